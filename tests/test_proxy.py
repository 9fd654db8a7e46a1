"""The TCP fault proxy, driven with real clients over real sockets on 127.0.0.1.

Timing assertions in real time are lower bounds measured from a stamp taken before the
fault acts (the machine is shared: load only makes them longer), with slack for the
event loop's clock resolution; those that need an exact gap or an upper bound play in
virtual time. Waits use the ledger or socket timeouts with generous deadlines, never a
bare sleep.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import httpx
import pytest
from _echo import EchoServer, event, pattern, request
from conftest import EXACT, OnVirtualLoop

from fake_servers import Fault, FaultProxy, Ledger, now

WAIT = 5.0  # deadline for anything that should happen "now"
EARLY = 0.005  # asyncio may wake a timer up to its clock resolution early

Ending = Literal["eof", "reset", "timeout"]


@dataclass
class Reading:
    """What a raw-socket client received, piece by piece, and how the stream ended."""

    data: bytes = b""
    ending: Ending = "eof"
    sizes: list[int] = field(default_factory=list)
    first_at: float | None = None
    last_at: float | None = None


def read_all(sock: socket.socket, timeout: float = WAIT) -> Reading:
    reading = Reading()
    sock.settimeout(timeout)
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            reading.ending = "reset"
            return reading
        except TimeoutError:
            reading.ending = "timeout"
            return reading
        if not data:
            return reading
        reading.first_at = reading.first_at or now()
        reading.last_at = now()
        reading.data += data
        reading.sizes.append(len(data))


def exchange(address: tuple[str, int], path: str, timeout: float = WAIT) -> Reading:
    with socket.create_connection(address, timeout=WAIT) as sock:
        sock.sendall(request(path))
        return read_all(sock, timeout)


def address(proxy: FaultProxy) -> tuple[str, int]:
    return proxy.host, proxy.port


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    with EchoServer() as server:
        yield server


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[FaultProxy]:
    with FaultProxy(echo.url) as running:
        yield running


def wait_closed(proxy: FaultProxy, seq: int) -> None:
    proxy.ledger.wait_for(
        lambda led: led.connections()[seq - 1].closed_by is not None,
        WAIT,
        f"connection {seq} to close",
    )


# -- passthrough ---------------------------------------------------------------------


def test_passthrough_is_byte_identical(proxy: FaultProxy, echo: EchoServer) -> None:
    """Without a fault the client gets exactly the bytes the upstream sent, and both counts."""
    direct = exchange((echo.host, echo.port), "/bytes?n=200000")
    proxied = exchange(address(proxy), "/bytes?n=200000")
    assert proxied.ending == "eof"
    assert proxied.data == direct.data
    wait_closed(proxy, 1)
    (conn,) = proxy.connections()
    assert conn.fault == ""
    assert conn.bytes_up == len(request("/bytes?n=200000"))
    assert conn.bytes_down == len(direct.data)
    assert conn.closed_by in ("upstream", "client")
    assert conn.peer[0] == "127.0.0.1"


def test_passthrough_serves_httpx_stream(proxy: FaultProxy) -> None:
    """An httpx client streams a chunked body through the proxy unchanged."""
    with httpx.Client(timeout=WAIT) as client:
        response = client.get(f"{proxy.url}/stream?events=5&gap=0.01")
    assert response.content == b"".join(event(i) for i in range(5))


# -- offline / online ------------------------------------------------------------------


def test_offline_refuses_connects_and_records_nothing(proxy: FaultProxy) -> None:
    """While offline, connects are refused and no connection reaches the ledger."""
    proxy.offline()
    with httpx.Client(timeout=WAIT) as client, pytest.raises(httpx.ConnectError):
        client.get(proxy.url)
    for _ in range(3):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(address(proxy), timeout=WAIT).close()
    assert proxy.connections() == ()


def test_offline_resets_open_raw_stream(proxy: FaultProxy) -> None:
    """Going offline cuts an open stream with an RST, recorded as closed_by="offline"."""
    with socket.create_connection(address(proxy), timeout=WAIT) as sock:
        sock.sendall(request("/stream?events=1000&gap=0.05"))
        assert b"HTTP/1.1 200" in sock.recv(65536)
        proxy.offline()
        assert read_all(sock).ending == "reset"
    (conn,) = proxy.connections()
    assert conn.closed_by == "offline"
    assert conn.closed_at is not None


def test_offline_breaks_open_httpx_stream(proxy: FaultProxy) -> None:
    """An httpx stream open when the proxy goes offline fails with a read error."""
    with (
        httpx.Client(timeout=WAIT) as client,
        client.stream("GET", f"{proxy.url}/stream?events=1000&gap=0.05") as response,
    ):
        chunks = response.iter_raw()
        assert next(chunks).startswith(b"id: 0")
        proxy.offline()
        with pytest.raises(httpx.ReadError):
            for _ in chunks:
                pass


def test_online_listens_again_on_the_same_port(proxy: FaultProxy) -> None:
    """After offline then online the same port accepts and serves again."""
    port = proxy.port
    proxy.offline()
    proxy.online()
    assert proxy.port == port
    with httpx.Client(timeout=WAIT) as client:
        assert client.get(f"{proxy.url}/bytes?n=10").content == pattern(10)
    assert len(proxy.connections()) == 1


# -- blackhole -----------------------------------------------------------------------


def test_blackhole_times_the_client_out(proxy: FaultProxy, echo: EchoServer) -> None:
    """A blackholed request never gets an answer nor a close, and never reaches upstream."""
    proxy.set_fault(Fault.blackhole())
    with httpx.Client(timeout=0.3) as client, pytest.raises(httpx.ReadTimeout):
        client.get(f"{proxy.url}/bytes?n=10")
    (conn,) = proxy.wait_connections(1, WAIT)
    assert conn.fault == "blackhole"
    assert conn.bytes_up > 0
    assert conn.bytes_down == 0
    assert echo.received == ()


def test_blackhole_silences_an_open_stream(proxy: FaultProxy) -> None:
    """set_fault(blackhole) stops an open stream dead without closing it."""
    with socket.create_connection(address(proxy), timeout=WAIT) as sock:
        sock.sendall(request("/stream?events=1000&gap=0.02"))
        assert b"HTTP/1.1 200" in sock.recv(65536)
        proxy.set_fault(Fault.blackhole())
        after = read_all(sock, timeout=0.5)
    assert after.ending == "timeout"
    # At most a chunk already in flight; 0.5 s of the stream would be ~25 events.
    assert len(after.data) < 3 * len(event(999))


def test_client_closing_a_blackholed_connection_ends_it(proxy: FaultProxy) -> None:
    """A client giving up on a blackhole closes the link, recorded as closed_by="client"."""
    proxy.set_fault(Fault.blackhole())
    with socket.create_connection(address(proxy), timeout=WAIT) as sock:
        sock.sendall(request("/bytes?n=10"))
        proxy.wait_connections(1, WAIT)
    wait_closed(proxy, 1)
    assert proxy.connections()[0].closed_by == "client"


def test_client_leaving_mid_stream_is_recorded(proxy: FaultProxy) -> None:
    """A client that closes an open stream is recorded as closed_by="client"."""
    with socket.create_connection(address(proxy), timeout=WAIT) as sock:
        sock.sendall(request("/stream?events=1000&gap=0.02"))
        assert b"HTTP/1.1 200" in sock.recv(65536)
    wait_closed(proxy, 1)
    assert proxy.connections()[0].closed_by == "client"


# -- reset / close -------------------------------------------------------------------


def test_reset_zero_comes_before_any_response_byte(proxy: FaultProxy, echo: EchoServer) -> None:
    """reset(0): the request reaches upstream and the client gets an RST and no byte."""
    proxy.set_fault(Fault.reset())
    reading = exchange(address(proxy), "/bytes?n=1000")
    assert reading.ending == "reset"
    assert reading.data == b""
    assert echo.wait_received(1, WAIT) == (request("/bytes?n=1000"),)
    wait_closed(proxy, 1)
    (conn,) = proxy.connections()
    assert conn.fault == "reset(after_bytes=0, direction=downstream)"
    assert conn.closed_by == "proxy"
    assert conn.bytes_down == 0


@pytest.mark.parametrize("after", [1, 100, 5000])
def test_reset_after_n_bytes(proxy: FaultProxy, echo: EchoServer, after: int) -> None:
    """reset(N): the client gets exactly the first N response bytes, then an RST."""
    direct = exchange((echo.host, echo.port), "/bytes?n=20000")
    proxy.set_fault(Fault.reset(after))
    reading = exchange(address(proxy), "/bytes?n=20000")
    assert reading.ending == "reset"
    assert reading.data == direct.data[:after]
    assert proxy.connections()[0].bytes_down == after


def test_upstream_reset_cuts_the_request_midway(proxy: FaultProxy, echo: EchoServer) -> None:
    """reset(N, "upstream"): upstream gets N request bytes, the client an RST."""
    proxy.set_fault(Fault.reset(10, direction="upstream"))
    reading = exchange(address(proxy), "/bytes?n=10")
    assert reading.ending == "reset"
    assert reading.data == b""
    assert echo.wait_received(1, WAIT) == (request("/bytes?n=10")[:10],)


def test_close_after_n_bytes_is_a_clean_fin(proxy: FaultProxy, echo: EchoServer) -> None:
    """close(N): the client gets the first N bytes, then EOF rather than a reset."""
    direct = exchange((echo.host, echo.port), "/bytes?n=5000")
    proxy.set_fault(Fault.close(100))
    reading = exchange(address(proxy), "/bytes?n=5000")
    assert reading.ending == "eof"
    assert reading.data == direct.data[:100]
    wait_closed(proxy, 1)
    assert proxy.connections()[0].closed_by == "proxy"


def test_unreachable_upstream_resets_the_client() -> None:
    """With nothing listening upstream the client is reset and the ledger blames upstream."""
    # Bound and never listening, and held for the whole test: connects are refused, and
    # no other test (an xdist worker) can take the port meanwhile, as a freed one could.
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        with FaultProxy(placeholder.getsockname()[:2]) as proxy:
            try:
                ending = exchange(address(proxy), "/").ending
            except ConnectionResetError:  # the RST can come before the request is sent
                ending = "reset"
            assert ending == "reset"
            wait_closed(proxy, 1)
            assert proxy.connections()[0].closed_by == "upstream"


# -- shaping -------------------------------------------------------------------------


def test_latency_delays_the_response(proxy: FaultProxy) -> None:
    """latency(s): no response byte reaches the client sooner than s after the request."""
    proxy.set_fault(Fault.latency(0.3))
    with socket.create_connection(address(proxy), timeout=WAIT) as sock:
        sent_at = now()
        sock.sendall(request("/bytes?n=10"))
        reading = read_all(sock)
    assert reading.data.endswith(pattern(10))
    assert reading.first_at is not None
    assert reading.first_at - sent_at >= 0.3 - EARLY


def test_latency_applies_to_an_open_stream(proxy: FaultProxy) -> None:
    """set_fault(latency) delays the next events of a stream already open."""
    with socket.create_connection(address(proxy), timeout=WAIT) as sock:
        sock.sendall(request("/stream?events=3&gap=0.05"))
        assert b"HTTP/1.1 200" in sock.recv(65536)
        proxy.set_fault(Fault.latency(0.4))
        changed_at = now()
        reading = read_all(sock)
    assert reading.data.endswith(b"0\r\n\r\n")
    assert reading.last_at is not None
    assert reading.last_at - changed_at >= 0.4 - EARLY


def test_bandwidth_bounds_throughput(proxy: FaultProxy, echo: EchoServer) -> None:
    """bandwidth(r): B bytes take at least B / r seconds to arrive."""
    total = len(exchange((echo.host, echo.port), "/bytes?n=12000").data)
    proxy.set_fault(Fault.bandwidth(30_000))
    with socket.create_connection(address(proxy), timeout=WAIT) as sock:
        sent_at = now()
        sock.sendall(request("/bytes?n=12000"))
        reading = read_all(sock)
    assert len(reading.data) == total
    assert reading.last_at is not None
    assert reading.last_at - sent_at >= total / 30_000 - EARLY
    assert len(reading.sizes) > 1


# -- queue, clear, ledger --------------------------------------------------------------


def test_next_connections_are_served_in_order(proxy: FaultProxy) -> None:
    """Queued faults go to the next connections one each, then the default resumes."""
    proxy.set_fault(Fault.latency(0.01))
    proxy.next_connections(Fault.reset(), Fault.close())
    endings = [exchange(address(proxy), "/bytes?n=10").ending for _ in range(3)]
    assert endings == ["reset", "eof", "eof"]
    assert [c.fault for c in proxy.connections()] == [
        "reset(after_bytes=0, direction=downstream)",
        "close(after_bytes=0)",
        "latency(seconds=0.01)",
    ]


def test_clear_restores_normal_service(proxy: FaultProxy) -> None:
    """clear() brings the proxy online with passthrough and an empty queue."""
    proxy.offline()
    proxy.set_fault(Fault.blackhole())
    proxy.next_connections(Fault.reset())
    proxy.clear()
    with httpx.Client(timeout=WAIT) as client:
        assert client.get(f"{proxy.url}/bytes?n=10").content == pattern(10)
    assert [c.fault for c in proxy.connections()] == [""]


def test_shares_a_given_ledger_and_takes_a_tuple_upstream(echo: EchoServer) -> None:
    """Connections go into the ledger passed in; upstream may be (host, port)."""
    ledger = Ledger()
    with FaultProxy((echo.host, echo.port), ledger=ledger) as proxy:
        exchange(address(proxy), "/bytes?n=1")
        assert proxy.ledger is ledger
        assert len(ledger.connections()) == 1


def test_wait_connections_times_out_with_a_message(proxy: FaultProxy) -> None:
    """Waiting for a connection that never comes fails with an AssertionError."""
    with pytest.raises(AssertionError, match="1 proxied connection"):
        proxy.wait_connections(1, 0.05)


# -- lifecycle -----------------------------------------------------------------------


def test_start_and_stop_are_fast_even_with_open_connections(echo: EchoServer) -> None:
    """start() and stop() each take well under half a second; stop cuts open connections."""
    proxy = FaultProxy(echo.url)
    started_at = now()
    proxy.start()
    assert now() - started_at < 0.5
    with (
        socket.create_connection(address(proxy), timeout=WAIT) as streaming,
        socket.create_connection(address(proxy), timeout=WAIT) as idle,
    ):
        streaming.sendall(request("/stream?events=1000&gap=0.05"))
        assert b"HTTP/1.1 200" in streaming.recv(65536)
        proxy.wait_connections(2, WAIT)
        stopping_at = now()
        proxy.stop()
        assert now() - stopping_at < 0.5
        assert read_all(streaming).ending == "reset"
        assert read_all(idle).ending == "reset"
    assert [c.closed_by for c in proxy.connections()] == ["proxy", "proxy"]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address(proxy), timeout=WAIT).close()


def test_restart_reuses_the_port(echo: EchoServer) -> None:
    """A stopped proxy starts again on the port it had."""
    proxy = FaultProxy(echo.url).start()
    port = proxy.port
    proxy.stop()
    with proxy.start():
        assert proxy.port == port
        assert exchange(address(proxy), "/bytes?n=3").data.endswith(pattern(3))


def test_stop_leaves_no_thread(echo: EchoServer) -> None:
    """After stop() no thread the proxy started is alive."""
    before = set(threading.enumerate())
    with FaultProxy(echo.url) as proxy:
        exchange(address(proxy), "/bytes?n=3")
        assert any(t.name.startswith("fault-proxy") for t in threading.enumerate())
    assert not any(t.name.startswith("fault-proxy") for t in threading.enumerate())
    leftover = set(threading.enumerate()) - before
    assert all(t.name.startswith("echo") for t in leftover)  # the upstream's own threads


def test_control_needs_a_running_proxy() -> None:
    """offline() before start() is an error; set_fault() before start() is remembered."""
    proxy = FaultProxy("http://127.0.0.1:9")
    proxy.set_fault(Fault.blackhole())
    with pytest.raises(RuntimeError, match="not running"):
        proxy.offline()


# -- the Fault value -------------------------------------------------------------------


def test_fault_constructors_label_and_validate() -> None:
    """Faults are frozen values with readable labels; nonsense parameters are refused."""
    assert Fault.passthrough().label == ""
    assert Fault.reset(5, "upstream").label == "reset(after_bytes=5, direction=upstream)"
    assert Fault.bandwidth(1000).label == "bandwidth(bytes_per_second=1000)"
    assert Fault.slice(4, 0.1).label == "slice(size=4, pause=0.1)"
    assert Fault.latency(0.5) == Fault.latency(0.5)
    invalid: list[Callable[[], Fault]] = [
        lambda: Fault.reset(-1),
        lambda: Fault.latency(-0.1),
        lambda: Fault.bandwidth(0),
        lambda: Fault.slice(0),
    ]
    for build in invalid:
        with pytest.raises(ValueError, match=r"fault|needs"):
            build()


def test_upstream_must_be_an_http_url_or_an_address() -> None:
    """A malformed upstream is refused at construction."""
    with pytest.raises(ValueError, match="upstream"):
        FaultProxy("127.0.0.1:8000")


# -- latency is exact: no read-ahead adds to it -----------------------------------------

_RECORD = 21  # f"{loop.time():020.6f}\n": the time the upstream sent it


async def _timestamped_upstream(records: int, gap: float) -> asyncio.Server:
    """A raw upstream that, once a client connects, sends ``records`` send-time stamps."""
    loop = asyncio.get_running_loop()

    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        next_at = loop.time()
        for _ in range(records):
            writer.write(f"{loop.time():020.6f}\n".encode())
            await writer.drain()
            next_at += gap
            await asyncio.sleep(next_at - loop.time())
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


async def _reads(port: int) -> list[tuple[float, bytes]]:
    """The loop time and bytes of every read, until the other end closes."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    reads: list[tuple[float, bytes]] = []
    while data := await reader.read(65536):
        reads.append((loop.time(), data))
    writer.close()
    return reads


