"""The reference client's shell without a server: defaults, the public façade, error
values, fail-fast on an open breaker, and the blocking façade."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from test_client_support import StateLog, make_client, payloads, policy

import conformance.reference as reference
from conformance.reference import (
    BackoffConfig,
    CircuitOpen,
    Failure,
    GaveUp,
    NonRetryableStatus,
    NotIdempotent,
    Offline,
    SSEEvent,
    Stalled,
    State,
    StateChange,
    StreamError,
    SyncStreamingClient,
    Truncated,
    default_terminal,
)
from conformance.reference._client import _Attempt, _drop_replays
from conformance.reference._watch import StallWatch
from fake_servers import FakeServer, Respond, Stream, now

CLOSED_PORT_URL = "http://127.0.0.1:9/s"  # discard port: nothing listens there


@pytest.mark.parametrize(
    ("event", "terminal"),
    [
        (SSEEvent(data="[DONE]"), True),
        (SSEEvent(event="done", data="{}"), True),
        (SSEEvent(event="message_stop", data="{}"), True),
        (SSEEvent(event="response.completed", data="{}"), True),
        (SSEEvent(data='{"choices": []}'), False),
        (SSEEvent(event="ping", data="{}"), False),
        (SSEEvent(data="[DONE] "), False),
    ],
)
def test_default_terminal(event: SSEEvent, terminal: bool) -> None:
    """The common LLM end markers end a stream; anything else is data."""
    assert default_terminal(event) is terminal


def test_idempotent_defaults() -> None:
    """GET is idempotent by default, POST is not unless the caller says so."""
    client = make_client()
    assert client.stream("http://x/s").idempotent
    assert client.stream("http://x/s", method="get").idempotent
    assert not client.stream("http://x/s", method="POST").idempotent
    assert client.stream("http://x/s", method="POST", idempotent=True).idempotent
    assert not client.stream("http://x/s", idempotent=False).idempotent


def test_errors_carry_their_details() -> None:
    """Every error is a StreamError with the fields a caller needs."""
    failure = Failure("status", 503)
    errors: list[StreamError] = [
        NonRetryableStatus(401, '{"error": "expired"}'),
        GaveUp(3, failure),
        CircuitOpen(12.5),
        Stalled(committed=True),
        Truncated(clean=False),
        Offline(),
        NotIdempotent(failure),
    ]
    assert all(isinstance(e, StreamError) and str(e) for e in errors)
    status, gave_up, circuit = errors[:3]
    assert isinstance(status, NonRetryableStatus)
    assert (status.status, status.body) == (401, '{"error": "expired"}')
    assert isinstance(gave_up, GaveUp)
    assert (gave_up.attempts, gave_up.last) == (3, failure)
    assert isinstance(circuit, CircuitOpen)
    assert circuit.until == 12.5


def test_public_facade_exports_resolve() -> None:
    """Every name in __all__ resolves; unknown names raise AttributeError."""
    for name in reference.__all__:
        assert getattr(reference, name) is not None
    with pytest.raises(AttributeError):
        _ = reference.NoSuchName  # type: ignore[attr-defined]


def _attempt(floor: int | None) -> _Attempt:
    att = _Attempt(probe=False, watch=StallWatch(1.0, 0.1, 0.0))
    att.replay_floor = floor
    return att


def test_replays_are_dropped_up_to_the_resume_point() -> None:
    """After resuming from id 3, ids 1..3 are dropped; the first newer id ends the filter."""
    att = _attempt(3)
    events = [SSEEvent(data=str(i), id=str(i)) for i in (1, 2, 3, 4)]
    assert payloads(_drop_replays(events, att)) == ["4"]
    assert att.replay_floor is None
    later = [SSEEvent(data="again", id="2")]  # past the replay, nothing is filtered
    assert _drop_replays(later, att) == later


def test_opaque_ids_are_trusted() -> None:
    """Non-numeric ids cannot be ordered: nothing is dropped."""
    events = [SSEEvent(data="a", id="abc"), SSEEvent(data="b", id="")]
    assert _drop_replays(events, _attempt(3)) == events


@pytest.mark.asyncio
async def test_new_call_fails_fast_on_an_open_breaker() -> None:
    """With the shared breaker open, a new stream raises CircuitOpen without connecting."""
    async with make_client() as client:
        for _ in range(client.policy.breaker.threshold):
            client.breaker.record_failure(now())
        stream = client.stream(CLOSED_PORT_URL)
        with pytest.raises(CircuitOpen):
            await anext(stream)
        assert stream.state is State.FAILED
        assert stream.attempts == 0


@pytest.mark.asyncio
async def test_aclose_before_iterating_sends_nothing() -> None:
    """A stream closed before its first iteration never starts."""
    async with make_client() as client:
        stream = client.stream(CLOSED_PORT_URL)
        await stream.aclose()
        assert [ev async for ev in stream] == []
        assert stream.attempts == 0


@pytest.mark.asyncio
async def test_client_aclose_closes_open_streams() -> None:
    """Closing the client stops a stream that keeps retrying against a dead port."""
    client = make_client(policy(connect_timeout=0.5))
    started = asyncio.Event()
    stream = client.stream(CLOSED_PORT_URL, on_state=lambda c: started.set())
    task = asyncio.create_task(anext(stream))
    await asyncio.wait_for(started.wait(), 5.0)
    await client.aclose()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(task, 1.0)


def test_sync_client_streams_and_retries(fake_server: FakeServer) -> None:
    """SyncStreamingClient runs the same loop on its own thread, with the same results."""
    fake_server.script("/s", Respond(503), Stream(events=4))
    changes = []
    with SyncStreamingClient(policy(), on_state=changes.append) as client:
        events = list(client.stream(fake_server.url + "/s"))
        client.offline()
        assert client.client.is_offline
        client.online()
        for _ in client.stream(fake_server.url + "/s"):
            break  # closing the generator closes the stream
    assert payloads(events) == [e.data for e in fake_server.ledger.attempts("/s")[1].data_events]
    assert State.RETRYING in [c.state for c in changes]
    fake_server.ledger.wait_finished(2.0, "/s")


@pytest.mark.asyncio
async def test_unsupported_url_scheme_is_raised_not_retried() -> None:
    """A URL httpx cannot send to is a caller error: raised at once, never retried."""
    async with make_client() as client:
        stream = client.stream("ftp://127.0.0.1/s")
        with pytest.raises(httpx.UnsupportedProtocol):
            await anext(stream)
        assert stream.attempts == 1


class VirtualTime:
    """A clock and a sleep for the client: sleeping moves the clock, not the world."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_waits_go_through_the_sleep_it_is_given_on_its_clock() -> None:
    """Each backoff is awaited with the client's sleep (10 s and 20 s pass at once), and
    every state change is stamped with the client's clock."""
    time = VirtualTime()
    slow = policy(max_attempts=3, backoff=BackoffConfig(base=10.0, caps=((1, 60.0),)))
    changes: list[StateChange] = []
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with make_client(slow, clock=time.clock, sleep=time.sleep) as client:
        stream = client.stream(CLOSED_PORT_URL, on_state=changes.append)
        with pytest.raises(GaveUp):
            await anext(stream)
    assert loop.time() - started < 5.0  # 30 s of backoff, none of it really waited
    retrying = [c for c in changes if c.state is State.RETRYING]
    assert [c.delay for c in retrying] == time.slept
    assert 10.0 <= time.slept[0] <= 15.0
    assert 20.0 <= time.slept[1] <= 30.0
    assert [c.at for c in retrying] == [1000.0, 1000.0 + time.slept[0]]


