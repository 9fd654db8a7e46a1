"""The reference client's request over real sockets: the EventSource headers, redirects
(Fetch's "follow" mode), an empty ``id:`` resetting Last-Event-ID, HTTP 204, and the
caller's Last-Event-ID, headers and raw body."""

from __future__ import annotations

import pytest
from conftest import EXACT, OnVirtualLoop
from test_client_support import DEADLINE, drain, make_client, payloads, policy

from conformance.reference import NonRetryableStatus, SSEEvent, SyncStreamingClient, Truncated
from conformance.reference._request import MAX_REDIRECTS
from fake_servers import Attempt, FakeServer, Respond, Step, Stream
from fake_servers._builders import raw

MOVED = "/v1/moved"
BODY = {"prompt": "hi", "stream": True}


def _moved(status: int, location: str | None = MOVED) -> Respond:
    headers = () if location is None else (("location", location),)
    return Respond(status=status, headers=headers)


def _event_stream(*events: str) -> Step:
    """Raw events, one write (so one read) each; the body ends cleanly without a terminal
    event, a truncation. One read each: a client must track the id event by event."""
    return raw(events, pause=0.01)


def _method_and_body(a: Attempt) -> tuple[str, int, str | None]:
    return a.method, a.body_size, a.header("content-type")


# -- the EventSource headers ------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_every_request_asks_for_no_cache(fake_server: FakeServer, method: str) -> None:
    """Cache mode "no-store" as Fetch sends it: Cache-Control and Pragma no-cache, and
    the Accept of an event stream."""
    fake_server.script("/s", Stream(events=2))
    body = BODY if method == "POST" else None
    async with make_client() as client:
        _, error = await drain(client.stream(fake_server.url + "/s", method=method, json=body))
    assert error is None
    (only,) = fake_server.ledger.attempts("/s")
    assert only.header("cache-control") == "no-cache"
    assert only.header("pragma") == "no-cache"
    assert only.header("accept") == "text/event-stream"
    assert only.last_event_id is None


# -- redirects --------------------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_get_follows_every_redirect(fake_server: FakeServer, status: int) -> None:
    fake_server.script(MOVED, Stream(events=3))
    fake_server.script("/s", _moved(status))
    async with make_client() as client:
        events, error = await drain(client.stream(fake_server.url + "/s"))
    assert error is None
    assert len(events) == 3
    first, second = fake_server.ledger.wait_finished(DEADLINE)
    assert (first.path, first.status, second.path, second.method) == ("/s", status, MOVED, "GET")


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [301, 302, 303])
async def test_a_post_becomes_a_get_without_its_body(fake_server: FakeServer, status: int) -> None:
    """Fetch: 301/302 after a POST, and 303, go on as a GET with no body or Content-Type."""
    fake_server.script(MOVED, Stream(events=3))
    fake_server.script("/s", _moved(status))
    async with make_client() as client:
        events, error = await drain(client.stream(fake_server.url + "/s", method="POST", json=BODY))
    assert error is None
    assert len(events) == 3
    first, second = fake_server.ledger.wait_finished(DEADLINE)
    assert first.method == "POST"
    assert first.body_size > 0
    assert _method_and_body(second) == ("GET", 0, None)
    assert second.header("content-length") is None


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [307, 308])
async def test_307_and_308_keep_the_method_and_the_very_same_body(
    fake_server: FakeServer, status: int
) -> None:
    """A multipart body (a random boundary) reaches the new URL byte for byte."""
    fake_server.script(MOVED, Stream(events=3))
    fake_server.script("/s", _moved(status))
    files = {"image": ("a.png", b"\x89PNG" * 100, "image/png")}
    async with make_client() as client:
        stream = client.stream(
            fake_server.url + "/s", method="POST", data={"prompt": "hi"}, files=files
        )
        _, error = await drain(stream)
    assert error is None
    first, second = fake_server.ledger.wait_finished(DEADLINE)
    assert (second.method, second.path) == ("POST", MOVED)
    assert (second.body_size, second.body_sha256) == (first.body_size, first.body_sha256)
    assert second.header("content-type") == first.header("content-type")


