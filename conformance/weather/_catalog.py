"""The shipped weathers, and custom ones from TOML files (validated like scenarios).

The rates are this project's reading of the seed article's conditions (seeds/000): a
corporate proxy that closes idle connections at 60 s, 5G handoffs mid-stream, hotel wifi
that rewrites what it carries, a backend that dies mid-stream or is deployed, and the
textbook client that "worked for 92% of users". ``seed-mix`` is tuned so that a client
with no resilience at all finishes about 92% of its streams.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from conformance.weather._model import FaultRate, Shape, Weather
from fake_servers._files import FileRefused, read_text_limited, shown_path
from fake_servers._validate import ScenarioError, reject, show, suggestion

__all__ = ["MAX_WEATHER_BYTES", "WEATHERS", "get_weather", "load_weather", "parse_weather"]

MAX_WEATHER_BYTES = 64 * 1024
SEED = "seeds/000"
_LONG = Shape(research=1.0)  # every stream has a research phase of 60-75 s

WEATHERS: dict[str, Weather] = {
    w.name: w
    for w in (
        Weather(
            "corporate-proxy",
            1,
            "A proxy that closes connections idle for 60 s (it holds the keepalive comments "
            "back) and one that buffers the whole answer.",
            (FaultRate("idle_cut", 0.15, 60.0), FaultRate("buffering", 0.05)),
            _LONG,
            f'{SEED} ("a corporate proxy that closes idle connections at 60 seconds")',
        ),
        Weather(
            "mobile-handoff",
            1,
            "A 5G cell handoff: the connection resets mid-stream, then no network for 1-5 s.",
            (FaultRate("handoff", 0.1, 1.0, 5.0),),
            Shape(),
            f'{SEED} ("a 5G connection that hands off between cells mid-stream")',
        ),
        Weather(
            "hotel-wifi",
            1,
            "Wifi that intercepts HTTP: its login page instead of the answer, a rewritten "
            "content type, a buffered body, a body cut short.",
            (
                FaultRate("captive_portal", 0.03),
                FaultRate("wrong_content_type", 0.03),
                FaultRate("buffering", 0.03),
                FaultRate("truncate", 0.04),
            ),
            Shape(),
            f'{SEED} ("a hotel wifi that intercepts HTTP and rewrites the response headers")',
        ),
        Weather(
            "backend-deploy",
            1,
            "A deploy: every request gets 503 with Retry-After for 30-120 s, all clients at "
            "once, streams in flight included.",
            (FaultRate("deploy", 4.0, 30.0, 120.0),),
            Shape(),
            f'{SEED} ("one bad backend deploy away from a self-DOS")',
        ),
        Weather(
            "flaky-backend",
            1,
            "A backend that fails 5 % of requests with a 5xx and drops 4 % of streams midway.",
            (FaultRate("status_5xx", 0.05), FaultRate("midstream_drop", 0.04)),
            Shape(),
            f'{SEED} ("a server that crashed mid-generation")',
        ),
        Weather(
            "seed-mix",
            1,
            "The article's blend: a little of every condition above (a rolling deploy of "
            "10-30 s), tuned so that the textbook client finishes about 92 % of its streams.",
            (
                FaultRate("status_5xx", 0.015),
                FaultRate("midstream_drop", 0.015),
                FaultRate("truncate", 0.01),
                FaultRate("idle_cut", 0.015, 60.0),
                FaultRate("handoff", 0.01, 1.0, 5.0),
                FaultRate("captive_portal", 0.002),
                FaultRate("wrong_content_type", 0.002),
                FaultRate("buffering", 0.01),
                FaultRate("deploy", 1.0, 10.0, 30.0, in_flight=False),
            ),
            Shape(),
            f'{SEED} ("It worked for 92% of users"; "from low-90s to consistently 99%+")',
        ),
    )
}


def get_weather(name: str | Path) -> Weather:
    """A shipped weather by name (``name`` or ``name@version``), or a ``.toml`` file.

    Raises:
        ScenarioError: no such weather, or the file is not a valid weather.
    """
    text = str(name)
    if text.endswith(".toml"):
        return load_weather(text)
    base, _, version = text.partition("@")
    weather = WEATHERS.get(base)
    if weather is None:
        known = ", ".join(WEATHERS)
        raise ScenarioError(
            f"no weather {show(text)}{suggestion(base, WEATHERS)}; shipped: {known}, or a "
            ".toml file",
            field="weather",
        )
    if version and version != str(weather.version):
        raise ScenarioError(
            f"{base} is at version {weather.version}, not {show(version)}", field="weather"
        )
    return weather


def load_weather(path: str | Path) -> Weather:
    """A custom weather from a TOML file; errors name the file and the field."""
    source = shown_path(path)
    try:
        text = read_text_limited(path, MAX_WEATHER_BYTES, "bytes per weather file")
    except FileRefused as error:
        raise ScenarioError(str(error), file=source) from None
    return parse_weather(text, source=source)


def parse_weather(text: str, *, source: str = "<string>") -> Weather:
    """The weather a TOML text describes (see docs/weather.md for its keys)."""
    try:
        tree = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"not valid TOML: {error}", file=source) from None
    try:
        return _weather(tree)
    except ScenarioError as error:
        raise error.located(file=source) from None
    except (TypeError, ValueError) as error:  # a value of a shape no check expected
        raise ScenarioError(str(error), file=source) from None


_TOP = ("weather", "shape", "fault")
_HEAD = ("name", "version", "description", "source")
_SHAPE = ("tokens", "token_gap", "first_byte", "research", "research_seconds", "keepalive")
_FAULT = ("kind", "rate", "seconds", "in_flight")


def _keys(table: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise ScenarioError(
                f"unknown key {show(key)}{suggestion(key, allowed)}; expected one of "
                f"{', '.join(allowed)}",
                step=where or None,
            )


def _table(tree: dict[str, Any], key: str) -> dict[str, Any]:
    value = tree.get(key, {})
    if not isinstance(value, dict):
        reject(key, "a table", value)
    return value


def _weather(tree: dict[str, Any]) -> Weather:
    _keys(tree, _TOP, "")
    head, shape = _table(tree, "weather"), _table(tree, "shape")
    _keys(head, _HEAD, "weather")
    _keys(shape, _SHAPE, "shape")
    if "name" not in head:
        raise ScenarioError("a weather needs a name", step="weather", field="name")
    faults = tree.get("fault", [])
    if not isinstance(faults, list):
        reject("fault", "an array of tables ([[fault]])", faults)
    made = []
    for index, fault in enumerate(faults):
        where = f"fault[{index}]"
        if not isinstance(fault, dict):
            raise ScenarioError(f"expected a table, got {show(fault)}", step=where)
        _keys(fault, _FAULT, where)
        try:
            made.append(_fault(fault))
        except ScenarioError as error:
            raise error.located(step=where) from None
    try:
        made_shape = Shape(**shape)
    except ScenarioError as error:
        raise error.located(step="shape") from None
    return Weather(
        head["name"],
        head.get("version", 1),
        head.get("description", f"a custom weather ({head['name']})"),
        tuple(made),
        made_shape,
        head.get("source", "custom"),
    )


def _fault(table: dict[str, Any]) -> FaultRate:
    if "kind" not in table or "rate" not in table:
        raise ScenarioError("a fault needs kind and rate", field="kind")
    seconds = table.get("seconds", [0.0, None])
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        seconds = [seconds, None]
    if not isinstance(seconds, list) or len(seconds) != 2:
        reject("seconds", "a number or a pair [low, high]", seconds)
    in_flight = table.get("in_flight", True)
    return FaultRate(table["kind"], table["rate"], seconds[0], seconds[1], in_flight)