@pytest.mark.asyncio
async def test_the_breaker_runs_on_the_clock_it_is_given() -> None:
    """An open breaker's cooldown is measured on the client's clock."""
    time = VirtualTime()
    async with make_client(policy(), clock=time.clock, sleep=time.sleep) as client:
        for _ in range(client.policy.breaker.threshold):
            client.breaker.record_failure(time.clock())
        with pytest.raises(CircuitOpen) as raised:
            await anext(client.stream(CLOSED_PORT_URL))
    assert raised.value.until == 1000.0 + client.policy.breaker.cooldown


@pytest.mark.asyncio
async def test_offline_and_online_cut_short_a_sleep_that_never_ends() -> None:
    """A stream pausing in the client's sleep is woken by offline() and online()."""
    never = asyncio.Event()

    async def sleep(seconds: float) -> None:
        await never.wait()

    log = StateLog()
    async with make_client(policy(connect_timeout=0.5), sleep=sleep) as client:
        stream = client.stream(CLOSED_PORT_URL, on_state=log)
        task = asyncio.create_task(anext(stream))
        await log.reached(State.RETRYING)
        client.offline()
        await log.reached(State.OFFLINE)
        client.online()
        await log.reached(State.RETRYING, count=2)  # the next attempt failed in its turn
        assert stream.attempts == 2
        task.cancel()


@pytest.mark.asyncio
async def test_the_kits_adapter_reads_no_proxy_settings_from_the_environment() -> None:
    """Its traffic stays on loopback, and reading os.environ while pytest writes it from
    the main thread raised KeyError in a lane; a user's client keeps httpx's default."""
    from conformance.reference import StreamingClient

    users = StreamingClient()
    kits = StreamingClient(trust_env=False)
    try:
        assert users._http.trust_env
        assert not kits._http.trust_env
    finally:
        await users.aclose()
        await kits.aclose()
