"""The TCP fault proxy: the network between a client and the fake server, failing on cue.

It runs its own event loop in its own thread; the control methods are called from the
test thread and have taken effect when they return. Every accepted connection becomes a
ledger ``Connection``, with the local port of its socket to the server
(``upstream_port``: the peer the server records for each request on it). Its byte
counts are what the client achieved on the wire: ``bytes_up`` is what the proxy read
from the client (swallowed bytes included) and ``bytes_down`` is what the proxy
delivered to it. A FIN from either side closes both (``closed_by`` names that side):
HTTP peers do not half-close, and the server should see a departed client at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from fake_servers._clock import now
from fake_servers._ledger import Connection, ConnectionEnd, ConnectionWriter, Ledger
from fake_servers._listen import close_listener, listening_socket, rst_on_close
from fake_servers._noise import LagProbe, Source
from fake_servers._virtual import kit_calls

__all__ = ["Direction", "Fault", "FaultKind", "FaultProxy"]

FaultKind = Literal["passthrough", "reset", "blackhole", "latency", "bandwidth", "slice", "close"]
Direction = Literal["downstream", "upstream"]

_T = TypeVar("_T")
# (arrival time at the proxy, bytes); b"" is the upstream's FIN, None its reset
_Chunk = tuple[float, bytes | None]

_READ_SIZE = 65536
# Bytes read from upstream and not yet delivered; beyond that, backpressure reaches upstream.
# A bound in bytes, not chunks: a latency fault holds every chunk in flight for its delay,
# and a reader that stopped after a few chunks would stamp the later ones late, adding to
# the delay. Latency is exact while the bytes in flight fit in this budget.
_READ_AHEAD_BYTES = 4 * 1024 * 1024
_READ_AHEAD_CHUNKS = 65536  # and as many chunks at most (tiny reads cost memory too)
_FLUSH_LIMIT = 0.25  # longest wait for the client's kernel to have our bytes before an RST
_FLUSH_POLL = 0.001
_CLOSE_LIMIT = 0.25  # longest wait for a graceful close before aborting
_CONTROL_TIMEOUT = 5.0
_BACKLOG = 100  # asyncio.start_server's own default
_SIOCOUTQ = 0x5411  # Linux ioctl (TIOCOUTQ): bytes written and not yet acknowledged
# Faults that only shape timing: an open connection can move between them mid-stream.
_SHAPING: frozenset[FaultKind] = frozenset({"passthrough", "latency", "bandwidth"})


@dataclass(frozen=True)
class Fault:
    """What one connection suffers; build it with the static constructors."""

    kind: FaultKind = "passthrough"
    after_bytes: int = 0
    direction: Direction = "downstream"
    seconds: float = 0.0
    bytes_per_second: float = 0.0
    size: int = 0
    pause: float = 0.0

    def __post_init__(self) -> None:
        if min(self.after_bytes, self.seconds, self.pause) < 0:
            raise ValueError(f"fault parameters must not be negative: {self!r}")
        if self.kind == "bandwidth" and self.bytes_per_second <= 0:
            raise ValueError("bandwidth needs bytes_per_second > 0")
        if self.kind == "slice" and self.size < 1:
            raise ValueError("slice needs size >= 1")

    @staticmethod
    def passthrough() -> Fault:
        """Forward everything untouched."""
        return Fault()

    @staticmethod
    def reset(after_bytes: int = 0, direction: Direction = "downstream") -> Fault:
        """RST the client once ``after_bytes`` went ``direction``.

        With 0 the reset comes when the first byte would go that way: downstream, the
        request reaches the server and the client gets no response byte.
        """
        return Fault("reset", after_bytes=after_bytes, direction=direction)

    @staticmethod
    def blackhole() -> Fault:
        """Accept, swallow the request, never answer, never close; upstream never sees it."""
        return Fault("blackhole")

    @staticmethod
    def latency(seconds: float) -> Fault:
        """Deliver each downstream chunk ``seconds`` after it reached the proxy."""
        return Fault("latency", seconds=seconds)

    @staticmethod
    def bandwidth(bytes_per_second: float) -> Fault:
        """Cap downstream throughput at ``bytes_per_second``."""
        return Fault("bandwidth", bytes_per_second=bytes_per_second)

    @staticmethod
    def slice(size: int, pause: float = 0.0) -> Fault:
        """Re-segment downstream into writes of ``size`` bytes, ``pause`` seconds apart."""
        return Fault("slice", size=size, pause=pause)

    @staticmethod
    def close(after_bytes: int = 0) -> Fault:
        """Send a clean FIN once ``after_bytes`` went downstream (0: at the first byte)."""
        return Fault("close", after_bytes=after_bytes)

    @property
    def label(self) -> str:
        """The fault's name in the ledger; "" for passthrough."""
        if self.kind == "passthrough":
            return ""
        if self.kind == "reset":
            return f"reset(after_bytes={self.after_bytes}, direction={self.direction})"
        if self.kind == "latency":
            return f"latency(seconds={self.seconds:g})"
        if self.kind == "bandwidth":
            return f"bandwidth(bytes_per_second={self.bytes_per_second:g})"
        if self.kind == "slice":
            return f"slice(size={self.size}, pause={self.pause:g})"
        if self.kind == "close":
            return f"close(after_bytes={self.after_bytes})"
        return self.kind

    def trips(self, direction: Direction) -> bool:
        """Whether this fault ends the connection after a byte count going ``direction``."""
        return self.kind in ("reset", "close") and self.direction == direction


