"""Resolve the plugin's options (command line first, then the ini file) into frozen settings."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# conformance._schedule.DEFAULT_LANES and OPENING_LANES, written out: this module loads
# with the plugin in every pytest run, where importing any of conformance is a cost
# (tests/test_startup.py checks that they agree).
DEFAULT_LANES = 6
OPENING_LANES = 4

if TYPE_CHECKING:  # the kit (servers included) is imported only for a streamcheck run
    from conformance._profiles import Profile, Timing

__all__ = [
    "FLAGS",
    "METAVARS",
    "OPTIONS",
    "Settings",
    "report_path",
    "resolve_settings",
    "verdicts_enabled",
]

DEFAULT_PROFILES = "seed-eventsource,seed-fetch"
SEED_ENV = "STREAMCHECK_SEED"  # carries the controller's seed to xdist workers

# (option, ini name, help); every option has an ini twin.
OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "--streamcheck",
        "streamcheck",
        "run the conformance suite against TARGET: reference, exec:COMMAND, module:factory, "
        "a module with streamcheck_adapter(), or a name in the streamcheck.clients entry points",
    ),
    (
        "--streamcheck-profile",
        "streamcheck_profile",
        f"comma-separated profiles (name, name@version or a .toml/.json file); "
        f"default: the one the client declares, else {DEFAULT_PROFILES}",
    ),
    (
        "--streamcheck-timing",
        "streamcheck_timing",
        "auto (virtual for a client that runs on the kit's event loop, else test for a "
        "configurable client, else real), virtual, test, or real",
    ),
    (
        "--streamcheck-format",
        "streamcheck_format",
        "the wire format of the cases' endpoints: openai, responses, anthropic or gemini "
        "(default: the one the client declares, else by the request's path: an SDK that "
        "appends its API's path to the case URL gets its provider's)",
    ),
    ("--streamcheck-report", "streamcheck_report", "write the JSON report to this path"),
    ("--streamcheck-html", "streamcheck_html", "write the HTML report to this path"),
    ("--streamcheck-strict", "streamcheck_strict", "also fail on a missed SHOULD (NON-STRICT)"),
    (
        "--streamcheck-known-failures",
        "streamcheck_known_failures",
        "file of expected failures: one 'CASE-ID-or-glob  reason' per line",
    ),
    ("--streamcheck-seed", "streamcheck_seed", "seed for content and the client's randomness"),
    (
        "--streamcheck-timeout",
        "streamcheck_timeout",
        "hard time limit per case in seconds (default 60)",
    ),
    (
        "--streamcheck-hello-timeout",
        "streamcheck_hello_timeout",
        "seconds an exec: client or a browser: page has to start and answer hello "
        "(default 10); a client that does not is one ERROR for the run",
    ),
    (
        "--streamcheck-lanes",
        "streamcheck_lanes",
        f"cases played at once at most, each with its own server, proxy and client "
        f"(default {DEFAULT_LANES}; a run opens {OPENING_LANES} and more while its noise "
        "stays calm; "
        "1: one at a time); exclusive cases and re-judging play alone; in virtual time "
        "a lane is a process, one a core",
    ),
    (
        "--streamcheck-verdicts",
        "streamcheck_verdicts",
        "print, at the end of the run, the verdict of every test whose client (driven "
        "through the llm_server fixture) mishandled a fault; --streamcheck-report gets them too",
    ),
    (
        "--streamcheck-certify",
        "streamcheck_certify",
        "write a certification bundle into DIR: report.json, report.html, manifest.json, "
        "badge.svg (check it with python -m pytest_streamcheck verify DIR)",
    ),
    (
        "--streamcheck-inconclusive",
        "streamcheck_inconclusive",
        "what an INCONCLUSIVE case (real time: the measured noise hid the verdict) does to "
        "the run: fail (default: a pytest error) or skip; the run is not conformant either way",
    ),
    (
        "--streamcheck-weather",
        "streamcheck_weather",
        "also play these network weathers through the client (comma-separated: shipped "
        "names or .toml files), one test each, streamcheck::WEATHER-NAME (docs/weather.md)",
    ),
    (
        "--streamcheck-weather-streams",
        "streamcheck_weather_streams",
        "streams in a weather test (default 300), from --streamcheck-weather-users users",
    ),
    (
        "--streamcheck-weather-users",
        "streamcheck_weather_users",
        "users streaming at once in a weather test (default 30)",
    ),
    (
        "--streamcheck-weather-require",
        "streamcheck_weather_require",
        "thresholds a weather test must meet, ';'-separated, e.g. "
        "'completion >= 0.99; duplicated_tokens == 0' (default: none; the test then fails "
        "only when the run could not be measured)",
    ),
)
FLAGS = ("--streamcheck-strict", "--streamcheck-verdicts")  # on/off options (ini: bool)
# What --help shows as each valued option's argument.
METAVARS = {
    "--streamcheck": "TARGET",
    "--streamcheck-profile": "PROFILE[,PROFILE]",
    "--streamcheck-timing": "MODE",
    "--streamcheck-format": "FORMAT",
    "--streamcheck-report": "PATH",
    "--streamcheck-html": "PATH",
    "--streamcheck-known-failures": "PATH",
    "--streamcheck-seed": "N",
    "--streamcheck-timeout": "SECONDS",
    "--streamcheck-hello-timeout": "SECONDS",
    "--streamcheck-lanes": "N",
    "--streamcheck-certify": "DIR",
    "--streamcheck-inconclusive": "fail|skip",
    "--streamcheck-weather": "NAME[,NAME]",
    "--streamcheck-weather-streams": "N",
    "--streamcheck-weather-users": "M",
    "--streamcheck-weather-require": "CONDITION[;CONDITION]",
}

TIMINGS = ("auto", "virtual", "test", "real")
INCONCLUSIVE_OUTCOMES = ("fail", "skip")


@dataclass(frozen=True)
class Settings:
    target: str
    profiles: tuple[Profile, ...] | None  # None: the client's declared one, else the defaults
    timing: Timing | None  # None: decided by the client's capabilities
    report: Path | None
    html: Path | None
    strict: bool
    known_failures: Path | None
    seed: int
    case_timeout: float
    verdicts: bool = False  # --streamcheck-verdicts (also honoured without --streamcheck)
    lanes: int = DEFAULT_LANES  # cases played at once (conformance._lanes)
    certify: Path | None = None  # --streamcheck-certify: the bundle's directory
    wire_format: str | None = None  # None: the client's declared one, else by path
    hello_timeout: float | None = None  # None: the adapters' own HELLO_TIMEOUT
    inconclusive: str = "fail"  # what an INCONCLUSIVE case is to pytest: an error, or a skip
    weathers: tuple[str, ...] = ()  # --streamcheck-weather: one weather test each
    weather_streams: int = 300
    weather_users: int = 30
    weather_require: tuple[str, ...] = ()


def _value(config: pytest.Config, option: str, ini: str) -> str | None:
    dest = option.lstrip("-").replace("-", "_")
    value = config.getoption(dest)
    if value is None or value is False:
        raw = config.getini(ini)
        value = raw if raw not in ("", None, []) else None
    return None if value is None else str(value)


def resolve_settings(config: pytest.Config) -> Settings | None:
    """The run's settings, or None when --streamcheck is not in use."""
    target = _value(config, "--streamcheck", "streamcheck")
    if not target:
        return None
    return Settings(
        target=target,
        profiles=_profiles(_value(config, "--streamcheck-profile", "streamcheck_profile")),
        timing=_timing(_value(config, "--streamcheck-timing", "streamcheck_timing")),
        report=report_path(config),
        html=_output(
            _value(config, "--streamcheck-html", "streamcheck_html"), "--streamcheck-html"
        ),
        strict=_bool(_value(config, "--streamcheck-strict", "streamcheck_strict")),
        known_failures=_existing(
            _value(config, "--streamcheck-known-failures", "streamcheck_known_failures")
        ),
        seed=_seed(_value(config, "--streamcheck-seed", "streamcheck_seed")),
        case_timeout=_positive(
            _value(config, "--streamcheck-timeout", "streamcheck_timeout"),
            60.0,
            "--streamcheck-timeout",
        ),
        verdicts=verdicts_enabled(config),
        lanes=_lanes(_value(config, "--streamcheck-lanes", "streamcheck_lanes"), config),
        certify=_output(
            _value(config, "--streamcheck-certify", "streamcheck_certify"),
            "--streamcheck-certify",
            directory=True,
        ),
        wire_format=_wire_format(_value(config, "--streamcheck-format", "streamcheck_format")),
        hello_timeout=_optional_positive(
            _value(config, "--streamcheck-hello-timeout", "streamcheck_hello_timeout"),
            "--streamcheck-hello-timeout",
        ),
        inconclusive=_inconclusive(
            _value(config, "--streamcheck-inconclusive", "streamcheck_inconclusive")
        ),
        **_weather(config),
    )


