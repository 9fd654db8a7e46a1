"""The shipped weathers, and custom ones from TOML files, refused with the field that is wrong."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from conformance.weather import (
    FAULT_KINDS,
    WEATHERS,
    FaultRate,
    Shape,
    Weather,
    get_weather,
    load_weather,
    parse_weather,
)
from conformance.weather._catalog import MAX_WEATHER_BYTES
from fake_servers._validate import ScenarioError


def toml_of(weather: Weather) -> str:
    """The weather as a TOML file (its JSON's values are TOML's too)."""
    data = weather.to_json()
    lines = ["[weather]"]
    lines += [f"{k} = {json.dumps(data[k])}" for k in ("name", "version", "description", "source")]
    shape = data["shape"]
    assert isinstance(shape, dict)
    lines += ["", "[shape]", *(f"{k} = {json.dumps(v)}" for k, v in shape.items())]
    faults = data["faults"]
    assert isinstance(faults, list)
    for fault in faults:
        lines += ["", "[[fault]]", *(f"{k} = {json.dumps(v)}" for k, v in fault.items())]
    return "\n".join(lines) + "\n"


# -- the shipped weathers --------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(WEATHERS))
def test_every_shipped_weather_is_valid_and_keyed_by_name_and_version(name: str) -> None:
    weather = WEATHERS[name]
    assert weather.name == name
    assert weather.key == f"{name}@{weather.version}"
    assert weather.version >= 1
    assert weather.description
    assert "seeds/000" in weather.source
    assert weather.faults
    assert all(f.kind in FAULT_KINDS for f in weather.faults)
    assert sum(f.rate for f in weather.faults if f.kind != "deploy") <= 1.0
    assert 0.0 <= weather.clear_rate <= 1.0
    assert get_weather(name) is weather
    assert get_weather(weather.key) is weather
    # made again from its parts, through the same checks
    assert replace(weather) == weather


@pytest.mark.parametrize("name", sorted(WEATHERS))
def test_every_shipped_weather_reads_back_from_a_file(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.toml"
    path.write_text(toml_of(WEATHERS[name]), encoding="utf-8")
    assert load_weather(path) == WEATHERS[name]


def test_six_weathers_are_shipped() -> None:
    assert set(WEATHERS) == {
        "corporate-proxy",
        "mobile-handoff",
        "hotel-wifi",
        "backend-deploy",
        "flaky-backend",
        "seed-mix",
    }
    # the blend has a little of every condition
    kinds = {f.kind for f in WEATHERS["seed-mix"].faults}
    assert kinds == set(FAULT_KINDS)


def test_a_misspelt_weather_is_refused_with_a_suggestion() -> None:
    with pytest.raises(ScenarioError) as info:
        get_weather("seed-mx")
    message = str(info.value)
    assert 'did you mean "seed-mix"?' in message
    assert "shipped: corporate-proxy" in message
    assert info.value.field == "weather"


def test_an_unknown_weather_lists_the_shipped_ones() -> None:
    with pytest.raises(ScenarioError, match=r'no weather "tornado".*shipped: .*seed-mix'):
        get_weather("tornado")


def test_a_version_not_shipped_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r'seed-mix is at version 1, not "9"'):
        get_weather("seed-mix@9")
    assert get_weather("seed-mix@1") is WEATHERS["seed-mix"]


# -- custom weathers -------------------------------------------------------------------

CUSTOM = """
[weather]
name = "office-vpn"
version = 3
description = "A VPN that drops a stream now and then."

[shape]
tokens = [5, 10]
token_gap = [0.1, 0.2]
research = 0.0

[[fault]]
kind = "midstream_drop"
rate = 0.1

[[fault]]
kind = "handoff"
rate = 0.05
seconds = [1, 3]

[[fault]]
kind = "idle_cut"
rate = 0.02
seconds = 30