@pytest.mark.asyncio
@pytest.mark.parametrize("location", [None, ""])
async def test_a_redirect_without_a_location_is_the_answer(
    fake_server: FakeServer, location: str | None
) -> None:
    """No (or an empty) Location: nothing to follow, the 302 fails the stream, once."""
    fake_server.script("/s", _moved(302, location), Stream(events=3))
    async with make_client() as client:
        events, error = await drain(client.stream(fake_server.url + "/s"))
    assert isinstance(error, NonRetryableStatus)
    assert error.status == 302
    assert events == []
    assert len(fake_server.ledger.wait_finished(DEADLINE)) == 1


@pytest.mark.asyncio
async def test_a_bad_location_fails_without_a_retry(fake_server: FakeServer) -> None:
    """An unusable Location is Fetch's network error; retrying would meet it again."""
    fake_server.script("/s", _moved(307, "ftp://127.0.0.1/x"), Stream(events=3))
    async with make_client() as client:
        _, error = await drain(client.stream(fake_server.url + "/s"))
    assert isinstance(error, NonRetryableStatus)
    assert (error.status, "http(s)" in str(error)) == (307, True)
    assert len(fake_server.ledger.wait_finished(DEADLINE)) == 1


def test_a_slow_redirect_chain_is_not_silence(virtual: OnVirtualLoop) -> None:
    """Six redirects, each head 0.5 s in coming: 3 s in all against a 0.6 s stall
    timeout. Each head is bytes (idle rule "bytes"): the chain is followed, not stalled.
    In virtual time: in real time beside a second suite one head came over 0.45 s later
    than scripted, and the client took it for a stall."""
    server = virtual.server
    hops = ["/v1/a", "/v1/b", "/v1/c", "/v1/d", "/v1/e", "/v1/f"]
    for here, there in zip(hops, [*hops[1:], "/s"], strict=True):
        server.script(here, Respond(status=307, headers=(("location", there),), delay=0.5))
    server.script("/s", Stream(events=3))
    patient = policy(stall_timeout=0.6, stall_check_interval=0.05, idle_rule="bytes")

    async def body() -> tuple[list[SSEEvent], BaseException | None]:
        async with make_client(patient) as client:
            return await drain(client.stream(server.url + hops[0]))

    events, error = virtual.run(body)
    assert error is None
    assert len(events) == 3
    attempts = server.ledger.wait_finished(DEADLINE)
    assert [a.path for a in attempts] == [*hops, "/s"]
    assert attempts[-1].arrived_at - attempts[0].arrived_at >= 6 * 0.5 - EXACT


@pytest.mark.asyncio
async def test_a_redirect_loop_ends_after_20_redirects(fake_server: FakeServer) -> None:
    fake_server.script(MOVED, _moved(307, "/s"))
    fake_server.script("/s", _moved(307))
    async with make_client() as client:
        _, error = await drain(client.stream(fake_server.url + "/s", method="POST", json=BODY))
    assert isinstance(error, NonRetryableStatus)
    assert "more than 20 redirects" in str(error)
    attempts = fake_server.ledger.wait_finished(DEADLINE)
    assert len(attempts) == MAX_REDIRECTS + 1
    assert {a.method for a in attempts} == {"POST"}


@pytest.mark.asyncio
async def test_a_retry_goes_to_where_the_redirect_led(fake_server: FakeServer) -> None:
    fake_server.script(MOVED, Respond(status=503), Stream(events=3))
    fake_server.script("/s", _moved(308))
    async with make_client() as client:
        stream = client.stream(fake_server.url + "/s", method="POST", json=BODY, idempotent=True)
        events, error = await drain(stream)
    assert error is None
    assert len(events) == 3
    assert [(a.path, a.method) for a in fake_server.ledger.wait_finished(DEADLINE)] == [
        ("/s", "POST"),
        (MOVED, "POST"),
        (MOVED, "POST"),
    ]


