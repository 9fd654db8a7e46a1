"""The script builders: the values they return and the arguments they refuse."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import fake_servers
from fake_servers._builders import (
    ScenarioError,
    abort,
    build_step,
    drip,
    endpoint,
    exponential,
    fixed,
    respond,
    scenario,
    stall,
    step_arguments,
    step_keys,
    stream,
    truncate,
    uniform,
)
from fake_servers._script import Endpoint, Framing, Gap, Respond, Scenario, Stall, Stream


def test_respond_defaults_to_a_plain_200() -> None:
    """respond() with no arguments is the default Respond value."""
    assert respond() == Respond()


@pytest.mark.parametrize(
    ("seconds", "header"), [(1, "1"), (2.0, "2"), (1.5, "1.5"), (0, "0"), (0.25, "0.25")]
)
def test_retry_after_is_an_integer_when_whole(seconds: float, header: str) -> None:
    """Retry-After is written as an integer for whole seconds, as a decimal otherwise."""
    assert respond(429, retry_after=seconds).headers == (("retry-after", header),)


def test_retry_after_ms_and_date() -> None:
    """retry_after_ms adds a retry-after-ms header; retry_after_date is kept for send time."""
    step = respond(503, retry_after_ms=1500, retry_after_date=3)
    assert step.headers == (("retry-after-ms", "1500"),)
    assert step.retry_after_date == 3.0


def test_retry_after_follows_the_given_headers() -> None:
    """Headers keep their order and repeats; the Retry-After header comes after them."""
    step = respond(429, headers=[("set-cookie", "a=1"), ("set-cookie", "b=2")], retry_after=2)
    assert step.headers == (("set-cookie", "a=1"), ("set-cookie", "b=2"), ("retry-after", "2"))


@pytest.mark.parametrize(
    ("body", "sent"),
    [(None, None), ("", b""), ("héllo", "héllo".encode()), (b"\xff\x00", b"\xff\x00")],
)
def test_respond_bodies(body: str | bytes | None, sent: bytes | None) -> None:
    """A string body is sent as UTF-8, bytes as they are, None as the server's default."""
    assert respond(body=body).body == sent


def test_a_table_body_is_sent_as_json() -> None:
    """A mapping body is JSON-encoded and gets a JSON Content-Type."""
    step = respond(400, body={"error": {"type": "invalid_request"}})
    assert step.body == b'{"error":{"type":"invalid_request"}}'
    assert step.headers == (("content-type", "application/json"),)


def test_a_table_body_keeps_a_given_content_type() -> None:
    """A Content-Type the caller set is not overridden for a mapping body."""
    step = respond(body={"a": 1}, headers={"Content-Type": "application/problem+json"})
    assert step.headers == (("Content-Type", "application/problem+json"),)


def test_stream_defaults_are_the_dataclass_defaults() -> None:
    """stream() with no arguments is the default Stream value."""
    assert stream() == Stream()


def test_stream_framing_arguments_land_in_framing() -> None:
    """The wire-layout keywords build the Framing value."""
    built = stream(
        line_ending="crlf", bom=True, comment_every=2, retry_ms=100, split=3,
        split_random=True, split_pause=0.01, buffered=True, content_type="text/plain",
    )  # fmt: skip
    assert built.framing == Framing("crlf", True, 2, 100, 3, True, 0.01, True, "text/plain")


@pytest.mark.parametrize(
    ("gap", "expected"),
    [
        (0.5, Gap("fixed", seconds=0.5)),
        (2, Gap("fixed", seconds=2.0)),
        (fixed(0.1), Gap("fixed", seconds=0.1)),
        (uniform(0.01, 0.02), Gap("uniform", low=0.01, high=0.02)),
        (exponential(0.3), Gap("exponential", seconds=0.3)),
        ({"kind": "uniform", "low": 0, "high": 1}, Gap("uniform", low=0.0, high=1.0)),
        ({"kind": "exponential", "mean": 2}, Gap("exponential", seconds=2.0)),
    ],
)
def test_gap_forms(gap: Any, expected: Gap) -> None:
    """A gap is a number, a Gap from fixed/uniform/exponential, or the file's table."""
    assert stream(gap=gap).gap == expected