class FaultProxy:
    """A TCP proxy in its own thread that makes "the network went away" real to a client."""

    def __init__(
        self,
        upstream: str | tuple[str, int],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ledger: Ledger | None = None,
    ) -> None:
        """Prepare a proxy; nothing listens until ``start()``.

        Args:
            upstream: Where to forward: ``"http://127.0.0.1:PORT"`` or ``(host, port)``.
            host: Interface to listen on.
            port: Port to listen on; 0 picks a free one, kept across offline/online.
            ledger: Where connections are recorded (pass a FakeServer's to share it).
        """
        self.upstream = _parse_upstream(upstream)
        self.host = host
        self.port = port
        self.ledger = ledger if ledger is not None else Ledger()
        self._default = Fault.passthrough()
        self._queue: deque[Fault] = deque()
        self._links: set[_Link] = set()
        self._server: asyncio.Server | None = None
        self._accepting = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._shared = False  # running on a loop it was given (see start)
        self._listening: socket.socket | None = None  # the last listener bound
        self._lag = LagProbe(self.ledger, Source.PROXY)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address
        return f"http://{host}:{self.port}"

    # -- lifecycle -------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> FaultProxy:
        """Listen (on the same port again after a stop): in a thread and event loop of its
        own, or on a running ``loop`` of another thread (the kit's virtual-time runs)."""
        if self._loop is not None:
            raise RuntimeError("the proxy is already running")
        if loop is not None:
            self._loop, self._shared = loop, True
            try:
                self._call(self._listen)
            except BaseException:
                self._loop, self._shared = None, False
                raise
            return self
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="fault-proxy", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._call(self._listen)
        except BaseException:
            self._halt()
            raise
        thread.name = f"fault-proxy:{self.port}"
        return self

    def stop(self) -> None:
        """Cut every connection (closed_by="proxy"), stop listening and join the thread."""
        if self._loop is None:
            return
        try:
            self._call(self._shutdown)
        finally:
            self._halt()

    def abandon(self) -> None:
        """Forget a shared loop that can no longer run anything (blocked by a client, or
        closed): close the listener from here, and let the connections go with it."""
        if not self._shared:
            return
        self._server, self._accepting = None, False
        self._links.clear()
        if self._listening is not None:
            self._listening.close()
        self._halt()

    def __enter__(self) -> FaultProxy:
        return self if self._loop is not None else self.start()  # `with proxy.start():` works

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- control (from the test thread) ----------------------------------------
    def measure_lag(self, on: bool = True) -> None:
        """Record the proxy's event-loop lag into its ledger (source ``proxy``), or stop.

        The probe (``fake_servers._noise``) runs until turned off or the proxy stops.
        """
        if self._loop is None:
            raise RuntimeError("the proxy is not running")
        if on:
            self._lag.start(self._loop)
        else:
            self._lag.stop()

    def offline(self) -> None:
        """Close the listener (new connects are refused) and RST every open connection."""
        if self._here():  # the links' tasks then end on their own, after the RSTs
            self._close_listener()
            self._end_links("offline")
            return
        self._call(self._go_offline)

    def online(self) -> None:
        """Listen again, on the same port."""
        if self._here():
            self._listen_now()
            return
        self._call(self._listen)

    def set_fault(self, fault: Fault) -> None:
        """Make ``fault`` the default for new connections.

        Open connections take it too where that makes sense: ``blackhole`` silences every
        open connection; passthrough/latency/bandwidth replace one another on open
        connections that only had timing faults. reset/close/slice apply to new ones only.
        """
        self._on_loop(lambda: self._set_default(fault))

    def next_connections(self, *faults: Fault) -> None:
        """Queue faults for the next new connections, one each, before the default resumes.

        Calls add to the queue's end; ``clear()`` empties it.
        """
        self._on_loop(lambda: self._queue.extend(faults))

    def clear(self) -> None:
        """Back to normal: passthrough default, empty queue, online."""

        def reset_state() -> None:
            self._queue.clear()
            self._set_default(Fault.passthrough())

        self._on_loop(reset_state)
        if self._loop is not None:
            self.online()

    def connections(self) -> tuple[Connection, ...]:
        return self.ledger.connections()

    def wait_connections(self, count: int, timeout: float) -> tuple[Connection, ...]:
        """Wait until at least ``count`` connections were accepted; raise LedgerTimeout after."""
        self.ledger.wait_for(
            lambda led: len(led.connections()) >= count,
            timeout,
            f"{count} proxied connection(s)",
        )
        return self.ledger.connections()

    # -- plumbing between the threads ------------------------------------------
    def _call(self, action: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        if self._loop is None:
            raise RuntimeError("the proxy is not running; call start() first")
        if self._here():
            raise RuntimeError("a blocking proxy control was called on the proxy's own loop")
        with kit_calls():
            future = asyncio.run_coroutine_threadsafe(action(), self._loop)
        return future.result(_CONTROL_TIMEOUT)

    def _here(self) -> bool:
        """Whether the caller runs on the proxy's loop (a case on a shared, virtual loop):
        the controls then act at once, with no hop between threads to wait for."""
        return self._loop is not None and asyncio._get_running_loop() is self._loop

    def _listen_now(self) -> None:
        """``_listen`` from the proxy's own loop: bound and listening when this returns.

        Given a bound socket, ``asyncio.start_server`` starts serving before its one
        bare pass of the loop (``sleep(0)``); a task takes that pass and finishes it (a
        started coroutine cannot be awaited, so it is resumed by hand).
        """
        listen = self._listen()
        try:
            if listen.send(None) is not None:  # waiting on a future: never for a socket
                listen.close()
                raise RuntimeError("the proxy could not listen at once")
        except StopIteration:
            return
        assert self._loop is not None
        self._loop.create_task(self._finish_listen(listen))

    async def _finish_listen(self, listen: Coroutine[Any, Any, None]) -> None:
        with contextlib.suppress(StopIteration):
            while True:  # each pass it asks for, until it returns
                await asyncio.sleep(0)
                if listen.send(None) is not None:
                    listen.close()
                    raise RuntimeError("the proxy's listener waited on a future")
        if not self._accepting:  # offline() came before this pass: close what listens
            self._close_listener()

    def _on_loop(self, change: Callable[[], None]) -> None:
        """Apply a state change on the proxy's loop, or right here when it is not running."""
        if self._loop is None or self._here():
            change()
            return

        async def apply() -> None:
            change()

        self._call(apply)

    def _halt(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        self._shared = False
        if loop is None or thread is None:  # a shared loop runs on, its owner's to stop
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    # -- on the proxy's loop ---------------------------------------------------
    async def _listen(self) -> None:
        if self._server is not None:
            return
        self._accepting = True  # before binding: the first accept may run inside start_server
        try:
            # Bound here, not by start_server: given a socket it never waits for a
            # resolver, so _listen_now can run it to its last pass at once.
            self._server = await asyncio.start_server(self._accept, sock=self._bind())
        except BaseException:
            self._accepting = False
            raise

    def _bind(self) -> socket.socket:
        sock = listening_socket(self.host, self.port, _BACKLOG)
        self.port = sock.getsockname()[1]
        self._listening = sock
        return sock

    async def _go_offline(self) -> None:
        self._close_listener()
        await self._cut_all("offline")

    async def _shutdown(self) -> None:
        self._lag.cancel_now()
        self._lag = LagProbe(self.ledger, Source.PROXY)  # for a start() after this stop
        self._close_listener()
        await self._cut_all("proxy")
        if self._shared:  # the other tasks on the loop are the server's and the client's
            return
        me = asyncio.current_task()
        rest = [task for task in asyncio.all_tasks() if task is not me]
        for task in rest:  # e.g. connections the loop was still accepting
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)
        await asyncio.sleep(0)  # let aborted transports close their sockets

    def _close_listener(self) -> None:
        self._accepting = False
        server, self._server = self._server, None
        if server is not None:
            close_listener(server)  # closes the listening socket now: connects are refused

    def _end_links(self, by: ConnectionEnd) -> list[_Link]:
        links = list(self._links)
        for link in links:
            link.end(by, reset=True)
        return links

    async def _cut_all(self, by: ConnectionEnd) -> None:
        tasks = [link.task for link in self._end_links(by)]
        if not tasks:
            return
        _, stuck = await asyncio.wait(tasks, timeout=_CLOSE_LIMIT * 2)
        for task in stuck:  # e.g. still connecting to an upstream that does not answer
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _set_default(self, fault: Fault) -> None:
        self._default = fault
        for link in self._links:
            link.retarget(fault)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Synchronous on purpose: the link is registered before anything else can run,
        # so offline() never misses a connection.
        if not self._accepting:  # accepted by the kernel just before the listener closed
            _abort_with_rst(writer)
            return
        fault = self._queue.popleft() if self._queue else self._default
        peer = writer.get_extra_info("peername")
        record = self.ledger.open_connection((str(peer[0]), int(peer[1])), fault.label)
        link = _Link(self.upstream, reader, writer, fault, record)
        self._links.add(link)
        link.task.add_done_callback(lambda _: self._links.discard(link))


class _Link:
    """One client connection and its upstream twin, pumping bytes through the current fault."""

    def __init__(
        self,
        upstream: tuple[str, int],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        fault: Fault,
        record: ConnectionWriter,
    ) -> None:
        self.fault = fault
        self._upstream = upstream
        self._client_r, self._client_w = reader, writer
        self._up_r: asyncio.StreamReader | None = None
        self._up_w: asyncio.StreamWriter | None = None
        self._record = record
        self._sent_up = 0  # forwarded to upstream
        self._sent_down = 0  # delivered to the client
        self._next_write_at = 0.0  # slice and bandwidth pacing
        self._ended = False
        self._done = asyncio.Event()
        _drain_fully(writer)
        self.task = asyncio.get_running_loop().create_task(self._run())

    def retarget(self, fault: Fault) -> None:
        """Adopt a new default fault mid-stream where that makes sense (see set_fault)."""
        if fault.kind == "blackhole" or (fault.kind in _SHAPING and self.fault.kind in _SHAPING):
            self.fault = fault

    def end(self, by: ConnectionEnd, *, reset: bool) -> None:
        """Close both sides now (an RST to the client if ``reset``); only the first call counts."""
        if self._ended:
            return
        self._ended = True
        self._record.close(by)
        if reset:
            _abort_with_rst(self._client_w)
        else:
            self._client_w.close()
        if self._up_w is not None:
            self._up_w.transport.abort()
        self._done.set()

    async def _run(self) -> None:
        pumps: list[asyncio.Task[None]] = []
        try:
            if self._ended:  # cut before it ever ran
                return
            if self.fault.kind != "blackhole" and not await self._connect():
                return
            pumps.append(asyncio.create_task(self._pump_up()))
            if self._up_r is not None:
                chunks = _ReadAhead()
                pumps.append(asyncio.create_task(self._read_upstream(self._up_r, chunks)))
                pumps.append(asyncio.create_task(self._pump_down(chunks)))
            for pump in pumps:
                pump.add_done_callback(self._pump_died)
            await self._done.wait()
        finally:
            self.end("proxy", reset=True)  # no-op unless we are being cancelled
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            await self._wait_closed()

    def _pump_died(self, pump: asyncio.Task[None]) -> None:
        # Expected endings are handled inside the pumps; anything else is a bug worth a log
        # line, and must not leave the client hanging on a half-dead link.
        if pump.cancelled() or pump.exception() is None:
            return
        self.end("proxy", reset=True)
        pump.get_loop().call_exception_handler(
            {"message": "fault proxy link failed", "exception": pump.exception(), "task": pump}
        )

    async def _connect(self) -> bool:
        try:
            self._up_r, self._up_w = await asyncio.open_connection(*self._upstream)
        except OSError:
            self.end("upstream", reset=True)
            return False
        _drain_fully(self._up_w)
        if self._ended:  # cut (offline, stop) while we were connecting
            self._up_w.transport.abort()
            return False
        # Before a byte goes up: the server sees this port as the peer of every request
        # on the connection, and the ledger links them by it (``link_attempts``).
        local = self._up_w.get_extra_info("sockname")
        if isinstance(local, tuple) and len(local) >= 2:
            self._record.upstream(int(local[1]))
        return True

    async def _wait_closed(self) -> None:
        writers = [w for w in (self._client_w, self._up_w) if w is not None]
        waits = [asyncio.ensure_future(w.wait_closed()) for w in writers]
        _, pending = await asyncio.wait(waits, timeout=_CLOSE_LIMIT)
        if pending:  # a graceful close stuck behind a peer that does not read
            for w in writers:
                w.transport.abort()
            await asyncio.wait(pending, timeout=_CLOSE_LIMIT)
        for wait in waits:
            if wait.done() and not wait.cancelled():
                wait.exception()  # a reset peer is an expected way to end

    # -- client -> upstream ----------------------------------------------------
    async def _pump_up(self) -> None:
        while True:
            try:
                data = await self._client_r.read(_READ_SIZE)
            except OSError:
                self.end("client", reset=True)
                return
            if not data:
                self.end("client", reset=False)
                return
            self._record.add_bytes(up=len(data))
            if self.fault.kind == "blackhole" or self._up_w is None:
                continue  # swallowed
            if not await self._forward_up(data, self.fault):
                return

    async def _forward_up(self, data: bytes, fault: Fault) -> bool:
        """Send ``data`` upstream, up to an upstream reset; False once the link ended."""
        assert self._up_w is not None
        trips = fault.trips("upstream")
        if trips:
            data = data[: max(0, fault.after_bytes - self._sent_up)]
        try:
            if data:
                self._up_w.write(data)
                await self._up_w.drain()
                self._sent_up += len(data)
        except OSError:
            self.end("upstream", reset=True)
            return False
        if trips and self._sent_up >= fault.after_bytes:
            self.end("proxy", reset=True)
            return False
        return True

    # -- upstream -> client ----------------------------------------------------
    async def _read_upstream(self, reader: asyncio.StreamReader, chunks: _ReadAhead) -> None:
        while True:
            try:
                data = await reader.read(_READ_SIZE)
            except OSError:  # the client still gets every byte read before it, then the RST
                await chunks.put((now(), None))
                return
            await chunks.put((now(), data))
            if not data:
                return

    async def _pump_down(self, chunks: _ReadAhead) -> None:
        while True:
            arrived, data = await chunks.get()
            if self.fault.kind == "blackhole":
                continue  # swallowed, the upstream's FIN too: a blackhole never closes
            if data is None:  # after every byte before it was delivered, and read
                await self._reset_after_delivery()
                self.end("upstream", reset=True)
                return
            if not data:  # after every byte before it was delivered
                self.end("upstream", reset=False)
                return
            if self.fault.kind == "latency":
                await _sleep_until(arrived + self.fault.seconds)
            try:
                await self._deliver(data, self.fault)
            except OSError:
                self.end("client", reset=True)
                return

    async def _deliver(self, data: bytes, fault: Fault) -> None:
        if fault.trips("downstream"):
            room = max(0, fault.after_bytes - self._sent_down)
            await self._write_down(data[:room])
            if len(data) >= room:
                await self._trip(fault)
        elif fault.kind == "slice":
            for i in range(0, len(data), fault.size):
                await self._paced_write(data[i : i + fault.size], fault.pause)
        elif fault.kind == "bandwidth":
            quantum = max(1, min(_READ_SIZE, int(fault.bytes_per_second / 50)))  # ~20 ms each
            self._next_write_at = max(self._next_write_at, now())
            for i in range(0, len(data), quantum):
                piece = data[i : i + quantum]
                self._next_write_at += len(piece) / fault.bytes_per_second
                await _sleep_until(self._next_write_at)  # a piece goes once its time has passed
                await self._write_down(piece)
        else:
            await self._write_down(data)

    async def _paced_write(self, piece: bytes, pause: float) -> None:
        await _sleep_until(self._next_write_at)
        await self._write_down(piece)
        self._next_write_at = now() + pause

    async def _write_down(self, piece: bytes) -> None:
        if not piece:
            return
        self._client_w.write(piece)
        await self._client_w.drain()  # buffer limit 0: returns once the kernel has it all
        self._sent_down += len(piece)
        self._record.add_bytes(down=len(piece))

    async def _reset_after_delivery(self) -> None:
        """Before an RST: the client's kernel has acknowledged the bytes (no pause beyond
        that: the server stamped the failure, and a client's reaction is timed from it)."""
        await _flush_kernel(self._client_w)

    async def _trip(self, fault: Fault) -> None:
        if fault.kind == "reset":
            await self._reset_after_delivery()
            self.end("proxy", reset=True)
        else:
            self.end("proxy", reset=False)


class _ReadAhead:
    """The chunks read from upstream and not yet delivered, bounded in bytes (not count)."""

    def __init__(self) -> None:
        self._chunks: deque[_Chunk] = deque()
        self._bytes = 0
        self._changed = asyncio.Condition()

    def _room(self) -> bool:
        return self._bytes < _READ_AHEAD_BYTES and len(self._chunks) < _READ_AHEAD_CHUNKS

    async def put(self, chunk: _Chunk) -> None:
        """Add a chunk, once there is room (the reader waits: backpressure)."""
        async with self._changed:
            await self._changed.wait_for(self._room)
            self._chunks.append(chunk)
            self._bytes += len(chunk[1] or b"")
            self._changed.notify_all()

    async def get(self) -> _Chunk:
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._chunks))
            chunk = self._chunks.popleft()
            self._bytes -= len(chunk[1] or b"")
            self._changed.notify_all()
            return chunk


