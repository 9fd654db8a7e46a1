"""Hostile input, end to end: a clear error, a bounded run time, nothing leaked.

Each test feeds the kit something a careless or malicious user could (a scenario
past a limit, a request body built to hurt, a value that makes no sense) and
asserts the error names what was wrong, the time stays bounded, and no thread or
file descriptor is left behind (threads: the autouse check in conftest.py).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from plugin_targets._pytester import PLAIN, prepare, suite

from conformance._adapter import AdapterInfo
from conformance._case import CAPABILITIES
from conformance._profiles import MAX_PROFILE_BYTES, Profile, ProfileError, load_profile
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
    raw,
    respond,
    stream,
)
from fake_servers._files import printable
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
    MAX_SEED,
    MAX_STEPS,
)
from pytest_streamcheck._known import MAX_KNOWN_FAILURES_BYTES, parse_known_failures

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
            "policy.stall_timeout: expected seconds in (0, 86400] for a profile, got 1e+308",
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


# -- a user's files: read within the limit whatever they are, before any case runs --------

SERVE = (sys.executable, "-m", "fake_servers", "serve")
ENDLESS = Path("/proc/self/pagemap")  # a regular file whose stat says 0 bytes, and is huge


@contextlib.contextmanager
def unblocked_after(fifo: Path, seconds: float = WAIT) -> Iterator[None]:
    """Let a reader blocked opening ``fifo`` go after ``seconds`` (a writer opens and
    closes it), so a regression fails the test instead of hanging it."""
    done = threading.Event()

    def release() -> None:
        if not done.wait(seconds):
            with contextlib.suppress(OSError):  # ENXIO: no reader is waiting
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    watchdog = threading.Thread(target=release)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        watchdog.join()


def hostile_file(tmp_path: Path, kind: str, name: str) -> Path:
    """A path named ``name`` (its suffix picks the loader's format) that is ``kind``."""
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to(ENDLESS if kind == "endless" else Path("/dev/zero"))
    return path


def _load(loader: str, path: Path) -> str:
    """The message ``loader`` refuses ``path`` with; it must refuse at once."""
    errors = (ScenarioError, ProfileError, pytest.UsageError)
    load = {"scenario": load_scenario, "profile": load_profile}.get(loader, parse_known_failures)
    started = time.monotonic()
    with unblocked_after(path), pytest.raises(errors) as caught:
        load(path)
    assert time.monotonic() - started < FAST
    return str(caught.value)


LOADERS = {  # loader -> (its limit, the unit its message counts, how it names the file)
    "scenario": (MAX_SCENARIO_BYTES, "bytes per scenario file", "{path}: "),
    "profile": (MAX_PROFILE_BYTES, "bytes per profile file", "{path}: "),
    "known-failures": (
        MAX_KNOWN_FAILURES_BYTES,
        "bytes per known-failures file",
        "--streamcheck-known-failures: {path}: ",
    ),
}


@pytest.mark.parametrize("loader", list(LOADERS))
@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        ("device", "is a character device, not a regular file"),
        ("fifo", "is a FIFO (named pipe), not a regular file"),
        ("directory", "is a directory, not a regular file"),
        ("endless", "holds more than the limit of {limit} {unit}"),
    ],
)
def test_a_device_fifo_or_endless_file_is_refused_by_every_loader(
    tmp_path: Path, loader: str, kind: str, problem: str, no_leaked_fds: None
) -> None:
    """/dev/zero (stat size 0) once grew a serve process to 7.3 GB and a profile to a
    MemoryError; a FIFO with no writer blocks an open(). Each is refused at once, and a
    regular file that reads on past its stat size is read to the limit and no further."""
    limit, unit, prefix = LOADERS[loader]
    path = hostile_file(tmp_path, kind, "input.toml")
    message = _load(loader, path)
    assert message == prefix.format(path=path) + problem.format(limit=limit, unit=unit)


def _serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVE, *args], capture_output=True, text=True, timeout=60, cwd=cwd, check=False
    )