async def _record_delays(port: int) -> list[float]:
    """Arrival minus send time of every record, in order, until the upstream closes."""
    delays: list[float] = []
    buffer = b""
    for arrived, data in await _reads(port):
        buffer += data
        while len(buffer) >= _RECORD:
            record, buffer = buffer[:_RECORD], buffer[_RECORD:]
            delays.append(arrived - float(record))
    return delays


def test_latency_delays_each_chunk_by_exactly_the_set_amount(virtual: OnVirtualLoop) -> None:
    """latency(1.0) on 100 chunks/s: every chunk arrives 1.0 s after it was sent, not later.

    A small read-ahead bound once stopped the proxy reading after 16 chunks, so later
    chunks were stamped late and the latency piled up (1.8 s, and twice the stream). In
    virtual time, so "not later" is exact: in real time a starved CI worker once delivered
    one chunk 1.25 s late, and no bound wide enough for that load would catch the bug.
    """
    records, gap, latency = 150, 0.01, 1.0
    upstream: asyncio.Server = virtual.run(lambda: _timestamped_upstream(records, gap))
    proxy = FaultProxy(("127.0.0.1", upstream.sockets[0].getsockname()[1]))
    proxy.start(loop=virtual.loop)
    proxy.set_fault(Fault.latency(latency))

    async def body() -> tuple[list[float], float]:
        started = asyncio.get_running_loop().time()
        delays = await _record_delays(address(proxy)[1])
        return delays, asyncio.get_running_loop().time() - started

    try:
        delays, took = virtual.run(body)
    finally:
        proxy.stop()
        virtual.loop.call_soon_threadsafe(upstream.close)
    assert len(delays) == records
    # Stamps are printed to the microsecond: each delay is the latency, to the clock's tick.
    assert max(abs(delay - latency) for delay in delays) <= EXACT, max(delays)
    assert took == pytest.approx((records - 1) * gap + latency, abs=EXACT)  # not stretched


