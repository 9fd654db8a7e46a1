"""The reference client against a failing backend and a failing network, over real
sockets: the shared circuit breaker, offline/online, resets, and the sync façade."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from conftest import OnVirtualLoop
from test_client_support import (
    StateLog,
    drain,
    make_client,
    policy,
    wait_ledger,
)

from conformance.reference import (
    BackoffConfig,
    BreakerConfig,
    BreakerState,
    CircuitOpen,
    ClientPolicy,
    NotIdempotent,
    Offline,
    SSEEvent,
    State,
)
from fake_servers import FakeServer, Fault, FaultProxy, Gap, Respond, Stream, now
from fake_servers._virtual import TICK

COOLDOWN = 0.3
BREAKER = policy(breaker=BreakerConfig(threshold=5, cooldown=COOLDOWN))


@pytest.fixture
def proxy(fake_server: FakeServer) -> Iterator[FaultProxy]:
    """A fault proxy in front of the fake server, with its own connection ledger."""
    with FaultProxy(fake_server.url).start() as running:
        yield running


# -- the circuit breaker (in virtual time: its timings are exact on any machine) ------
def test_breaker_opens_fails_new_calls_fast_and_closes_after_a_probe(
    virtual: OnVirtualLoop,
) -> None:
    """5 failures open the breaker: the retrying call waits out the cooldown, a new call
    fails fast with CircuitOpen, and the successful probe closes the breaker again."""
    server = virtual.server
    server.script("/s", *[Respond(503)] * 5, Stream(events=2))

    async def body() -> None:
        log = StateLog()
        async with make_client(BREAKER) as client:
            waiting = asyncio.create_task(drain(client.stream(server.url + "/s", on_state=log)))
            await log.reached(State.BREAKER_OPEN)
            assert client.breaker.state(now()) is BreakerState.OPEN

            _, error = await drain(client.stream(server.url + "/s"))
            assert isinstance(error, CircuitOpen)
            assert error.until > now()
            assert len(server.ledger.attempts("/s")) == 5  # the new call sent nothing

            events, error = await waiting
            assert error is None
            assert len(events) == 2
            assert client.breaker.state(now()) is BreakerState.CLOSED
            events, error = await drain(client.stream(server.url + "/s"))
            assert error is None

    virtual.run(body)
    attempts = server.ledger.attempts("/s")
    assert len(attempts) == 7
    assert attempts[5].arrived_at - attempts[4].arrived_at >= COOLDOWN - TICK  # the probe waited


def test_half_open_admits_exactly_one_probe_among_ten_waiting_streams(
    virtual: OnVirtualLoop,
) -> None:
    """Ten streams wait on an open breaker; exactly one probes, the rest follow its success."""
    server = virtual.server
    slow_fail = Respond(503, delay=0.2)  # all ten first attempts are in flight together
    probe = Stream(events=3, delay=0.1)  # slow enough for the others to ask while it runs
    server.script("/s", *[slow_fail] * 10, probe)
    backoff = BackoffConfig(base=0.15, caps=((1, 0.3),))  # retries come after the trip
    logs = [StateLog() for _ in range(10)]

    async def body() -> list[tuple[list[SSEEvent], BaseException | None]]:
        async with make_client(policy(breaker=BREAKER.breaker, backoff=backoff)) as client:
            return await asyncio.gather(
                *(drain(client.stream(server.url + "/s", on_state=log)) for log in logs)
            )

    results = virtual.run(body)
    attempts = server.ledger.attempts("/s")
    first_round, later = attempts[:10], attempts[10:]
    assert max(a.arrived_at for a in first_round) < min(a.ended_at or 0 for a in first_round), (
        "precondition: the ten first attempts must overlap"
    )
    assert [len(events) for events, _ in results] == [3] * 10
    assert all(error is None for _, error in results)
    # In virtual time every backoff (at most 0.3 s) ends inside the cooldown: all ten wait.
    assert sum(State.BREAKER_OPEN in log.states for log in logs) == 10
    assert len(later) == 10  # one probe, then each other stream once: no flood
    probe_attempt = later[0]
    assert probe_attempt.first_byte_at is not None
    # The probe's first byte closes the breaker and the rest go in that same instant.
    assert all(a.arrived_at >= probe_attempt.first_byte_at for a in later[1:])
    assert all(a.seq > probe_attempt.seq for a in later[1:])
    assert probe_attempt.arrived_at - max(a.arrived_at for a in first_round) >= COOLDOWN - TICK


def test_failed_probe_reopens_the_breaker(virtual: OnVirtualLoop) -> None:
    """A probe that fails opens the breaker for another full cooldown."""
    server = virtual.server
    server.script("/s", *[Respond(503)] * 6, Stream(events=1))

    async def body() -> BaseException | None:
        async with make_client(BREAKER) as client:
            _, error = await drain(client.stream(server.url + "/s"))
        return error

    assert virtual.run(body) is None
    arrived = [a.arrived_at for a in server.ledger.attempts("/s")]
    assert len(arrived) == 7
    # Exactly the cooldown, to the clock's tick: the 503s take no time in virtual time.
    assert arrived[5] - arrived[4] >= COOLDOWN - TICK
    assert arrived[6] - arrived[5] >= COOLDOWN - TICK


@pytest.mark.asyncio
async def test_mid_stream_failures_do_not_count_for_the_breaker(fake_server: FakeServer) -> None:
    """Three resumes after the commit with threshold 2: the breaker stays closed."""
    steps = [Stream(events=n, ids=True, end="abort") for n in (2, 4, 6)]
    fake_server.script("/s", *steps, Stream(events=8, ids=True))
    pol = policy(breaker=BreakerConfig(threshold=2, cooldown=5.0))
    log = StateLog()
    async with make_client(pol, on_state=log) as client:
        events, error = await drain(client.stream(fake_server.url + "/s"))
        assert client.breaker.state(now()) is BreakerState.CLOSED
    assert error is None
    assert [e.id for e in events] == [str(i) for i in range(1, 9)]
    assert State.BREAKER_OPEN not in log.states
    assert len(fake_server.ledger.attempts("/s")) == 4


# -- offline and online, in virtual time: "at once" is the same instant ------------------
def test_no_attempts_while_offline_and_connect_at_once_on_online(virtual: OnVirtualLoop) -> None:
    """offline(): the retrying stream waits without making a single attempt; online(): it
    goes at once (the pooled keep-alive connection may carry it, so count attempts)."""
    server = virtual.server
    server.script("/s", Respond(503), Stream(events=2))
    proxy = FaultProxy(server.url).start(loop=virtual.loop)
    log = StateLog()
    pol = policy(backoff=BackoffConfig(base=0.1, caps=((1, 0.1),)))

    async def body() -> tuple[list[SSEEvent], BaseException | None, float]:
        async with make_client(pol) as client:
            task = asyncio.create_task(drain(client.stream(proxy.url + "/s", on_state=log)))
            await log.reached(State.RETRYING)
            client.offline()
            await log.reached(State.OFFLINE)
            await asyncio.sleep(0.4)  # four backoffs: an online client would have retried
            assert len(server.ledger.attempts("/s")) == 1
            assert len(proxy.connections()) == 1
            back = now()
            client.online()
            events, error = await task
            return events, error, back

    try:
        events, error, back = virtual.run(body)
    finally:
        proxy.stop()
    assert error is None
    assert len(events) == 2
    attempts = server.ledger.attempts("/s")
    assert len(attempts) == 2
    assert attempts[1].arrived_at - back <= TICK  # no backoff after online()


def _online_after(virtual: OnVirtualLoop, pol: ClientPolicy, waiting: State) -> float:
    """Play a stream until ``waiting``, then online(): how long after it the next
    attempt reached the server."""
    server = virtual.server
    log = StateLog()

    async def body() -> float:
        async with make_client(pol) as client:
            task = asyncio.create_task(drain(client.stream(server.url + "/s", on_state=log)))
            await log.reached(waiting)
            if waiting is State.RETRYING:
                client.offline()
                await log.reached(State.OFFLINE)
            back = now()
            client.online()
            assert client.breaker.state(now()) is BreakerState.CLOSED
            _, error = await task
            assert error is None
            return back

    back = virtual.run(body)
    return server.ledger.attempts("/s")[-1].arrived_at - back


def test_online_skips_the_remaining_backoff(virtual: OnVirtualLoop) -> None:
    """online() after offline(): the stream connects at once, not after its 2 s backoff."""
    virtual.server.script("/s", Respond(503), Stream(events=1))
    pol = policy(backoff=BackoffConfig(base=2.0, caps=((1, 2.0),)))
    assert _online_after(virtual, pol, State.RETRYING) <= TICK
    assert len(virtual.server.ledger.attempts("/s")) == 2


def test_online_resets_an_open_breaker(virtual: OnVirtualLoop) -> None:
    """online() closes the breaker: a stream waiting out a 5 s cooldown goes at once."""
    virtual.server.script("/s", *[Respond(503)] * 5, Stream(events=1))
    pol = policy(breaker=BreakerConfig(cooldown=5.0))
    assert _online_after(virtual, pol, State.BREAKER_OPEN) <= TICK
    assert len(virtual.server.ledger.attempts("/s")) == 6


@pytest.mark.asyncio
async def test_offline_cuts_an_open_stream_which_resumes_on_online(
    fake_server: FakeServer, proxy: FaultProxy
) -> None:
    """offline() closes the open connection; online() resumes after the last id, exactly once."""
    fake_server.script("/s", Stream(events=30, ids=True, gap=Gap(seconds=0.01)))
    log = StateLog()
    async with make_client(on_state=log) as client:
        stream = client.stream(proxy.url + "/s")
        events = [await anext(stream), await anext(stream)]
        client.offline()
        await asyncio.to_thread(proxy.offline)
        await wait_ledger(
            proxy.ledger, lambda led: led.connections()[0].closed_by is not None, "cut"
        )
        await log.reached(State.OFFLINE, count=2)  # the client's, then the stream's
        await asyncio.to_thread(proxy.online)
        client.online()
        rest, error = await drain(stream)
    assert error is None
    events += rest
    assert [e.id for e in events] == [str(i) for i in range(1, 31)]
    second = fake_server.ledger.attempts("/s")[1]
    assert second.last_event_id is not None
    assert int(second.last_event_id) >= 2


@pytest.mark.asyncio
async def test_offline_surfaces_on_a_committed_stream_without_ids(
    fake_server: FakeServer, proxy: FaultProxy
) -> None:
    """A committed stream that cannot resume raises Offline when the network goes away."""
    fake_server.script("/s", Stream(events=50, gap=Gap(seconds=0.02)))
    async with make_client() as client:
        stream = client.stream(proxy.url + "/s")
        await anext(stream)
        client.offline()
        _, error = await drain(stream)
    assert isinstance(error, Offline)
    await wait_ledger(proxy.ledger, lambda led: led.connections()[0].closed_by is not None, "close")


@pytest.mark.asyncio
async def test_new_stream_waits_while_offline(fake_server: FakeServer, proxy: FaultProxy) -> None:
    """A stream started while offline makes no attempt until online()."""
    fake_server.script("/s", Stream(events=1))
    log = StateLog()
    async with make_client() as client:
        client.offline()
        task = asyncio.create_task(drain(client.stream(proxy.url + "/s", on_state=log)))
        await log.reached(State.OFFLINE)
        assert proxy.connections() == ()
        client.online()
        events, error = await task
    assert error is None
    assert len(events) == 1


# -- network faults and idempotency ----------------------------------------------
@pytest.mark.asyncio
async def test_non_idempotent_post_is_not_resent_after_a_reset(
    fake_server: FakeServer, proxy: FaultProxy
) -> None:
    """A reset after the request bytes left: a non-idempotent POST raises NotIdempotent."""
    fake_server.script("/s", Stream(events=2))
    proxy.next_connections(Fault.reset(0))
    async with make_client() as client:
        stream = client.stream(proxy.url + "/s", method="POST", json={"prompt": "charge me"})
        _, error = await drain(stream)
    assert isinstance(error, NotIdempotent)
    assert error.last.kind == "reset"
    assert len(proxy.connections()) == 1
    assert len(fake_server.ledger.attempts("/s")) <= 1


@pytest.mark.asyncio
async def test_idempotent_get_is_retried_after_a_reset(
    fake_server: FakeServer, proxy: FaultProxy
) -> None:
    """The same reset on a GET is retried on a new connection."""
    fake_server.script("/s", Stream(events=2))
    proxy.next_connections(Fault.reset(0))
    async with make_client() as client:
        events, error = await drain(client.stream(proxy.url + "/s"))
    assert error is None
    assert len(events) == 2
    assert len(proxy.connections()) == 2


@pytest.mark.asyncio
async def test_non_idempotent_post_is_retried_when_the_connect_failed(
    fake_server: FakeServer, proxy: FaultProxy
) -> None:
    """Refused connects never carried the body, so even a non-idempotent POST retries them."""
    fake_server.script("/s", Stream(events=2))
    await asyncio.to_thread(proxy.offline)
    log = StateLog()
    async with make_client() as client:
        stream = client.stream(proxy.url + "/s", method="POST", json={"p": 1}, on_state=log)
        task = asyncio.create_task(drain(stream))
        await log.reached(State.RETRYING, count=3)
        await asyncio.to_thread(proxy.online)
        events, error = await task
    assert error is None
    assert len(events) == 2
    assert len(fake_server.ledger.attempts("/s")) == 1


def test_blackholed_request_is_abandoned_by_the_stall_watch(virtual: OnVirtualLoop) -> None:
    """A connection that swallows the request and never answers is a stall before the
    commit: abandoned after the stall timeout and retried on a new connection.

    In virtual time, so the gap is exact: in real time a loaded proxy loop once stamped
    the first connection 0.28 s late, and the gap it measured said nothing of the client."""
    server = virtual.server
    server.script("/s", Stream(events=2))
    log = StateLog()
    pol = policy(stall_timeout=0.3, stall_check_interval=0.05)

    proxy = FaultProxy(server.url, ledger=server.ledger).start(loop=virtual.loop)
    proxy.next_connections(Fault.blackhole())

    async def body() -> tuple[list[SSEEvent], BaseException | None]:
        async with make_client(pol, on_state=log) as client:
            return await drain(client.stream(proxy.url + "/s", on_state=log))

    try:
        events, error = virtual.run(body)
    finally:
        proxy.stop()
    assert error is None
    assert len(events) == 2
    assert State.STALLED in log.states
    first, second = proxy.connections()
    assert first.fault == "blackhole"
    # The watch looks every 0.05 s: the silence is abandoned within one look of 0.3 s,
    # and the retry goes after the delay the client drew, to the microsecond.
    assert first.closed_at is not None
    assert 0.3 <= first.closed_at - first.opened_at <= 0.35 + TICK
    retrying = next(c for c in log.changes if c.state is State.RETRYING)
    assert retrying.delay is not None
    assert second.opened_at - first.closed_at == pytest.approx(retrying.delay, abs=2 * TICK)


@pytest.mark.asyncio
async def test_connection_reset_mid_stream_with_ids_resumes(
    fake_server: FakeServer, proxy: FaultProxy
) -> None:
    """An RST after some bytes on a stream with ids: resumed, each event delivered once."""
    fake_server.script("/s", Stream(events=20, ids=True))
    proxy.next_connections(Fault.reset(after_bytes=1500))
    async with make_client() as client:
        events, error = await drain(client.stream(proxy.url + "/s"))
    assert error is None
    assert [e.id for e in events] == [str(i) for i in range(1, 21)]
    assert len(proxy.connections()) == 2
