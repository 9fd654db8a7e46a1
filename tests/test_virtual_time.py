"""Virtual time: the server, the proxy and a client on one loop whose clock jumps.

Real sockets on loopback, real Hypercorn, real httpx: only the clock is virtual. Every
expected time here is exact (to the clock's microsecond), whatever the machine's load.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from conftest import run_on

from fake_servers import FakeServer, FaultProxy, now, respond, stream
from fake_servers._virtual import CASE_SPACING, VirtualLoop, kit_calls, virtual_loop

EXACT = 1e-9  # the clock counts whole microseconds; a float sum keeps this much


@pytest.fixture
def loop() -> Iterator[VirtualLoop]:
    vloop = virtual_loop()
    thread = threading.Thread(target=vloop.run_forever, daemon=True)
    thread.start()
    yield vloop
    vloop.call_soon_threadsafe(vloop.stop)
    thread.join(5)
    vloop.close()


on = run_on


def test_a_clients_waits_are_measured_exactly_by_the_server(loop: VirtualLoop) -> None:
    with FakeServer().start(loop=loop) as server:
        server.script("/s", respond(503), respond(503), stream(events=3))

        async def client() -> list[int]:
            statuses = []
            async with httpx.AsyncClient() as http:
                for delay in (0.43, 2.5, 0.0):
                    statuses.append((await http.get(server.url + "/s")).status_code)
                    await asyncio.sleep(delay)
            return statuses

        assert on(loop, client) == [503, 503, 200]
        arrivals = [a.arrived_at for a in server.ledger.attempts()]
    assert arrivals[1] - arrivals[0] == pytest.approx(0.43, abs=EXACT)
    assert arrivals[2] - arrivals[1] == pytest.approx(2.5, abs=EXACT)


def test_an_hour_of_waiting_passes_without_waiting_it(loop: VirtualLoop) -> None:
    async def wait_an_hour() -> float:
        start = now()
        await asyncio.sleep(3600)
        return now() - start

    # Waited in real time it would pass on()'s 30 s limit: the hour is the clock's alone.
    assert on(loop, wait_an_hour) == pytest.approx(3600, abs=EXACT)


def test_each_case_starts_on_a_whole_spacing_of_the_clock(loop: VirtualLoop) -> None:
    async def case() -> float:
        loop.restart_clock()
        start = now()
        await asyncio.sleep(1.5)
        return start

    first, second = on(loop, case), on(loop, case)
    assert (first % CASE_SPACING, second - first) == (0, CASE_SPACING)


def test_now_reads_the_monotonic_clock_off_a_virtual_loop() -> None:
    before = time.monotonic()
    assert before <= now() <= time.monotonic()


def test_the_proxy_on_the_shared_loop_acts_at_once(loop: VirtualLoop) -> None:
    server = FakeServer().start(loop=loop)
    proxy = FaultProxy(server.url, ledger=server.ledger).start(loop=loop)
    try:
        server.script("/s", stream(events=2))

        async def client() -> tuple[int, str, int]:
            # No keep-alive: each request opens a connection of its own.
            limits = httpx.Limits(max_keepalive_connections=0)
            async with httpx.AsyncClient(limits=limits) as http:
                first = (await http.get(proxy.url + "/s")).status_code
                proxy.offline()  # from the loop itself: in effect when it returns
                try:
                    await http.get(proxy.url + "/s")
                    refused = "no"
                except httpx.ConnectError:
                    refused = "refused"
                await asyncio.sleep(1.5)
                proxy.online()
                last = (await http.get(proxy.url + "/s")).status_code
            return first, refused, last

        assert on(loop, client) == (200, "refused", 200)
        attempts = server.ledger.attempts()
        assert len(attempts) == 2
        assert attempts[1].arrived_at - attempts[0].arrived_at == pytest.approx(1.5, abs=EXACT)
    finally:
        proxy.stop()
        server.stop()


def test_the_loop_runs_on_after_its_proxy_and_server_stop(loop: VirtualLoop) -> None:
    server = FakeServer().start(loop=loop)
    FaultProxy(server.url, ledger=server.ledger).start(loop=loop).stop()
    server.stop()
    assert on(loop, lambda: asyncio.sleep(1, result="alive")) == "alive"


# -- the guard ---------------------------------------------------------------------
def escapes_of(loop: VirtualLoop, body: Callable[[], Awaitable[Any]]) -> list[str]:
    async def watched() -> list[str]:
        with loop.watching():
            await body()
        return [str(e) for e in loop.guard.escapes]

    return on(loop, lambda: watched())  # type: ignore[no-any-return]


def test_the_guard_sees_a_blocking_sleep(loop: VirtualLoop) -> None:
    async def blocks() -> None:
        time.sleep(0.01)  # noqa: ASYNC251 - the mistake the guard exists to see

    (escape,) = escapes_of(loop, blocks)
    assert escape.startswith("time.sleep(0.01) blocked the loop")
    assert "test_virtual_time.py" in escape  # it names where
    assert time.sleep.__module__ == "time"  # and puts the real sleep back


def test_the_guard_sees_a_sleep_in_a_thread(loop: VirtualLoop) -> None:
    async def in_a_thread() -> None:
        await asyncio.to_thread(time.sleep, 0.01)

    escapes = escapes_of(loop, in_a_thread)
    assert any("executor" in e for e in escapes), escapes


def test_the_guard_sees_a_thread_waking_the_loop(loop: VirtualLoop) -> None:
    async def woken() -> None:
        done = asyncio.get_running_loop().create_future()
        threading.Thread(
            target=lambda: loop.call_soon_threadsafe(done.set_result, None), daemon=True
        ).start()
        await done

    escapes = escapes_of(loop, woken)
    assert any("a thread outside the loop" in e for e in escapes), escapes


def test_the_guard_is_quiet_for_work_on_the_loop(loop: VirtualLoop) -> None:
    with FakeServer().start(loop=loop) as server:
        server.script("/s", stream(events=3))

        async def on_the_loop() -> None:
            async with httpx.AsyncClient() as http:
                await http.get(server.url + "/s")
            await asyncio.sleep(2)

        assert escapes_of(loop, on_the_loop) == []


def test_work_in_a_thread_that_does_not_wait_is_no_escape(loop: VirtualLoop) -> None:
    """An SDK that reads its platform in a thread once (openai's ``get_platform``): the
    clock stands still until it is done, and nothing is noted."""

    async def reads_in_a_thread() -> float:
        start = now()
        await asyncio.to_thread(sum, range(100_000))
        return now() - start

    async def watched() -> tuple[float, list[str]]:
        with loop.watching():
            took = await reads_in_a_thread()
        return took, [str(e) for e in loop.guard.escapes]

    assert on(loop, watched) == (0.0, [])


def test_a_deadline_a_rounding_away_is_reached(loop: VirtualLoop) -> None:
    """A wait for its own deadline set one float's rounding ahead of now: asyncio would run
    its timer early (within the clock's resolution) on a clock that stands still, so it
    never passed (SC-OFFLINE-5 in CI, one seed in twenty); the loop makes it wait a tick."""

    async def wait_for_a_deadline() -> int:
        loop.restart_clock()  # at 10,000 s and more a float's step is some 2e-12 s
        deadline = math.nextafter(now(), math.inf)
        turns = 0
        while now() < deadline and turns < 1000:
            turns += 1
            await asyncio.sleep(deadline - now())
        return turns

    assert on(loop, wait_for_a_deadline) == 1


def test_a_wake_up_from_the_kits_own_thread_is_no_escape(loop: VirtualLoop) -> None:
    """The collector runs finalizers in whatever thread allocates: one in the kit's main
    thread that wakes the loop (a transport closing) is not the client waiting (the
    openai-async column of CI's matrix got 26 ERRORs from it)."""
    ready, box = threading.Event(), {}

    async def watched() -> list[str]:
        with loop.watching():
            box["woken"] = asyncio.get_running_loop().create_future()
            ready.set()
            await box["woken"]
        return [str(e) for e in loop.guard.escapes]

    with kit_calls():
        running = asyncio.run_coroutine_threadsafe(watched(), loop)
    assert ready.wait(5)
    loop.call_soon_threadsafe(box["woken"].set_result, None)  # not inside kit_calls
    assert running.result(5) == []
