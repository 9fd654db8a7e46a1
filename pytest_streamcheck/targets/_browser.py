"""The browser adapter: a client page in headless Chromium (docs/browser.md).

``--streamcheck=browser:PATH`` opens the HTML page at PATH, ``browser:eventsource`` the
kit's page around the browser's native ``EventSource``. The page speaks exec protocol
v1 as JavaScript objects: the kit calls ``window.streamcheck.hello()`` and
``window.streamcheck.command(cmd)``, the page answers and reports through
``window.streamcheckEmit(obj)``, a Playwright binding. Each message is checked and
delivered by ``_exec_protocol``, as an exec client's stdout line is.

Each adapter has a ``BrowserContext`` and a page of its own in the process's one
browser (``_browser_host``); offline and online are that context's network emulation,
so the page sees its real ``offline``/``online`` events and ``navigator.onLine``, and
its requests fail as on a train. Deliveries are stamped when the page emitted them:
the kit's ``streamcheckEmit`` passes the page's ``performance.now()`` along, mapped
onto the kit's clock by the page's clock offset (read when the page opens); the binding
call itself reaches Python a millisecond or (loaded) hundreds later (docs/browser.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import urlsplit, urlunsplit

from conformance._adapter import AdapterRequest, StreamCancelled, StreamSink
from conformance._profiles import policy_to_dict
from conformance._result import HarnessError, Unresponsive
from conformance.reference import ClientPolicy
from fake_servers import now
from fake_servers._noise import PROBE_INTERVAL, Source
from pytest_streamcheck.targets import _browser_host
from pytest_streamcheck.targets._browser_network import (
    Entry,
    heads_seen,
    network_hops,
    parse_entries,
)
from pytest_streamcheck.targets._browser_serve import KIT_PREFIX, PageServer
from pytest_streamcheck.targets._exec import QUOTE_LIMIT, TAIL_IN_MESSAGES
from pytest_streamcheck.targets._exec_protocol import (
    HELLO_TIMEOUT,
    PROTOCOL_VERSION,
    REPLIES,
    ProtocolError,
    Reply,
    check_event,
    deliver,
    on_kit_clock,
    parse_hello,
    stream_command,
)
from pytest_streamcheck.targets._peer import OpenStream, Peer

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

    from fake_servers._ledger import Ledger

__all__ = ["NATIVE_PAGE", "NATIVE_PAGES", "BrowserAdapter"]

T = TypeVar("T")
# browser:NAME for a page the kit ships (served under /__streamcheck/).
NATIVE_PAGES = {"eventsource": "eventsource.html"}
NATIVE_PAGE = "eventsource"
DEFAULT_CLIENT = "default"  # StreamRequest.client's default: the page's one client
CLOSE_GRACE = 2.0  # seconds for the page's shutdown and the context's close
# A reset's fresh context and page get ``hello_timeout`` times each of these in turn, each
# try from a fresh context: the page loaded once already, so a reopen that hangs is the
# machine, not the page. Beside 2 CPU burners and CI's other track (load 14) reopens took
# 1.3 s (median), 2.8 s (p90) and 6.7 s (max, of 226); a clean-clone CI run so loaded had
# two past 10 s in 208 cases.
REOPEN_LIMITS = (1, 2)


def _page_script(name: str) -> str:
    """The kit's own page-side JavaScript, shipped as package files (browser/kit/): the
    init script, and the functions the adapter evaluates in the page."""
    path = resources.files("pytest_streamcheck") / "browser" / "kit" / name
    return path.read_text(encoding="utf-8").rstrip()


# The page's command() is called through this wrapper: a throw, or a rejected promise,
# is the page's protocol breach, reported with its stack (never swallowed).
# It answers [fault or null, the page's performance.now() as the command arrived]: how
# late a command reached the page is a lag row of its own (``_record_signal``).
_SEND = _page_script("send.js")
# The commands whose trip to the page is a lag row: the kit's reactions that cases time
# from the kit's own mark (a cancel). Not ``stream``: the herd's 50 starts queue behind
# one another in Playwright's pipe, which delays no moment a case times, and as rows
# they made the herd's statistics "too noisy" (p99 116 ms in one run).
TIMED_COMMANDS = frozenset({"cancel"})
SILENCE_ENDS_RUN = frozenset({"configure", "reset"})  # a page silent on these is given up
# When the page first saw a network event of a kind after a page time (the kit's own
# listener, added before any of the page's), or null after a timeout (ms).
_SEEN = _page_script("seen.js")
# Chromium tells the renderer that the context is online (the page's `online` event) and
# its network process on separate channels, so a request the page makes on hearing the
# event can meet a network process still offline and fail (CI: all five requests of a
# blink, 4-10 ms after the event, none reaching the server). ``online()`` returns once a
# request of the page's own gets an answer from the page server (any status), so a
# case's "online() took effect" mark is when the page's network works again.
_BACK = _page_script("back.js")
# ``streamcheckEmit`` is the kit's wrapper around the binding. It notes the page's
# performance.now() at the call, when the client hands its consumer what it reports, so
# the kit can stamp the delivery then and not when the call reaches Python; and it sends
# what one task emitted in one binding call (a read of 100 events is 100 emits), each
# message copied as it was emitted.
_EMIT = _page_script("emit.js")
# The page's lag probe (``__streamcheckLag``): a setTimeout chain of PROBE_INTERVAL, each
# wake-up late by as much as the renderer delays any timer or read of the page; its
# rows reach the kit every LAG_BATCH seconds through the binding and at the case's end
# (``collect_lag``), mapped onto the kit's clock, as ``Source.PAGE`` (a hosting loop).
LAG_BATCH = 1.0  # seconds; measured: 0.1 s cost twice the CPU of 1 s (docs/browser.md)
PINGS = 8  # page-clock readings per page; the one with the shortest round trip wins
# Resolves once the page defines ``window.streamcheck`` (a 10 ms poll in the page). An
# ``evaluate``, not ``wait_for_function``: that compiles Playwright's injected script in
# every fresh page first, about 40 ms a reset (benchmarks/browser_reset.py).
_UNTIL_DEFINED = _page_script("until_defined.js")


class _TimedOut(HarnessError):
    """A call into the browser that passed its time limit."""


class BrowserAdapter(Peer):
    """Drives a client page in headless Chromium through protocol v1 (docs/browser.md).

    Start it with ``await adapter.start()`` (page load and ``hello``) before reading
    ``info``; every other coroutine starts it on first use and must run on the loop that
    started it. ``aclose()`` leaves no context, page or server open.
    """

    def __init__(
        self,
        page: Path | None,
        *,
        executable: str | None = None,
        hello_timeout: float = HELLO_TIMEOUT,
        command_timeout: float = 10.0,
        native: str = NATIVE_PAGE,
    ) -> None:
        """Prepares the adapter; nothing is started before ``start()``.

        Args:
            page: The client page's HTML file; None: the kit's ``native`` page.
            executable: The Chromium binary; None: ``_browser_host.find_chromium()``.
            hello_timeout: Seconds to load the page, see ``window.streamcheck`` and get
                the ``hello()`` reply.
            command_timeout: Seconds the page has to answer ``configure``/``reset``.
            native: Which of ``NATIVE_PAGES`` to open when ``page`` is None.
        """
        self.page_path = page.resolve() if page is not None else None
        self._native = native
        self._executable = executable
        self.hello_timeout = hello_timeout
        self.command_timeout = command_timeout
        super().__init__()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._host: _browser_host.Host | None = None
        self._server: PageServer | None = None
        self._context: BrowserContext | None = None
        self._page: Page | None = None
        self._notes: deque[str] = deque(maxlen=200)  # console, page errors, the kit's notes
        self._lock = threading.Lock()  # around _streams and _entries (the browser's thread)
        self._failure: str | None = None
        self._closed = False
        self._start_lock = asyncio.Lock()
        self._policy: ClientPolicy | None = None  # configured again on every fresh page
        self._breached = False  # set on the browser's thread at once; _failure follows
        self._page_offset: float | None = None  # the page's clock minus the kit's
        self.clock_error = 0.0  # how far off that offset may be, in seconds
        self._doing = "starting"  # the step of opening the page, for a timeout's message
        # Where the page's lag probe records while a case plays (``measure_lag``), and
        # each probed page's clock offset by its token (a batch names its page).
        self._lag_ledger: Ledger | None = None
        self._lag_since = 0.0  # when the runner last turned the page's probe on or off
        # Notes of when the page heard a signal, still on their way (``collect_lag``).
        self._signals: list[concurrent.futures.Future[None]] = []
        self._probe_offsets: dict[int, float] = {}
        self._probe_token = 0
        # The page's Resource Timing entries since the last collect, with their offsets.
        self._entries: list[tuple[Entry, float]] = []
        self._got: list[tuple[Entry, float]] = []  # fetch calls and resolutions (the page's)
        self._client_hosts: dict[str, int] = {}  # each client key's own host (``stream``)

    # -- identity --------------------------------------------------------------------
    @property
    def _who(self) -> str:
        if self.page_path is None:
            return f"browser page {KIT_PREFIX}{NATIVE_PAGES[self._native]} (native)"
        return f"browser page {self.page_path}"

    @property
    def url(self) -> str | None:
        """The page's URL while it is served."""
        if self._server is None:
            return None
        if self.page_path is None:
            return f"{self._server.url}{KIT_PREFIX}{NATIVE_PAGES[self._native]}"
        return f"{self._server.url}/{self.page_path.name}"

    def notes(self) -> tuple[str, ...]:
        """The page's console lines and errors, and the kit's notes, in order."""
        return tuple(self._notes)

    def diagnostics(self) -> str:
        state = "failed" if self._failure else ("open" if self._page is not None else "not open")
        return f"{self._who}: {state}{self._tail()}"

    def _tail(self) -> str:
        lines = list(self._notes)[-TAIL_IN_MESSAGES:]
        if not lines:
            return "\n  (nothing on the page's console)"
        return "\nlast console lines:\n" + "\n".join(f"  | {line}" for line in lines)

    # -- the adapter contract --------------------------------------------------------
    async def start(self) -> Self:
        """Open the page and shake hands; idempotent.

        Raises:
            HarnessError: no browser, the page does not load, defines no
                ``window.streamcheck`` or answers ``hello()`` wrongly, within
                ``hello_timeout`` (everything opened is closed again).
        """
        async with self._start_lock:
            if self._closed:
                raise HarnessError(f"{self._who}: the adapter is closed")
            if self._host is None and self._failure is None:
                self._loop = asyncio.get_running_loop()
                try:
                    await self._launch()
                except BaseException:
                    await self._teardown()
                    raise
            self._check_usable()
        return self

    async def configure(self, policy: ClientPolicy) -> None:
        await self.start()
        await self._request({"cmd": "configure", "policy": policy_to_dict(policy)}, "configured")
        self._policy = policy

    async def reset(self) -> None:
        """A fresh context and page, configured again, then the page's own ``reset``.

        A context keeps its idle keep-alive connections: the next case's first request
        would reuse one to the proxy opened before the case began, and a fault scripted
        for the case's first connection would never meet it. A fresh context has none,
        as a fresh client of any other kind (it costs 0.5-2 s a case, by the machine's
        load: a renderer process starts and the page loads again; docs/browser.md).
        The reopen is tried again, longer, when it passes its limit (REOPEN_LIMITS).
        """
        await self.start()
        try:
            await self._on_host(self._reopen(), self._reopen_limit, "reopening the page")
        except _TimedOut as exc:  # every try: later cases are an ERROR at once
            self._fail(str(exc))
            raise HarnessError(self._failure or str(exc)) from None
        if self._policy is not None:
            command = {"cmd": "configure", "policy": policy_to_dict(self._policy)}
            await self._request(command, "configured")
        await self._request({"cmd": "reset"}, "reset")
        self._finished.clear()

    @property
    def _reopen_limit(self) -> float:
        tries = sum(REOPEN_LIMITS) * self.hello_timeout
        return tries + (len(REOPEN_LIMITS) + 1) * CLOSE_GRACE

    @property
    def reset_limit(self) -> float:
        """Seconds ``reset`` may take within this adapter's own limits: the runner waits
        that long (``conformance._runner``), so the adapter's message is the one seen."""
        return self._reopen_limit + 2 * self.command_timeout  # then `configure`, `reset`

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        """Run one stream until the page reports ``done`` or ``error`` for it, or
        delivers its ``cancel_after``-th chunk; cancelling the task sends ``cancel``."""
        await self.start()
        assert self._loop is not None
        request = self._client_host(request)
        sid = request.stream
        entry = OpenStream(sink, self._loop.create_future(), request.request.cancel_after)
        with self._lock:
            if sid in self._streams:
                raise HarnessError(f"{self._who}: stream {sid!r} is already open")
            self._streams[sid] = entry
        self._finished.discard(sid)
        try:
            await self._send(stream_command(request))
            await entry.ended
        except asyncio.CancelledError:
            if not entry.over and self._failure is None:
                self._send_nowait({"cmd": "cancel", "stream": sid})
            raise
        finally:
            with self._lock:
                self._streams.pop(sid, None)
                self._finished.add(sid)

    def _client_host(self, request: AdapterRequest) -> AdapterRequest:
        """A stream of a ``client`` key other than the default goes to a loopback host
        name of that key's own (``client-N.streamcheck.test``, which the browser maps to
        127.0.0.1): Chromium opens at most 6 connections per host, so without it the
        herd's 50 users would queue behind one another in one pool, which separate
        browsers do not."""
        key = request.request.client
        url = urlsplit(request.url)
        if key == DEFAULT_CLIENT or url.hostname != "127.0.0.1" or url.port is None:
            return request
        index = self._client_hosts.setdefault(key, len(self._client_hosts))
        netloc = f"client-{index}.{_browser_host.CLIENT_DOMAIN}:{url.port}"
        return replace(request, url=urlunsplit(url._replace(netloc=netloc)))

    async def offline(self) -> None:
        """The context's network goes away: the page gets its real ``offline`` event."""
        await self._set_offline(True)

    async def online(self) -> None:
        await self._set_offline(False)

    def measure_lag(self, ledger: Ledger | None) -> None:
        """From any thread: while a case plays, probe the page's own event-loop lag into
        ``ledger`` (``Source.PAGE``); None stops the probe. The runner calls it as it
        starts and stops its own probes; the probe starts on the page each ``reset``
        opens, so it runs on the page the case plays against."""
        self._lag_ledger = ledger
        self._lag_since = now()
        if ledger is None and self._host is not None and self._page is not None:
            self._host.submit(_quietly(self._stop_probe(self._page)))

    async def collect_lag(self) -> None:
        """The rows the page's probe has not sent yet, into the ledger: the runner calls
        it as a case ends, before it reads the case's noise (a batch in flight under
        load can be seconds behind)."""
        if self._lag_ledger is None or self._page is None or self._failure is not None:
            return
        await self._signals_noted()
        page, ledger = self._page, self._lag_ledger
        try:
            # At most CLOSE_GRACE: the runner's limit on a case covers this too.
            rows = await self._on_host(
                page.evaluate("() => window.__streamcheckLag.take()"),
                min(self.command_timeout, CLOSE_GRACE),
                "collecting the page's lag",
            )
        except _TimedOut:
            # The page's loop gave no sign the whole case, as far as the kit can tell:
            # one wake-up due as the case began and not seen by now (``Noise.page_stalled``).
            ledger.record_lag(Source.PAGE, self._lag_since, now())
            return
        except Exception:  # a page that went away took its rows along
            return
        self._record_lag(rows)
        self._record_network()

    def _in_flight(self, note: concurrent.futures.Future[None]) -> None:
        self._signals = [f for f in self._signals if not f.done()] + [note]

    async def _signals_noted(self) -> None:
        """Wait for the notes of when the page heard the case's signals (at most
        CLOSE_GRACE): a case that ends right after ``online()`` must not lose the note,
        the one measure of the trip from the kit to the page (CI: the example page's
        reconnect counted 85 ms late from the signal, its note not yet in)."""
        pending, self._signals = self._signals, []
        if pending:
            futures = [asyncio.wrap_future(f) for f in pending]
            await asyncio.wait(futures, timeout=min(self.command_timeout, CLOSE_GRACE))

    async def evaluate(self, expression: str) -> Any:
        """Evaluate a JavaScript expression in the page (for tests and debugging)."""
        await self.start()
        assert self._page is not None
        return await self._on_host(
            self._page.evaluate(expression), self.command_timeout, "evaluating"
        )

    async def aclose(self) -> None:
        """Ask the page to shut down, close its context and server; idempotent."""
        if self._closed:
            return
        self._closed = True
        async with self._start_lock:
            if self._page is not None and self._failure is None:
                self._send_nowait({"cmd": "shutdown"})
            self._resolve_all(f"{self._who}: the adapter was closed")
            await self._teardown()

    # -- opening and closing ---------------------------------------------------------
    async def _launch(self) -> None:
        executable = self._executable or _browser_host.find_chromium()
        host = self._host = _browser_host.acquire(executable)
        await host.ready()
        root = self.page_path.parent if self.page_path is not None else None
        self._server = await asyncio.to_thread(PageServer, root)
        try:
            reply = await self._on_host(self._open(), self.hello_timeout, "opening the page")
        except _TimedOut:
            raise HarnessError(
                f"{self._who}: gave up {self._doing} after {self.hello_timeout:.1f}s{self._tail()}"
            ) from None
        try:
            info, unknown = parse_hello(reply, self._default_name())
        except ProtocolError as exc:
            raise HarnessError(f"{self._who} broke the protocol: {exc}{self._tail()}") from None
        for name in unknown:
            self._notes.append(f"[kit] ignored the unknown capability {name!r}")
        self._info = info

    def _default_name(self) -> str:
        return self.page_path.name if self.page_path is not None else self._native

    async def _open(self) -> dict[str, Any]:
        """On the host's loop: context, bindings, page, load, ``hello()``."""
        assert self._host is not None
        assert self._host.browser is not None
        context = self._context = await self._host.browser.new_context()
        await context.expose_binding("__streamcheckEmit", self._on_emit)
        await context.add_init_script(_EMIT)
        await context.expose_binding("__streamcheckFault", self._on_fault)
        page = self._page = await context.new_page()
        page.on("console", lambda m: self._notes.append(f"[console.{m.type}] {m.text}"))
        page.on("pageerror", lambda e: self._notes.append(f"[page error] {e}"))
        page.on("crash", lambda _: self._breach("crashed (the renderer process died)"))
        url = self.url
        assert url is not None
        self._doing = doing = f"loading {url}"
        try:
            response = await page.goto(url, wait_until="load")
            if response is None or response.status != 200:
                status = "no response" if response is None else f"HTTP {response.status}"
                raise HarnessError(f"{self._who}: {url} answered {status}{self._tail()}")
            self._doing = doing = "waiting for the page to define window.streamcheck"
            self._doing += " = {hello(), command(cmd)}"
            await page.evaluate(_UNTIL_DEFINED)
            self._doing = doing = "waiting for window.streamcheck.hello() to return"
            reply = await page.evaluate("() => window.streamcheck.hello()")
            self._doing = "reading the page's clock"
            self._page_offset = await self._read_clock(page)
            if self._lag_ledger is not None:
                self._doing = "starting the page's lag probe"
                await self._start_probe(page, self._page_offset)
        except HarnessError:
            raise
        except Exception as exc:  # Playwright's Error: the page threw, or went away
            raise HarnessError(f"{self._who}: failed {doing}: {_first_line(exc)}") from None
        try:
            hello = check_event(reply)
        except ProtocolError as exc:
            raise HarnessError(f"{self._who}: hello() returned {_quote(reply)}: {exc}") from None
        if hello["type"] != "hello":
            raise HarnessError(f"{self._who}: hello() returned a {hello['type']!r} object")
        return hello

    async def _read_clock(self, page: Page) -> float:
        """The page's clock minus the kit's, in seconds, to within half the shortest
        round trip of PINGS readings (both are CLOCK_MONOTONIC on Linux: no drift)."""
        best, rtt = 0.0, float("inf")
        for _ in range(PINGS):
            before = now()
            page_ms = await page.evaluate("performance.now()")
            after = now()
            if after - before < rtt:
                best, rtt = page_ms / 1000 - (before + after) / 2, after - before
        self.clock_error = rtt / 2
        return best

    async def _start_probe(self, page: Page, offset: float) -> None:
        self._probe_token += 1
        token = self._probe_token
        self._probe_offsets = {token: offset}  # an earlier page's late batch is dropped
        interval, every = PROBE_INTERVAL * 1000, LAG_BATCH * 1000
        await page.evaluate(
            "([t, i, e]) => window.__streamcheckLag.start(t, i, e)", [token, interval, every]
        )

    async def _stop_probe(self, page: Page) -> None:
        rows = await page.evaluate("() => window.__streamcheckLag.stop()")
        self._record_lag(rows)

    def _record_lag(self, batch: Any) -> None:
        """``[token, [due, woke, ...], [url, fetchStart, responseEnd, ...], [url, call,
        resolved, ...]]`` in page milliseconds: the probe's rows into the ledger, the
        Resource Timing entries and the fetch resolutions kept for ``_record_network``
        (their attempts may not have ended yet)."""
        ledger = self._lag_ledger
        if ledger is None or not isinstance(batch, list) or len(batch) not in (2, 3, 4):
            return
        token, rows, *entries = batch
        offset = self._probe_offsets.get(token) if isinstance(token, int) else None
        if offset is None or not isinstance(rows, list):
            return
        with self._lock:
            for kept, flat in zip((self._entries, self._got), entries, strict=False):
                kept.extend((e, offset) for e in parse_entries(flat))
        latest = now()
        for i in range(0, len(rows) - 1, 2):
            due, woke = rows[i], rows[i + 1]
            if isinstance(due, int | float) and isinstance(woke, int | float):
                row = on_kit_clock(due / 1000, woke / 1000, offset, latest)
                ledger.record_lag(Source.PAGE, *row)

    def _record_network(self) -> None:
        """The network hop of every finished request so far, into the ledger by attempt."""
        ledger = self._lag_ledger
        with self._lock:
            kinds, self._entries, self._got = (self._entries, self._got), [], []
        if ledger is None or not any(kinds):
            return
        attempts = ledger.attempts()
        # Each kind is paired on its own: a request's entry and its fetch overlap.
        for kept in kinds:
            for offset in {o for _, o in kept}:
                mine = [e for e, o in kept if o == offset]
                for seq, out, back in network_hops(mine, attempts, offset, self.clock_error):
                    ledger.record_hop(seq, out, back)
                if kept is kinds[1]:  # a fetch resolved: the page's code had the head
                    for seq, at in heads_seen(mine, attempts, offset, self.clock_error):
                        ledger.record_head(seq, at)

    async def _reopen(self) -> None:
        """On the host's loop: close the context, open a fresh one and its page, within
        ``hello_timeout`` times each of REOPEN_LIMITS in turn."""
        limits = [f"{factor * self.hello_timeout:.1f}s" for factor in REOPEN_LIMITS]
        for tried, (factor, limit) in enumerate(zip(REOPEN_LIMITS, limits, strict=True), 1):
            if self._context is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._context.close(), CLOSE_GRACE)
            try:
                async with asyncio.timeout(factor * self.hello_timeout):
                    await self._open()
                return
            except TimeoutError:
                self._notes.append(f"[kit] reopening passed {limit} {self._doing} (try {tried})")
        raise _TimedOut(
            f"did not finish reopening the page within {', then '.join(limits)} (a machine too "
            "loaded to open it, or a page that hangs when loaded again): later cases not run"
        )

    async def _teardown(self) -> None:
        context, self._context, self._page = self._context, None, None
        host, self._host = self._host, None
        server, self._server = self._server, None
        if context is not None and host is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(host.call(context.close()), CLOSE_GRACE)
        if server is not None:
            await asyncio.to_thread(server.close)
        if host is not None:
            await asyncio.to_thread(_browser_host.release, host)

    async def _on_host(self, coro: Coroutine[Any, Any, T], timeout: float, doing: str) -> T:
        assert self._host is not None
        try:
            async with asyncio.timeout(timeout):
                return await self._host.call(coro)
        except TimeoutError:
            raise _TimedOut(
                f"{self._who}: did not finish {doing} within {timeout:.1f}s{self._tail()}"
            ) from None

    # -- commands --------------------------------------------------------------------
    async def _request(self, command: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
        assert self._loop is not None
        waiter: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._replies[reply].append(waiter)
        try:
            await self._send(command)
            async with asyncio.timeout(self.command_timeout):
                return await waiter
        except TimeoutError:
            reason = f"did not answer `{command['cmd']}` within {self.command_timeout:.1f}s"
            self._fail(reason)
            # A page silent on a command of the run's own (not a stream's) is given up
            # for the run, as an exec client is: not one command limit per case.
            error = Unresponsive if command["cmd"] in SILENCE_ENDS_RUN else HarnessError
            raise error(self._failure or reason) from None
        finally:
            with contextlib.suppress(ValueError):
                self._replies[reply].remove(waiter)

    async def _send(self, command: Mapping[str, Any]) -> None:
        self._check_usable()
        try:
            fault = await self._on_host(
                self._evaluate(command), self.command_timeout, f"sending `{command['cmd']}`"
            )
        except HarnessError:
            raise
        except Exception:  # the page closed under it: a breach closes it, and says why
            if self._failure is None:
                raise
            raise HarnessError(self._failure) from None
        if fault is not None:
            self._fail(f"threw from streamcheck.command({{cmd: {command['cmd']!r}}}): {fault}")
            self._check_usable()

    def _send_nowait(self, command: Mapping[str, Any]) -> None:
        if self._host is not None and self._page is not None:
            self._in_flight(self._host.submit(_quietly(self._evaluate(command))))

    async def _evaluate(self, command: Mapping[str, Any]) -> str | None:
        assert self._page is not None
        sent = now()
        result = await self._page.evaluate(_SEND, dict(command))
        if not isinstance(result, list) or len(result) != 2:
            return None
        fault, arrived = result
        if command.get("cmd") in TIMED_COMMANDS:
            self._record_signal(sent, arrived)
        return fault if isinstance(fault, str) else None

    def _record_signal(self, sent: float, page_ms: Any) -> None:
        """How late something the kit did (a command, a network switch) reached the
        page: a lag row of the ``page`` series, due as the kit acted, woken as the page
        saw it. The trip crosses Playwright's driver and the browser process, which no
        probe of the page sees; it is the harness's noise like any loop's lag."""
        ledger = self._lag_ledger
        if ledger is None or self._probe_offsets.get(self._probe_token) is None:
            return
        at = self._kit_time(page_ms)
        if at is not None:
            ledger.record_lag(Source.PAGE, sent, max(sent, at))

    async def _set_offline(self, offline: bool) -> None:
        await self.start()
        assert self._context is not None
        sent = now()
        await self._on_host(
            self._context.set_offline(offline), self.command_timeout, "switching the network"
        )
        if not offline and self._page is not None:
            page = self._page
            await self._on_host(
                page.evaluate(_BACK, self.command_timeout * 1000 / 2),
                self.command_timeout,
                "waiting for the page's network to come back",
            )
        if self._host is not None and self._page is not None and self._page_offset is not None:
            since = (sent + self._page_offset - self.clock_error) * 1000
            kind = "offline" if offline else "online"
            note = self._note_network(self._page, kind, sent, since)
            self._in_flight(self._host.submit(_quietly(note)))

    async def _note_network(self, page: Page, kind: str, sent: float, since: float) -> None:
        """On the host's loop: when the page heard the network event, as a lag row."""
        at = await page.evaluate(_SEEN, [kind, since, CLOSE_GRACE * 1000 / 2])
        if page is self._page:
            self._record_signal(sent, at)

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise HarnessError(self._failure)
        if self._closed:
            raise HarnessError(f"{self._who}: the adapter is closed")

    # -- the page's messages (on the browser's thread) --------------------------------
    def _on_emit(self, source: Any, batch: Any = None, lag: Any = None) -> None:
        """One binding call: the ``[message, page time]`` pairs one task of the page
        emitted, or (``lag``) a batch of the lag probe's rows."""
        if not isinstance(batch, list):
            self._breach(f"called the kit's binding with {_quote(batch)}")
            return
        if lag is not None:
            self._record_lag(lag)
        for pair in batch:
            message, page_ms = pair if isinstance(pair, list) and len(pair) == 2 else (pair, None)
            self._on_message(message, page_ms)

    def _on_message(self, message: Any, page_ms: Any) -> None:
        if self._breached:  # nothing the page says after a breach counts
            return
        try:
            event = check_event(message)
        except ProtocolError as exc:
            self._breach(f"broke the protocol: streamcheckEmit({_quote(message)}) {exc}")
            return
        kind = event["type"]
        if kind in REPLIES:
            self._soon(self._hand_reply, kind, event, self._notes.append)
            return
        sid = event.get("stream")
        with self._lock:
            entry = self._streams.get(sid) if isinstance(sid, str) else None
        if entry is None:
            self._note_stray(event, self._notes.append)
            return
        try:
            over = deliver(entry.sink, event, self._kit_time(page_ms)) or entry.consumer_stopped()
        except StreamCancelled:
            return
        except ProtocolError as exc:
            self._breach(f"broke the protocol: streamcheckEmit({_quote(message)}): {exc}")
            return
        if over and not entry.over:
            entry.over = True
            self._soon(_settle, entry.ended)

    def _kit_time(self, page_ms: Any) -> float | None:
        """When the page emitted, on the kit's clock; None (stamp on arrival) without
        a reading of the page's clock or a usable page time."""
        offset = self._page_offset
        if offset is None or isinstance(page_ms, bool) or not isinstance(page_ms, int | float):
            return None
        at = page_ms / 1000 - offset
        # Never later than the arrival, whatever the page did to its clock.
        return min(at, now())

    def _on_fault(self, source: Any, command: Any = None, error: Any = None) -> None:
        self._breach(f"rejected the promise of streamcheck.command({{cmd: {command!r}}}): {error}")

    def _breach(self, reason: str) -> None:
        """From the browser's thread: the page can no longer be trusted."""
        self._breached = True
        self._soon(self._fail, reason)

    def _soon(self, callback: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(callback, *args)

    # -- on the adapter's loop -------------------------------------------------------
    def _fail(self, reason: str) -> None:
        """The first breach wins: every waiter fails with it, the page is closed."""
        if self._failure is not None or self._closed:
            return
        self._failure = f"{self._who} {reason}{self._waiting_for()}{self._tail()}"
        self._resolve_all(self._failure)
        context, host = self._context, self._host
        if context is not None and host is not None:
            host.submit(_quietly(context.close()))

    def __repr__(self) -> str:
        return f"<BrowserAdapter {self.diagnostics().splitlines()[0]}>"


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _quietly(coro: Coroutine[Any, Any, Any]) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(coro, CLOSE_GRACE)


def _quote(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT] + "..."


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


assert PROTOCOL_VERSION == 1  # the page contract is protocol v1's messages
