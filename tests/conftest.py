"""Fixtures shared by the kit's own tests: leak checks and a local fake server."""

# ruff: noqa: E402 - the bytecode switch below must come before the kit's imports

from __future__ import annotations

import asyncio
import gc
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

# Each xdist worker rewrites the asserts of every test module and of the kit (a plugin's
# whole distribution) when it imports them: about 5 s of CPU a process. Where the
# environment turns bytecode caching off (PYTHONDONTWRITEBYTECODE), the suite keeps its
# rewritten modules in __pycache__ (ignored by git) all the same, so later workers and
# later runs read them back.
sys.dont_write_bytecode = False
# The same for the Python processes the tests start (pytest runs, the console script,
# the matrix's targets): with the variable set, each one rewrote and compiled the kit
# from source again, about 0.2 s of CPU apiece and 9 s of the suite's.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import anyio._backends._asyncio  # noqa: F401 - see below
import httpcore  # noqa: F401
import httpx  # noqa: F401
import pytest

# pytester's in-process runs restore sys.modules afterwards: a module first
# imported inside one run is a new object in the next, and httpx would then fail
# to map httpcore's exceptions. Importing the network stack here keeps it stable, and
# saves each run importing (and, as anyio is a pytest plugin, rewriting) it again.
import conformance.reference._client  # noqa: F401
import pytest_streamcheck.targets._exec
import pytest_streamcheck.targets._reference  # noqa: F401
from fake_servers._proxy import FaultProxy  # noqa: F401
from fake_servers._server import FakeServer
from fake_servers._virtual import TICK, VirtualLoop, kit_calls, virtual_loop
from pytest_streamcheck._llm import LLMSession


def _share_the_default_tls_context() -> None:
    """The tests' own httpx clients, and the SDK clients they make, each built httpx's
    default verifying TLS context: a CA bundle read, 24 ms of CPU, never used (all
    traffic here is plain HTTP on loopback), and hundreds of them (about 9 s of the
    suite's CPU). In the test processes they share one; any other kind is made as asked."""
    from httpx._transports import default

    made = default.create_ssl_context
    shared: list[ssl.SSLContext] = []

    def create(verify: Any = True, cert: Any = None, trust_env: bool = True) -> ssl.SSLContext:
        if verify is not True or cert is not None or not trust_env:
            return made(verify=verify, cert=cert, trust_env=trust_env)
        if not shared:
            shared.append(made())
        return shared[0]

    default.create_ssl_context = create  # type: ignore[assignment]


_share_the_default_tls_context()
THREAD_GRACE = 1.0  # seconds a test's threads get to wind down after it

# The kit's tests mostly wait (servers, timeouts, backoff at test timing, real
# libraries at their real delays): the suite runs on two workers a core, at most
# MAX_WORKERS. Three a core was 5-10 % faster on a quiet machine, but its real-time
# tests then false-failed in CI's clean-clone runs (a stall closed 54 ms past the
# measured lag): the load they add is what the noise model cannot see. WORKERS_ENV overrides
# the count; -n, --dist or --tx on the command line win over both, and -n 0 runs in
# one process.
MAX_WORKERS = 4
WORKERS_ENV = "STREAMCHECK_TEST_WORKERS"


def _streamcheck_run(config: pytest.Config) -> bool:
    """A catalog run (``--streamcheck`` or its ini twin), not the kit's own tests."""
    if not config.pluginmanager.hasplugin("streamcheck"):  # -p no:streamcheck
        return False
    return bool(config.getoption("streamcheck", None) or config.getini("streamcheck"))


# Every warning is an error in the kit's own tests: here, not in pyproject.toml's
# [tool.pytest.ini_options], which a catalog run from this checkout
# (pytest --streamcheck=my_library) also reads, and the user's library's warnings are
# not the kit's to fail.
STRICT_WARNINGS = (
    "error",
    "error::ResourceWarning",
    "error::pytest.PytestUnraisableExceptionWarning",
)