def test_stall_builds_a_stream_that_goes_silent() -> None:
    """stall() is a stream with a Stall after ``after`` events."""
    built = stall(2, 1.5, keepalive=0.5, events=4, ids=True)
    assert built == Stream(events=4, ids=True, stall=Stall(after=2, seconds=1.5, keepalive=0.5))


def test_stall_forever_by_default() -> None:
    """stall() without seconds stalls until the client leaves, right after the headers."""
    assert stall().stall == Stall(after=0, seconds=None, keepalive=None)


def test_drip_writes_one_byte_at_a_time() -> None:
    """drip(rate) cuts writes into single bytes, 1/rate seconds apart."""
    built = drip(200, events=2)
    assert (built.events, built.framing.split, built.framing.split_pause) == (2, 1, 0.005)


def test_truncate_and_abort_set_events_and_end() -> None:
    """truncate/abort play ``after`` events, then end as their name says."""
    assert truncate(3, gap=0.1) == Stream(events=3, end="truncate", gap=Gap(seconds=0.1))
    assert abort(2) == Stream(events=2, end="abort")
    assert abort(2, mid_line=True) == Stream(events=2, end="abort_mid_line")


def test_endpoint_and_scenario() -> None:
    """endpoint() and scenario() assemble the steps and endpoints as given."""
    first, second = respond(503), stream()
    built = scenario(endpoint("/v1", first, second, method="POST", then="cycle"), seed=9)
    assert built.seed == 9
    assert built.endpoints == (Endpoint("/v1", (first, second), "POST", "cycle"),)
    assert built.endpoints[0].step_for(3) == (0, first)


def test_the_facade_exports_the_builders() -> None:
    """The public package re-exports every builder name."""
    assert fake_servers.respond is respond
    assert fake_servers.ScenarioError is ScenarioError
    assert issubclass(ScenarioError, ValueError)


DATA_LAYER = (
    "Ending",
    "Endpoint",
    "Framing",
    "Gap",
    "Respond",
    "Scenario",
    "Stall",
    "Step",
    "Stream",
)
ROOT = Path(__file__).resolve().parents[1]


def test_the_facade_advertises_the_builders_not_the_dataclasses() -> None:
    """__all__ lists the builders; the frozen values they return resolve, unadvertised."""
    assert not set(DATA_LAYER) & set(fake_servers.__all__)
    assert {"respond", "stream", "stall", "stall_after", "reply"} <= set(fake_servers.__all__)
    assert fake_servers.Stall is Stall
    assert fake_servers.Respond is Respond
    for name in (*fake_servers.__all__, *DATA_LAYER):
        getattr(fake_servers, name)


def test_every_name_the_docs_import_from_fake_servers_resolves() -> None:
    """README, docs, examples and the downstream CI project import only names that exist."""
    texts = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / ".ci").rglob("*.py")]
    texts += (ROOT / "examples").rglob("*.py")
    names = set()
    for path in texts:
        for match in re.finditer(
            r"from fake_servers import (?:\(([^)]*)\)|(.+))", path.read_text()
        ):
            listed = match.group(1) or match.group(2)
            names |= {n.strip() for n in listed.split(",") if n.strip()}
    assert {"respond", "rate_limited", "FakeServer"} <= names  # the scan found the examples
    missing = sorted(n for n in names if not hasattr(fake_servers, n))
    assert not missing


