"""Hostile input, end to end: a clear error, a bounded run time, nothing leaked.

Each test feeds the kit something a careless or malicious user could (a scenario
past a limit, a request body built to hurt, a value that makes no sense) and
asserts the error names what was wrong, the time stays bounded, and no thread or
file descriptor is left behind (threads: the autouse check in conftest.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_servers import (
    Endpoint,
    FakeServer,
    Respond,
    Scenario,
    ScenarioError,
    Stream,
    load_scenario,
    parse_scenario,
    rate_limited,
    respond,
    stream,
)
from fake_servers._limits import (
    MAX_DEPTH,
    MAX_ENDPOINTS,
    MAX_EVENTS,
    MAX_HEADER_BYTES,
    MAX_SCENARIO_BYTES,
    MAX_SCRIPTED_BODY_BYTES,
    MAX_SECONDS,
    MAX_STEPS,
)

WAIT = 10.0
FAST = 1.0  # what "at once" means for a refusal, on a shared 2-core machine


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def no_leaked_fds() -> Iterator[None]:
    """Fail a test that leaves file descriptors (sockets included) open."""
    before = open_fds()
    yield
    deadline = time.monotonic() + 1.0
    while open_fds() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert open_fds() <= before, f"{open_fds() - before} file descriptor(s) left open"


@pytest.fixture
def server(no_leaked_fds: None) -> Iterator[FakeServer]:
    with FakeServer() as running:
        yield running
    running.check()


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = action()
    return result, time.monotonic() - started


def refused(text: str, file_format: str = "toml") -> ScenarioError:
    """The ScenarioError a scenario text gets, which must come at once."""
    started = time.monotonic()
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, format=file_format, source="s." + file_format)  # type: ignore[arg-type]
    assert time.monotonic() - started < FAST
    return caught.value


def _toml(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)  # JSON's numbers, strings and escapes are TOML's too


def toml_step(**keys: object) -> str:
    lines = ["[[endpoint]]", 'path = "/a"', "[[endpoint.step]]"]
    lines += [f"{key} = {_toml(value)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"


# -- scenario limits, at load time ---------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "field", "problem"),
    [
        (
            {"kind": "stream", "events": 10**12},
            "events",
            f"1000000000000 is over the limit of {MAX_EVENTS} events per response",
        ),
        (
            {"kind": "rate_limited", "times": 10**10},
            "times",
            f"10000000000 is over the limit of {MAX_STEPS} steps per endpoint",
        ),
        (
            {"kind": "respond", "retry_after_date": 1e12},
            "retry_after_date",
            f"1000000000000.0 is over the limit of {MAX_SECONDS:g} seconds",
        ),
        (
            {"kind": "respond", "retry_after": 1e12},
            "retry_after",
            f"1000000000000.0 is over the limit of {MAX_SECONDS:g} seconds",
        ),
        (
            {"kind": "stream", "gap": 1e300},
            "gap",
            f"1e+300 is over the limit of {MAX_SECONDS:g} seconds",
        ),
        (
            {"kind": "stall", "seconds": 10**7},
            "seconds",
            f"10000000 is over the limit of {MAX_SECONDS:g} seconds",
        ),
        (
            {"kind": "stream", "retry_ms": 10**12},
            "retry_ms",
            "1000000000000 is over the limit of 86400000 milliseconds",
        ),
        (
            {"kind": "respond", "headers": {"x-snow": "\u2603"}},
            "headers.x-snow",
            'expected latin-1 text (a header value cannot carry other characters), got "\u2603"',
        ),
        (
            {"kind": "respond", "headers": {"x-pad": " a"}},
            "headers.x-pad",
            'expected no space or tab at either end (HTTP cannot send them), got " a"',
        ),
        (
            {"kind": "stream", "content_type": "text/\u00e9v\u00e9nement\u2026"},
            "content_type",
            "expected latin-1 text (a header value cannot carry other characters), "
            'got "text/\u00e9v\u00e9nement\u2026"',
        ),
        (
            {"kind": "respond", "headers": {"x-big": "x" * MAX_HEADER_BYTES}},
            "headers",
            f"{MAX_HEADER_BYTES + 5} is over the limit of {MAX_HEADER_BYTES} bytes of headers",
        ),
    ],
)
def test_a_value_past_a_limit_is_refused_at_load_naming_file_step_field_and_limit(
    keys: dict[str, object], field: str, problem: str
) -> None:
    """Each limit is checked when the file loads; the error says where and which limit."""
    error = refused(toml_step(**keys))
    assert (error.file, error.step, error.field, error.problem) == (
        "s.toml",
        "endpoint[0].step[0]",
        field,
        problem,
    )


def test_the_same_limits_hold_for_values_built_in_python() -> None:
    """Builders and the frozen values refuse alike, whichever way a script is made."""
    with pytest.raises(ScenarioError, match=r"^events: .* over the limit of 1000000 events"):
        stream(events=MAX_EVENTS + 1)
    with pytest.raises(ScenarioError, match=r"^events: .* over the limit of 1000000 events"):
        Stream(events=MAX_EVENTS + 1)
    with pytest.raises(ScenarioError, match=r"^times: 10000000000 is over the limit"):
        rate_limited(times=10**10)
    with pytest.raises(ScenarioError, match=r"^retry_after_date: .* over the limit of 86400"):
        Respond(status=503, retry_after_date=1e12)
    with pytest.raises(ScenarioError, match=r"^headers\.x-snow: expected latin-1 text"):
        Respond(headers=(("x-snow", "\u2603"),))
    with pytest.raises(ScenarioError, match=r"^body: .* over the limit of 8388608 bytes"):
        respond(body=b"x" * (MAX_SCRIPTED_BODY_BYTES + 1))
    with pytest.raises(ScenarioError, match=r"^steps: 1001 is over the limit of 1000 steps"):
        Endpoint("/a", (Respond(),) * (MAX_STEPS + 1))
    with pytest.raises(ScenarioError, match=r"^endpoint: 1001 is over the limit of 1000 endp"):
        Scenario(tuple(Endpoint(f"/{i}", (Respond(),)) for i in range(MAX_ENDPOINTS + 1)))


def test_too_many_endpoints_are_refused_before_any_is_built() -> None:
    """A file with more than MAX_ENDPOINTS endpoints is refused at once, by count."""
    tree = {"endpoint": [{"path": f"/{i}", "step": [{"kind": "respond"}]} for i in range(5000)]}
    error = refused(json.dumps(tree), "json")
    assert str(error) == "s.json: endpoint: 5000 is over the limit of 1000 endpoints per scenario"


def test_too_many_steps_are_refused_as_they_grow() -> None:
    """Step tables and the steps their times stand for count together, per endpoint."""
    steps = [{"kind": "outage", "times": 600}, {"kind": "rate_limited", "times": 600}]
    tree = {"endpoint": [{"path": "/a", "step": steps}]}
    error = refused(json.dumps(tree), "json")
    assert str(error) == (
        "s.json: endpoint[0].step: 1200 is over the limit of 1000 steps per endpoint"
    )


@pytest.mark.parametrize(
    ("text", "file_format"),
    [
        ("a = " + "[" * 100_000 + "]" * 100_000, "toml"),
        ('{"endpoint": ' + "[" * 100_000 + "]" * 100_000 + "}", "json"),
        ("seed = 1\n[[endpoint]]\npath = '/a'\n[[endpoint.step]]\nkind = 'respond'\n"
         "body = " + "{a = " * 200 + "1" + "}" * 200, "toml"),
    ],
    ids=["toml-arrays", "json-arrays", "toml-body-tables"],
)  # fmt: skip
def test_a_deeply_nested_file_is_a_scenario_error_not_a_recursion_error(
    text: str, file_format: str
) -> None:
    """Nesting past MAX_DEPTH is refused with the limit named, never a RecursionError."""
    error = refused(text, file_format)
    assert f"nested deeper than {MAX_DEPTH} levels" in str(error)


def test_a_json_integer_of_5000_digits_is_a_scenario_error() -> None:
    """Python refuses such an integer (ValueError); the loader says so as a ScenarioError."""
    error = refused('{"seed": 1' + "0" * 5000 + "}", "json")
    assert "not valid JSON" in str(error)


def test_a_scenario_file_past_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    """A file larger than MAX_SCENARIO_BYTES is refused by its size."""
    big = tmp_path / "big.json"
    with big.open("wb") as out:
        out.truncate(MAX_SCENARIO_BYTES + 1)
    started = time.monotonic()
    with pytest.raises(ScenarioError) as caught:
        load_scenario(big)
    assert time.monotonic() - started < FAST
    assert str(caught.value) == (
        f"{big}: {MAX_SCENARIO_BYTES + 1} is over the limit of {MAX_SCENARIO_BYTES} "
        "bytes per scenario file"
    )


def test_a_zero_step_endpoint_is_refused_at_the_value_whichever_way_it_is_built(
    server: FakeServer,
) -> None:
    """No endpoint without steps exists: script(), load() and the dataclass all refuse it."""
    with pytest.raises(ScenarioError, match=r"^steps: expected at least one step$"):
        server.script("/z")
    with pytest.raises(ScenarioError, match=r"^steps: expected at least one step$"):
        server.load(Scenario((Endpoint("/z", ()),)))
    with pytest.raises(ScenarioError, match=r"^steps\[0\]: expected a step"):
        Endpoint("/z", ("stream",))  # type: ignore[arg-type]
    response = httpx.get(server.url + "/z", timeout=WAIT)
    assert response.status_code == 404  # nothing was scripted, and nothing broke
