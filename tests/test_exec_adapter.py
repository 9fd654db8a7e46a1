"""The exec adapter, driving real processes over JSON lines against the fake server.

The clients live in tests/exec_clients/: ``minimal.py`` is a correct client built on
the reference StreamingClient; the others each break the protocol in one way. Waits
poll with generous deadlines (the machine is shared); nothing relies on tight timing.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from conformance._adapter import AdapterRequest, StreamSink
from conformance._case import CAPABILITIES, JsonBody, MultipartBody, StreamRequest
from conformance._evidence import Delivery, DeliveryLog
from conformance._result import HarnessError
from conformance.reference import ClientPolicy
from fake_servers import Gap, Raw, Respond, Stream, now
from fake_servers._noise import Source
from fake_servers._server import FakeServer
from pytest_streamcheck.targets._exec import (
    ExecAdapter,
    ProtocolError,
    parse_event,
    parse_hello,
    stream_command,
)
from pytest_streamcheck.targets._exec_protocol import deliver, parse_lag, probes_lag

CLIENTS = Path(__file__).parent / "exec_clients"
NODE_CLIENT = Path(__file__).parent.parent / "examples" / "node-client" / "client.mjs"
WAIT = 20.0  # deadline for anything that should happen soon (a loaded 2-core machine)
START = 30.0  # hello timeout for clients that import httpx on start
POLICY = ClientPolicy().scaled(0.02)


def client(name: str, *args: str) -> list[str]:
    return [sys.executable, str(CLIENTS / name), *args]


@asynccontextmanager
async def running(argv: list[str], **options: Any) -> AsyncIterator[ExecAdapter]:
    """A started adapter that is always closed, and whose process is checked gone."""
    options.setdefault("hello_timeout", START)
    adapter = ExecAdapter(argv, **options)
    try:
        yield adapter
    finally:
        await adapter.aclose()
        assert_gone(adapter)


def assert_gone(adapter: ExecAdapter) -> None:
    if adapter.pid is None:
        return
    assert adapter.returncode is not None, "the process still runs"
    with pytest.raises(ProcessLookupError):  # reaped: not even a zombie is left
        os.kill(adapter.pid, 0)


async def eventually(predicate: Callable[[], bool], what: str, within: float = WAIT) -> None:
    deadline = now() + within
    while not predicate():
        if now() > deadline:
            pytest.fail(f"waited {within}s for {what}")
        await asyncio.sleep(0.01)


def request(server: FakeServer, path: str = "/chat", **fields: Any) -> AdapterRequest:
    return AdapterRequest(server.url + path, StreamRequest(path=path, **fields))


async def play(adapter: ExecAdapter, req: AdapterRequest) -> tuple[Delivery, ...]:
    log = DeliveryLog()
    await adapter.stream(req, StreamSink(log, req.stream))
    return log.all()


def chunks(deliveries: tuple[Delivery, ...]) -> list[str]:
    return [d.data for d in deliveries if d.kind == "chunk"]


async def ready(adapter: ExecAdapter) -> ExecAdapter:
    await adapter.start()
    await adapter.configure(POLICY)
    await adapter.reset()
    return adapter


# -- the pure part ----------------------------------------------------------------------


def test_stream_command_maps_json_and_multipart_bodies() -> None:
    """Bodies map to {"json": ...} and {"multipart": {...}} with base64 files."""
    json_req = AdapterRequest("http://h/x", StreamRequest("/x", "POST", body=JsonBody({"a": 1})))
    assert stream_command(json_req)["body"] == {"json": {"a": 1}}
    body = MultipartBody((("prompt", "hi"),), (("image", "a.png", "image/png", b"\x89PNG"),))
    req = StreamRequest("/x", "POST", (("x-k", "v"),), body, idempotent=False, cancel_after=3)
    command = stream_command(AdapterRequest("http://h/x", req))
    assert command == {
        "cmd": "stream",
        "stream": "s1",
        "url": "http://h/x",
        "method": "POST",
        "headers": {"x-k": "v"},
        "body": {
            "multipart": {
                "fields": {"prompt": "hi"},
                "files": [
                    {
                        "name": "image",
                        "filename": "a.png",
                        "content_type": "image/png",
                        "base64": base64.b64encode(b"\x89PNG").decode(),
                    }
                ],
            }
        },
        "idempotent": False,
        "cancel_after": 3,
        "client": "default",
        "comments": False,
        "last_event_id": None,
    }
    asked = StreamRequest("/x", comments=True)
    assert stream_command(AdapterRequest("http://h/x", asked))["comments"] is True
    resumed = StreamRequest("/x", last_event_id="41")
    assert stream_command(AdapterRequest("http://h/x", resumed))["last_event_id"] == "41"


def test_a_comment_event_reaches_the_sink_and_needs_its_text() -> None:
    """{"type": "comment", "text": ...} is StreamSink.comment; it never ends the stream."""
    log = DeliveryLog()
    sink = StreamSink(log, "s1")
    assert deliver(sink, {"type": "comment", "stream": "s1", "text": " two"}) is False
    assert [(d.kind, d.data) for d in log.all()] == [("comment", " two")]
    assert parse_event(b'{"type": "comment", "stream": "s1", "text": ""}\n') is not None
    with pytest.raises(ProtocolError, match='needs a string "text"'):
        deliver(sink, {"type": "comment", "stream": "s1"})
    with pytest.raises(ProtocolError, match=r"comment\.text must be a string"):
        deliver(sink, {"type": "comment", "stream": "s1", "text": 7})


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"garbage\n", "is not JSON"),
        (b"[1, 2]\n", "not an object"),
        (b'{"type": "bogus"}\n', "unknown type 'bogus'"),
        (b'{"type": "chunk", "data": "x"}\n', 'without a string "stream"'),
        (b'\xff{"type": "done"}\n', "not UTF-8"),
    ],
)
def test_parse_event_rejects_lines_outside_the_protocol(line: bytes, problem: str) -> None:
    """A line that is not a v1 event is a ProtocolError that says why."""
    with pytest.raises(ProtocolError, match=problem):
        parse_event(line)


def test_parse_event_skips_blank_lines_and_reads_events() -> None:
    """Blank lines are ignored; events come back as their objects."""
    assert parse_event(b"  \n") is None
    assert parse_event(b'{"type": "done", "stream": "s1"}\n') == {"type": "done", "stream": "s1"}


def test_parse_hello_checks_the_version_and_refuses_unknown_capabilities() -> None:
    """A wrong protocol is refused; so is an unknown capability, named with the known ones
    (set aside, a typo would leave its cases UNSUPPORTED with nothing said)."""
    info, unknown = parse_hello({"protocol": 1, "name": "c", "capabilities": ["get"]}, "argv0")
    assert (info.name, info.version, info.capabilities, unknown) == (
        "c",
        "unknown",
        frozenset({"get"}),
        [],
    )
    with pytest.raises(ProtocolError, match="protocol 2"):
        parse_hello({"protocol": 2}, "argv0")
    with pytest.raises(ProtocolError) as caught:
        parse_hello({"protocol": 1, "capabilities": ["get", "stal"]}, "argv0")
    assert str(caught.value) == (
        "hello.capabilities: unknown capability 'stal' (did you mean 'stall'?); "
        f"the known ones: {', '.join(CAPABILITIES)}"
    )


def test_info_before_the_handshake_is_a_clear_error() -> None:
    """Reading info before start() names the fix instead of returning a blank identity."""
    with pytest.raises(HarnessError, match=r"await adapter.start\(\)"):
        _ = ExecAdapter(["true"]).info


# -- a correct client ----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_handshake_reports_identity_and_capabilities() -> None:
    """hello's reply becomes info; stderr is captured."""
    async with running(client("minimal.py")) as adapter:
        await adapter.start()
        assert adapter.info.name == "minimal-python"
        assert adapter.info.version == "1.0"
        assert adapter.info.capabilities == frozenset(CAPABILITIES)
    assert "minimal: ready" in adapter.stderr_tail()
    assert adapter.returncode == 0  # it took the shutdown command