_REFUSED: list[tuple[Any, str, str]] = [
    (lambda: respond(99), "status", "expected an integer 100..599, got 99"),
    (lambda: respond(600), "status", "expected an integer 100..599, got 600"),
    (lambda: respond("200"), "status", 'expected an integer 100..599, got "200"'),
    (lambda: respond(True), "status", "expected an integer 100..599, got true"),
    (lambda: respond(delay=-1), "delay", "expected a number >= 0, got -1"),
    (lambda: respond(delay=float("nan")), "delay", "expected a number >= 0, got NaN"),
    (lambda: respond(retry_after=-0.5), "retry_after", "expected a number >= 0, got -0.5"),
    (lambda: respond(body=3), "body", "expected a string or a table (sent as JSON), got 3"),
    (
        lambda: respond(retry_after=1, retry_after_date=2),
        "retry_after_date",
        "conflicts with retry_after (both set Retry-After)",
    ),
    (
        lambda: respond(retry_after_ms=1, headers={"Retry-After-Ms": "5"}),
        "retry_after_ms",
        'conflicts with the "retry-after-ms" header in headers',
    ),
    (
        lambda: respond(headers={"bad name": "x"}),
        "headers",
        'expected header names made of letters, digits and -, got "bad name"',
    ),
    (
        lambda: respond(headers={"x-a": "1\r\nx-b: 2"}),
        "headers.x-a",
        'expected a single-line string, got "1\\r\\nx-b: 2"',
    ),
    (
        lambda: respond(headers="x-a: 1"),
        "headers",
        'expected a table of name = value, or a list of [name, value] pairs, got "x-a: 1"',
    ),
    (lambda: stream(-1), "events", "expected an integer >= 0, got -1"),
    (lambda: stream(2.0), "events", "expected an integer >= 0, got 2.0"),
    (lambda: stream(gap="fast"), "gap", 'expected a number >= 0 or a table, got "fast"'),
    (lambda: stream(gap=-0.1), "gap", "expected a number >= 0, got -0.1"),
    (
        lambda: stream(gap={"low": 1}),
        "gap.kind",
        'expected one of "fixed", "uniform", "exponential", got null',
    ),
    (
        lambda: stream(gap={"kind": "uniform", "low": 1, "hihg": 2}),
        "gap.hihg",
        'unknown key for a "uniform" gap; did you mean "high"?',
    ),
    (
        lambda: stream(gap={"kind": "uniform", "low": 1}),
        "gap.high",
        "required key is missing",
    ),
    (lambda: uniform(2, 1), "high", "expected a number >= low (2), got 1"),
    (lambda: exponential(0), "mean", "expected a number > 0, got 0"),
    (lambda: Gap("uniform", low=3, high=1), "high", "expected a number >= low (3), got 1"),
    (
        lambda: stream(end="abrt"),
        "end",
        'expected one of "done", "truncate", "abort", "abort_mid_line", "error", got "abrt"; '
        'did you mean "abort"?',
    ),
    (lambda: stream(ids=1), "ids", "expected true or false, got 1"),
    (
        lambda: stream(format="opneai"),
        "format",
        'expected one of "anthropic", "auto", "gemini", "named", "openai", "responses", '
        'got "opneai"; did you mean "openai"?',
    ),
    (
        lambda: stream(headers={"Content-Type": "text/plain"}),
        "headers",
        "set a stream's Content-Type with content_type",
    ),
    (
        lambda: stream(3, stall={"after": 4}),
        "stall.after",
        "expected an integer 0..3 (at most events), got 4",
    ),
    (lambda: Stall(keepalive=0), "keepalive", "expected a number > 0, got 0"),
    (lambda: stream(stall=[1]), "stall", "expected a table, got [1]"),
    (lambda: stream(split=-1), "split", "expected an integer >= 0, got -1"),
    (lambda: stream(split_random=True), "split_random", "needs split >= 1 (the largest piece)"),
    (lambda: stream(split_pause=0.1), "split_pause", "needs split >= 1 (pieces to pause between)"),
    (lambda: stream(retry_ms=-5), "retry_ms", "expected an integer >= 0, got -5"),
    (
        lambda: stream(line_ending="LF"),
        "line_ending",
        'expected one of "lf", "cr", "crlf", got "LF"; did you mean "lf"?',
    ),
    (
        lambda: stream(content_type=""),
        "content_type",
        'expected a non-empty single-line string, got ""',
    ),
    (lambda: stall(6), "after", "expected an integer 0..5 (at most events), got 6"),
    (lambda: stall(1, evnts=3), "evnts", 'unknown key for a "stall" step; did you mean "events"?'),
    (
        lambda: stall(1, stall=Stall()),
        "stall",
        'not allowed in a "stall" step, which sets it from after, seconds and keepalive',
    ),
    (lambda: drip(0), "rate", "expected a number > 0, got 0"),
    (lambda: drip(10, split=2), "split", 'not allowed in a "drip" step, which sets it from rate'),
    (lambda: truncate(-1), "after", "expected an integer >= 0, got -1"),
    (
        lambda: truncate(2, events=3),
        "events",
        'not allowed in a "truncate" step, which sets it from after',
    ),
    (
        lambda: abort(2, end="done"),
        "end",
        'not allowed in an "abort" step, which sets it from mid_line',
    ),
    (lambda: abort(2, mid_line="yes"), "mid_line", 'expected true or false, got "yes"'),
    (lambda: endpoint("/v1"), "steps", "expected at least one step"),
    (
        lambda: endpoint("v1", stream()),
        "path",
        'expected a path starting with "/" (no query, no spaces), got "v1"',
    ),
    (
        lambda: endpoint("/v1?x=1", stream()),
        "path",
        'expected a path starting with "/" (no query, no spaces), got "/v1?x=1"',
    ),
    (
        lambda: endpoint("/v1", stream(), method="get"),
        "method",
        'expected one of "GET", "POST", "ANY", got "get"; did you mean "GET"?',
    ),
    (
        lambda: endpoint("/v1", stream(), then="loop"),
        "then",
        'expected one of "repeat_last", "cycle", got "loop"',
    ),
    (
        lambda: endpoint("/v1", "stream"),
        "steps[0]",
        'expected a step (respond(), stream(), raw(), ...), got "stream"',
    ),
    (lambda: Stream(events=-2), "events", "expected an integer >= 0, got -2"),
    (lambda: scenario(seed=-1), "seed", "expected an integer 0..9223372036854775807, got -1"),
    (lambda: scenario("/v1"), "endpoints[0]", 'expected an endpoint(), got "/v1"'),
]


