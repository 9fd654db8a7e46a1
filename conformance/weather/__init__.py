"""Network weather: how many streams finish, intact, and at what cost to the backend.

A weather (``Weather``) is a named fault mix over a stream's life; a weather run drives
many streams from many users through a client and measures the outcome
(``WeatherMetrics``) from the ledger and what the client delivered.

Importing the package is cheap: each name loads its module on first use (the run
imports the kit's runner and servers; the command's parser needs none of that).
"""

from typing import TYPE_CHECKING

from conformance.reference._exports import lazy_getattr

if TYPE_CHECKING:
    from conformance.weather._catalog import WEATHERS, get_weather, load_weather, parse_weather
    from conformance.weather._metrics import (
        Rate,
        StreamOutcome,
        WeatherMetrics,
        outcome_of,
        summarize,
    )
    from conformance.weather._model import (
        DEFAULT_STREAMS,
        DEFAULT_USERS,
        FAULT_KINDS,
        FaultKind,
        FaultRate,
        Shape,
        Weather,
    )
    from conformance.weather._plan import WeatherPlan, fault_of, stream_path
    from conformance.weather._run import WeatherRun, estimate, run_weather

_MODULES = {
    "_catalog": ("WEATHERS", "get_weather", "load_weather", "parse_weather"),
    "_metrics": ("Rate", "StreamOutcome", "WeatherMetrics", "outcome_of", "summarize"),
    "_model": (
        "DEFAULT_STREAMS",
        "DEFAULT_USERS",
        "FAULT_KINDS",
        "FaultKind",
        "FaultRate",
        "Shape",
        "Weather",
    ),
    "_plan": ("WeatherPlan", "fault_of", "stream_path"),
    "_run": ("WeatherRun", "estimate", "run_weather"),
}

__all__ = [
    "DEFAULT_STREAMS",
    "DEFAULT_USERS",
    "FAULT_KINDS",
    "WEATHERS",
    "FaultKind",
    "FaultRate",
    "Rate",
    "Shape",
    "StreamOutcome",
    "Weather",
    "WeatherMetrics",
    "WeatherPlan",
    "WeatherRun",
    "estimate",
    "fault_of",
    "get_weather",
    "load_weather",
    "outcome_of",
    "parse_weather",
    "run_weather",
    "stream_path",
    "summarize",
]
__getattr__ = lazy_getattr(__name__, {n: m for m, names in _MODULES.items() for n in names})