def _weather(config: pytest.Config) -> dict[str, Any]:
    """The weather tests' settings, each checked now: a bad name is a usage error before
    the first case, not an ERROR after the whole suite."""
    names = _value(config, "--streamcheck-weather", "streamcheck_weather") or ""
    weathers = tuple(n.strip() for n in names.split(",") if n.strip())
    streams = _count(
        _value(config, "--streamcheck-weather-streams", "streamcheck_weather_streams"),
        300,
        "--streamcheck-weather-streams",
    )
    users = _count(
        _value(config, "--streamcheck-weather-users", "streamcheck_weather_users"),
        30,
        "--streamcheck-weather-users",
    )
    raw = _value(config, "--streamcheck-weather-require", "streamcheck_weather_require") or ""
    require = tuple(c.strip() for c in raw.split(";") if c.strip())
    if weathers:
        from conformance.weather import get_weather
        from conformance.weather._metrics import parse_condition
        from fake_servers._validate import ScenarioError

        try:
            for name in weathers:
                get_weather(name)
            for condition in require:
                parse_condition(condition)
        except (ScenarioError, ValueError) as exc:
            raise pytest.UsageError(f"--streamcheck-weather: {exc}") from None
        if not 1 <= min(users, streams) <= 1000 or users > streams:
            raise pytest.UsageError(
                "--streamcheck-weather-users and -streams: needs 1 <= users <= streams <= 1000"
            )
    return {
        "weathers": weathers,
        "weather_streams": streams,
        "weather_users": users,
        "weather_require": require,
    }