@pytest.mark.parametrize(("build", "field", "problem"), _REFUSED)
def test_invalid_arguments_are_refused_with_the_field_named(
    build: Any, field: str, problem: str
) -> None:
    """Each invalid argument raises a ScenarioError naming the field and what was expected."""
    with pytest.raises(ScenarioError) as caught:
        build()
    assert (caught.value.field, caught.value.problem) == (field, problem)
    assert str(caught.value) == f"{field}: {problem}"
    assert caught.value.file is None


def test_duplicate_paths_are_refused() -> None:
    """Two endpoints on one path are refused: the server could only ever play the first."""
    with pytest.raises(ScenarioError, match=r'endpoint\[1\]\.path: duplicate path "/a"'):
        scenario(endpoint("/a", stream()), endpoint("/a", respond(), method="POST"))


def test_hand_built_values_are_checked_when_made() -> None:
    """The values check themselves: built without the builders, they are refused alike."""
    with pytest.raises(ScenarioError) as caught:
        Respond(status=42)
    assert str(caught.value) == "status: expected an integer 100..599, got 42"
    with pytest.raises(ScenarioError, match=r"^steps: expected at least one step$"):
        Endpoint("/a", ())
    with pytest.raises(ScenarioError, match=r"^endpoint\[1\]\.path: duplicate path"):
        Scenario((Endpoint("/a", (Respond(),)), Endpoint("/a", (Stream(),))))


def test_every_step_rebuilds_from_its_arguments() -> None:
    """step_arguments gives the builder call that rebuilds a step exactly."""
    steps = [
        respond(429, retry_after=1, body={"e": 1}),
        stall(1, 2.0, keepalive=0.5, ids=True),
        drip(50),
        abort(3, mid_line=True, gap=uniform(0.0, 0.1)),
    ]
    for step in steps:
        kind, arguments = step_arguments(step)
        assert build_step(kind, arguments) == step


def test_step_keys_cover_the_shorthands() -> None:
    """A shorthand takes its own keys and stream's, less the ones it sets itself."""
    assert "after" in step_keys("truncate")
    assert "events" not in step_keys("truncate")
    assert {"rate", "gap", "events"} <= step_keys("drip")
    assert "split" not in step_keys("drip")
    assert "body" not in step_keys("stream")
