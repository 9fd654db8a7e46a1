"""Hostile input, end to end: a clear error, a bounded run time, nothing leaked.

Each test feeds the kit something a careless or malicious user could (a scenario
past a limit, a request body built to hurt, a value that makes no sense) and
asserts the error names what was wrong, the time stays bounded, and no thread or
file descriptor is left behind (threads: the autouse check in conftest.py).
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conformance._profiles import Profile, ProfileError, load_profile
from conformance.reference import (
    BackoffConfig,
    BreakerConfig,
    ClientPolicy,
    PolicyError,
    RetryMatrix,
)
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
    BODY_TIMEOUT,
    MAX_DEPTH,
    MAX_ENDPOINTS,
    MAX_EVENTS,
    MAX_FILE_BYTES,
    MAX_HEADER_BYTES,
    MAX_JSON_DEPTH,
    MAX_PARTS,
    MAX_REQUEST_BYTES,
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


# -- the server: hostile requests get a 4xx, recorded, and the others are not stalled ------


def test_a_deeply_nested_json_body_is_a_recorded_400(server: FakeServer) -> None:
    """A JSON body nested past MAX_JSON_DEPTH: 400 naming the limit, in the ledger, no step."""
    server.script("/v1/chat/completions", stream(events=2))
    with httpx.Client(base_url=server.url, timeout=WAIT) as client:
        headers = {"content-type": "application/json"}
        deep = client.post("/v1/chat/completions", content=b"[" * 100_000, headers=headers)
        fine = client.post("/v1/chat/completions", json={"stream": True, "x": [[[[1]]]]})
    assert deep.status_code == 400
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in deep.text
    assert fine.status_code == 200
    first, second = server.ledger.wait_finished(WAIT)
    assert (first.status, first.step, first.end) == (400, None, "completed")
    assert "nested deeper" in first.note
    assert second.step == 0  # the rejection used no step
    server.check()  # nothing went wrong inside the server


def test_a_nested_body_on_a_get_is_harmless(server: FakeServer) -> None:
    """A GET's JSON body is not checked, but reading it must not break the server."""
    server.script("/s", stream(events=1))
    body = b"[" * 100_000
    headers = {"content-type": "application/json"}
    response = httpx.request("GET", server.url + "/s", content=body, headers=headers, timeout=WAIT)
    assert response.status_code == 200
    server.check()


def test_a_last_event_id_of_5000_digits_resumes_past_the_end(server: FakeServer) -> None:
    """A huge Last-Event-ID is past every event: only the ending, no ValueError, no 500."""
    server.script("/s", stream(events=3, ids=True))
    headers = {"last-event-id": "9" * 5000}
    response = httpx.get(server.url + "/s", headers=headers, timeout=WAIT)
    assert (response.status_code, response.text) == (200, "data: [DONE]\n\n")
    (attempt,) = server.ledger.wait_finished(WAIT)
    assert [e.kind for e in attempt.events] == ["terminal"]
    server.check()


