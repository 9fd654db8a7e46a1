"""The reference client's retry loop over real sockets: the matrix, Retry-After, backoff,
request bodies and idempotency."""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import httpx
import pytest
from conftest import EXACT, OnVirtualLoop
from test_client_support import (
    SLACK,
    StateLog,
    drain,
    drain_on,
    make_client,
    payloads,
    policy,
)

from conformance.reference import (
    BackoffConfig,
    ClientPolicy,
    GaveUp,
    NonRetryableStatus,
    NotIdempotent,
    State,
)
from fake_servers import FakeServer, Respond, Stream

NEVER = (400, 401, 403, 404, 422)
RETRIED = (429, 500, 502, 503, 504)
METHODS = ("GET", "POST")


def _options(method: str) -> dict[str, Any]:
    # POST is not idempotent by default; the seed's fetch client re-sends its body on 5xx.
    return {} if method == "GET" else {"json": {"prompt": "hi"}, "idempotent": True}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("status", NEVER)
@pytest.mark.asyncio
async def test_never_retried_status_fails_after_one_attempt(
    fake_server: FakeServer, method: str, status: int
) -> None:
    """A 4xx from the matrix's "never" list raises NonRetryableStatus after one attempt."""
    fake_server.script("/s", Respond(status), Stream(events=3))
    log = StateLog()
    async with make_client(on_state=log) as client:
        events, error = await drain(
            client.stream(fake_server.url + "/s", method=method, **_options(method))
        )
    assert events == []
    assert isinstance(error, NonRetryableStatus)
    assert error.status == status
    assert str(status) in error.body  # the server's JSON error body is kept
    assert len(fake_server.ledger.attempts("/s")) == 1
    assert log.states[-1] is State.FAILED


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("status", RETRIED)
@pytest.mark.asyncio
async def test_retried_status_succeeds_on_the_next_attempt(
    fake_server: FakeServer, method: str, status: int
) -> None:
    """429 and 5xx are retried; the second attempt's stream is delivered whole."""
    fake_server.script("/s", Respond(status), Stream(events=3))
    async with make_client() as client:
        events, error = await drain(
            client.stream(fake_server.url + "/s", method=method, **_options(method))
        )
    assert error is None
    attempts = fake_server.ledger.wait_finished(2.0, "/s")
    assert [a.status for a in attempts] == [status, 200]
    assert payloads(events) == [e.data for e in attempts[1].data_events]


@pytest.mark.asyncio
async def test_max_attempts_gives_up_with_the_last_failure(fake_server: FakeServer) -> None:
    """With max_attempts=3 and a server that keeps failing, GaveUp after exactly 3 attempts."""
    fake_server.script("/s", Respond(503))
    async with make_client(policy(max_attempts=3)) as client:
        _, error = await drain(client.stream(fake_server.url + "/s"))
    assert isinstance(error, GaveUp)
    assert error.attempts == 3
    assert (error.last.kind, error.last.status) == ("status", 503)
    assert len(fake_server.ledger.attempts("/s")) == 3


# -- delays, in virtual time: the server sees each retry exactly when the client sent it --
def _gaps(virtual: OnVirtualLoop, pol: ClientPolicy) -> list[float]:
    """The gaps between the arrivals of a GET's attempts, played by a client of ``pol``."""
    _, error = drain_on(virtual, pol)
    assert error is None
    server = virtual.server
    arrived = [a.arrived_at for a in server.ledger.attempts("/s")]
    return [after - before for before, after in itertools.pairwise(arrived)]


def test_backoff_gaps_respect_the_policy_envelope(virtual: OnVirtualLoop) -> None:
    """The shell sleeps the core's backoff: gaps grow 50, 100, 200 ms (+0-50 %), and the
    server sees each one exactly (in real time a loaded worker once added 0.2 s)."""
    backoff = BackoffConfig(base=0.05, caps=((1, 1.0),))
    virtual.server.script("/s", Respond(500), Respond(500), Respond(500), Stream(events=1))
    gaps = _gaps(virtual, policy(backoff=backoff))
    assert len(gaps) == 3
    for retry, gap in enumerate(gaps, start=1):
        low, high = backoff.envelope(retry)
        assert low - EXACT <= gap <= high + EXACT, (retry, gap)