def pytest_configure(config: pytest.Config) -> None:
    if not _streamcheck_run(config):
        for line in STRICT_WARNINGS:
            config.addinivalue_line("filterwarnings", line)


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which turns -n into workers
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``python -m pytest`` with no paths runs the whole suite under pytest-xdist.

    Only when it is safe: xdist installed and not disabled (``-p no:xdist``), not an
    xdist worker, not a ``--streamcheck`` run (the catalog, not these tests), nothing
    chosen about distribution on the command line, no ``--pdb``, no ``-s`` (xdist cannot
    show a test's output live), not ``--collect-only``, and no test paths named (a few
    tests named run faster in one process).
    """
    option = config.option
    if (
        not config.pluginmanager.hasplugin("xdist")
        or hasattr(config, "workerinput")
        or getattr(option, "numprocesses", None) is not None
        or getattr(option, "dist", "no") != "no"
        or getattr(option, "distload", False)
        or getattr(option, "tx", None)
        or option.usepdb
        or option.capture == "no"
        or option.collectonly
        or config.args_source != pytest.Config.ArgsSource.TESTPATHS
        or _streamcheck_run(config)
    ):
        return
    workers = int(os.environ.get(WORKERS_ENV, min(MAX_WORKERS, 2 * (os.cpu_count() or 1))))
    if workers > 0:
        option.numprocesses = workers
        option.dist = "worksteal"  # tests last 1 ms to 25 s: idle workers take over


@pytest.fixture(scope="session")
def one_browser() -> Iterator[None]:
    """One Chromium for all of a worker's browser tests (each adapter still gets a context
    of its own): a launch is about a second of CPU, and the modules that use it launched
    one each. A test that must see a browser start or end runs it in a child process."""
    from pytest_streamcheck.targets import _browser_host

    try:
        host = _browser_host.acquire(_browser_host.find_chromium())
    except _browser_host.BrowserMissing:
        yield
        return
    host.wait_launched()  # its threads start now, not during the first test
    yield
    _browser_host.release(host)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (the kit, the test modules) lives as long as the process:
    out of the collector's reach, each full collection (pytest runs one whenever a
    configuration ends, and the inner runs make many) costs a fraction of what it did."""
    gc.freeze()


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves threads running (they get THREAD_GRACE s to end)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + THREAD_GRACE
    for thread in set(threading.enumerate()) - before:
        thread.join(max(0.0, deadline - time.monotonic()))
    leaked = [t for t in set(threading.enumerate()) - before if t.is_alive()]
    if leaked:
        pytest.fail(f"test left {len(leaked)} thread(s) running: {leaked}")


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A started FakeServer with no endpoints; stopped and checked after the test."""
    server = FakeServer().start()
    try:
        yield server
    finally:
        server.stop()
    server.check()


def run_on(loop: VirtualLoop, make: Callable[[], Awaitable[Any]], timeout: float = 30) -> Any:
    """Run ``make()``'s coroutine on ``loop`` (running in another thread), as the kit."""

    async def body() -> Any:
        return await make()

    with kit_calls():
        return asyncio.run_coroutine_threadsafe(body(), loop).result(timeout)


# A span between two stamps on a virtual clock, each true to its microsecond.
EXACT = 2 * TICK


class OnVirtualLoop:
    """A virtual-time loop in a thread with a fake server on it. ``run`` plays a test's
    coroutine there: the server, the client and the test share one jumping clock, so the
    test's timings are exact whatever the machine's load."""

    def __init__(self) -> None:
        self.loop = virtual_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.server = FakeServer().start(loop=self.loop)

    def run(self, make: Callable[[], Awaitable[Any]], timeout: float = 30) -> Any:
        return run_on(self.loop, make, timeout)

    def close(self) -> None:
        self.server.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


@pytest.fixture
def virtual() -> Iterator[OnVirtualLoop]:
    """A fake server on a virtual-time loop, and a way to run a client beside it."""
    on_loop = OnVirtualLoop()
    try:
        yield on_loop
    finally:
        on_loop.close()
    on_loop.server.check()


class RawConnection:
    """A plain blocking socket speaking just enough HTTP/1.1 to see every byte."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    def request(
        self, path: str, method: str = "GET", headers: dict[str, str] | None = None
    ) -> None:
        lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())

    def read_head(self) -> tuple[int, dict[str, str]]:
        """Read the status line and headers; the body's first bytes stay in ``buffer``."""
        while b"\r\n\r\n" not in self.buffer:
            self._recv_or_fail()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(status_line.split()[1]), headers

    def read_until(self, marker: bytes) -> bytes:
        """Read until ``marker`` is in what arrived after the head."""
        while marker not in self.buffer:
            self._recv_or_fail()
        return self.buffer

    def read_to_close(self) -> bytes:
        """Read until the server closes the connection; return what arrived after the head."""
        while chunk := self.sock.recv(65536):
            self.buffer += chunk
        return self.buffer

    def read_chunked(self) -> tuple[bytes, bool]:
        """Read a chunked body to its end or to the close: (payload, terminated)."""
        while True:
            payload, terminated = self.decode_chunked(self.buffer)
            if terminated:
                return payload, True
            chunk = self.sock.recv(65536)
            if not chunk:
                return payload, False
            self.buffer += chunk

    def read_more(self) -> None:
        """One recv; fail if the server closed."""
        self._recv_or_fail()

    def _recv_or_fail(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"server closed the connection; got {self.buffer[-200:]!r}")
        self.buffer += chunk

    def close(self) -> None:
        self.sock.close()

    @staticmethod
    def decode_chunked(raw: bytes) -> tuple[bytes, bool]:
        """The payload of a chunked body, and whether it ended with the terminating chunk."""
        payload = b""
        while raw:
            size_line, sep, rest = raw.partition(b"\r\n")
            if not sep:
                return payload, False
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                return payload, rest.startswith(b"\r\n")
            payload += rest[:size]
            raw = rest[size + 2 :]
        return payload, False


@pytest.fixture
def raw_connect() -> Iterator[Callable[[int], RawConnection]]:
    """Open raw connections to a port; all are closed after the test."""
    opened: list[RawConnection] = []

    def connect(port: int) -> RawConnection:
        opened.append(RawConnection(port))
        return opened[-1]

    yield connect
    for connection in opened:
        connection.close()


@pytest.fixture(scope="module")
def streamcheck_llm_session() -> Iterator[LLMSession]:
    """One ``llm_server`` backend per module instead of per session: this suite checks
    that no test leaves threads behind, and a session-long proxy thread would trip it."""
    session = LLMSession().start()
    yield session
    session.stop()