def _count(raw: str | None, default: int, name: str) -> int:
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(f"{name}: expected a whole number, got {_shown(raw)}") from None


def _choice(option: str, raw: str, valid: Sequence[str]) -> str:
    """``raw`` if it is one of ``valid``, else a usage error naming ``option``."""
    if raw not in valid:
        raise pytest.UsageError(f"{option}: {raw!r} is not valid; valid: {', '.join(valid)}")
    return raw


def _inconclusive(raw: str | None) -> str:
    return (
        "fail" if raw is None else _choice("--streamcheck-inconclusive", raw, INCONCLUSIVE_OUTCOMES)
    )


def _wire_format(raw: str | None) -> str | None:
    if raw is None or raw == "auto":
        return None
    from fake_servers import WIRE_FORMATS  # only when asked: the server is a heavy import

    return _choice("--streamcheck-format", raw, WIRE_FORMATS)


def verdicts_enabled(config: pytest.Config) -> bool:
    """Whether --streamcheck-verdicts (or its ini twin) is on; independent of --streamcheck."""
    return _bool(_value(config, "--streamcheck-verdicts", "streamcheck_verdicts"))


def report_path(config: pytest.Config) -> Path | None:
    """The --streamcheck-report path, with or without --streamcheck, checked writable."""
    raw = _value(config, "--streamcheck-report", "streamcheck_report")
    return _output(raw, "--streamcheck-report")