@pytest.mark.asyncio
async def test_stream_is_delivered_in_order_then_done(fake_server: FakeServer) -> None:
    """Every chunk the server sent arrives in order, stamped on arrival, then done."""
    fake_server.script("/chat", Stream(events=6, gap=Gap(seconds=0.01)))
    async with running(client("minimal.py")) as adapter:
        await ready(adapter)
        started = now()
        deliveries = await play(adapter, request(fake_server))
    (attempt,) = fake_server.ledger.attempts()
    assert chunks(deliveries) == [e.data for e in attempt.data_events]
    assert [d.kind for d in deliveries if d.kind != "state"][-1] == "done"
    stamps = [d.at for d in deliveries]
    assert stamps == sorted(stamps)
    assert stamps[0] >= started
    assert "committed" in [d.state for d in deliveries if d.kind == "state"]


@pytest.mark.asyncio
async def test_comments_cross_the_protocol_when_asked(fake_server: FakeServer) -> None:
    """With "comments": true the client reports each comment line among its chunks, in
    stream order; without it, none."""
    wire = (b": one\ndata: a\n\n", b":  two\ndata: b\n\ndata: [DONE]\n\n")
    fake_server.script("/chat", Raw(wire))
    async with running(client("minimal.py")) as adapter:
        await ready(adapter)
        asked = await play(adapter, request(fake_server, comments=True))
        await adapter.reset()
        plain = await play(adapter, request(fake_server))
    kinds = ("chunk", "comment")
    assert [(d.kind, d.data) for d in asked if d.kind in kinds] == [
        ("comment", "one"),
        ("chunk", "a"),
        ("comment", " two"),
        ("chunk", "b"),
    ]
    assert [(d.kind, d.data) for d in plain if d.kind in kinds] == [("chunk", "a"), ("chunk", "b")]


