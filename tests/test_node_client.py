"""The Node.js example client (examples/node-client) over the exec protocol, on the fake server.

A small driver in this file speaks the protocol (JSON lines on the process's stdin/stdout)
the way the exec adapter will. Policies are the seed's, scaled down (ClientPolicy.scaled).
Waits use the ledger or the client's events with generous deadlines; timing assertions are
lower bounds (with EARLY slack for timer resolution) or loose upper bounds, since the machine
is shared.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from _node import NODE, run_node_tests

from conformance._case import CAPABILITIES
from conformance._profiles import SEED_EVENTSOURCE, policy_to_dict
from conformance.reference import BreakerConfig, ClientPolicy
from conformance.timing import Noise
from fake_servers._clock import now
from fake_servers._ledger import Attempt, Ledger, LedgerTimeout
from fake_servers._script import Gap, Respond, Stall, Step, Stream
from fake_servers._server import FakeServer

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not on PATH")

CLIENT_DIR = Path(__file__).resolve().parent.parent / "examples" / "node-client"
WAIT = 10.0  # deadline for anything that should happen "soon"
EARLY = 0.005  # timers may fire up to a clock tick early relative to the other process
QUIET = 0.25  # how long we watch for something that must NOT happen

# The seed article's EventSource policy at 1/100 of real time. Its stall watch is far
# beyond any pause a loaded machine puts into a healthy stream: a test that is not
# about stalls must not see one (a 0.3 s watch once turned a 5 ms-gap stream into a
# `stalled` state under load). The stall tests configure STALL_POLICY themselves.
POLICY = replace(
    SEED_EVENTSOURCE.scaled(0.01),
    connect_timeout=2.0,  # connects to 127.0.0.1 are instant; never let load fail one
    stall_timeout=5.0,
    stall_check_interval=0.05,
)
STALL_POLICY = replace(POLICY, stall_timeout=0.3)


@dataclass(frozen=True)
class Event:
    """One line the client wrote, stamped on the kit's clock when it arrived."""

    at: float
    body: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.body.get("type"))

    def __getitem__(self, key: str) -> Any:
        return self.body[key]