@pytest.mark.parametrize(
    ("headers", "hint"),
    [
        ((("retry-after", "0.3"),), 0.3),  # seconds, as a decimal
        ((("retry-after", "1"),), 0.6),  # whole seconds, clamped to the scaled 60 s cap
        ((("retry-after-ms", "250"),), 0.25),
        ((("retry-after-ms", "250"), ("retry-after", "1")), 0.25),  # -ms wins
    ],
    ids=["seconds-float", "seconds-over-cap", "ms", "ms-first"],
)
def test_retry_after_sets_the_delay(
    virtual: OnVirtualLoop, headers: tuple[tuple[str, str], ...], hint: float
) -> None:
    """The next attempt comes after the server's Retry-After (clamped to the cap), no
    sooner and no later (in real time beside 2 burners a 0.6 s wait once took 1.2 s)."""
    virtual.server.script("/s", Respond(503, headers=headers), Stream(events=1))
    (gap,) = _gaps(virtual, policy())
    assert gap == pytest.approx(hint, abs=EXACT)


@pytest.mark.asyncio
async def test_retry_after_http_date(fake_server: FakeServer) -> None:
    """An HTTP-date Retry-After (whole seconds, rounded up by the server) is waited out."""
    fake_server.script("/s", Respond(503, retry_after_date=0.2), Stream(events=1))
    async with make_client(policy(retry_after_cap=3.0)) as client:
        _, error = await drain(client.stream(fake_server.url + "/s"))
    assert error is None
    first, second = fake_server.ledger.attempts("/s")
    assert 0.2 <= second.arrived_at - first.arrived_at <= 1.2 + SLACK


@pytest.mark.parametrize("value", ["soon", "-5", "1e3"])
def test_unusable_retry_after_falls_back_to_backoff(virtual: OnVirtualLoop, value: str) -> None:
    """Garbage or negative Retry-After is ignored: the (short) backoff applies."""
    virtual.server.script("/s", Respond(503, headers=(("retry-after", value),)), Stream(events=1))
    (gap,) = _gaps(virtual, policy())
    low, high = policy().backoff.envelope(1)
    assert low - EXACT <= gap <= high + EXACT


@pytest.mark.asyncio
async def test_json_body_is_byte_identical_on_every_attempt(fake_server: FakeServer) -> None:
    """Each retry of an idempotent POST sends exactly the same body."""
    fake_server.script("/s", Respond(503), Respond(500), Stream(events=2))
    body = {"prompt": "make the headline bigger", "n": 1}
    async with make_client() as client:
        stream = client.stream(fake_server.url + "/s", method="POST", json=body, idempotent=True)
        _, error = await drain(stream)
    assert error is None
    attempts = fake_server.ledger.attempts("/s")
    sent = httpx.Request("POST", fake_server.url, json=body).read()
    assert len(attempts) == 3
    assert {a.body_sha256 for a in attempts} == {hashlib.sha256(sent).hexdigest()}


@pytest.mark.asyncio
async def test_multipart_with_an_image_is_byte_identical_on_every_attempt(
    fake_server: FakeServer,
) -> None:
    """A multipart POST with a 1 MB image: one random boundary, the same bytes each time."""
    fake_server.script("/s", Respond(503), Respond(502), Stream(events=2))
    image = bytes(range(256)) * 4096  # 1 MiB
    async with make_client() as client:
        stream = client.stream(
            fake_server.url + "/s",
            method="POST",
            data={"prompt": "add a testimonial section"},
            files={"image": ("page.png", image, "image/png")},
            idempotent=True,
        )
        events, error = await drain(stream)
    assert error is None
    assert len(events) == 2
    attempts = fake_server.ledger.attempts("/s")
    assert [a.status for a in attempts] == [503, 502, 200]
    assert len({a.body_sha256 for a in attempts}) == 1
    assert attempts[0].body_size > len(image)


@pytest.mark.asyncio
async def test_post_is_not_idempotent_by_default(fake_server: FakeServer) -> None:
    """A plain POST that reached the server is never re-sent, even on a 503."""
    fake_server.script("/s", Respond(503), Stream(events=2))
    async with make_client() as client:
        stream = client.stream(fake_server.url + "/s", method="POST", json={"prompt": "x"})
        assert not stream.idempotent
        _, error = await drain(stream)
    assert isinstance(error, NotIdempotent)
    assert error.last.status == 503
    assert len(fake_server.ledger.attempts("/s")) == 1


@pytest.mark.asyncio
async def test_get_sends_event_stream_headers(fake_server: FakeServer) -> None:
    """Requests ask for text/event-stream, and the caller's headers are kept."""
    fake_server.script("/s", Stream(events=1))
    async with make_client() as client:
        stream = client.stream(fake_server.url + "/s", headers={"Authorization": "Bearer t"})
        _, error = await drain(stream)
    assert error is None
    (attempt,) = fake_server.ledger.attempts("/s")
    assert attempt.header("accept") == "text/event-stream"
    assert attempt.authorization
    assert attempt.last_event_id is None
