"""wait_ended_progressing: a stream still delivering is not cut short; one that stops is."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from conformance._evidence import DeliveryLog
from conformance.cases._common import wait_ended_progressing


class _Ctx:
    """The two waits a case uses, over a real DeliveryLog (no network is involved)."""

    def __init__(self) -> None:
        self.deliveries = DeliveryLog()
        self.waits: list[tuple[str, float]] = []

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate() and loop.time() < deadline:  # noqa: ASYNC110 (polls, as the runner does)
            await asyncio.sleep(0.005)
        return predicate()

    async def wait_ended(self, stream: str, timeout: float) -> bool:
        self.waits.append((stream, timeout))
        return await self.wait_until(lambda: self.deliveries.ended(stream), timeout)


async def _deliver(ctx: _Ctx, chunks: int, gap: float, *, done: bool) -> None:
    for n in range(chunks):
        await asyncio.sleep(gap)
        ctx.deliveries.add("s1", "chunk", data=str(n))
    if done:
        ctx.deliveries.add("s1", "done")


def _run(chunks: int, gap: float, *, done: bool, budget: float) -> tuple[bool, _Ctx]:
    """The wait, allowing a few chunks more than are delivered."""

    async def main() -> tuple[bool, _Ctx]:
        ctx = _Ctx()
        feeder = asyncio.create_task(_deliver(ctx, chunks, gap, done=done))
        ended = await wait_ended_progressing(ctx, "s1", budget, chunks + 4)  # type: ignore[arg-type]
        feeder.cancel()
        return ended, ctx

    return asyncio.run(main())


def test_a_stream_still_delivering_outlasts_the_budget() -> None:
    # Eight chunks 60 ms apart take about 0.5 s, five times the 0.1 s budget.
    ended, _ = _run(8, 0.06, done=True, budget=0.1)
    assert ended


def test_a_stream_that_stops_fails_a_budget_after_its_last_chunk() -> None:
    start = time.monotonic()
    ended, ctx = _run(3, 0.02, done=False, budget=0.1)
    elapsed = time.monotonic() - start
    assert not ended
    assert elapsed < 1.0  # the budget runs once after the last chunk, not once per chunk
    assert ctx.waits == [("s1", 0.0)]  # the stall already waited out the budget


def test_a_stream_with_no_chunk_gets_the_whole_last_wait() -> None:
    ended, ctx = _run(0, 0.0, done=False, budget=0.05)
    assert not ended
    assert ctx.waits == [("s1", 0.05)]  # what the hung-adapter rule reads