class NodeDriver:
    """Runs client.mjs and speaks the exec protocol to it."""

    def __init__(self) -> None:
        assert NODE is not None
        self.proc = subprocess.Popen(
            [NODE, str(CLIENT_DIR / "client.mjs")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self.events: list[Event] = []
        self.bad_lines: list[str] = []
        self.stderr: list[str] = []
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._readers = [
            threading.Thread(target=self._read_stdout, name="node-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name="node-stderr", daemon=True),
        ]
        for thread in self._readers:
            thread.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            at = now()
            try:
                body = json.loads(line)
            except ValueError:
                body = None
            with self._cond:
                if isinstance(body, dict):
                    self.events.append(Event(at, body))
                else:
                    self.bad_lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    # -- talking ---------------------------------------------------------------------
    def send_raw(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def send(self, cmd: str, **fields: Any) -> None:
        self.send_raw(json.dumps({"cmd": cmd, **fields}))

    def wait_for(
        self, predicate: Callable[[Event], bool], what: str, timeout: float = WAIT
    ) -> Event:
        """The first event (ever) matching ``predicate``; fail after ``timeout``."""
        deadline = now() + timeout
        with self._cond:
            while True:
                found = next((e for e in self.events if predicate(e)), None)
                if found is not None:
                    return found
                left = deadline - now()
                if left <= 0 or self.proc.poll() is not None:
                    pytest.fail(f"no {what} within {timeout}s; events: {self.dump()}")
                self._cond.wait(min(left, 0.1))

    def reply(self, kind: str) -> Event:
        return self.wait_for(lambda e: e.type == kind, f"{kind!r} reply")

    def configure(self, policy: ClientPolicy) -> None:
        count = len(self.of_type("configured"))
        self.send("configure", policy=policy_to_dict(policy))
        self.wait_for(lambda e: e.type == "configured" and self._index(e) >= count, "configured")

    def stream(
        self,
        url: str,
        *,
        method: str = "GET",
        body: dict[str, Any] | None = None,
        idempotent: bool | None = None,
        cancel_after: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> str:
        """Start a stream; returns its id."""
        sid = f"s{next(self._ids)}"
        self.send(
            "stream",
            stream=sid,
            url=url,
            method=method,
            headers=headers or {},
            body=body,
            idempotent=method == "GET" if idempotent is None else idempotent,
            cancel_after=cancel_after,
        )
        return sid

    # -- reading ---------------------------------------------------------------------
    def of(self, sid: str) -> list[Event]:
        with self._cond:
            return [e for e in self.events if e.body.get("stream") == sid]

    def of_type(self, kind: str) -> list[Event]:
        with self._cond:
            return [e for e in self.events if e.type == kind]

    def chunks(self, sid: str) -> list[Event]:
        return [e for e in self.of(sid) if e.type == "chunk"]

    def states(self, sid: str) -> list[str]:
        return [e["state"] for e in self.of(sid) if e.type == "state"]

    def end(self, sid: str, timeout: float = WAIT) -> Event:
        """The stream's one `done` or `error` event."""
        return self.wait_for(
            lambda e: e.body.get("stream") == sid and e.type in ("done", "error"),
            f"end of {sid}",
            timeout,
        )

    def state(self, sid: str, state: str, timeout: float = WAIT) -> Event:
        return self.wait_for(
            lambda e: e.body.get("stream") == sid and e.type == "state" and e["state"] == state,
            f"state {state} of {sid}",
            timeout,
        )

    def _index(self, event: Event) -> int:
        return [e for e in self.events if e.type == event.type].index(event)

    def dump(self) -> str:
        tail = "".join(self.stderr[-20:])
        return "\n".join(json.dumps(e.body)[:300] for e in self.events[-40:]) + f"\nstderr: {tail}"

    def close(self, timeout: float = 5.0) -> int:
        """Shut the process down (killing it if it does not go) and join the reader threads."""
        if self.proc.poll() is None:
            try:
                self.send("shutdown")
                self.proc.wait(timeout)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        for thread in self._readers:
            thread.join(timeout)
        return self.proc.returncode


@pytest.fixture
def client(fake_server: FakeServer) -> Iterator[NodeDriver]:
    """A node client after the handshake, configured with POLICY.

    It depends on ``fake_server`` so that it exits (closing its keep-alive connections)
    before the server stops.
    """
    driver = NodeDriver()
    try:
        driver.send("hello", protocol=1)
        driver.reply("hello")
        driver.configure(POLICY)
        yield driver
    finally:
        driver.close()


def scripted(server: FakeServer, *steps: Step, path: str = "/v1/stream") -> str:
    server.script(path, *steps)
    return server.url + path


def data_of(attempts: tuple[Attempt, ...]) -> list[str]:
    return [e.data for a in attempts for e in a.data_events]


def no_more_attempts(ledger: Ledger, count: int, within: float = QUIET) -> bool:
    """True if the ledger still holds ``count`` attempts after watching it for ``within`` s."""
    try:
        ledger.wait_for(lambda led: len(led.attempts()) > count, within, "an extra attempt")
    except LedgerTimeout:
        return True
    return False


def wait_end(ledger: Ledger, number: int, end: str) -> Attempt:
    """Wait until attempt ``number`` (1-based) has ended; assert how."""
    ledger.wait_for(
        lambda led: len(led.attempts()) >= number and led.attempts()[number - 1].finished,
        WAIT,
        f"attempt {number} to end",
    )
    attempt = ledger.attempts()[number - 1]
    assert attempt.end == end, attempt
    return attempt


# -- the protocol ---------------------------------------------------------------------


def test_handshake_configure_reset_and_shutdown() -> None:
    """hello advertises every capability but comments (it keeps comment lines to itself);
    configure and reset reply; shutdown exits 0 within 2 s."""
    driver = NodeDriver()
    try:
        driver.send("hello", protocol=1)
        hello = driver.reply("hello")
        assert hello["protocol"] == 1
        assert hello["name"]
        assert hello["version"]
        assert set(hello["capabilities"]) == set(CAPABILITIES)
        driver.configure(POLICY)
        driver.send("reset")
        driver.reply("reset")
        started = now()
        driver.send("shutdown")
        assert driver.proc.wait(2.0) == 0
        assert now() - started < 2.0
        assert driver.bad_lines == []
    finally:
        driver.close()


def test_malformed_commands_are_logged_and_the_client_carries_on(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """Lines that are not JSON objects or not commands become `log` events; nothing crashes."""
    for line in ["not json", "[1, 2]", '{"cmd": "teleport"}', '{"cmd": "stream"}', "{}"]:
        client.send_raw(line)
    client.send("configure", policy={"backoff": {"family": "fibonacci"}})
    client.wait_for(lambda e: e.type == "log" and "fibonacci" in e["message"], "a configure log")
    client.send("stream", stream="bad", url="not a url")
    error = client.end("bad")
    assert error["kind"] == "other"
    client.send("cancel", stream="nobody")
    client.send("hello", protocol=1)
    client.wait_for(lambda e: e.type == "hello" and client._index(e) == 1, "a second hello")
    assert len(client.of_type("log")) >= 6
    assert client.proc.poll() is None
    assert client.bad_lines == []


# -- streams ----------------------------------------------------------------------------


def test_plain_stream_is_delivered_in_order_then_done(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """Every data event reaches the consumer once, in order, then `done` ends the stream."""
    url = scripted(fake_server, Stream(events=8, gap=Gap(seconds=0.005)))
    sid = client.stream(url)
    assert client.end(sid).type == "done"
    attempts = wait_end_all(fake_server.ledger, 1)
    assert [c["data"] for c in client.chunks(sid)] == data_of(attempts)
    # A starved machine can hold the events past the client's stall check: it may say
    # so (stalled) and go on; nothing else may differ.
    # A stall that clears before the headers says connecting again.
    states = [s for s in client.states(sid) if s != "stalled"]
    states = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
    assert states == ["connecting", "committed", "done"]
    assert client.of(sid)[-1].type == "done"
    assert attempts[0].header("accept") == "text/event-stream"


def wait_end_all(ledger: Ledger, count: int) -> tuple[Attempt, ...]:
    ledger.wait_attempts(count, WAIT)
    return ledger.wait_finished(WAIT)


def test_named_format_with_bom_and_crlf_is_parsed(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """Named events, a BOM, CRLF line ends and bytes split into 3-byte pieces parse the same."""
    from fake_servers._script import Framing

    framing = Framing(line_ending="crlf", bom=True, comment_every=2, split=3)
    url = scripted(fake_server, Stream(events=6, format="named", framing=framing))
    sid = client.stream(url)
    assert client.end(sid).type == "done"
    attempts = wait_end_all(fake_server.ledger, 1)
    chunks = client.chunks(sid)
    assert [c["data"] for c in chunks] == data_of(attempts)
    assert {c["event"] for c in chunks} == {"token"}


def test_401_is_never_retried(client: NodeDriver, fake_server: FakeServer) -> None:
    """A 401 ends the stream with non_retryable_status after exactly one attempt."""
    url = scripted(fake_server, Respond(status=401))
    sid = client.stream(url)
    error = client.end(sid)
    assert (error.type, error["kind"], error["status"]) == ("error", "non_retryable_status", 401)
    assert len(fake_server.ledger.attempts()) == 1
    assert no_more_attempts(fake_server.ledger, 1)


def test_503_twice_then_success_takes_three_attempts(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """Retryable statuses are retried; the answer is delivered once, from the third attempt."""
    url = scripted(fake_server, Respond(status=503), Respond(status=503), Stream(events=4))
    sid = client.stream(url)
    assert client.end(sid).type == "done"
    attempts = wait_end_all(fake_server.ledger, 3)
    assert [a.status for a in attempts] == [503, 503, 200]
    assert [c["data"] for c in client.chunks(sid)] == data_of(attempts)
    assert client.states(sid).count("retrying") == 2


def test_retry_after_ms_sets_the_delay(client: NodeDriver, fake_server: FakeServer) -> None:
    """retry-after-ms replaces the computed backoff (a lower bound measured on the server)."""
    url = scripted(fake_server, Respond(status=429, headers=(("retry-after-ms", "150"),)), Stream())
    sid = client.stream(url)
    assert client.end(sid).type == "done"
    first, second = wait_end_all(fake_server.ledger, 2)
    assert second.arrived_at - first.arrived_at >= 0.150 - EARLY
    retrying = next(e for e in client.of(sid) if e.type == "state" and e["state"] == "retrying")
    assert retrying["delay"] == pytest.approx(0.150)


def test_max_attempts_gives_up(client: NodeDriver, fake_server: FakeServer) -> None:
    """With max_attempts=2 an always-503 endpoint gets two attempts, then gave_up."""
    client.configure(replace(POLICY, max_attempts=2))
    url = scripted(fake_server, Respond(status=503))
    sid = client.stream(url)
    error = client.end(sid)
    assert (error["kind"], error["status"]) == ("gave_up", 503)
    assert len(fake_server.ledger.attempts()) == 2


@pytest.mark.parametrize("end", ["abort", "abort_mid_line", "truncate"])
def test_failure_after_commit_without_ids_is_surfaced(
    client: NodeDriver, fake_server: FakeServer, end: str
) -> None:
    """After 2 chunks without ids the stream is never retried: the consumer gets `truncated`."""
    url = scripted(fake_server, Stream(events=2, end=end))  # type: ignore[arg-type]
    sid = client.stream(url)
    error = client.end(sid)
    assert (error.type, error["kind"]) == ("error", "truncated")
    attempts = wait_end_all(fake_server.ledger, 1)
    chunks = [c["data"] for c in client.chunks(sid)]
    assert chunks == data_of(attempts)
    assert len(chunks) == len(set(chunks)) == 2
    assert no_more_attempts(fake_server.ledger, 1)


@pytest.mark.parametrize("server_resumes", [True, False], ids=["server-resumes", "server-replays"])
def test_resume_with_last_event_id_delivers_the_sequence_exactly_once(
    client: NodeDriver, fake_server: FakeServer, server_resumes: bool
) -> None:
    """With ids, a broken stream resumes with Last-Event-ID; no chunk is lost or repeated."""
    url = scripted(
        fake_server,
        Stream(events=2, ids=True, end="abort"),
        Stream(events=6, ids=True, resume=server_resumes),
    )
    sid = client.stream(url)
    assert client.end(sid).type == "done"
    first, second = wait_end_all(fake_server.ledger, 2)
    assert first.last_event_id is None
    assert second.last_event_id == "2"
    sent = {e.id: e.data for a in (first, second) for e in a.data_events}
    chunks = client.chunks(sid)
    assert [c["id"] for c in chunks] == [str(i) for i in range(1, 7)]
    assert [c["data"] for c in chunks] == [sent[str(i)] for i in range(1, 7)]


def test_post_json_body_is_identical_across_retries(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """An idempotent POST is re-sent byte for byte (ledger body_sha256) until it streams."""
    url = scripted(fake_server, Respond(status=503), Respond(status=502), Stream(events=3))
    body = {"json": {"prompt": "make the headline bigger ✨", "images": [], "n": 1}}
    sid = client.stream(url, method="POST", body=body, idempotent=True)
    assert client.end(sid).type == "done"
    attempts = wait_end_all(fake_server.ledger, 3)
    assert {a.method for a in attempts} == {"POST"}
    assert len({a.body_sha256 for a in attempts}) == 1
    assert attempts[0].body_size > 0
    assert attempts[0].header("content-type") == "application/json"


def test_post_multipart_body_is_identical_across_retries(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """A multipart POST (FormData + Blob) keeps its bytes and boundary across retries."""
    image = os.urandom(200_000)
    body = {
        "multipart": {
            "fields": {"prompt": "add a testimonial section"},
            "files": [
                {
                    "name": "image",
                    "filename": "a.png",
                    "content_type": "image/png",
                    "base64": base64.b64encode(image).decode(),
                }
            ],
        }
    }
    url = scripted(fake_server, Respond(status=503), Stream(events=3))
    sid = client.stream(url, method="POST", body=body, idempotent=True)
    assert client.end(sid).type == "done"
    first, second = wait_end_all(fake_server.ledger, 2)
    assert first.body_sha256 == second.body_sha256
    assert second.body_size > len(image)
    assert (second.header("content-type") or "").startswith("multipart/form-data; boundary=")


def test_non_idempotent_post_is_never_resent(client: NodeDriver, fake_server: FakeServer) -> None:
    """idempotent=false: a 503 the server answered is not re-sent; the consumer gets gave_up."""
    url = scripted(fake_server, Respond(status=503), Stream())
    sid = client.stream(url, method="POST", body={"json": {"prompt": "x"}}, idempotent=False)
    error = client.end(sid)
    assert (error["kind"], error["status"]) == ("gave_up", 503)
    assert no_more_attempts(fake_server.ledger, 1)


# -- the consumer stops ----------------------------------------------------------------


def test_cancel_after_closes_the_connection(client: NodeDriver, fake_server: FakeServer) -> None:
    """cancel_after=3: exactly 3 chunks, then the server sees the client close the connection."""
    url = scripted(fake_server, Stream(events=200, gap=Gap(seconds=0.01)))
    sid = client.stream(url, cancel_after=3)
    attempt = wait_end(fake_server.ledger, 1, "client_closed")
    client.wait_for(lambda e: e.type == "log" and e.body.get("stream") == sid, "the cancel log")
    assert len(client.chunks(sid)) == 3
    assert len(attempt.data_events) < 200
    assert not [e for e in client.of(sid) if e.type in ("done", "error")]


def test_cancel_closes_a_silent_stream(client: NodeDriver, fake_server: FakeServer) -> None:
    """`cancel` aborts the fetch even while the server is silent; the close reaches it at once."""
    url = scripted(fake_server, Stream(events=5, stall=Stall(after=1)))
    sid = client.stream(url)
    client.wait_for(lambda e: e.type == "chunk" and e["stream"] == sid, "the first chunk")
    sent = now()
    client.send("cancel", stream=sid)
    attempt = wait_end(fake_server.ledger, 1, "client_closed")
    assert attempt.ended_at is not None
    assert attempt.ended_at - sent < 1.0  # generous: the machine is shared


# -- stalls -----------------------------------------------------------------------------


def test_stall_before_the_first_chunk_is_retried(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """A silent stream is abandoned after stall_timeout and retried, since nothing was delivered."""
    client.configure(STALL_POLICY)
    url = scripted(fake_server, Stream(events=3, stall=Stall(after=0)), Stream(events=3))
    asked = now()
    sid = client.stream(url)
    assert client.end(sid).type == "done"
    first = wait_end(fake_server.ledger, 1, "client_closed")
    assert first.ended_at is not None
    # From the command, not the request's arrival: the watch may start when the client
    # starts connecting, and under load that request reached the server 0.27 s later.
    assert first.ended_at - asked >= STALL_POLICY.stall_timeout - EARLY
    assert "stalled" in client.states(sid)
    assert len(client.chunks(sid)) == 3


def test_stall_after_commit_without_ids_surfaces_stalled(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """After the commit a silent stream is abandoned and `stalled` reaches the consumer.

    The server stamps an event after its write returns, so its loop's lag can make the
    stamp late and the silence it measures short (beside 2 CPU burners: 2.7 ms of a
    0.3 s watch): the lower bound allows what the server's probe measured there.
    """
    client.configure(STALL_POLICY)
    fake_server.measure_lag(True)
    url = scripted(fake_server, Stream(events=5, stall=Stall(after=2)))
    sid = client.stream(url)
    error = client.end(sid)
    assert (error.type, error["kind"]) == ("error", "stalled")
    attempt = wait_end(fake_server.ledger, 1, "client_closed")
    assert attempt.ended_at is not None
    silent_since = attempt.data_events[-1].at
    late = Noise.from_ledger(fake_server.ledger.lags()).lower_slack(silent_since)
    low = STALL_POLICY.stall_timeout - EARLY - late
    limit = STALL_POLICY.stall_timeout + STALL_POLICY.stall_check_interval
    assert low <= attempt.ended_at - silent_since < limit + 1.0
    assert len(client.chunks(sid)) == 2
    assert no_more_attempts(fake_server.ledger, 1)


@pytest.mark.parametrize(("idle_rule", "survives"), [("bytes", True), ("data", False)])
def test_keepalive_comments_count_only_under_the_bytes_rule(
    client: NodeDriver, fake_server: FakeServer, idle_rule: str, survives: bool
) -> None:
    """Comments during a data silence keep a `bytes` watch alive; a `data` watch abandons it."""
    # Surviving: keepalives every 20 ms against a 1 s timeout, a 50-fold margin (against
    # 0.3 s, beside 2 CPU burners, a starved process once let the watch fire), through two
    # timeouts of silence. Abandoning: five timeouts of keepalive-only silence, as a
    # starved Node process that sleeps through a shorter one (CI: 2.5 timeouts) reads the
    # data after it before its watch looks.
    timeout, silence = (1.0, 2.0) if survives else (0.3, 1.5)
    policy = replace(STALL_POLICY, idle_rule=idle_rule, stall_timeout=timeout)
    client.configure(policy)  # type: ignore[arg-type]
    stall = Stall(after=2, seconds=silence, keepalive=0.02)
    url = scripted(fake_server, Stream(events=4, stall=stall))
    sid = client.stream(url)
    end = client.end(sid)
    if survives:
        assert end.type == "done"
        assert len(client.chunks(sid)) == 4
    else:
        assert (end.type, end["kind"]) == ("error", "stalled")
        wait_end(fake_server.ledger, 1, "client_closed")


def test_first_chunk_timeout_abandons_a_slow_attempt(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """first_chunk_timeout bounds headers-to-first-chunk per attempt; the retry then succeeds."""
    client.configure(replace(POLICY, first_chunk_timeout=0.1, stall_timeout=30.0))
    url = scripted(fake_server, Stream(events=3, stall=Stall(after=0)), Stream(events=3))
    asked = now()
    sid = client.stream(url)
    assert client.end(sid).type == "done"
    first = wait_end(fake_server.ledger, 1, "client_closed")
    assert first.ended_at is not None
    # The timer starts when the request is sent, after ``asked``; the server stamps the
    # close when its loop gets to it, never earlier. Its arrival stamp is no bound: a
    # server loop held back on a loaded machine stamps the arrival late (once 94 ms).
    assert first.ended_at - asked >= 0.1 - EARLY
    assert first.ended_at - first.arrived_at < 5.0


# -- the breaker ------------------------------------------------------------------------

BREAKER = replace(POLICY, breaker=BreakerConfig(kind="consecutive", threshold=3, cooldown=30.0))


def test_breaker_opens_after_threshold_and_new_streams_fail_fast(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """Three consecutive failures open the shared breaker; a new stream fails with circuit_open."""
    client.configure(BREAKER)
    url = scripted(fake_server, Respond(status=503))
    first = client.stream(url)
    client.state(first, "breaker_open")
    assert len(fake_server.ledger.attempts()) == 3
    second = client.stream(url)
    error = client.end(second)
    assert (error.type, error["kind"]) == ("error", "circuit_open")
    assert len(fake_server.ledger.attempts()) == 3
    assert not [e for e in client.of(first) if e.type in ("done", "error")]


def test_half_open_admits_one_probe_at_a_time(client: NodeDriver, fake_server: FakeServer) -> None:
    """With three streams waiting on an open breaker, probes arrive one per cooldown, never two."""
    cooldown = 0.25
    client.configure(
        replace(POLICY, breaker=BreakerConfig(kind="consecutive", threshold=3, cooldown=cooldown))
    )
    url = scripted(fake_server, Respond(status=503))
    ids = [client.stream(url) for _ in range(3)]
    for sid in ids:
        client.state(sid, "breaker_open")
    seen = len(fake_server.ledger.attempts())
    attempts = fake_server.ledger.wait_attempts(seen + 2, WAIT)
    probe, next_probe = attempts[seen], attempts[seen + 1]
    assert next_probe.arrived_at - probe.arrived_at >= cooldown - EARLY


def test_probe_success_closes_the_breaker(client: NodeDriver, fake_server: FakeServer) -> None:
    """After the cooldown one probe goes out; its success closes the breaker and the stream ends."""
    cooldown = 0.2
    client.configure(
        replace(POLICY, breaker=BreakerConfig(kind="consecutive", threshold=3, cooldown=cooldown))
    )
    url = scripted(fake_server, *(Respond(status=503) for _ in range(3)), Stream(events=2))
    sid = client.stream(url)
    assert client.end(sid, timeout=WAIT).type == "done"
    attempts = wait_end_all(fake_server.ledger, 4)
    assert attempts[3].arrived_at - attempts[2].arrived_at >= cooldown - EARLY
    again = client.stream(url)
    assert client.end(again).type == "done"


# -- offline / online ---------------------------------------------------------------------


@pytest.mark.slow
def test_offline_aborts_and_online_resumes_at_once(
    client: NodeDriver, fake_server: FakeServer
) -> None:
    """offline drops the open stream and makes no attempt; online reconnects at once and resumes."""
    url = scripted(fake_server, Stream(events=40, gap=Gap(seconds=0.02), ids=True))
    sid = client.stream(url)
    client.wait_for(
        lambda e: e.type == "chunk" and e["stream"] == sid and e["id"] == "2", "chunk 2"
    )
    client.send("offline")
    client.state(sid, "offline")
    wait_end(fake_server.ledger, 1, "client_closed")
    assert no_more_attempts(fake_server.ledger, 1)
    back = now()
    client.send("online")
    second = fake_server.ledger.wait_attempts(2, WAIT)[1]
    assert second.arrived_at - back < 1.0  # "at once", with slack for a shared machine
    assert second.last_event_id is not None
    assert client.end(sid).type == "done"
    assert [c["id"] for c in client.chunks(sid)] == [str(i) for i in range(1, 41)]


# -- the pure modules ---------------------------------------------------------------------


@pytest.mark.slow
def test_node_unit_tests_pass() -> None:
    """The client's own node:test suite (its transport) passes; the shared modules' tests
    (SSE parser, policy, breaker) run in tests/test_browser_client.py."""
    run_node_tests(CLIENT_DIR)
