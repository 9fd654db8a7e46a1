"""Virtual time: one event loop whose clock jumps to its next timer when nothing is ready.

The fake server, the fault proxy and a client that does all its waiting on asyncio can
share one loop (``virtual_loop()``). Its clock, read by ``now()`` on that loop, stands
still while work runs and jumps to the next timer once every task waits, so I/O on
loopback takes no time at all and a verdict is exact: a 2 s backoff measures 2.000000 s
whatever the machine's load, and 60 s of cooldown take milliseconds of wall time.

How: the loop's selector polls the sockets without waiting, and only when a run of
``IDLE_PASSES`` polls in a row found nothing ready and no callback is due does the clock
jump, to the next timer exactly (whole microseconds, so no float drift). The same
technique as ``looptime``'s, written here: that package imports pytest into every
process that loads it and patches the loop through name-mangled internals, and the kit
needs its core (some 30 lines) plus:

- a start for every case on a whole multiple of ``CASE_SPACING`` set by its place in
  the catalog (``restart_clock``), so that two runs with one seed give the same
  evidence, stamps included, whichever process played the case. (Not an origin
  subtracted from the loop's clock: a deadline computed on one frame and waited for on
  another can fall short of itself by a float's rounding, and a clock that stands still
  would never close that gap.);
- a guard: virtual time is only true for work that waits on this loop. A client that
  waits elsewhere (a thread, ``time.sleep``, an executor) would see time jump past it,
  and a verdict judged on that would be false. The guard notes every such escape it
  can see (``Guard.escapes``) and the runner refuses the verdict, naming the cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextvars import Context
from dataclasses import dataclass
from types import FrameType
from typing import Any, ClassVar, SupportsIndex, TypeVar, TypeVarTuple, Unpack

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")

__all__ = ["CASE_SPACING", "TICK", "Escape", "Guard", "VirtualLoop", "kit_calls", "virtual_loop"]

# Idle passes before the clock jumps: each polls the sockets, so bytes a peer wrote on
# loopback (delivered by the kernel within the writer's send call) are read before time
# moves, and a callback chain that reschedules itself finishes first. A pass costs some
# 10 microseconds, so a jump costs well under a millisecond of wall time.
IDLE_PASSES = 42
_TICKS = 1_000_000  # the clock counts whole microseconds: no float drift over a long case
# While an executor's job runs the clock stands still and the loop waits for it in real
# time, this long at a time (its end wakes the loop at once through its self-pipe).
OUTSIDE_POLL = 0.05
TICK = 1 / _TICKS
# asyncio runs a timer this much early at most (its "clock resolution"; 1 ns for the
# monotonic clock). A tenth of a tick here: far below what the clock can tell apart, and
# far above a float's step at its largest readings (some 1.5e-8 s at 8e7 s, where the
# catalog's last slot starts a case), so that "now + resolution" is always later than
# now: at 1 ns a timer due exactly now would never be run, and the loop would spin.
RESOLUTION = TICK / 10
# Every case in virtual time starts on a multiple of this (seconds): far beyond a case's
# own length (VIRTUAL_LIMIT, an hour) and the real seconds the loop waits between cases.
CASE_SPACING = 10_000
_SPACING = CASE_SPACING * _TICKS  # the clock's resolution: an exact stamp is true to within this


@dataclass(frozen=True)
class Escape:
    """One way the client waited outside the loop, seen by the guard."""

    what: str  # e.g. "time.sleep(0.5)", "work handed to an executor"
    where: str  # the caller's frame, as "file:line in function"

    def __str__(self) -> str:
        return f"{self.what} ({self.where})"


class Guard:
    """Notes what would make the loop's virtual time lie, while armed (a case plays)."""

    def __init__(self) -> None:
        self.armed = False
        self.escapes: list[Escape] = []

    def note(self, what: str, where: str | None = None) -> None:
        if self.armed and len(self.escapes) < 20:
            self.escapes.append(Escape(what, where or _caller()))