# -- slice is exact: each piece one pause after the last ---------------------------------


async def _bytes_upstream(payload: bytes) -> asyncio.Server:
    """A raw upstream that sends ``payload`` in one write to each client, then closes."""

    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(payload)
        await writer.drain()
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


def test_slice_delivers_in_paced_pieces(virtual: OnVirtualLoop) -> None:
    """slice(n, p): 70 bytes sent in one write arrive as pieces of 16, 16, 16, 16 and 6,
    each exactly p seconds after the one before.

    In virtual time: in real time a starved reader once took the first piece 9 ms late,
    and the span it measured (0.491 s of 0.5) failed a proxy that paced every piece."""
    payload, size, pause = bytes(range(70)), 16, 0.05
    upstream: asyncio.Server = virtual.run(lambda: _bytes_upstream(payload))
    proxy = FaultProxy(("127.0.0.1", upstream.sockets[0].getsockname()[1]))
    proxy.start(loop=virtual.loop)
    proxy.set_fault(Fault.slice(size, pause=pause))
    try:
        reads = virtual.run(lambda: _reads(address(proxy)[1]))
    finally:
        proxy.stop()
        virtual.loop.call_soon_threadsafe(upstream.close)
    assert [len(data) for _, data in reads] == [16, 16, 16, 16, 6]
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(reads)]
    assert gaps == pytest.approx([pause] * 4, abs=EXACT)


def test_an_upstream_reset_comes_after_the_bytes_read_before_it() -> None:
    """The server sends 5,000 bytes and resets; a latency fault holds them in the proxy
    when the reset arrives. The client gets every byte, then the reset (the proxy used
    to reset the client at once, dropping what the server had sent)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"x" * 5000)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    threading.Thread(target=serve, daemon=True).start()
    with FaultProxy(listener.getsockname()) as proxy, listener:
        proxy.set_fault(Fault.latency(0.3))
        with socket.create_connection(address(proxy), timeout=WAIT) as sock:
            sock.sendall(request("/"))
            reading = read_all(sock)
    assert reading.data == b"x" * 5000
    assert reading.ending == "reset"
