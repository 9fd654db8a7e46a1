"""One pytest item per ``--streamcheck-weather``: ``streamcheck::WEATHER-NAME``.

The item plays the weather through the run's client (``conformance.weather``) and
passes when the run was measured and meets every ``--streamcheck-weather-require``
threshold; a run that could not be measured (the client broke) is a pytest ERROR. Its
figures go on the report (``WEATHER_ATTR``): the JSON and HTML reports and the terminal
summary show them.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance._result import HarnessError
from conformance.weather import WeatherRun, get_weather, run_weather
from pytest_streamcheck._session import StreamcheckSession
from pytest_streamcheck.reports._weather import weather_lines

__all__ = ["WEATHER_ATTR", "WeatherItem", "weather_items"]

WEATHER_ATTR = "streamcheck_weather"  # the run's JSON, on the call's report (crosses xdist)


class WeatherItem(pytest.Item):
    def __init__(self, *, weather: str, session_state: StreamcheckSession, **kw: Any) -> None:
        super().__init__(**kw)
        self.weather = weather
        self._state = session_state
        self.run: WeatherRun | None = None
        self.add_marker(pytest.mark.streamcheck)

    def runtest(self) -> None:
        s = self._state.settings
        weather = get_weather(self.weather)
        self.run = run = run_weather(
            self._state.factory,
            weather,
            streams=s.weather_streams,
            users=s.weather_users,
            seed=s.seed,
            target=s.target,
        )
        self.user_properties.append(("streamcheck_weather", weather.key))
        if run.metrics is None:
            raise HarnessError(f"{weather.key}: the run could not be measured: {run.error}")
        run.metrics.require(*s.weather_require)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        lines = [str(excinfo.value)]
        if self.run is not None and self.run.metrics is not None:
            lines += weather_lines([self.run.to_json()])
        return "\n".join(lines)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "streamcheck", None, f"streamcheck::{self.name}"


def weather_items(parent: pytest.Collector, state: StreamcheckSession) -> list[pytest.Item]:
    return [
        WeatherItem.from_parent(
            parent, name=f"WEATHER-{_label(name)}", weather=name, session_state=state
        )
        for name in state.settings.weathers
    ]


def _label(name: str) -> str:
    """A node name for a weather: its name, or a file's stem."""
    return name.rsplit("/", 1)[-1].removesuffix(".toml")
