"""The live bookkeeping of a stream: one attempt's record, the consumer's buffer and
what wakes a waiting stream."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field

from conformance.reference._policy import FailureKind
from conformance.reference._sse import SSEComment, SSEEvent
from conformance.reference._watch import StallWatch

__all__ = ["_Attempt", "_Buffer", "_Wake", "_drop_replays", "_numeric_id"]


@dataclass(eq=False)
class _Attempt:
    """The live bookkeeping of one attempt (one HTTP request)."""

    probe: bool
    watch: StallWatch
    guard: asyncio.Timeout | None = None
    tick: asyncio.TimerHandle | None = None
    tick_due: float = 0.0  # the health checks' grid point last scheduled (loop time)
    request_sent: bool = False  # request bytes were written: the server may have seen it
    delivered: bool = False  # a data event of this attempt reached the buffer
    resolved: bool = False  # the breaker has heard this attempt's outcome
    settled: bool = False  # the outcome is known; timers may no longer interrupt
    finished: bool = False  # the terminal event arrived
    paused: bool = False  # waiting for a slow consumer: not network silence
    interrupt: FailureKind | None = None  # why the guard was fired early
    replay_floor: int | None = None  # resumed: numeric ids <= this are replays
    body: str = ""  # an error response's text


@dataclass(eq=False)
class _Buffer:
    """Events (and comments, if asked for) on their way from the reader task to the consumer."""

    events: deque[SSEEvent | SSEComment] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # events or the end arrived
    drained: asyncio.Event = field(default_factory=asyncio.Event)  # the consumer emptied it
    ended: bool = False
    error: BaseException | None = None

    def push(self, events: Iterable[SSEEvent | SSEComment]) -> None:
        self.events.extend(events)
        self.ready.set()

    def end(self, error: BaseException | None = None) -> None:
        if not self.ended:
            self.ended, self.error = True, error
        self.ready.set()


class _Wake:
    """What wakes a waiting stream: offline(), online(), a breaker probe's outcome.

    An ``asyncio.Event`` that also cuts short the pause in progress: ``set()`` ends
    ``wait()`` and ``pause()`` alike. The pause awaits the client's own sleep function,
    so a test can pass one that does not really wait.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._pausing: asyncio.Timeout | None = None

    def set(self) -> None:
        self._event.set()
        pausing = self._pausing
        if pausing is not None and not pausing.expired():
            pausing.reschedule(asyncio.get_running_loop().time())  # ends it on the next turn

    def clear(self) -> None:
        self._event.clear()

    async def wait(self) -> None:
        await self._event.wait()

    async def pause(self, sleeping: Awaitable[None]) -> None:
        """Awaits ``sleeping`` (the client's ``sleep(seconds)``) unless ``set()`` comes first."""
        try:
            async with asyncio.timeout(None) as pausing:
                self._pausing = pausing
                await sleeping
        except TimeoutError:
            if not pausing.expired():
                raise  # the sleep's own error, not our wake-up
        finally:
            self._pausing = None


# An id is a replay-ordering number only if it is plain ASCII digits of a sane length:
# str.isdigit() accepts "²" and other digits int() refuses, and int() refuses over
# 4,300 digits; such ids are opaque, like any other text.
_ID_DIGITS = 18


def _numeric_id(event_id: str) -> int | None:
    """The id as a number when it is 1-18 ASCII digits, else None (an opaque id)."""
    if 0 < len(event_id) <= _ID_DIGITS and event_id.isascii() and event_id.isdigit():
        return int(event_id)
    return None


def _drop_replays(events: list[SSEEvent], att: _Attempt) -> list[SSEEvent]:
    """After a resume, drops what a replaying server sends again (numeric ids <= the
    resume point); the first newer id ends the replay. Opaque ids are trusted."""
    kept: list[SSEEvent] = []
    for ev in events:
        floor = att.replay_floor
        number = _numeric_id(ev.id)
        if floor is not None and number is not None:
            if number <= floor:
                continue
            att.replay_floor = None
        kept.append(ev)
    return kept