@pytest.mark.asyncio
async def test_a_resume_goes_to_where_a_303_led_as_a_get(fake_server: FakeServer) -> None:
    fake_server.script(MOVED, Stream(events=2, ids=True, end="abort"), Stream(events=4, ids=True))
    fake_server.script("/s", _moved(303))
    async with make_client() as client:
        stream = client.stream(fake_server.url + "/s", method="POST", json=BODY, idempotent=True)
        events, error = await drain(stream)
    assert error is None
    assert [e.id for e in events] == ["1", "2", "3", "4"]
    _, first, resumed = fake_server.ledger.wait_finished(DEADLINE)
    assert (resumed.path, resumed.method, resumed.last_event_id) == (MOVED, "GET", "2")
    assert first.last_event_id is None


@pytest.mark.asyncio
async def test_authorization_stays_behind_on_another_origin(fake_server: FakeServer) -> None:
    """Fetch drops Authorization when a redirect crosses origins (here: another host name
    for the same server), and keeps it on the same origin."""
    other = fake_server.url.replace("127.0.0.1", "localhost") + MOVED
    fake_server.script(MOVED, Stream(events=2))
    fake_server.script("/s", _moved(307, other))
    headers = {"authorization": "Bearer sk-test", "x-user": "u1"}
    async with make_client() as client:
        _, error = await drain(client.stream(fake_server.url + "/s", headers=headers))
    assert error is None
    first, second = fake_server.ledger.wait_finished(DEADLINE)
    assert (first.authorization, second.authorization) == (True, False)
    assert second.header("x-user") == "u1"


# -- the last event ID ---------------------------------------------------------------
@pytest.mark.asyncio
async def test_an_empty_id_resets_the_last_event_id(fake_server: FakeServer) -> None:
    """After ``id:`` with no value there is no resume point: the cut stream is not resumed
    with the stale id (HTML §9.2.6 sets the last event ID to the empty buffer)."""
    fake_server.script(
        "/s", _event_stream("id: 1\ndata: a\n\n", "id:\ndata: b\n\n"), Stream(events=3, ids=True)
    )
    async with make_client() as client:
        stream = client.stream(fake_server.url + "/s")
        events, error = await drain(stream)
    assert isinstance(error, Truncated)
    assert [(e.data, e.id) for e in events] == [("a", "1"), ("b", "")]
    assert stream.last_event_id == ""
    assert [a.last_event_id for a in fake_server.ledger.wait_finished(DEADLINE)] == [None]


@pytest.mark.asyncio
async def test_a_new_id_after_an_empty_one_is_sent(fake_server: FakeServer) -> None:
    fake_server.script(
        "/s",
        _event_stream("id: 1\ndata: a\n\n", "id\ndata: b\n\n", "id: 3\ndata: c\n\n"),
        Stream(events=5, ids=True),
    )
    async with make_client() as client:
        events, error = await drain(client.stream(fake_server.url + "/s"))
    assert error is None
    assert payloads(events)[:3] == ["a", "b", "c"]
    assert [a.last_event_id for a in fake_server.ledger.wait_finished(DEADLINE)] == [None, "3"]


@pytest.mark.asyncio
@pytest.mark.parametrize("odd_id", ["\u00b2", "\u0663", "9" * 5000])
async def test_an_id_of_digits_int_refuses_is_an_opaque_resume_point(
    fake_server: FakeServer, odd_id: str
) -> None:
    """Ids like "²", Arabic-Indic digits or 5,000 digits pass str.isdigit() but are no replay
    number, and "²" is no ASCII: the stream resumes with the id UTF-8 encoded, as text."""
    fake_server.script("/s", _event_stream(f"id: {odd_id}\ndata: a\n\n"), Stream(events=3))
    async with make_client() as client:
        events, error = await drain(client.stream(fake_server.url + "/s"))
    assert error is None, error
    assert payloads(events)[0] == "a"
    assert [a.last_event_id for a in fake_server.ledger.wait_finished(DEADLINE)] == [
        None,
        odd_id,
    ]