def _drain(port: int, path: str, stop: threading.Event) -> None:
    """Read a response as fast as it comes until ``stop`` (a raw socket: it sees the flag)."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
        sock.settimeout(0.05)
        while not stop.is_set():
            try:
                if not sock.recv(1 << 20):
                    return
            except TimeoutError:
                continue


@pytest.mark.slow
@pytest.mark.parametrize(
    "step",
    [
        stream(events=MAX_EVENTS),
        stream(events=MAX_EVENTS, buffered=True),
        stream(events=MAX_EVENTS, ids=True, format="responses"),
    ],
    ids=["gapless", "buffered", "responses-format"],
)
def test_a_million_event_response_never_stalls_the_others(server: FakeServer, step: Stream) -> None:
    """While one response of MAX_EVENTS events plays, other requests are answered at once.

    The plan unfolds as it is played: before, the whole million events were planned
    first (34 s with the server loop blocked, and 2 GB). The time judged is the
    server's own, arrival to end in the ledger: the test's client shares the process
    (and its GIL) with the busy server thread, so its own clock would judge that.
    """
    server.script("/big", step)
    server.script("/small", stream(events=2))
    stop = threading.Event()
    reader = threading.Thread(target=_drain, args=(server.port, "/big", stop))
    reader.start()
    try:
        server.ledger.wait_for(lambda led: led.attempts("/big") != (), WAIT, "the big stream")
        with httpx.Client(base_url=server.url, timeout=WAIT) as client:
            for _ in range(10):
                assert client.get("/small").status_code == 200
        small = server.ledger.wait_finished(WAIT, "/small")
    finally:
        stop.set()
        reader.join(WAIT)
    assert not reader.is_alive()
    served = [a.ended_at - a.arrived_at for a in small if a.ended_at is not None]
    assert len(served) == 10
    # The bug guarded blocked the loop for the whole plan (34 s). A starved xdist worker
    # once held one of the ten 0.54 s (the others under 0.04 s), so the typical request
    # is judged by the median and a lone outlier only by a bound far below the bug's.
    served.sort()
    typical = (served[4] + served[5]) / 2
    assert typical < 0.25, f"half the requests on another path took over {typical:.3f} s"
    assert served[-1] < 3.0, f"a request on another path took {served[-1]:.3f} s"
    big = server.ledger.attempts("/big")[0]
    assert big.end is None or big.end == "client_closed"  # still playing when the test ended


@pytest.mark.slow
def test_a_slow_upload_gets_408_after_the_body_timeout(no_leaked_fds: None) -> None:
    """A body that does not arrive within body_timeout: 408, recorded, no step used."""
    assert BODY_TIMEOUT == 10.0  # the default the docs state
    with FakeServer(body_timeout=0.5) as server:
        server.script("/p", stream(events=1))
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as sock:
            sock.sendall(
                b"POST /p HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: 100\r\n\r\n{"
            )
            started = time.monotonic()
            head = sock.recv(65536)
            took = time.monotonic() - started
        (attempt,) = server.ledger.wait_finished(WAIT)
    server.check()
    assert head.startswith(b"HTTP/1.1 408")
    assert 0.5 - 0.05 <= took < 0.5 + FAST
    assert (attempt.status, attempt.step, attempt.body_size) == (408, None, 1)
    assert "not complete within 0.5 s" in attempt.note
    assert attempt.rejected == "body_timeout"


def test_a_multipart_body_of_200k_parts_is_refused_at_once(server: FakeServer) -> None:
    """More than MAX_PARTS parts: 413 naming the limit; parsing stops at the limit."""
    server.script("/p", stream(events=1))
    part = b'--B\r\ncontent-disposition: form-data; name="p"\r\n\r\nx\r\n'
    body = part * 200_000 + b"--B--\r\n"
    headers = {"content-type": "multipart/form-data; boundary=B"}
    with httpx.Client(base_url=server.url, timeout=WAIT) as client:
        response, took = timed(lambda: client.post("/p", content=body, headers=headers))
    assert response.status_code == 413
    assert f"more than {MAX_PARTS} parts" in response.text
    assert took < FAST
    (attempt,) = server.ledger.wait_finished(WAIT)
    assert (attempt.status, attempt.step) == (413, None)


# -- profile values: checked once, where they are made, before any case runs --------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[policy]\nmax_attempts = "many"',
            "policy.max_attempts: expected an integer >= 1, got 'many'",
        ),
        ("[policy]\nmax_attempts = -3", "policy.max_attempts: expected an integer >= 1, got -3"),
        (
            '[policy.retry]\nnever = ["abc"]',
            "policy.retry.never: expected HTTP statuses 100..599, got 'abc'",
        ),
        (
            "[policy.retry]\nalways = [700]",
            "policy.retry.always: expected HTTP statuses 100..599, got 700",
        ),
        (
            "[policy]\nstall_timeout = nan",
            "policy.stall_timeout: expected seconds > 0 (a finite number), got nan",
        ),
        (
            "[policy]\nstall_timeout = 1e308",
            "policy.stall_timeout: expected seconds in (0, 3600] for a profile, got 1e+308",
        ),
        (
            '[policy]\nstall_timeout = "eight"',
            "policy.stall_timeout: expected seconds > 0 (a finite number), got 'eight'",
        ),
        (
            '[policy.backoff]\nfamily = "nope"',
            "policy.backoff.family: expected one of 'seed', "
            "'full', 'equal', 'decorrelated', 'proportional', 'none', got 'nope'",
        ),
        (
            "[policy.backoff]\njitter = 5",
            "policy.backoff.jitter: expected a number in [0, 1], got 5",
        ),
        (
            '[policy.backoff]\ncaps = [["eight", 2]]',
            "policy.backoff.caps: expected an integer >= 1, got 'eight'",
        ),
        (
            "[policy.breaker]\nthreshold = 0",
            "policy.breaker.threshold: expected an integer >= 1, got 0",
        ),
        (
            "[policy.breaker]\nratio = 1.5",
            "policy.breaker.ratio: expected a number in (0, 1], got 1.5",
        ),
        (
            "[policy]\nmax_attempts = 1000000",
            "policy.max_attempts: expected an integer 1..100 for a profile, got 1000000",
        ),
        ('test_scale = "eight"', "test_scale: expected a number in (0, 1], got 'eight'"),
        (
            "transports = []",
            "transports: expected at least one of ['get', 'post']: no transport to judge",
        ),
        (
            'transports = ["get", "ws"]',
            "transports: expected a subset of ['get', 'post'], got ['get', 'ws']",
        ),
    ],
)
def test_a_profile_value_out_of_range_is_refused_at_load_naming_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    """Each nonsense value of the issue is a ProfileError naming the field and its range."""
    path = tmp_path / "claim.toml"
    path.write_text(f'name = "claim"\n{text}\n')
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert str(caught.value) == f"{path}: {message}"


def test_the_policy_values_check_themselves_when_made() -> None:
    """Built in Python, the same values are refused by the dataclasses' __post_init__."""
    with pytest.raises(PolicyError, match=r"^jitter: expected a number in \[0, 1\], got 5$"):
        BackoffConfig(jitter=5)
    with pytest.raises(PolicyError, match=r"^family: expected one of"):
        BackoffConfig(family="nope")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match=r"^threshold: expected an integer >= 1, got 0$"):
        BreakerConfig(threshold=0)
    with pytest.raises(PolicyError, match=r"^never: expected HTTP statuses 100..599"):
        RetryMatrix(never=frozenset({"abc"}))  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match=r"^stall_timeout: expected seconds > 0"):
        ClientPolicy(stall_timeout=math.nan)
    with pytest.raises(PolicyError, match=r"^max_attempts: expected an integer >= 1, got -3$"):
        ClientPolicy(max_attempts=-3)
    no_cap = BackoffConfig(caps=((1, math.inf),))  # "no cap" is a policy (the zoo's no_cap)
    with pytest.raises(PolicyError, match=r"^policy\.backoff\.caps\[1\]: expected seconds in"):
        Profile("p", 1, "t", "s", ClientPolicy(backoff=no_cap))  # ...but not a judgeable claim


