"""How late the kit's own event loops run: the harness's noise, measured while it works.

A ``LagProbe`` is a task that sleeps ``PROBE_INTERVAL`` at a time on one event loop
and records, for every wake-up, when it was due and how late it came. A loop that
is blocked, starved of CPU or waiting for the GIL wakes its probe late by as much as
it delays every timer and every read on it, so the records bound the harness's share
of any timing the kit measures there. The records go into the ledger (by ``Source``:
``server``, ``proxy``, ``client``, ...), cleared with it, so the noise of a case is
evidence like its attempts.

``Source`` is the declared set of what the kit measures lag in, and how each place
delays a client's work (``Source.hosting``, ``Source.queueing``): the timing model
(``conformance.timing``) reads the classification, the probes and adapters write the
names.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from enum import StrEnum
from typing import TYPE_CHECKING

from fake_servers._clock import now

if TYPE_CHECKING:
    from fake_servers._ledger import Ledger

__all__ = ["PROBE_INTERVAL", "LagProbe", "Source", "ThreadLagProbe"]

# Short against the waits the cases judge, cheap enough to run on three loops at once.
PROBE_INTERVAL = 0.005


class Source(StrEnum):
    """Where the kit measured lag: a loop, the threads or process a client runs in, or
    the network between them. The values are what the ledger stores and reports show."""

    SERVER = "server"  # the fake server's loop
    PROXY = "proxy"  # the fault proxy's loop
    CLIENT = "client"  # the runner's own loop: the kit's clients, an exec client's reader
    SDK_LOOP = "sdk-loop"  # the runner's loop when it runs a library's clients (async SDKs)
    THREADS = "threads"  # a synchronous SDK's stream threads (``ThreadLagProbe``)
    PROCESS = "process"  # an exec client's own process (the exec protocol's "lag")
    PAGE = "page"  # a browser page's loop
    NETWORK = "network"  # the per-request hops outside every loop (``Noise.hops``)

    @property
    def hosting(self) -> bool:
        """A loop that hosts every client of a case (fifty SDK instances in one process,
        fifty users in one page): a stall there holds every timer due during it, and the
        requests queued behind it leave one by one after it ends, beyond any reach around
        a stamp, so its lag counts over a whole wait."""
        return self in (Source.PROCESS, Source.PAGE, Source.THREADS, Source.SDK_LOOP)

    @property
    def queueing(self) -> bool:
        """A loop where work queues: it handles many clients' requests, and a request
        needs several of its iterations to cross it, so a loop that stays busy holds it
        for as long as it stays busy, more than any one wake-up is late. Not a page (its
        requests leave through the browser's network process, measured per request), nor
        the runner's own ``client`` loop (a browser's or an exec client's requests never
        cross it, and the zoo's fixed-delay mutants on it must stay caught)."""
        return self in (
            Source.SERVER,
            Source.PROXY,
            Source.PROCESS,
            Source.THREADS,
            Source.SDK_LOOP,
        )


class LagProbe:
    """Records how late one event loop wakes: start and stop it from any thread."""

    def __init__(self, ledger: Ledger, source: Source, interval: float = PROBE_INTERVAL) -> None:
        self._ledger = ledger
        self.source = source
        self.interval = interval
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run the probe on ``loop`` (from any thread); a second start is a no-op."""
        if self._loop is not None:
            return
        self._loop = loop
        loop.call_soon_threadsafe(self._begin)

    def stop(self) -> None:
        """Stop probing (from any thread); idempotent, safe after the loop ended."""
        loop, self._loop = self._loop, None
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop stopped meanwhile
            loop.call_soon_threadsafe(self._cancel)

    async def aclose(self) -> None:
        """On the probe's own loop: stop it and wait until its task has ended."""
        self._loop = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def cancel_now(self) -> None:
        """On the probe's own loop: cancel at once (for a loop that is shutting down)."""
        self._loop = None
        self._cancel()

    def _begin(self) -> None:
        if self._loop is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _cancel(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()

    async def _run(self) -> None:
        due = now() + self.interval
        while True:
            await asyncio.sleep(max(0.0, due - now()))
            woke = now()
            self._ledger.record_lag(self.source, due, woke)
            # No backlog: after a long block the next wake-up is due one interval on.
            due = max(due + self.interval, woke + self.interval / 2)


class ThreadLagProbe:
    """``LagProbe``'s twin for code that waits in threads: a thread that sleeps
    ``interval`` at a time and records each wake-up's lateness under ``source``
    (``Source.THREADS`` for the synchronous SDK adapters).

    A synchronous client's stream thread sleeps its backoff and then needs the CPU and
    the GIL again, as this thread does, so a machine that holds one late holds both.
    Start and stop it from any thread; a stopped probe records nothing more.
    """

    def __init__(self, ledger: Ledger, source: Source, interval: float = PROBE_INTERVAL) -> None:
        self._ledger = ledger
        self.source = source
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lag-{source}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        # Joined, so a record the thread was making as it was told to stop lands
        # before this returns: after it, nothing more (a wait of one interval at most).
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        due = now() + self.interval
        while not self._stop.is_set():
            time.sleep(max(0.0, due - now()))
            woke = now()
            if self._stop.is_set():
                return
            self._ledger.record_lag(self.source, due, woke)
            due = max(due + self.interval, woke + self.interval / 2)  # no backlog, as above