def _parse_upstream(upstream: str | tuple[str, int]) -> tuple[str, int]:
    if isinstance(upstream, tuple):
        return upstream
    parts = urlsplit(upstream)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"upstream must be 'http://host:port' or (host, port), not {upstream!r}")
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def _drain_fully(writer: asyncio.StreamWriter) -> None:
    # With no buffering allowed, drain() waits until the kernel took every byte: pacing is
    # real, and an RST right after a drain cannot drop bytes still queued in asyncio.
    writer.transport.set_write_buffer_limits(high=0)


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        rst_on_close(sock)
    writer.transport.abort()


async def _flush_kernel(writer: asyncio.StreamWriter) -> bool:
    """Wait briefly until the client's kernel acknowledged what we wrote (an RST discards
    bytes not yet sent); False if it did not within _FLUSH_LIMIT (a client that stopped
    reading: its window is full)."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return False
    for _ in range(int(_FLUSH_LIMIT / _FLUSH_POLL)):  # kernel state: polling is the only way
        if _unacked_bytes(sock.fileno()) <= 0:
            return True
        await asyncio.sleep(_FLUSH_POLL)
    return False


def _unacked_bytes(fd: int) -> int:
    try:
        raw = fcntl.ioctl(fd, _SIOCOUTQ, b"\0\0\0\0")
    except OSError:
        return 0  # not Linux: nothing to wait for that we can see
    return int.from_bytes(raw, sys.byteorder, signed=True)


async def _sleep_until(deadline: float) -> None:
    delay = deadline - now()
    if delay > 0:
        await asyncio.sleep(delay)
