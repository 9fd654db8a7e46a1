"""wait_ended_progressing: a stream still delivering is not cut short; one that stops is.

On a virtual clock (``fake_servers._virtual``): every time below is exact."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from conformance._evidence import DeliveryLog
from conformance.cases._common import wait_ended_progressing
from fake_servers._virtual import TICK, virtual_loop


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


def _run(chunks: int, gap: float, *, done: bool, budget: float) -> tuple[bool, _Ctx, float]:
    """The wait, allowing a few chunks more than are delivered; and how long it took."""

    async def main() -> tuple[bool, _Ctx, float]:
        ctx = _Ctx()
        start = asyncio.get_running_loop().time()
        feeder = asyncio.create_task(_deliver(ctx, chunks, gap, done=done))
        ended = await wait_ended_progressing(ctx, "s1", budget, chunks + 4)  # type: ignore[arg-type]
        feeder.cancel()
        return ended, ctx, asyncio.get_running_loop().time() - start

    with asyncio.Runner(loop_factory=virtual_loop) as runner:
        return runner.run(main())


def test_a_stream_still_delivering_outlasts_the_budget() -> None:
    # Eight chunks 60 ms apart take 0.48 s, almost five times the 0.1 s budget.
    ended, _, took = _run(8, 0.06, done=True, budget=0.1)
    assert ended
    assert took == pytest.approx(0.48, abs=TICK)


def test_a_stream_that_stops_fails_a_budget_after_its_last_chunk() -> None:
    ended, ctx, took = _run(3, 0.02, done=False, budget=0.1)
    assert not ended
    # The budget runs once after the last chunk (at 0.06 s), not once per chunk; the
    # waits poll every 5 ms, so the end is seen within one poll of 0.16 s.
    assert 0.16 <= took <= 0.16 + 0.005 + TICK
    assert ctx.waits == [("s1", 0.0)]  # the stall already waited out the budget


def test_a_stream_with_no_chunk_gets_the_whole_last_wait() -> None:
    ended, ctx, _ = _run(0, 0.0, done=False, budget=0.05)
    assert not ended
    assert ctx.waits == [("s1", 0.05)]  # what the hung-adapter rule reads
