"""How late the kit's own event loops run: the harness's noise, measured while it works.

A ``LagProbe`` is a task that sleeps ``PROBE_INTERVAL`` at a time on one event loop
and records, for every wake-up, when it was due and how late it came. A loop that
is blocked, starved of CPU or waiting for the GIL wakes its probe late by as much as
it delays every timer and every read on it, so the records bound the harness's share
of any timing the kit measures there. The records go into the ledger (source
``server``, ``proxy``, ``client``), cleared with it, so the noise of a case is
evidence like its attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import TYPE_CHECKING

from fake_servers._clock import now

if TYPE_CHECKING:
    from fake_servers._ledger import Ledger

__all__ = ["PROBE_INTERVAL", "LagProbe", "ThreadLagProbe"]

# 5 ms: short against the waits the cases judge (tens of ms at test timing and up),
# cheap enough to run on three loops at once (about 600 wake-ups a second in all).
PROBE_INTERVAL = 0.005


class LagProbe:
    """Records how late one event loop wakes: start and stop it from any thread."""

    def __init__(self, ledger: Ledger, source: str, interval: float = PROBE_INTERVAL) -> None:
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
    ``interval`` at a time and records each wake-up's lateness under ``source``.

    A synchronous client's stream thread sleeps its backoff and then needs the CPU and
    the GIL again, as this thread does, so a machine that holds one late holds both.
    Start and stop it from any thread; a stopped probe records nothing more.
    """

    def __init__(self, ledger: Ledger, source: str, interval: float = PROBE_INTERVAL) -> None:
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