@pytest.mark.asyncio
async def test_post_json_body_reaches_the_server(fake_server: FakeServer) -> None:
    """A POST's JSON body crosses the protocol intact."""
    fake_server.script("/chat", Stream(events=2))
    async with running(client("minimal.py")) as adapter:
        await ready(adapter)
        body = JsonBody({"prompt": "héllo", "n": [1, 2]})
        deliveries = await play(adapter, request(fake_server, method="POST", body=body))
    (attempt,) = fake_server.ledger.attempts()
    assert attempt.method == "POST"
    assert attempt.body_size == len(b'{"prompt":"h\xc3\xa9llo","n":[1,2]}')
    assert deliveries[-1].kind == "done"


@pytest.mark.asyncio
async def test_error_is_mapped_through(fake_server: FakeServer) -> None:
    """A 401 arrives as a non_retryable_status error carrying the status."""
    fake_server.script("/chat", Respond(status=401))
    async with running(client("minimal.py")) as adapter:
        await ready(adapter)
        deliveries = await play(adapter, request(fake_server))
    errors = [d for d in deliveries if d.kind == "error"]
    assert [(e.error, e.status) for e in errors] == [("non_retryable_status", 401)]
    assert len(fake_server.ledger.attempts()) == 1


@pytest.mark.asyncio
async def test_cancel_closes_the_connection(fake_server: FakeServer) -> None:
    """Cancelling stream() sends cancel; the client hangs up (ledger: client_closed)."""
    fake_server.script("/chat", Stream(events=200, gap=Gap(seconds=0.05)))
    async with running(client("minimal.py")) as adapter:
        await ready(adapter)
        log = DeliveryLog()
        req = request(fake_server)
        task = asyncio.create_task(adapter.stream(req, StreamSink(log, "s1")))
        await eventually(lambda: any(d.kind == "chunk" for d in log.all()), "a first chunk")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await eventually(
            lambda: [a.end for a in fake_server.ledger.attempts()] == ["client_closed"],
            "the server to see the client hang up",
        )
        # The adapter still works: the next case can reset and stream.
        await adapter.reset()


@pytest.mark.asyncio
async def test_cancel_after_ends_the_stream_for_the_kit(fake_server: FakeServer) -> None:
    """With cancel_after=N, stream() returns after the N-th chunk; the client hangs up."""
    fake_server.script("/chat", Stream(events=200, gap=Gap(seconds=0.02)))
    async with running(client("minimal.py")) as adapter:
        await ready(adapter)
        deliveries = await play(adapter, request(fake_server, cancel_after=2))
        assert len(chunks(deliveries)) == 2
        await eventually(
            lambda: [a.end for a in fake_server.ledger.attempts()] == ["client_closed"],
            "the server to see the client hang up",
        )


# -- broken clients: each a clear HarnessError with stderr ---------------------------------------


@pytest.mark.asyncio
async def test_missing_command_cannot_start() -> None:
    """A command that does not exist fails start() with the OS's reason."""
    async with running(["/nonexistent/streamcheck-client"]) as adapter:
        with pytest.raises(HarnessError, match="cannot start the command"):
            await adapter.start()


@pytest.mark.asyncio
async def test_crash_at_hello_names_the_exit_code_and_stderr() -> None:
    """A client that dies on hello: its exit code, what was awaited and its traceback."""
    async with running(client("crash_at_hello.py")) as adapter:
        with pytest.raises(HarnessError) as caught:
            await adapter.start()
    message = str(caught.value)
    assert "exited with code 1" in message
    assert "waiting for the `hello` reply" in message
    assert "RuntimeError: crash_at_hello cannot handle hello" in message
    assert "crash_at_hello: starting" in message


