"""The plugin's options: each has an ini twin that works, the command line wins over
the ini file, and a bad value is a usage error (exit 4) that says what is valid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _pytest.unraisableexception import gc_collect_iterations_key
from plugin_targets._pytester import PLAIN, only, prepare, write_ini

from conformance._profiles import BUILTIN_PROFILES
from conformance._schedule import DEFAULT_LANES
from pytest_streamcheck._settings import OPTIONS, Settings
from pytest_streamcheck.plugin import STATE_KEY


@pytest.fixture(autouse=True)
def _isolated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    prepare(pytester, monkeypatch)


def _settings(pytester: pytest.Pytester, *args: str) -> Settings:
    config = pytester.parseconfigure(*PLAIN, *args)
    # As pytester's inline runs do: no full collection when this configuration ends.
    config.stash[gc_collect_iterations_key] = 0
    return config.stash[STATE_KEY].settings


# ini name -> (the value as written, how Settings shows it)
VALUES: dict[str, tuple[str, Any]] = {
    "streamcheck": ("sct_reference:make_adapter", "sct_reference:make_adapter"),
    "streamcheck_profile": ("seed-pipeline", ("seed-pipeline@1",)),
    "streamcheck_timing": ("real", "real"),
    "streamcheck_report": ("out/report.json", Path("out/report.json")),
    "streamcheck_html": ("out/report.html", Path("out/report.html")),
    "streamcheck_strict": ("true", True),
    "streamcheck_known_failures": ("known.txt", Path("known.txt")),
    "streamcheck_seed": ("77", 77),
    "streamcheck_timeout": ("2.5", 2.5),
    "streamcheck_lanes": ("2", 2),
    "streamcheck_verdicts": ("true", True),
    "streamcheck_certify": ("out/bundle", Path("out/bundle")),
    "streamcheck_format": ("anthropic", "anthropic"),
    "streamcheck_hello_timeout": ("1.5", 1.5),
    "streamcheck_inconclusive": ("skip", "skip"),
    "streamcheck_weather": ("seed-mix,hotel-wifi", ("seed-mix", "hotel-wifi")),
    "streamcheck_weather_streams": ("40", 40),
    "streamcheck_weather_users": ("8", 8),
    "streamcheck_weather_require": (
        "completion >= 0.99; duplicated_tokens == 0",
        ("completion >= 0.99", "duplicated_tokens == 0"),
    ),
}
FIELDS = {
    "streamcheck": "target",
    "streamcheck_profile": "profiles",
    "streamcheck_timing": "timing",
    "streamcheck_report": "report",
    "streamcheck_html": "html",
    "streamcheck_strict": "strict",
    "streamcheck_known_failures": "known_failures",
    "streamcheck_seed": "seed",
    "streamcheck_timeout": "case_timeout",
    "streamcheck_lanes": "lanes",
    "streamcheck_verdicts": "verdicts",
    "streamcheck_certify": "certify",
    "streamcheck_format": "wire_format",
    "streamcheck_hello_timeout": "hello_timeout",
    "streamcheck_inconclusive": "inconclusive",
    "streamcheck_weather": "weathers",
    "streamcheck_weather_streams": "weather_streams",
    "streamcheck_weather_users": "weather_users",
    "streamcheck_weather_require": "weather_require",
}


def _shown(settings: Settings, ini: str) -> Any:
    value = getattr(settings, FIELDS[ini])
    return tuple(p.key for p in value) if ini == "streamcheck_profile" else value


def test_every_option_is_covered_here() -> None:
    """A new option gets a row in this module's tables."""
    assert {ini for _, ini, _ in OPTIONS} == set(VALUES) == set(FIELDS)


@pytest.mark.parametrize("ini", sorted(VALUES))
def test_an_option_and_its_ini_twin_set_the_same_thing(pytester: pytest.Pytester, ini: str) -> None:
    """The command-line option and its ini twin resolve to the same setting."""
    raw, expected = VALUES[ini]
    pytester.makefile(".txt", known="SC-RETRY-3  a reason\n")
    option = next(o for o, name, _ in OPTIONS if name == ini)
    flag = option if ini in ("streamcheck_strict", "streamcheck_verdicts") else f"{option}={raw}"
    target = [] if ini == "streamcheck" else ["--streamcheck=reference"]
    assert _shown(_settings(pytester, *target, flag), ini) == expected

    write_ini(
        pytester, **({} if ini == "streamcheck" else {"streamcheck": "reference"}), **{ini: raw}
    )
    assert _shown(_settings(pytester), ini) == expected


def test_the_command_line_wins_over_the_ini_file(pytester: pytest.Pytester) -> None:
    """Each option given on the command line overrides its ini twin."""
    write_ini(
        pytester,
        streamcheck="sct_reference:make_adapter",
        streamcheck_profile="seed-pipeline",
        streamcheck_timing="real",
        streamcheck_seed="77",
        streamcheck_timeout="2.5",
    )
    s = _settings(
        pytester,
        "--streamcheck=reference",
        "--streamcheck-profile=seed-fetch",
        "--streamcheck-timing=test",
        "--streamcheck-seed=5",
        "--streamcheck-timeout=9",
    )
    assert (s.target, s.profiles[0].key, s.timing, s.seed, s.case_timeout) == (
        "reference",
        "seed-fetch@1",
        "test",
        5,
        9.0,
    )