[[fault]]
kind = "deploy"
rate = 2
seconds = [5.0, 10.0]
in_flight = false
"""


def test_a_custom_weather_loads_from_a_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "vpn.toml"
    path.write_text(CUSTOM, encoding="utf-8")
    for given in (path, str(path)):
        for weather in (load_weather(given), get_weather(given)):
            assert weather.key == "office-vpn@3"
            assert weather.source == "custom"
            assert weather.shape == Shape(tokens=(5, 10), token_gap=(0.1, 0.2), research=0.0)
            assert weather.faults == (
                FaultRate("midstream_drop", 0.1),
                FaultRate("handoff", 0.05, 1.0, 3.0),
                FaultRate("idle_cut", 0.02, 30.0, 30.0),
                FaultRate("deploy", 2.0, 5.0, 10.0, in_flight=False),
            )
            assert weather.rate("handoff") == 0.05
            assert weather.rate("truncate") == 0.0
            assert weather.clear_rate == pytest.approx(0.83)


def test_a_minimal_weather_has_the_defaults() -> None:
    weather = parse_weather('[weather]\nname = "calm"\ndescription = "Nothing happens."\n')
    assert weather.key == "calm@1"
    assert weather.faults == ()
    assert weather.shape == Shape()
    assert weather.clear_rate == 1.0


def _refused(tmp_path: Path, text: str) -> ScenarioError:
    path = tmp_path / "broken.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_weather(path)
    error = info.value
    assert str(path) in str(error)  # the message names the file
    return error


def _weather(*faults: str, shape: str = "") -> str:
    head = '[weather]\nname = "x"\ndescription = "broken"\n'
    if shape:
        head += f"\n[shape]\n{shape}\n"
    return head + "".join(f"\n[[fault]]\n{f}\n" for f in faults)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            _weather('kind = "truncate"\nrat = 0.1'),
            'fault[0]: unknown key "rat"; did you mean "rate"?; expected one of kind, rate',
            id="unknown-fault-key",
        ),
        pytest.param(
            '[wether]\nname = "x"\n',
            'unknown key "wether"; did you mean "weather"?',
            id="unknown-table",
        ),
        pytest.param(
            '[weather]\nname = "x"\nversoin = 2\n',
            'weather: unknown key "versoin"; did you mean "version"?',
            id="unknown-head-key",
        ),
        pytest.param(
            _weather(shape="token = [1, 2]"),
            'shape: unknown key "token"; did you mean "tokens"?',
            id="unknown-shape-key",
        ),
        pytest.param(
            _weather('kind = "status_5xx"\nrate = 1.5'),
            "fault[0].rate: 1.5 is over the limit of 1 (a probability per attempt)",
            id="rate-over-1",
        ),
        pytest.param(
            _weather('kind = "status_5xx"\nrate = -0.1'),
            "fault[0].rate: expected a number >= 0, got -0.1",
            id="rate-negative",
        ),
        pytest.param(
            _weather('kind = "status_5xx"\nrate = "often"'),
            'fault[0].rate: expected a number >= 0, got "often"',
            id="rate-text",
        ),
        pytest.param(
            _weather('kind = "deploy"\nrate = -1\nseconds = [1, 2]'),
            "fault[0].rate: expected a number >= 0, got -1",
            id="deploys-negative",
        ),
        pytest.param(
            _weather('kind = "status_5xx"\nrate = 0.6', 'kind = "truncate"\nrate = 0.6'),
            "fault: the per-attempt rates add up to 1.2: at most 1",
            id="rates-over-1",
        ),
        pytest.param(
            _weather('kind = "tsunami"\nrate = 0.1'),
            'fault[0].kind: expected one of "status_5xx", "midstream_drop"',
            id="unknown-kind",
        ),
        pytest.param(
            _weather('kind = "truncate"\nrate = 0.1', 'kind = "truncate"\nrate = 0.2'),
            "fault: truncate given twice",
            id="kind-twice",
        ),
        pytest.param(
            _weather('kind = "handoff"\nrate = 0.1\nseconds = [-1, 5]'),
            "fault[0].seconds[0]: expected a number >= 0, got -1",
            id="negative-duration",
        ),
        pytest.param(
            _weather('kind = "handoff"\nrate = 0.1\nseconds = -2'),
            "fault[0].seconds[0]: expected a number >= 0, got -2",
            id="negative-seconds",
        ),
        pytest.param(
            _weather('kind = "handoff"\nrate = 0.1\nseconds = [5, 1]'),
            "fault[0].seconds[1]: expected a number >= 5 (the low end), got 1",
            id="high-below-low",
        ),
        pytest.param(
            _weather('kind = "deploy"\nrate = 1'),
            "fault[0].seconds: expected a duration > 0 for this kind",
            id="deploy-without-duration",
        ),
        pytest.param(
            _weather('kind = "idle_cut"\nrate = 0.1'),
            "fault[0].seconds: expected the proxy's idle limit (> 0 s)",
            id="idle-cut-without-limit",
        ),
        pytest.param(
            _weather('kind = "handoff"\nrate = 0.1\nseconds = [1, 2, 3]'),
            "fault[0].seconds: expected a number or a pair [low, high], got [1, 2, 3]",
            id="seconds-triple",
        ),
        pytest.param(
            _weather('kind = "deploy"\nrate = 1\nseconds = 10\nin_flight = "yes"'),
            "fault[0].in_flight",
            id="in-flight-text",
        ),
        pytest.param(
            _weather('kind = "truncate"'),
            "fault[0].kind: a fault needs kind and rate",
            id="fault-without-rate",
        ),
        pytest.param(
            '[weather]\nname = "x"\nfault = 3\n',
            'weather: unknown key "fault"',
            id="fault-in-the-head",
        ),
        pytest.param(
            'fault = 3\n[weather]\nname = "x"\n',
            "fault: expected an array of tables ([[fault]]), got 3",
            id="fault-not-an-array",
        ),
        pytest.param(
            '[weather]\ndescription = "no name"\n',
            "weather.name: a weather needs a name",
            id="no-name",
        ),
        pytest.param(
            '[weather]\nname = "two words"\n',
            "name: expected a name without spaces or '@', got \"two words\"",
            id="name-with-space",
        ),
        pytest.param(
            '[weather]\nname = "x@2"\n',
            "name: expected a name without spaces or '@'",
            id="name-with-at",
        ),
        pytest.param(
            '[weather]\nname = "x"\ndescription = "d"\nversion = 0\n',
            "version: expected an integer >= 1, got 0",
            id="version-zero",
        ),
        pytest.param(
            _weather(shape="tokens = [0, 5]"),
            "shape.tokens[0]",
            id="no-tokens",
        ),
        pytest.param(
            _weather(shape="token_gap = [0.5, 0.1]"),
            "shape.token_gap[1]: expected a number >= 0.5 (the low end), got 0.1",
            id="gap-backwards",
        ),
        pytest.param(
            _weather(shape="research = 2"),
            "shape.research: 2 is over the limit of 1 (a probability)",
            id="research-over-1",
        ),
        pytest.param(
            _weather(shape="keepalive = 0"),
            "shape.keepalive: expected a number > 0, got 0",
            id="keepalive-zero",
        ),
        pytest.param(
            "[weather\nname = 'x'\n",
            "not valid TOML",
            id="not-toml",
        ),
        pytest.param(
            "name: x\nfaults:\n  - status_5xx\n",
            "not valid TOML",
            id="yaml",
        ),
    ],
)
def test_a_broken_weather_file_is_refused_naming_the_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    error = _refused(tmp_path, text)
    assert expected in str(error)


def test_a_file_too_big_is_refused(tmp_path: Path) -> None:
    text = '[weather]\nname = "x"\n' + "#" * MAX_WEATHER_BYTES + "\n"
    error = _refused(tmp_path, text)
    assert "bytes per weather file" in str(error)
    assert str(MAX_WEATHER_BYTES) in str(error)


def test_a_file_just_under_the_limit_loads(tmp_path: Path) -> None:
    head = '[weather]\nname = "x"\ndescription = "d"\n'
    path = tmp_path / "big.toml"
    path.write_text(head + "#" * (MAX_WEATHER_BYTES - len(head) - 1) + "\n", encoding="utf-8")
    assert path.stat().st_size == MAX_WEATHER_BYTES
    assert load_weather(path).key == "x@1"


def test_a_missing_or_binary_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"nothing\.toml"):
        load_weather(tmp_path / "nothing.toml")
    with pytest.raises(ScenarioError, match=r"nothing\.toml"):
        get_weather(str(tmp_path / "nothing.toml"))
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\xff\xfe[weather]")
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load_weather(path)


def test_parse_weather_names_its_source() -> None:
    with pytest.raises(ScenarioError, match=r"^team\.toml: fault\[0\]\.rate: "):
        parse_weather(_weather('kind = "truncate"\nrate = 7'), source="team.toml")
    with pytest.raises(ScenarioError, match=r"^<string>: not valid TOML"):
        parse_weather("= 1")


def test_values_are_checked_where_they_are_made() -> None:
    with pytest.raises(ScenarioError, match="kind"):
        FaultRate("hail", 0.1)  # type: ignore[arg-type]
    with pytest.raises(ScenarioError, match="fault"):
        Weather("x", 1, "d", ("status_5xx",))  # type: ignore[arg-type]
    with pytest.raises(ScenarioError, match="shape"):
        Weather("x", 1, "d", (), shape=None)  # type: ignore[arg-type]
    assert FaultRate("idle_cut", 0.1, 60.0).high == 60.0  # the limit alone: low == high


def test_a_weather_file_without_a_description_gets_one(tmp_path: Path) -> None:
    path = tmp_path / "bare.toml"
    path.write_text('[weather]\nname = "bare"\n', encoding="utf-8")
    weather = load_weather(path)
    assert (weather.key, weather.description) == ("bare@1", "a custom weather (bare)")
