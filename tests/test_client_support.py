"""Helpers shared by the reference client's socket-level tests (this module has no tests).

Timing: every policy here is the seed policy scaled to 1 % (backoff 2 ms, breaker
cooldown 0.6 s, stall timeout 0.9 s) with explicit overrides per test, and every
wait has a deadline. A test that times the client plays in virtual time (``drain_on``)
and asserts to the clock's tick; in real time, lower bounds on delays are asserted
strictly and upper bounds get ``SLACK`` because the machine is shared.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from conformance.reference import ClientPolicy, SSEEvent, State, StateChange, StreamingClient
from conformance.reference._client import EventStream
from fake_servers import Ledger, now

if TYPE_CHECKING:
    from conftest import OnVirtualLoop

SLACK = 0.5  # seconds of scheduling noise allowed on top of any upper bound
DEADLINE = 5.0  # the longest any single wait may take before the test fails
BASE = replace(ClientPolicy().scaled(0.01), connect_timeout=2.0)


def policy(**changes: Any) -> ClientPolicy:
    """The scaled seed policy with ``changes`` applied."""
    return replace(BASE, **changes)


def make_client(pol: ClientPolicy | None = None, **kwargs: Any) -> StreamingClient:
    kwargs.setdefault("clock", now)  # the kit's clock: virtual on a virtual loop
    return StreamingClient(pol or BASE, rng=random.Random(1234), **kwargs)


async def drain(stream: EventStream) -> tuple[list[SSEEvent], BaseException | None]:
    """Every event the stream yields, and the error it ended with (None: completed)."""
    events: list[SSEEvent] = []
    try:
        async with stream:
            async with asyncio.timeout(DEADLINE):
                async for ev in stream:
                    events.append(ev)
    except Exception as exc:
        return events, exc
    return events, None


def drain_on(
    virtual: OnVirtualLoop, pol: ClientPolicy, log: StateLog | None = None
) -> tuple[list[SSEEvent], BaseException | None]:
    """``drain`` one GET of ``/s`` by a client of ``pol`` beside the virtual server."""
    server = virtual.server

    async def body() -> tuple[list[SSEEvent], BaseException | None]:
        async with make_client(pol, on_state=log) as client:
            return await drain(client.stream(server.url + "/s"))

    result: tuple[list[SSEEvent], BaseException | None] = virtual.run(body)
    return result


async def wait_ledger(ledger: Ledger, predicate: Callable[[Ledger], bool], what: str) -> None:
    """Waits (off the event loop, so the client keeps running) for the ledger."""
    await asyncio.to_thread(ledger.wait_for, predicate, DEADLINE, what)


class StateLog:
    """Records state changes; ``await log.reached(State.X)`` waits for one."""

    def __init__(self) -> None:
        self.changes: list[StateChange] = []
        self._seen: dict[State, asyncio.Event] = {}

    def __call__(self, change: StateChange) -> None:
        self.changes.append(change)
        self._event(change.state).set()

    @property
    def states(self) -> list[State]:
        return [c.state for c in self.changes]

    async def reached(self, state: State, count: int = 1) -> None:
        async with asyncio.timeout(DEADLINE):
            while self.states.count(state) < count:
                event = self._event(state)
                event.clear()
                await event.wait()

    def _event(self, state: State) -> asyncio.Event:
        return self._seen.setdefault(state, asyncio.Event())


def payloads(events: list[SSEEvent]) -> list[str]:
    return [ev.data for ev in events]