@pytest.mark.asyncio
async def test_events_without_ids_after_a_resume_leave_no_resume_point(
    fake_server: FakeServer,
) -> None:
    """Each connection starts its id buffer empty (HTML §9.2.6): after id-less events on
    the resumed connection, resuming from the old id would repeat them, so it stops."""
    fake_server.script(
        "/s", _event_stream("id: 7\ndata: a\n\n"), _event_stream("data: b\n\n"), Stream()
    )
    async with make_client() as client:
        events, error = await drain(client.stream(fake_server.url + "/s"))
    assert isinstance(error, Truncated)
    assert [(e.data, e.id) for e in events] == [("a", "7"), ("b", "")]
    assert [a.last_event_id for a in fake_server.ledger.wait_finished(DEADLINE)] == [None, "7"]


@pytest.mark.asyncio
async def test_the_callers_last_event_id_goes_on_the_first_request(
    fake_server: FakeServer,
) -> None:
    fake_server.script("/s", Stream(events=6, ids=True, resume=True))
    async with make_client() as client:
        stream = client.stream(fake_server.url + "/s", last_event_id="4")
        events, error = await drain(stream)
    assert error is None
    assert [e.id for e in events] == ["5", "6"]
    (only,) = fake_server.ledger.wait_finished(DEADLINE)
    assert only.last_event_id == "4"


@pytest.mark.asyncio
async def test_a_last_event_id_that_cannot_be_a_header_is_refused() -> None:
    async with make_client() as client:
        with pytest.raises(ValueError, match="CR, LF or NUL"):
            client.stream("http://127.0.0.1:9/s", last_event_id="1\r\nx-evil: 1")
        with pytest.raises(ValueError, match="whole body"):
            client.stream("http://127.0.0.1:9/s", content=b"x", json={"a": 1})


# -- HTTP 204 ----------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_204_stops_the_retries(fake_server: FakeServer) -> None:
    """A 204 on a retry ends the stream at once: HTML's sign to stop reconnecting."""
    fake_server.script("/s", Respond(status=503), Respond(status=204), Stream(events=3))
    async with make_client() as client:
        events, error = await drain(client.stream(fake_server.url + "/s"))
    assert isinstance(error, NonRetryableStatus)
    assert error.status == 204
    assert "stop reconnecting" in str(error)
    assert events == []
    assert [a.status for a in fake_server.ledger.wait_finished(DEADLINE)] == [503, 204]


# -- the caller's headers and raw body ---------------------------------------------------
@pytest.mark.asyncio
async def test_caller_headers_and_a_raw_body_go_on_every_attempt(fake_server: FakeServer) -> None:
    fake_server.script("/s", Respond(status=503), Stream(events=2))
    raw = b'{"prompt": "raw bytes, sent as they are"}'
    headers = {"content-type": "application/json", "x-user": "u1", "Cache-Control": "max-age=0"}
    async with make_client() as client:
        stream = client.stream(
            fake_server.url + "/s", method="POST", content=raw, headers=headers, idempotent=True
        )
        _, error = await drain(stream)
    assert error is None
    attempts = fake_server.ledger.wait_finished(DEADLINE)
    assert len(attempts) == 2
    for a in attempts:
        assert (a.header("x-user"), a.header("cache-control")) == ("u1", "max-age=0")
        assert (a.body_size, a.header("content-type")) == (len(raw), "application/json")
    assert attempts[0].body_sha256 == attempts[1].body_sha256


def test_the_sync_facade_takes_the_same_options(fake_server: FakeServer) -> None:
    fake_server.script("/s", Stream(events=5, ids=True, resume=True))
    with SyncStreamingClient() as client:
        got = list(client.stream(fake_server.url + "/s", last_event_id="3", headers={"x-u": "1"}))
    assert [e.id for e in got] == ["4", "5"]
    (only,) = fake_server.ledger.wait_finished(DEADLINE)
    assert (only.last_event_id, only.header("x-u")) == ("3", "1")
