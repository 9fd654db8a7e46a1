"""Hosting one adapter: its private event loop in a thread of its own, and the calls
into it, each with a hard time limit.

A client that blocks its loop cannot hang the suite: the calling thread waits with a
hard time limit, watching a heartbeat the loop runs, and raises ``HarnessError`` (the
case is an ERROR), ``Unresponsive`` for a command (configure, reset) left unanswered,
or, for a loop that runs no callback at all, ``LoopBlocked``: the kit cannot take that
thread back, so it is abandoned (``AdapterHost.abandon``), a daemon that does not keep
the run from ending. An ``aclose()`` that raises, hangs or blocks is never hidden:
``close`` says why, within CLOSE_LIMIT (LOOP_BLOCK_LIMIT for a blocked loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from conformance._adapter import ClientAdapter, HostsLibraryClients, Startable
from conformance._case import RequestUnsupported
from conformance._result import HarnessError, LoopBlocked, Unresponsive
from fake_servers import Ledger
from fake_servers._noise import LagProbe, Source
from fake_servers._virtual import VirtualLoop, kit_calls

__all__ = [
    "BEAT_INTERVAL",
    "BLOCKED",
    "CLOSE_LIMIT",
    "COMMAND_LIMIT",
    "COMMAND_MARGIN",
    "LOOP_BLOCK_LIMIT",
    "QUIET_BEAT",
    "WATCH_SLICE",
    "AdapterHost",
]

T = TypeVar("T")
# Limits on adapter commands sit above the exec adapter's own (10 s), so its
# richer message (with the client's stderr) is the one users see.
COMMAND_LIMIT = 15.0
COMMAND_MARGIN = 5.0  # above an adapter's own ``reset_limit``, for the same reason
CLOSE_LIMIT = 5.0
# A loop that runs no callback at all for this long is blocked by a synchronous call,
# not busy: the worst lag a loaded machine gives the kit's loops is far below it.
LOOP_BLOCK_LIMIT = 10.0
BEAT_INTERVAL = 0.25  # seconds between the heartbeats the adapter's loop runs
WATCH_SLICE = 0.25  # seconds between looks at the heartbeat while waiting on the loop
QUIET_BEAT = 1.0  # after a timeout, a loop silent this long is watched until it is judged
BLOCKED = (
    "the kit cannot take a blocked thread back (it is left as a daemon thread, which "
    "does not keep the run from ending)"
)


class _Heartbeat:
    """When the adapter's loop last ran a callback of the kit's (read from any thread).

    A busy loop still beats, late by its lag; a loop that misses every beat for
    LOOP_BLOCK_LIMIT is stuck in a synchronous call and will not come back.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.last = time.monotonic()
        loop.call_soon_threadsafe(self._beat)

    def _beat(self) -> None:
        self.last = time.monotonic()
        self._loop.call_later(BEAT_INTERVAL, self._beat)

    def silent_for(self) -> float:
        return time.monotonic() - self.last