def test_the_docs_state_every_limit() -> None:
    """docs/fake-servers.md and docs/scenario-format.md give the limits _limits.py defines."""
    docs = Path(__file__).resolve().parent.parent / "docs"
    fake_servers_md = (docs / "fake-servers.md").read_text()
    scenario_md = (docs / "scenario-format.md").read_text()
    for value in (MAX_EVENTS, MAX_STEPS, MAX_ENDPOINTS, int(MAX_SECONDS), MAX_PARTS):
        assert f"{value:,}" in fake_servers_md, value
    for value in (MAX_EVENTS, MAX_STEPS, MAX_ENDPOINTS, int(MAX_SECONDS)):
        assert f"{value:,}" in scenario_md, value
    sizes = {
        MAX_SCRIPTED_BODY_BYTES: "8 MiB",
        MAX_HEADER_BYTES: "8 KiB",
        MAX_SCENARIO_BYTES: "16 MiB",
        MAX_REQUEST_BYTES: "32 MiB",
        MAX_FILE_BYTES: "5 MiB",
    }
    for size, text in sizes.items():
        assert size == int(text.split()[0]) * (1024 if "KiB" in text else 1024 * 1024)
        assert text in fake_servers_md
    assert f"nested {MAX_DEPTH} tables/arrays deep" in fake_servers_md
    assert f"{MAX_JSON_DEPTH} levels" in fake_servers_md
    assert f"{BODY_TIMEOUT:g} s from the request's arrival" in fake_servers_md