def test_defaults(pytester: pytest.Pytester) -> None:
    """Unset options take the documented defaults."""
    s = _settings(pytester, "--streamcheck=reference")
    assert s.profiles is None  # the client's declared profile, else DEFAULT_PROFILES
    assert (s.timing, s.report, s.html, s.strict, s.known_failures) == (
        None,
        None,
        None,
        False,
        None,
    )
    assert s.case_timeout == 60.0
    assert s.lanes == DEFAULT_LANES
    assert 0 <= s.seed < 2**32


def test_the_ini_file_alone_runs_the_suite(pytester: pytest.Pytester) -> None:
    """``streamcheck`` and ``streamcheck_profile`` in the ini file run the suite with no
    streamcheck flag on the command line."""
    write_ini(
        pytester,
        streamcheck="reference",
        streamcheck_profile="seed-pipeline",
        streamcheck_report="report.json",
    )
    result = pytester.runpytest(*PLAIN, "-k", only("SC-RETRY-1"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["streamcheck: target=reference profiles=seed-pipeline@1 timing=auto seed=*"]
    )
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert [p["name"] for p in report["profiles"]] == ["seed-pipeline"]
    assert [(c["id"], c["verdict"], c["profile"]) for c in report["cases"]] == [
        ("SC-RETRY-1", "PASS", "seed-pipeline@1")
    ]


BAD: list[tuple[str, str, str]] = [
    # (ini name, bad value, what the message must say)
    ("streamcheck_timing", "fast", "'fast' is not valid; valid values: auto, virtual, test, real"),
    (
        "streamcheck_profile",
        "nope",
        f"unknown profile 'nope'; valid profiles: {', '.join(sorted(BUILTIN_PROFILES))}, "
        "or a .toml/.json file",
    ),
    ("streamcheck", "no.such.module", "valid targets: reference, exec:COMMAND, "),
    (
        "streamcheck_seed",
        "x",
        "--streamcheck-seed: expected an integer 0..9223372036854775807, got 'x'",
    ),
    ("streamcheck_timeout", "-1", "expected a positive number of seconds, got '-1'"),
    ("streamcheck_timeout", "nan", "expected a positive number of seconds, got 'nan'"),
    ("streamcheck_timeout", "inf", "expected a positive number of seconds, got 'inf'"),
    ("streamcheck_hello_timeout", "0", "expected a positive number of seconds, got '0'"),
    ("streamcheck_lanes", "0", "--streamcheck-lanes: expected a whole number of cases at once"),
    ("streamcheck_lanes", "2.5", "(1 or more), got '2.5'"),
    ("streamcheck_profile", ",", "--streamcheck-profile: no profile in ',', so no transport"),
    (
        "streamcheck_profile",
        "no-transport.toml",
        "no-transport.toml: transports: expected at least one of ['get', 'post']: "
        "no transport to judge",
    ),
    (
        "streamcheck_profile",
        "wide-jitter.toml",
        "wide-jitter.toml: policy.backoff.jitter: expected a number in [0, 1], got 5",
    ),
    (
        "streamcheck",
        "exec:'unbalanced",
        "exec: cannot split the command into words: No closing quotation",
    ),
    (
        "streamcheck_known_failures",
        "no-reason.txt",
        "no-reason.txt:2: a known failure needs a reason",
    ),
    (
        "streamcheck_known_failures",
        "missing.txt",
        "--streamcheck-known-failures: missing.txt: cannot read the file: No such file",
    ),
]


@pytest.mark.parametrize("where", ["command line", "ini file"])
@pytest.mark.parametrize(("ini", "value", "message"), BAD, ids=[b[1] for b in BAD])
def test_a_bad_value_is_a_usage_error(
    pytester: pytest.Pytester, where: str, ini: str, value: str, message: str
) -> None:
    """A bad value stops the run before collection with exit code 4 and says why."""
    pytester.makefile(".txt", **{"no-reason": "SC-RETRY-1  fine\nSC-RETRY-3\n"})
    pytester.makefile(".toml", **{"no-transport": 'name = "x"\ntransports = []\n'})
    pytester.makefile(".toml", **{"wide-jitter": 'name = "x"\n[policy.backoff]\njitter = 5\n'})
    target = {} if ini == "streamcheck" else {"streamcheck": "reference"}
    if where == "ini file":
        write_ini(pytester, **target, **{ini: value})
        result = pytester.runpytest(*PLAIN)
    else:
        option = next(o for o, name, _ in OPTIONS if name == ini)
        flags = [f"--streamcheck={v}" for v in target.values()]
        result = pytester.runpytest(*PLAIN, *flags, f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
    assert "collected" not in result.stdout.str()