class AdapterHost:
    """One adapter at a time (the factory makes each) on a loop of its own.

    ``start`` makes a fresh loop and adapter; ``call`` runs a coroutine on the loop
    within a time limit (``command``: an adapter command's limit); ``close`` closes the
    adapter and stops its loop; ``abandon`` leaves a blocked loop behind. The loop's own
    lag is probed into ``ledger`` while ``measure_lag`` says so.
    """

    def __init__(self, factory: Callable[[], ClientAdapter], ledger: Ledger) -> None:
        self._factory = factory
        self._ledger = ledger
        self.adapter: ClientAdapter
        self._loop: VirtualLoop | None = None
        self._thread: threading.Thread | None = None
        self._heartbeat: _Heartbeat
        self._loop_lag: LagProbe
        self._open = False  # self.adapter is started and not yet closed

    @property
    def loop(self) -> VirtualLoop | None:
        """The adapter's loop while it runs (None: stopped, or abandoned)."""
        return self._loop

    def start(self) -> ClientAdapter:
        """A fresh loop in a thread of its own, and on it a fresh adapter, started.

        The loop is a ``VirtualLoop``, in real time until a case asks for virtual time
        (``SuiteRunner``): in real time it is an ordinary selector loop.
        """
        loop = self._loop = VirtualLoop()
        self._thread = threading.Thread(
            target=_run_loop, args=(loop,), name="streamcheck-adapter", daemon=True
        )
        self._thread.start()
        self._heartbeat = _Heartbeat(loop)
        self._loop_lag = LagProbe(self._ledger, Source.CLIENT)
        adapter = self.call(self._make_adapter(), 2 * COMMAND_LIMIT, "starting the adapter")
        self.adapter = adapter
        # A library's client instances on the loop: a hosting loop (docs/timing.md).
        if isinstance(adapter, HostsLibraryClients) and adapter.hosts_library_clients:
            self._loop_lag = LagProbe(self._ledger, Source.SDK_LOOP)
        self._open = True
        return adapter

    async def _make_adapter(self) -> ClientAdapter:
        adapter = self._factory()
        if isinstance(adapter, Startable):  # e.g. the exec adapter's handshake
            try:
                await adapter.start()
            except BaseException:  # whoever started it stops it: nothing half started stays
                with contextlib.suppress(Exception):
                    await adapter.aclose()
                raise
        return adapter

    def measure_lag(self, on: bool) -> None:
        """Probe the loop's lag while a case plays, into the ledger (source ``client``,
        or ``sdk-loop`` for an adapter that hosts a library's clients on it)."""
        if on and self._loop is not None:
            self._loop_lag.start(self._loop)
        else:
            self._loop_lag.stop()

    def close(self) -> str | None:
        """Close the adapter (within CLOSE_LIMIT), then stop its loop; idempotent.

        Returns why its ``aclose()`` failed (it raised, did not return in time, or blocked
        the loop, which is then abandoned), or None: the caller reports it.
        """
        try:
            failure = self._close_adapter()
        finally:
            self._stop_loop()
        return failure

    def _close_adapter(self) -> str | None:
        if not self._open or self._loop is None:
            return None
        self._open = False
        try:
            self.call(_aclose(self.adapter), CLOSE_LIMIT, "closing (adapter.aclose())")
        except LoopBlocked as exc:  # never join a blocked loop's thread: leave it
            self.abandon()
            return str(exc)
        except HarnessError as exc:
            return str(exc)
        return None

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        probe = asyncio.run_coroutine_threadsafe(self._loop_lag.aclose(), loop)
        with contextlib.suppress(Exception):  # a blocked loop: the probe dies with it
            probe.result(1.0)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5.0)
        if not thread.is_alive():
            loop.close()

    def abandon(self) -> None:
        """Leave a blocked loop behind: no waiting on it, no more calls into it.

        Its thread is a daemon, so it never keeps the run from ending; should the
        blocking call return, the loop stops and closes itself (``_run_loop``).
        """
        loop, self._loop, self._thread = self._loop, None, None
        self._open = False
        if loop is not None:
            self._loop_lag.stop()
            with contextlib.suppress(RuntimeError):  # it stopped by itself meanwhile
                loop.call_soon_threadsafe(loop.stop)

    def command(self, coro: Coroutine[Any, Any, T], doing: str, takes: float = 0.0) -> T:
        """An adapter command (configure, reset) within COMMAND_LIMIT, or COMMAND_MARGIN
        beyond what the adapter says it ``takes`` by its own limits, if that is longer.

        Raises:
            Unresponsive: it did not finish in time (the client stopped answering).
        """
        limit = max(COMMAND_LIMIT, takes + COMMAND_MARGIN)
        return self.call(coro, limit, doing, late=Unresponsive)

    def call(
        self,
        coro: Coroutine[Any, Any, T],
        timeout: float,
        doing: str,
        *,
        late: type[HarnessError] = HarnessError,
    ) -> T:
        """Run ``coro`` on the loop within ``timeout`` seconds; ``doing`` names it in errors.

        Raises:
            HarnessError: it raised, or did not finish in time (then as ``late``).
            LoopBlocked: the loop ran no callback for LOOP_BLOCK_LIMIT meanwhile.
        """
        assert self._loop is not None
        self._loop.kit_threads.add(threading.get_ident())  # a runner's thread: the kit's
        with kit_calls():  # the kit's own call: the loop's guard does not count it
            future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        self._wait(future, timeout, doing, late)
        try:
            return future.result()
        except (HarnessError, RequestUnsupported):  # the runner's to read, as they are
            raise
        except Exception as exc:
            raise HarnessError(f"{doing} failed: {type(exc).__name__}: {exc}") from exc

    def _wait(
        self, future: Future[T], timeout: float, doing: str, late: type[HarnessError]
    ) -> None:
        """Wait for ``future`` until it is done, the time limit passes (``late``), or the
        loop is seen blocked (then at once: a blocked loop never finishes anything)."""
        deadline = time.monotonic() + timeout
        while not future.done():
            left = deadline - time.monotonic()
            if left <= 0:
                future.cancel()
                if self._loop_blocked():
                    raise self._blocked(doing)
                raise late(f"the adapter did not finish {doing} within {timeout:.1f}s")
            concurrent.futures.wait([future], timeout=min(WATCH_SLICE, left))
            if not future.done() and self._heartbeat.silent_for() >= LOOP_BLOCK_LIMIT:
                future.cancel()
                raise self._blocked(doing)

    def _loop_blocked(self) -> bool:
        """After a timeout: is the loop blocked? A loop that went quiet is watched until
        it beats again or stays silent for LOOP_BLOCK_LIMIT (at most that long, once)."""
        while self._heartbeat.silent_for() >= QUIET_BEAT:
            if self._heartbeat.silent_for() >= LOOP_BLOCK_LIMIT:
                return True
            time.sleep(WATCH_SLICE)
        return False

    def _blocked(self, doing: str) -> LoopBlocked:
        return LoopBlocked(
            f"the adapter blocked its event loop: no callback ran on it for "
            f"{LOOP_BLOCK_LIMIT:.0f}s while {doing}\n"
            "A synchronous call (time.sleep(), a blocking read) inside an async method "
            "blocks it: run blocking work with asyncio.to_thread(), or wrap a blocking "
            "client in SyncClientAdapter. The kit cannot take a blocked thread back: it is "
            "left behind as a daemon thread, which does not keep the run from ending, and "
            "every remaining case is ERROR at once"
        )


async def _aclose(adapter: ClientAdapter) -> None:
    """``adapter.aclose()``; whatever it raises names it (a HarnessError of its own too)."""
    try:
        await adapter.aclose()
    except Exception as exc:
        raise HarnessError(f"adapter.aclose() raised {type(exc).__name__}: {exc}") from exc


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The adapter thread: the loop until it is stopped, then closed, so that even a
    loop left behind blocked closes itself should its blocking call ever return."""
    try:
        loop.run_forever()
    finally:
        # As asyncio.run() does: what is left is cancelled and may unwind (briefly).
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.wait(tasks, timeout=1.0))
        loop.close()