@pytest.mark.asyncio
async def test_environment_is_passed_on_top_of_the_kit_s() -> None:
    """env adds variables to the process's environment (seen here through its stderr)."""
    script = "import os, sys; print(os.environ['SC_TEST'], 'PATH' in os.environ, file=sys.stderr)"
    argv = [sys.executable, "-c", script + "; sys.exit(5)"]
    async with running(argv, env={"SC_TEST": "from-the-kit"}) as adapter:
        with pytest.raises(HarnessError, match=r"(?s)exited with code 5.*\| from-the-kit True"):
            await adapter.start()


@pytest.mark.asyncio
async def test_no_hello_times_out_with_stderr() -> None:
    """A client that never answers hello fails after hello_timeout, and is stopped. The
    timeout covers the interpreter's start before the client says a word on stderr:
    beside a second suite that took over 1 s."""
    async with running(client("silent_hello.py"), hello_timeout=3.0) as adapter:
        with pytest.raises(HarnessError) as caught:
            await adapter.start()
        assert adapter.returncode is not None  # stopped at once, not left for aclose
        with pytest.raises(HarnessError, match="did not answer"):  # later: the same failure
            await adapter.reset()
    message = str(caught.value)
    assert "did not answer `hello` within 3.0s" in message
    assert "silent_hello: ignoring hello" in message


@pytest.mark.asyncio
async def test_garbage_instead_of_hello_is_a_protocol_error() -> None:
    """A line that is not JSON is quoted, with its line number and the stderr tail."""
    async with running(client("garbage.py", "hello")) as adapter:
        with pytest.raises(HarnessError) as caught:
            await adapter.start()
    message = str(caught.value)
    assert "broke the protocol: stdout line 1 is not JSON" in message
    assert "'Hello there! (this is not JSON)'" in message
    assert "garbage: about to print garbage instead of hello" in message


@pytest.mark.asyncio
async def test_garbage_mid_stream_fails_the_stream(fake_server: FakeServer) -> None:
    """A non-object line during a stream fails that stream, after the chunks before it."""
    async with running(client("garbage.py", "stream")) as adapter:
        await adapter.start()
        log = DeliveryLog()
        with pytest.raises(HarnessError) as caught:
            await adapter.stream(request(fake_server), StreamSink(log, "s1"))
    message = str(caught.value)
    assert "stdout line 3 is JSON but not an object" in message
    assert "stream 's1' (1 chunk delivered)" in message
    assert "garbage: about to print a JSON array" in message
    assert chunks(log.all()) == ["first"]


@pytest.mark.asyncio
async def test_exit_mid_stream_names_the_code_and_the_stream(fake_server: FakeServer) -> None:
    """A client that exits mid-stream fails the stream with its code and stderr."""
    async with running(client("exit_mid_stream.py")) as adapter:
        await adapter.start()
        await adapter.reset()
        with pytest.raises(HarnessError) as caught:
            await play(adapter, request(fake_server))
        with pytest.raises(HarnessError, match="exited with code 3"):
            await adapter.reset()  # a dead client fails fast, with the same story
    message = str(caught.value)
    assert "exited with code 3 while the kit was waiting for stream 's1'" in message
    assert "exit_mid_stream: giving up mid-stream" in message


@pytest.mark.asyncio
async def test_hang_mid_stream_hits_the_stream_timeout(fake_server: FakeServer) -> None:
    """A frozen client fails the stream after stream_timeout, and is killed."""
    async with running(client("hang_mid_stream.py"), stream_timeout=1.5) as adapter:
        await adapter.start()
        with pytest.raises(HarnessError) as caught:
            await play(adapter, request(fake_server))
        assert adapter.returncode is not None
    message = str(caught.value)
    assert "stream 's1' did not end within 1.5s (the kit stopped it)" in message
    assert "hang_mid_stream: frozen after one chunk" in message


@pytest.mark.slow
@pytest.mark.asyncio
async def test_aclose_kills_a_client_that_ignores_shutdown(fake_server: FakeServer) -> None:
    """aclose() waits the protocol's 2 s, then terminates: no process, no zombie, no pipe."""
    async with running(client("hang_mid_stream.py")) as adapter:
        await adapter.start()
        log = DeliveryLog()
        task = asyncio.create_task(adapter.stream(request(fake_server), StreamSink(log, "s1")))
        await eventually(lambda: bool(log.all()), "the one chunk")
        started = now()
        await adapter.aclose()
        assert now() - started >= 2.0 - 0.05  # it had its chance to shut down
        with pytest.raises(HarnessError, match="closed"):
            await task
    assert adapter.returncode is not None
    assert adapter.returncode < 0  # ended by a signal, after the grace