class VirtualLoop(asyncio.SelectorEventLoop):
    """A selector event loop on virtual time, with the kit's guard and per-case origin."""

    def __init__(self) -> None:
        selector = selectors.DefaultSelector()
        super().__init__(selector)
        self.guard = Guard()
        # False: the clock runs in real time (from where virtual time left it), as an
        # ordinary loop's; a case in virtual time turns it on and off (go_virtual).
        self.virtual = False
        self._synced = time.monotonic()  # the monotonic reading _ticks was last set at
        self._ticks = 0  # the clock, in microseconds since the loop was made
        self._idle = 0  # polls in a row that found nothing to do
        self._owner: int | None = None  # the thread running the loop
        self._outside: set[asyncio.Future[Any]] = set()  # executor jobs not yet done
        self._workers: set[int] = set()  # the threads that ran them
        # The kit's own threads (the main thread, each runner's): a wake-up from one is
        # the kit's, even outside ``kit_calls`` (a finalizer the collector runs there).
        main = threading.main_thread().ident
        self.kit_threads: set[int] = set() if main is None else {main}
        self._poll = selector.select
        selector.select = self._select  # type: ignore[method-assign]
        self._clock_resolution = RESOLUTION  # BaseEventLoop's, read by its _run_once

    def go_virtual(self) -> None:
        """Virtual time from here (call it on the loop's thread): the clock goes on from
        its reading, so no timer already set moves, and jumps whenever all tasks wait."""
        self._ticks = round(self.time() * _TICKS)
        self.virtual = True

    def go_real(self) -> None:
        """Real time from here: the clock runs on at the monotonic clock's pace from
        where virtual time left it (a loop that waits for the next case must block, not
        jump from one heartbeat to the next at full speed)."""
        self._ticks = round(self.time() * _TICKS)
        self._synced = time.monotonic()
        self.virtual = False

    def time(self) -> float:
        if self.virtual:
            return self._ticks / _TICKS
        return self._ticks / _TICKS + (time.monotonic() - self._synced)

    def _select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if not self.virtual:
            return self._poll(timeout)
        ready = self._poll(0)
        if ready or timeout == 0:  # I/O to handle, or callbacks already due: no jump
            self._idle = 0
            return ready
        if timeout is None:  # no timer at all: only another thread can wake the loop
            return self._poll(None)
        if self._outside:  # work in a thread: wait for it in real time, no jump
            self._idle = 0
            return self._poll(min(timeout, OUTSIDE_POLL))
        self._idle += 1
        if self._idle > IDLE_PASSES:  # every task waits on a timer: jump to the next one
            self._idle = 0
            self._ticks += max(1, round(timeout * _TICKS))
        return ready

    def call_at(
        self, when: float, callback: Callable[[Unpack[_Ts]], object], *args: *_Ts, **kw: Any
    ) -> asyncio.TimerHandle:
        """A timer less than the clock's resolution ahead waits one tick.

        asyncio runs a timer up to its clock's resolution (RESOLUTION) early. A wait for
        its own deadline set a float's rounding ahead of now (3.6e-12 s at 20,000 s) would fire
        at once, find the deadline not met, be set again, and fire again, forever, on a
        clock that stands still: one tick later the deadline has passed.
        """
        if self.virtual and 0 < when - self.time() < RESOLUTION:
            when = self.time() + TICK
        return super().call_at(when, callback, *args, **kw)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Arm the guard, with no escapes noted yet; disarm it on the way out."""
        self.guard.escapes.clear()
        self.guard.armed = True
        _SleepPatch.acquire(self)
        try:
            yield
        finally:
            self.guard.armed = False
            _SleepPatch.release(self)

    def restart_clock(self, slot: int | None = None) -> None:
        """Move the clock on to a whole multiple of CASE_SPACING (call it on the loop's
        thread, as a case starts): the case's stamps then do not depend on how long the
        loop waited in real time before it. Timers due meanwhile fire, as they would had
        that much time passed.

        ``slot``: the case's place in the catalog; it starts at ``slot + 1`` spacings
        if the clock has not passed that, so a case's stamps (and any the client prints
        of its own clock) do not depend on which cases this loop played before it: alone,
        in a run, in any process of a run. Otherwise (or with no slot): the next multiple.
        """
        ticks = round(self.time() * _TICKS)
        after = -(-ticks // _SPACING) * _SPACING
        self._ticks = after if slot is None else max(after, (slot + 1) * _SPACING)
        self._synced = time.monotonic()

    def virtual_now(self) -> float:
        """What ``now()`` reads on this loop while it is virtual: the loop's own clock
        (one frame for the kit's deadlines and the loop's timers)."""
        return self.time()

    def run_forever(self) -> None:
        self._owner = threading.get_ident()
        try:
            super().run_forever()
        finally:
            self._owner = None

    def run_in_executor(
        self, executor: Executor | None, func: Callable[[Unpack[_Ts]], _T], *args: *_Ts
    ) -> asyncio.Future[_T]:
        """Work in a thread: the clock stands still until it is done (see ``_select``),
        and a ``time.sleep`` there is an escape (``_guarded_sleep``): an SDK that reads
        its platform in a thread once is fine, a backoff slept in a thread is not."""
        workers, where = self._workers, _caller()

        def tracked(*args: *_Ts) -> _T:
            workers.add(threading.get_ident())
            _job.where = where  # a sleep in the job is noted where the job was handed over
            return func(*args)

        future = super().run_in_executor(executor, tracked, *args)
        self._outside.add(future)
        future.add_done_callback(self._outside.discard)
        return future

    def call_soon_threadsafe(
        self,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: Context | None = None,
    ) -> asyncio.Handle:
        caller = threading.get_ident()
        if (
            self.guard.armed
            and self._owner is not None
            and caller != self._owner
            and caller not in self._workers  # an executor's job ending: time stood still
            and caller not in self.kit_threads
            and not _kit.active
        ):
            self.guard.note("a thread outside the loop woke it (call_soon_threadsafe)")
        return super().call_soon_threadsafe(callback, *args, context=context)


class _KitCalls(threading.local):
    active = False


_kit = _KitCalls()


class _Job(threading.local):
    where: str | None = None  # in an executor's thread: where its job was handed over


_job = _Job()


@contextlib.contextmanager
def kit_calls() -> Iterator[None]:
    """Mark calls into a virtual loop from this thread as the kit's own, not the client's
    (the runner submitting a case, the proxy's controls from a test)."""
    was, _kit.active = _kit.active, True
    try:
        yield
    finally:
        _kit.active = was


def virtual_loop() -> VirtualLoop:
    """A new loop in virtual time (run it in a thread of its own with ``run_forever``)."""
    loop = VirtualLoop()
    loop.go_virtual()
    loop.restart_clock()  # on a whole CASE_SPACING: not the microseconds it took to make
    return loop


def running_virtual_loop() -> VirtualLoop | None:
    """The virtual loop running in this thread, if any."""
    loop = asyncio._get_running_loop()
    return loop if isinstance(loop, VirtualLoop) else None


class _SleepPatch:
    """``time.sleep`` reports itself to the guard of a virtual loop it blocks.

    Installed while any guard is armed, removed with the last: a blocking sleep on the
    loop's thread holds every task while the virtual clock stands still, so a client's
    backoff written as ``time.sleep`` would measure 0 s.
    """

    loops: ClassVar[set[VirtualLoop]] = set()  # the loops whose guard is armed
    _lock = threading.Lock()
    _real = time.sleep

    @classmethod
    def acquire(cls, loop: VirtualLoop) -> None:
        with cls._lock:
            if not cls.loops:
                cls._real = time.sleep
                time.sleep = _guarded_sleep
            cls.loops.add(loop)

    @classmethod
    def release(cls, loop: VirtualLoop) -> None:
        with cls._lock:
            cls.loops.discard(loop)
            if not cls.loops and time.sleep is _guarded_sleep:
                time.sleep = cls._real


def _guarded_sleep(seconds: float | SupportsIndex) -> None:
    loop = running_virtual_loop()
    if loop is not None:
        loop.guard.note(f"time.sleep({float(seconds):g}) blocked the loop")
    else:  # in an executor's thread of an armed loop: the clock stood still meanwhile
        me = threading.get_ident()
        for armed in list(_SleepPatch.loops):
            if me in armed._workers:
                what = f"time.sleep({float(seconds):g}) in an executor's thread"
                armed.guard.note(what, _job.where)
    _SleepPatch._real(seconds)


def _caller() -> str:
    """The first frame outside this module and asyncio: where the escape came from."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name == __file__ or "/asyncio/" in name or "/threading" in name):
            return f"{name}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return "unknown"
