"""FakeServer: the scripted app on Hypercorn, in its own thread and event loop.

The listening socket is bound here, before the thread starts, so the port is
known at once and early connections wait in the backlog. Each accepted
connection runs Hypercorn's HTTP/1.1 connection handler; keeping the writers
lets ``stop()`` cut every connection within a fixed time, even one whose
client stopped reading.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import socket
import threading
from types import TracebackType
from typing import Any, cast

from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.asyncio.worker_context import WorkerContext
from hypercorn.config import Config
from hypercorn.utils import wrap_app

from fake_servers._app import ScriptPlayer, build_app, check_wire_format
from fake_servers._formats import vocabulary
from fake_servers._ledger import Ledger
from fake_servers._limits import BODY_TIMEOUT, MAX_FILE_BYTES, MAX_REQUEST_BYTES
from fake_servers._listen import close_listener, listening_socket
from fake_servers._noise import LagProbe, Source
from fake_servers._script import Endpoint, Method, Planner, Scenario, Step, Then
from fake_servers._virtual import kit_calls

__all__ = ["FakeServer", "ServerError"]

_START_TIMEOUT = 5.0
# stop() gives connections _GRACE to close on their own, aborts the rest, gives them _GRACE
# again, then cancels what is left; each connection's teardown is some 0.1 ms of the
# loop's time on top. It reports ServerError if the thread is still running after
# _STOP_TIMEOUT plus _STOP_PER_CONNECTION for each connection open when it was called.
_STOP_TIMEOUT = 5.0
_STOP_PER_CONNECTION = 0.002
_GRACE = 0.15  # how long stop() lets connections close on their own before cutting them
BACKLOG = 4096  # the listen queue; Linux caps it at net.core.somaxconn
KEEP_ALIVE = 60.0  # seconds an idle connection stays open (before its request, or between)


class ServerError(RuntimeError):
    """The server could not start, or its app hit an exception (see ``__cause__``)."""


class FakeServer:
    """A scripted LLM streaming server on 127.0.0.1, recording everything in a ledger."""

    def __init__(
        self,
        scenario: Scenario | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ledger: Ledger | None = None,
        max_file_bytes: int = MAX_FILE_BYTES,
        max_body_bytes: int = MAX_REQUEST_BYTES,
        body_timeout: float = BODY_TIMEOUT,
        wire_format: str = "auto",  # a plain path's format: "auto", or a provider's name
    ) -> None:
        self.host = host
        self.port = port
        self.ledger = ledger if ledger is not None else Ledger()
        self._player = ScriptPlayer(
            scenario if scenario is not None else Scenario(),
            self.ledger,
            max_file_bytes=max_file_bytes,
            max_body_bytes=max_body_bytes,
            body_timeout=body_timeout,
            wire_format=wire_format,
        )
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._lag = LagProbe(self.ledger, Source.SERVER)
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._connections: _Connections | None = None  # the running server's, for stop()
        self._hosted: concurrent.futures.Future[None] | None = None  # serving on a given loop

    # -- the script ----------------------------------------------------------------
    @property
    def scenario(self) -> Scenario:
        return self._player.scenario

    @property
    def wire_format(self) -> str:
        """The format a plain path's ``auto`` streams and errors take (``"auto"``: by path)."""
        return self._player.wire_format

    @wire_format.setter
    def wire_format(self, name: str) -> None:
        check_wire_format(name)
        self._player.wire_format = name

    @property
    def marked(self) -> bool:
        """Whether answers are marked: each token says which attempt sent it and where it
        stands (``fake_servers._marks``), for a client judged on its text alone."""
        return self._player.marked

    @marked.setter
    def marked(self, on: bool) -> None:
        self._player.marked = on

    @property
    def hosted_on(self) -> asyncio.AbstractEventLoop | None:
        """The loop it was given to serve on (``start(loop=...)``), while it serves there."""
        return self._loop if self._hosted is not None else None

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:54321``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def load(self, scenario: Scenario, *, planner: Planner | None = None) -> None:
        """Replace every endpoint; clear the ledger (and so the attempt counters).

        ``planner``: decides each attempt's step instead of the endpoint's list, from
        the path, the attempt number, when it arrived and its Last-Event-ID (a weather
        run's plan, ``conformance.weather``); None for it to return the scenario's.
        """
        vocabulary(scenario.seed)  # build the words now, not in the first request
        self._player.planner = planner
        self._player.scenario = scenario
        self.ledger.clear()

    def script(
        self, path: str, *steps: Step, method: Method = "ANY", then: Then = "repeat_last"
    ) -> None:
        """Add or replace the endpoint at ``path``, keep the others; clear the ledger."""
        endpoint = Endpoint(path=path, steps=steps, method=method, then=then)
        old = self.scenario
        others = tuple(e for e in old.endpoints if e.path != path)
        self.load(
            Scenario(endpoints=(*others, endpoint), seed=old.seed), planner=self._player.planner
        )

    def reset(self) -> None:
        """No endpoints and an empty ledger (the seed stays)."""
        self.load(Scenario(seed=self.scenario.seed))

    def measure_lag(self, on: bool = True) -> None:
        """Record this server's event-loop lag into its ledger (source ``server``), or stop.

        The probe (``fake_servers._noise``) runs until turned off or the server stops.
        """
        if self._loop is None:
            raise RuntimeError("the server is not running")
        if on:
            self._lag.start(self._loop)
        else:
            self._lag.stop()

    def check(self) -> None:
        """Raise, in the caller's thread, the first exception the app hit (once)."""
        failure, self._failure = self._failure, None
        if failure is not None:
            raise ServerError(f"the fake server's thread failed: {failure!r}") from failure
        if self._player.errors:
            error = self._player.errors.pop(0)
            self._player.errors.clear()
            raise ServerError(f"the fake server's app failed: {error!r}") from error

    # -- running ---------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> FakeServer:
        """Bind, start serving, and return once it accepts connections.

        With no ``loop``, the server runs in a thread and event loop of its own. With a
        running ``loop`` (in another thread), it serves there: the kit's virtual-time
        runs put the server, the proxy and the client on one loop, and so one clock.
        """
        if self._thread is not None or self._hosted is not None:
            return self
        vocabulary(self.scenario.seed)  # build the words now, not in the first request
        sock = self._bind()
        self._ready.clear()
        self._failure = None
        if loop is None:
            self._thread = threading.Thread(
                target=self._run, args=(sock,), name=f"fake-server:{self.port}", daemon=True
            )
            self._thread.start()
        else:
            with kit_calls():
                self._hosted = asyncio.run_coroutine_threadsafe(self._hosted_serve(sock), loop)
        if not self._ready.wait(_START_TIMEOUT) or self._failure is not None:
            self.stop()
            raise ServerError(f"fake server on {self.url} did not start") from self._failure
        return self

    def _bind(self) -> socket.socket:
        sock = listening_socket(self.host, self.port, BACKLOG)
        self._sock = sock
        self.port = sock.getsockname()[1]
        return sock

    def stop(self) -> None:
        """Cut open streams (ending them as ``server_stopped``) and shut down; idempotent."""
        thread, hosted, loop, stopping = self._thread, self._hosted, self._loop, self._stopping
        if thread is None and hosted is None:
            return
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError), kit_calls():  # the loop already ended
                loop.call_soon_threadsafe(stopping.set)
        open_connections = len(self._connections or ())
        limit = _STOP_TIMEOUT + open_connections * _STOP_PER_CONNECTION
        if thread is not None:
            thread.join(limit)
        elif hosted is not None:
            with contextlib.suppress(Exception):  # a stop that failed is reported below
                hosted.result(limit)
        self._thread = self._loop = self._stopping = self._hosted = None
        self._lag = LagProbe(self.ledger, Source.SERVER)  # asyncio.run cancelled the old one
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if (thread is not None and thread.is_alive()) or (hosted is not None and not hosted.done()):
            # shutdown is bounded (see _STOP_TIMEOUT); this would be a bug
            raise ServerError(f"fake server on {self.url} did not stop")

    def abandon(self) -> None:
        """Forget the loop it was given to serve on, which can no longer run anything
        (blocked by a client, or closed): close the listener from here."""
        if self._hosted is None:
            return
        self._hosted = self._loop = self._stopping = None
        self._lag = LagProbe(self.ledger, Source.SERVER)
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self._thread is not None or self._hosted else "stopped"
        return f"<FakeServer {self.url} {state}>"

    # -- the server thread -------------------------------------------------------------
    def _run(self, sock: socket.socket) -> None:
        try:
            asyncio.run(self._serve(sock))
        except BaseException as error:  # report to start(), never kill the process
            self._failure = error
            self._ready.set()

    async def _hosted_serve(self, sock: socket.socket) -> None:
        try:
            await self._serve(sock)
        except BaseException as error:  # report to start(), never kill the loop
            self._failure = error
            self._ready.set()

    async def _serve(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = stopping = asyncio.Event()
        self._loop = loop
        config = hypercorn_config()
        context = WorkerContext(None)
        # Starlette's ASGI types and Hypercorn's differ only in their TypedDicts.
        app = wrap_app(cast(Any, build_app(self._player)), config.wsgi_max_body_size, "asgi")
        connections = self._connections = _Connections()

        async def serve_connection(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> None:
            _no_delay(writer)
            try:
                await TCPServer(app, loop, config, context, {}, reader, writer)
            except asyncio.CancelledError:
                # Cut by stop(): end quietly. (On Python 3.11 a cancelled start_server
                # task makes asyncio log "Exception in callback ... CancelledError".)
                if not stopping.is_set():
                    raise

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # Synchronous, so every connection is registered as it is handed over: a task
            # cancelled by stop() before its first step would never close its socket.
            if stopping.is_set():
                writer.transport.abort()
                return
            task = loop.create_task(serve_connection(reader, writer))
            connections.add(task, writer)
            task.add_done_callback(connections.remove)

        server = await asyncio.start_server(accept, sock=sock, backlog=BACKLOG)
        self._ready.set()
        await stopping.wait()
        await self._shutdown(server, context, connections)

    async def _shutdown(
        self, server: asyncio.Server, context: WorkerContext, connections: _Connections
    ) -> None:
        self._player.cut_all()  # streams end as server_stopped and drop their connections
        close_listener(server)  # no new connections
        await context.terminated.set()  # idle keep-alive connections close
        await connections.closed(_GRACE)
        for writer in connections.writers():
            writer.transport.abort()  # whatever is left, e.g. a client that stopped reading
        await connections.closed(_GRACE)
        left = connections.tasks()  # their transports were aborted just above
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        await server.wait_closed()


class _Connections:
    """The open connections (their tasks and writers), and a wait for none to be left."""

    def __init__(self) -> None:
        self._open: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._none_left = asyncio.Event()
        self._none_left.set()

    def __len__(self) -> int:
        return len(self._open)

    def add(self, task: asyncio.Task[None], writer: asyncio.StreamWriter) -> None:
        self._open[task] = writer
        self._none_left.clear()

    def remove(self, task: asyncio.Task[None]) -> None:
        self._open.pop(task, None)
        if not self._open:
            self._none_left.set()

    def writers(self) -> list[asyncio.StreamWriter]:
        return list(self._open.values())

    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._open)

    async def closed(self, timeout: float) -> None:
        """Wait until no connection is left, or ``timeout`` (one wait, whatever their number)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._none_left.wait()


def hypercorn_config() -> Config:
    """Hypercorn's settings for the fake server (the benchmarks give a bare app the same)."""
    config = Config()
    config.accesslog = None
    config.errorlog = logging.getLogger("fake_servers.server")
    config.graceful_timeout = _GRACE
    config.include_server_header = False
    # Hypercorn's idle timer runs from the accept until the request has been read, then
    # between requests. With its 5 s default a busy server (10,000 connections arriving
    # at once) closed connections whose requests were still waiting to be read.
    config.keep_alive_timeout = KEEP_ALIVE
    return config


def _no_delay(writer: asyncio.StreamWriter) -> None:
    # Each SSE event is a small write that must leave at once: no Nagle batching.
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