@pytest.mark.asyncio
async def test_aclose_cut_short_still_kills_the_process(fake_server: FakeServer) -> None:
    """An aclose() cancelled by its caller's time limit kills the process on the way out."""
    async with running(client("hang_mid_stream.py")) as adapter:
        await adapter.start()
        log = DeliveryLog()
        task = asyncio.create_task(adapter.stream(request(fake_server), StreamSink(log, "s1")))
        await eventually(lambda: bool(log.all()), "the one chunk")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(adapter.aclose(), 0.3)
        await eventually(lambda: adapter.returncode is not None, "the process to be reaped")
        assert adapter.returncode == -9
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# -- the Node example client ----------------------------------------------------------------------


@pytest.mark.skipif(
    shutil.which("node") is None or not NODE_CLIENT.exists(), reason="needs node and the client"
)
@pytest.mark.asyncio
async def test_node_client_streams_through_the_adapter(fake_server: FakeServer) -> None:
    """The Node example client speaks the same protocol: one stream, in order, done."""
    fake_server.script("/chat", Stream(events=5, gap=Gap(seconds=0.01)))
    node = shutil.which("node")
    assert node is not None
    async with running([node, str(NODE_CLIENT)]) as adapter:
        await ready(adapter)
        assert "configurable" in adapter.info.capabilities
        deliveries = await play(adapter, request(fake_server))
    (attempt,) = fake_server.ledger.attempts()
    assert chunks(deliveries) == [e.data for e in attempt.data_events]
    assert [d.kind for d in deliveries if d.kind not in ("state", "log")][-1] == "done"
    assert adapter.returncode == 0


# -- the client process's own lag ---------------------------------------------------------


def test_parse_lag_maps_the_wall_clock_and_never_past_the_arrival() -> None:
    """Rows on the wall clock come out on the kit's, no wake-up later than the event's
    arrival, no due after its wake-up; malformed rows are a protocol error."""
    rows = parse_lag({"type": "lag", "rows": [100.0, 100.2, 101.0, 105.0]}, 90.0, 12.0)
    assert rows == [(pytest.approx(10.0), pytest.approx(10.2)), (11.0, 12.0)]
    for bad in ([1.0], ["1", 2.0], None, [True, 1.0]):
        with pytest.raises(ProtocolError, match="rows"):
            parse_lag({"type": "lag", "rows": bad}, 0.0, 0.0)
    with pytest.raises(ProtocolError, match="lag_probe"):
        probes_lag({"lag_probe": "yes"})


@pytest.mark.asyncio
async def test_a_probing_process_reports_its_lag_into_the_ledger() -> None:
    """A client whose hello says lag_probe: told when a case starts and stops, and its
    flushed rows land in the ledger as the ``process`` series, on the kit's clock."""
    server = FakeServer()
    async with running(client("lag_probe.py")) as adapter:
        await adapter.start()
        adapter.measure_lag(server.ledger)
        await asyncio.sleep(0)  # the command, queued on this loop, is written first
        before = now()
        await adapter.collect_lag()
        adapter.measure_lag(None)
        await eventually(lambda: any("on=False" in s for s in adapter.stderr_tail()), "off")
        ((due, woke),) = server.ledger.lags()[Source.PROCESS]
        assert woke - due == pytest.approx(0.2, abs=0.01)
        assert before - 0.4 < due < now()
        assert [s for s in adapter.stderr_tail() if "lag_probe:" in s] == [
            "lag_probe: lag on=True flush=None",
            "lag_probe: lag on=None flush=True",
            "lag_probe: lag on=False flush=None",
        ]


@pytest.mark.asyncio
async def test_a_process_that_does_not_probe_is_never_asked_to() -> None:
    """Without lag_probe in its hello the client gets no lag command: protocol v1 as it was."""
    server = FakeServer()
    async with running(client("lag_probe.py", "--no-probe")) as adapter:
        await ready(adapter)
        adapter.measure_lag(server.ledger)
        await asyncio.sleep(0)
        await adapter.collect_lag()
        adapter.measure_lag(None)
        await adapter.reset()  # a round trip: any lag command would have been read by now
        assert not any("lag_probe:" in s for s in adapter.stderr_tail())
        assert Source.PROCESS not in server.ledger.lags()
