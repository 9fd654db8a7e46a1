"""FakeServer's life: fast start and stop, nothing left behind, scripts swapped, any client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from fake_servers._formats import _REGISTRY, OpenAIFormat, register_format, vocabulary
from fake_servers._ledger import Ledger
from fake_servers._script import Endpoint, Framing, Respond, Scenario, Stall, Stream
from fake_servers._server import FakeServer, ServerError

PATH = "/v1/stream"
WAIT = 10.0
FAST = 0.5  # the brief's bound for start and for stop


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_start_and_stop_are_fast_and_leave_nothing_behind():
    """Start and stop each take < 0.5 s; threads and file descriptors return to before."""
    vocabulary(0)  # a one-time cost per process, not part of starting a server
    threads, fds = threading.active_count(), open_fds()
    began = time.perf_counter()
    server = FakeServer(Scenario((Endpoint(PATH, (Stream(events=2),)),))).start()
    started = time.perf_counter()
    with httpx.Client(timeout=WAIT) as client:
        assert client.get(server.url + PATH).status_code == 200
    stopping = time.perf_counter()
    server.stop()
    stopped = time.perf_counter()
    assert started - began < FAST
    assert stopped - stopping < FAST
    assert threading.active_count() == threads
    assert open_fds() == fds


def test_stop_cuts_stalled_streams_quickly(raw_connect):
    """Streams stalled forever are cut at stop (< 0.5 s) and end as server_stopped."""
    server = FakeServer().start()
    try:
        server.script(PATH, Stream(events=2, stall=Stall(after=1)))
        conns = [raw_connect(server.port) for _ in range(3)]
        for conn in conns:
            conn.request(PATH)
            conn.read_head()
            conn.read_until(b"\n\n")
        began = time.perf_counter()
    finally:
        server.stop()
    assert time.perf_counter() - began < FAST
    attempts = server.ledger.attempts(PATH)
    assert [a.end for a in attempts] == ["server_stopped"] * 3
    for conn in conns:
        _, terminated = conn.read_chunked()
        assert not terminated


def test_stop_cuts_a_client_that_stopped_reading(raw_connect):
    """A write blocked on a client that reads nothing is cut too, within the bound."""
    server = FakeServer().start()
    try:
        # One ~6 MB write (buffered): more than the socket buffers take, so it blocks.
        server.script(PATH, Stream(events=30_000, framing=Framing(buffered=True)))
        conn = raw_connect(server.port)
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        conn.request(PATH)  # and never read
        server.ledger.wait_for(lambda led: any(a.status for a in led.attempts(PATH)), WAIT)
        began = time.perf_counter()
    finally:
        server.stop()
    assert time.perf_counter() - began < FAST
    (attempt,) = server.ledger.attempts(PATH)
    assert (attempt.end, attempt.events) == ("server_stopped", ())


def test_stop_is_idempotent_and_the_server_is_a_context_manager():
    """stop() twice is harmless; ``with`` starts and stops."""
    with FakeServer() as server:
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert "running" in repr(server)
    server.stop()
    assert "stopped" in repr(server)


def test_load_script_and_reset(fake_server):
    """load replaces all endpoints, script adds one, reset empties; each clears the ledger."""
    with httpx.Client(base_url=fake_server.url, timeout=WAIT) as client:
        fake_server.load(Scenario((Endpoint("/a", (Respond(status=201),)),), seed=5))
        assert client.get("/a").status_code == 201
        fake_server.script("/b", Respond(status=202))
        assert fake_server.ledger.attempts() == ()
        assert fake_server.scenario.seed == 5
        assert (client.get("/a").status_code, client.get("/b").status_code) == (201, 202)
        fake_server.script("/a", Respond(status=418))
        assert client.get("/a").status_code == 418
        fake_server.reset()
        assert fake_server.scenario.endpoints == ()
        assert client.get("/a").status_code == 404
    assert [a.number for a in fake_server.ledger.attempts("/a")] == [1]


def test_step_numbers_restart_after_the_ledger_is_cleared(fake_server):
    """Clearing the ledger restarts every endpoint's script at its first step."""
    fake_server.script(PATH, Respond(status=500), Respond(status=200))
    with httpx.Client(base_url=fake_server.url, timeout=WAIT) as client:
        assert [client.get(PATH).status_code for _ in range(2)] == [500, 200]
        fake_server.ledger.clear()
        assert [client.get(PATH).status_code for _ in range(2)] == [500, 200]


def test_a_shared_ledger_is_used():
    """A ledger passed in is the one the server writes."""
    ledger = Ledger()
    with FakeServer(Scenario((Endpoint(PATH, (Respond(),)),)), ledger=ledger) as server:
        assert server.ledger is ledger
        httpx.get(server.url + PATH, timeout=WAIT)
        assert len(ledger.wait_attempts(1, WAIT)) == 1


class _BrokenFormat(OpenAIFormat):
    def streams(self, call: object) -> bool:  # asked before the headers go out
        raise RuntimeError("no-such-format")


def test_check_raises_what_the_app_hit(fake_server):
    """An exception inside the app surfaces in the test through check()."""
    register_format("test-broken", _BrokenFormat(), replace=True)
    try:
        fake_server.script(PATH, Stream(format="test-broken"))
        response = httpx.get(fake_server.url + PATH, timeout=WAIT)
    finally:  # the registry is global
        _REGISTRY.pop("test-broken")
    assert response.status_code == 500
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert attempt.end == "aborted"
    assert "no-such-format" in attempt.note
    with pytest.raises(ServerError, match="no-such-format"):
        fake_server.check()
    fake_server.check()  # reported once


@pytest.mark.asyncio
async def test_async_clients_on_their_own_loop(fake_server):
    """An httpx AsyncClient on the test's event loop streams from the server's thread."""
    fake_server.script(PATH, Stream(events=3))
    async with (
        httpx.AsyncClient(base_url=fake_server.url, timeout=WAIT) as client,
        client.stream("GET", PATH) as response,
    ):
        lines = [line async for line in response.aiter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    assert len(lines) == 4


def test_clients_in_other_processes(fake_server):
    """Another process reaches the server over loopback."""
    fake_server.script(PATH, Stream(events=2, format="named"))
    code = (
        "import sys, urllib.request\n"
        "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode(), end='')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, fake_server.url + PATH],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.count("event: token\n") == 2
    assert out.endswith("event: done\ndata: {}\n\n")


def test_start_fails_cleanly_on_a_taken_port():
    """Binding a port in use raises and leaves nothing running."""
    with FakeServer() as server:
        taken = FakeServer(port=server.port)
        with pytest.raises(OSError, match="in use"):
            taken.start()