@pytest.mark.parametrize(
    ("scenario", "problem"),
    [
        ("/dev/zero", 'unknown file type ""; expected .toml or .json'),
        ("zero.json", "is a character device, not a regular file"),
        ("fifo.toml", "is a FIFO (named pipe), not a regular file"),
        (
            "endless.json",
            f"holds more than the limit of {MAX_SCENARIO_BYTES} bytes per scenario file",
        ),
    ],
)
def test_serve_refuses_a_device_or_fifo_scenario_at_once(
    tmp_path: Path, scenario: str, problem: str
) -> None:
    """The issue's command, ``serve --scenario /dev/zero``, and its kin: exit 2 with the
    reason, in the time a Python start takes; no server is started."""
    hostile_file(tmp_path, "device", "zero.json")
    hostile_file(tmp_path, "fifo", "fifo.toml")
    hostile_file(tmp_path, "endless", "endless.json")
    with unblocked_after(tmp_path / "fifo.toml", 30.0):
        result = _serve("--scenario", scenario, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"fake-servers: {scenario}: {problem}\n"
    assert result.stdout == ""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An isolated directory for inner pytest runs of the suite (in-process)."""
    return prepare(pytester, monkeypatch)


def usage_error(pytester: pytest.Pytester, *args: str) -> str:
    """The stderr of a run that must stop at once as a usage error, before any case."""
    result, took = timed(lambda: pytester.runpytest(*PLAIN, *args))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert "collected" not in result.stdout.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert took < WAIT
    return str(result.stderr.str())


@pytest.mark.parametrize("kind", ["device", "fifo", "endless"])
def test_a_device_or_fifo_profile_is_a_usage_error(inner: pytest.Pytester, kind: str) -> None:
    """``--streamcheck-profile`` on /dev/zero was an INTERNALERROR (MemoryError)."""
    path = hostile_file(inner.path, kind, "claim.toml")
    with unblocked_after(path):
        stderr = usage_error(inner, "--streamcheck=reference", f"--streamcheck-profile={path}")
    assert f"--streamcheck-profile: {path}: " in stderr
    assert ("regular file" if kind != "endless" else "bytes per profile file") in stderr


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_a_device_or_fifo_known_failures_file_is_a_usage_error(
    inner: pytest.Pytester, kind: str
) -> None:
    """Checked with the other options, before the target loads: not "no such file"."""
    path = hostile_file(inner.path, kind, "known.txt")
    with unblocked_after(path):
        stderr = usage_error(
            inner, "--streamcheck=reference", f"--streamcheck-known-failures={path}"
        )
    assert f"--streamcheck-known-failures: {path}: is a " in stderr
    assert "not a regular file" in stderr


def test_a_profile_cannot_start_from_a_file_that_names_itself(tmp_path: Path) -> None:
    """``base`` names a built-in profile: a file there could name itself (once a
    RecursionError traceback), and would be read relative to the working folder."""
    path = tmp_path / "loop.toml"
    path.write_text(f'name = "loop"\nbase = "{path}"\n')
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert str(caught.value).startswith(
        f"{path}: base: expected a built-in profile, got '{path}'; valid: "
    )


# -- the seed and the output paths: usage errors before the first case -------------------


@pytest.mark.parametrize("value", ["-1", str(2**63), "1e3", "9" * 5000, "seven"])
def test_a_seed_out_of_range_is_one_usage_error(inner: pytest.Pytester, value: str) -> None:
    """``--streamcheck-seed=-1`` was a traceback ERROR per case (the scenarios refuse a
    negative seed); now it is one usage error naming the option, the range and the value."""
    stderr = usage_error(inner, "--streamcheck=reference", f"--streamcheck-seed={value}")
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    assert f"--streamcheck-seed: expected an integer 0..{MAX_SEED}, got {shown}" in stderr


def test_a_bad_seed_from_the_environment_names_the_variable(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller hands its seed to xdist workers in STREAMCHECK_SEED; a bad one set
    by hand is named as the variable, not as an option the user never gave."""
    monkeypatch.setenv("STREAMCHECK_SEED", "-5")
    stderr = usage_error(inner, "--streamcheck=reference")
    assert f"STREAMCHECK_SEED: expected an integer 0..{MAX_SEED}, got '-5'" in stderr


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        (
            "--streamcheck-certify",
            "existing.txt",
            "already exists and is a file, not a directory",
        ),
        ("--streamcheck-report", "existing.txt/r.json", "existing.txt is a file, not a folder"),
        ("--streamcheck-report", "existing.txt/a/b/r.json", "existing.txt is a file, not a"),
        ("--streamcheck-html", "existing.txt/r.html", "existing.txt is a file, not a folder"),
        ("--streamcheck-report", "folder", "already exists and is a directory, not a file"),
        ("--streamcheck-html", "fifo", "already exists and is a FIFO (named pipe), not a file"),
        ("--streamcheck-certify", "existing.txt/cert", "existing.txt is a file, not a folder"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_a_usage_error_before_the_run(
    inner: pytest.Pytester, option: str, value: str, problem: str
) -> None:
    """Found only after the whole run, these were FileExistsError tracebacks (the
    reports lost); now the run does not start, and the message names option and path."""
    (inner.path / "existing.txt").write_text("x")
    (inner.path / "folder").mkdir()
    os.mkfifo(inner.path / "fifo")
    stderr = usage_error(inner, "--streamcheck=reference", f"{option}={value}")
    assert f"{option}: {value}: {problem}" in stderr


def test_the_report_path_is_checked_without_streamcheck_too(inner: pytest.Pytester) -> None:
    """--streamcheck-verdicts writes the report of an llm_server run: the same check."""
    (inner.path / "existing.txt").write_text("x")
    stderr = usage_error(inner, "--streamcheck-verdicts", "--streamcheck-report=existing.txt/r")
    assert "--streamcheck-report: existing.txt/r: existing.txt is a file, not a folder" in stderr


def test_serve_checks_the_ledger_path_before_serving(tmp_path: Path) -> None:
    """The ledger is written at exit: a file in its way would lose a whole session."""
    (tmp_path / "existing.txt").write_text("x")
    result = _serve("--ledger-json", "existing.txt/ledger.json", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        "argument --ledger-json: existing.txt/ledger.json: existing.txt is a file, "
        "not a folder to write in" in result.stderr
    )
    assert result.stdout == ""  # no server was started


# -- text that cannot be sent, and paths that would hide what they say -------------------


@pytest.mark.parametrize(
    ("tree", "place"),
    [
        ({"path": "/a", "step": [{"kind": "respond", "body": "ok \ud800"}]}, "step[0].body"),
        (
            {"path": "/a", "step": [{"kind": "respond", "body": {"x": ["\udfff"]}}]},
            "step[0].body.x[0]",
        ),
        ({"path": "/a", "step": [{"kind": "stream", "\ud800": 1}]}, "step[0].\\ud800"),
        ({"path": "/a\ud800", "step": [{"kind": "respond"}]}, "path"),
    ],
    ids=["body", "body-table", "key", "path"],
)
def test_a_lone_surrogate_is_refused_where_the_scenario_is_made(
    tree: dict[str, Any], place: str
) -> None:
    """JSON's "\\ud800" decodes to a string UTF-8 cannot carry: it was a UnicodeEncodeError
    traceback when sent (or printed in serve's listing). The loader names the field."""
    error = refused(json.dumps({"endpoint": [tree]}), "json")
    surrogate = "\\ud800" if "\udfff" not in json.dumps(tree, ensure_ascii=False) else "\\udfff"
    assert str(error) == (
        f"s.json: endpoint[0].{place}: expected text UTF-8 can carry, "
        f"got the lone surrogate {surrogate}"
    )


def test_toml_refuses_a_surrogate_escape_itself() -> None:
    """TOML allows no surrogate escape: its parser's error, as a ScenarioError."""
    assert "not valid TOML" in str(refused(toml_step(kind="respond", body="\ud800")))


def test_serve_refuses_a_lone_surrogate_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        '{"endpoint": [{"path": "/a", "step": [{"kind": "respond", "body": "\\ud800"}]}]}'
    )
    result = _serve("--scenario", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        f"fake-servers: {path}: endpoint[0].step[0].body: expected text UTF-8 can carry, "
        "got the lone surrogate \\ud800\n"
    )


HIDING = "\x1b[2Jevil\u202elmot.toml"  # a terminal escape and a right-to-left override
HIDING_SHOWN = "\\x1b[2Jevil\\u202elmot.toml"


def test_printable_escapes_what_a_terminal_would_act_on() -> None:
    """NUL, escapes, bidi controls and undecodable bytes (surrogateescape) come out as
    repr spells them; printable text, accents and symbols included, stays as it is."""
    assert printable("caf\u00e9 \u2603 /a b") == "caf\u00e9 \u2603 /a b"
    assert printable("a\x00b\u202ec\u2066d\udcffe\n") == "a\\x00b\\u202ec\\u2066d\\udcffe\\n"


def test_a_scenario_key_that_would_reorder_the_terminal_is_shown_escaped() -> None:
    """A ScenarioError escapes all it shows: the file, the field (a user's key), the value."""
    step = {"kind": "respond", "status\u202e": 200}
    error = refused(json.dumps({"endpoint": [{"path": "/a", "step": [step]}]}), "json")
    assert str(error).startswith("s.json: endpoint[0].step[0].status\\u202e: unknown key")
    assert "\u202e" not in str(error)


def test_each_loader_shows_a_path_escaped(tmp_path: Path) -> None:
    """A file named to reorder or clear the terminal is named escaped by every loader."""
    path = tmp_path / HIDING
    path.write_text("= not valid")
    shown = f"{tmp_path}/{HIDING_SHOWN}"
    with pytest.raises(ScenarioError) as scenario_error:
        load_scenario(path)
    with pytest.raises(ProfileError) as profile_error:
        load_profile(path)
    with pytest.raises(pytest.UsageError) as known_error:
        parse_known_failures(path)
    assert str(scenario_error.value).startswith(f"{shown}: line 1: not valid TOML")
    assert str(profile_error.value).startswith(f"{shown}: cannot read profile")
    assert str(known_error.value).startswith(f"{shown}:1: ")


@pytest.mark.parametrize("loader", list(LOADERS))
def test_a_nul_in_a_path_is_a_clear_error_not_a_value_error(loader: str) -> None:
    """open() raises ValueError for a NUL, which no loader caught: a traceback."""
    message = _load(loader, Path("a\x00b.toml"))
    assert "a\\x00b.toml: cannot read the file: its path holds a NUL character" in message
    assert "\x00" not in message


def test_the_options_show_a_path_escaped(inner: pytest.Pytester) -> None:
    """An output or known-failures path is echoed escaped in the usage error."""
    (inner.path / "existing.txt").write_text("x")
    stderr = usage_error(inner, "--streamcheck=reference", f"--streamcheck-known-failures={HIDING}")
    assert f"--streamcheck-known-failures: {HIDING_SHOWN}: cannot read the file" in stderr
    stderr = usage_error(
        inner, "--streamcheck=reference", f"--streamcheck-report=existing.txt/{HIDING}"
    )
    assert f"--streamcheck-report: existing.txt/{HIDING_SHOWN}: existing.txt is a" in stderr
    assert "\u202e" not in stderr
    assert "\x1b" not in stderr


def test_serve_shows_a_scenario_path_escaped(tmp_path: Path) -> None:
    result = _serve("--scenario", HIDING, cwd=tmp_path)
    assert result.returncode == 2
    assert (
        result.stderr
        == f"fake-servers: {HIDING_SHOWN}: cannot read the file: No such file or directory\n"
    )


# -- capabilities: an unknown one is refused, naming it and the known ones -----------------


def test_an_unknown_capability_in_adapter_info_is_refused() -> None:
    """Accepted silently, a typo left the cases that need the capability UNSUPPORTED."""
    known = ", ".join(CAPABILITIES)
    with pytest.raises(ValueError, match="unknown capability") as caught:
        AdapterInfo(name="x", capabilities=frozenset({"get", "stal"}))  # type: ignore[arg-type]
    assert str(caught.value) == (
        "AdapterInfo.capabilities: unknown capability 'stal' (did you mean 'stall'?); "
        f"the known ones: {known}"
    )
    with pytest.raises(ValueError, match=r"expected a set of capability names, got 'get'"):
        AdapterInfo(name="x", capabilities="get")  # type: ignore[arg-type]
    as_tuple = AdapterInfo(name="x", capabilities=("get", "post"), api=2)  # type: ignore[arg-type]
    assert as_tuple.capabilities == frozenset({"get", "post"})


BAD_CAPABILITY_TARGET = """
from conformance._adapter import AdapterInfo

class Adapter:
    def __init__(self):
        self.info = AdapterInfo(name="typo", capabilities=frozenset({"get", "teleport"}))

def streamcheck_adapter():
    return Adapter()
"""

BAD_CAPABILITY_CLIENT = """
import json, sys
for line in sys.stdin:
    if json.loads(line)["cmd"] == "hello":
        hello = {"type": "hello", "protocol": 1, "capabilities": ["get", "teleport"]}
        print(json.dumps(hello), flush=True)
"""


@pytest.mark.parametrize("kind", ["python", "exec"])
def test_an_unknown_capability_is_one_clear_error_for_the_run(
    inner: pytest.Pytester, kind: str
) -> None:
    """A Python adapter's AdapterInfo and an exec client's hello alike: the client does
    not start, and the first ERROR names the capability and the known ones."""
    if kind == "python":
        inner.makepyfile(bad_capability=BAD_CAPABILITY_TARGET)
        inner.syspathinsert()
        target = "bad_capability"
    else:
        inner.makepyfile(bad_client=BAD_CAPABILITY_CLIENT)
        target = f"exec:{sys.executable} bad_client.py"
    result, took = timed(lambda: inner.runpytest(*suite(target, "SC-RETRY-1", "SC-RETRY-3")))
    assert took < WAIT * 3
    result.assert_outcomes(errors=2)
    output = result.stdout.str()
    assert "unknown capability 'teleport'" in output
    assert f"the known ones: {', '.join(CAPABILITIES)}" in output
    assert "the client did not start" in output  # the second case: one error per run


@pytest.mark.parametrize(
    ("make", "where"),
    [
        (lambda: respond(body="half \ud800"), "body"),
        (lambda: raw(["data: \udfff\n\n"]), "pieces"),
    ],
)
def test_a_builder_given_a_lone_surrogate_names_its_argument(make: Any, where: str) -> None:
    """The Python builders refuse what UTF-8 cannot carry as the file loader does: a
    ScenarioError naming the argument, not a UnicodeEncodeError from deep inside."""
    with pytest.raises(ScenarioError, match=rf"^{where}: expected text UTF-8 can carry"):
        make()