def _profiles(raw: str | None) -> tuple[Profile, ...] | None:
    from conformance._profiles import ProfileError, get_profile

    if raw is None:
        return None
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if not names:  # every case would be UNSUPPORTED: a green run that checked nothing
        raise pytest.UsageError(
            f"--streamcheck-profile: no profile in {raw!r}, so no transport to judge; "
            f"e.g. {DEFAULT_PROFILES}"
        )
    try:
        return tuple(get_profile(n) for n in names)
    except ProfileError as exc:
        raise pytest.UsageError(f"--streamcheck-profile: {exc}") from None


def _timing(raw: str | None) -> Timing | None:
    value = (raw or "auto").strip()
    if value not in TIMINGS:
        raise pytest.UsageError(
            f"--streamcheck-timing: {value!r} is not valid; valid values: {', '.join(TIMINGS)}"
        )
    return None if value == "auto" else value  # type: ignore[return-value]


def _bool(raw: str | None) -> bool:
    return (raw or "").strip().lower() in ("1", "true", "yes", "on")


def _output(raw: str | None, option: str, *, directory: bool = False) -> Path | None:
    """An output path checked before the first case: found at the run's end, a file in
    its way would cost the whole run."""
    if not raw:
        return None
    from fake_servers._files import FileRefused, check_output_path, shown_path

    path = Path(raw)
    try:
        check_output_path(path, directory=directory)
    except FileRefused as exc:
        raise pytest.UsageError(f"{option}: {shown_path(raw)}: {exc}") from None
    return path


def _existing(raw: str | None) -> Path | None:
    if not raw:
        return None
    from fake_servers._files import FileRefused, check_regular_file, shown_path

    try:
        check_regular_file(raw)
    except FileRefused as exc:
        raise pytest.UsageError(f"--streamcheck-known-failures: {shown_path(raw)}: {exc}") from None
    return Path(raw)


def _seed(raw: str | None) -> int:
    """The run's seed: the option's, else the controller's (an xdist worker), else new.
    Checked here, once: a seed the scenarios refuse would be an ERROR for every case."""
    from fake_servers._limits import MAX_SEED

    given = raw if raw is not None else os.environ.get(SEED_ENV)
    option = "--streamcheck-seed" if raw is not None else SEED_ENV
    if given is None:
        seed = random.SystemRandom().randrange(2**32)
    else:
        try:
            seed = int(given)
        except ValueError:  # not a number, or over 4300 digits
            seed = -1
        if not 0 <= seed <= MAX_SEED:
            raise pytest.UsageError(
                f"{option}: expected an integer 0..{MAX_SEED}, got {_shown(given)}"
            )
    os.environ[SEED_ENV] = str(seed)  # xdist workers inherit it: one seed per run
    return seed


def _shown(raw: str) -> str:
    """A user's value in a message: quoted and escaped (repr), and cut short."""
    text = repr(raw)
    return text if len(text) <= 60 else text[:57] + "..."


def _lanes(raw: str | None, config: pytest.Config) -> int:
    """Cases at once in this process: an xdist worker takes its share of the run's."""
    try:
        value = DEFAULT_LANES if raw is None else int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise pytest.UsageError(
            f"--streamcheck-lanes: expected a whole number of cases at once (1 or more), "
            f"got {raw!r}"
        )
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    return max(1, value // max(1, int(workers)))


def _positive(raw: str | None, default: float, name: str) -> float:
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value > 0):  # nan and inf too: a deadline must be real
        raise pytest.UsageError(f"{name}: expected a positive number of seconds, got {raw!r}")
    return value


def _optional_positive(raw: str | None, name: str) -> float | None:
    return None if raw is None else _positive(raw, 0.0, name)
