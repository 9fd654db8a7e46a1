"""The real anthropic SDK against the fake server: it streams, raises its typed errors, retries.

Timing bounds are server-side gaps between attempts, from the failed request's arrival
to the next arrival: the SDK's sleep starts later, so a
gap is never shorter than the SDK's wait (lower bounds need no slack); upper bounds get
3 s of slack for a shared, loaded 2-core machine.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _sdk import SLACK, answer, gaps

from fake_servers import (
    FakeServer,
    drop_after,
    error_after,
    outage,
    rate_limited,
    reply,
    respond,
    stall_after,
    truncate_after,
)

anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")  # the SDK's HTTP client

# anthropic 2.17 wraps what breaks while a stream is read (APIConnectionError,
# APITimeoutError, the transport's error as the cause); 2.16 and before let it through.
WRAPS_STREAM_ERRORS = tuple(int(p) for p in anthropic.__version__.split(".")[:2]) >= (2, 17)

MESSAGES_PATH = "/v1/messages"
REQUEST = {
    "model": "claude-x",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "Say something."}],
}


@pytest.fixture
def sdk(fake_server: FakeServer) -> Iterator[anthropic.Anthropic]:
    """The SDK pointed at the fake server: dummy key, two retries, short timeouts."""
    with anthropic.Anthropic(
        base_url=fake_server.url, api_key="sk-ant-test", max_retries=2, timeout=10.0
    ) as client:
        yield client


def _stream_text(sdk: anthropic.Anthropic) -> str:
    events = sdk.messages.create(**REQUEST, stream=True)
    return "".join(e.delta.text for e in events if e.type == "content_block_delta")


# -- streaming and replies ------------------------------------------------------------


def test_raw_event_stream_text_is_the_servers_answer(fake_server, sdk):
    """create(stream=True) yields the typed events; their text deltas join to the answer."""
    fake_server.script(MESSAGES_PATH, reply(chunks=12))
    events = list(sdk.messages.create(**REQUEST, stream=True))
    assert [e.type for e in events[:2]] == ["message_start", "content_block_start"]
    assert [e.type for e in events[-3:]] == ["content_block_stop", "message_delta", "message_stop"]
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text == answer(fake_server)


def test_stream_helper_accumulates_the_final_message(fake_server, sdk):
    """messages.stream() checks the event order as it accumulates; the message is complete."""
    fake_server.script(MESSAGES_PATH, reply(chunks=8))
    with sdk.messages.stream(**REQUEST) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == answer(fake_server)
    assert final.content[0].text == text
    assert (final.stop_reason, final.usage.output_tokens) == ("end_turn", 8)


def test_non_streaming_create_gets_the_whole_message(fake_server, sdk):
    """Without stream=True the SDK parses the Message object."""
    fake_server.script(MESSAGES_PATH, reply(chunks=5))
    message = sdk.messages.create(**REQUEST)
    assert message.content[0].text == answer(fake_server)
    assert message.stop_reason == "end_turn"


# -- typed errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (400, "BadRequestError", "invalid_request_error"),
        (401, "AuthenticationError", "authentication_error"),
        (403, "PermissionDeniedError", "permission_error"),
        (404, "NotFoundError", "not_found_error"),
        (413, "RequestTooLargeError", "request_too_large"),
        (429, "RateLimitError", "rate_limit_error"),
        (500, "InternalServerError", "api_error"),
        (503, "ServiceUnavailableError", "api_error"),
        (529, "OverloadedError", "overloaded_error"),
    ],
)
def test_scripted_statuses_raise_the_sdks_typed_errors(fake_server, sdk, status, error, kind):
    """Each status raises the SDK's own exception, with the error body parsed."""
    fake_server.script(MESSAGES_PATH, respond(status))
    with pytest.raises(getattr(anthropic, error)) as caught:
        sdk.with_options(max_retries=0).messages.create(**REQUEST, stream=True)
    assert caught.value.status_code == status
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == kind
    assert caught.value.request_id == "req_streamcheck"


@pytest.mark.parametrize("status", [400, 401, 404])
def test_non_retryable_statuses_are_sent_once(fake_server, sdk, status):
    """400/401/404 are not retried, even with retries to spare."""
    fake_server.script(MESSAGES_PATH, respond(status), reply())
    with pytest.raises(anthropic.APIStatusError):
        _stream_text(sdk)
    assert len(fake_server.ledger.wait_finished(5)) == 1


# -- retries ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_overload_is_retried_with_growing_jittered_backoff(fake_server, sdk):
    """Two 529s, then the answer: retry counts 0, 1, 2, about 0.4 s then 0.8 s apart."""
    fake_server.script(MESSAGES_PATH, *outage(times=2, status=529), reply(chunks=4))
    assert _stream_text(sdk) == answer(fake_server)
    attempts = fake_server.ledger.attempts()
    assert [a.header("x-stainless-retry-count") for a in attempts] == ["0", "1", "2"]
    first, second = gaps(attempts)
    assert 0.375 <= first <= 0.5 + SLACK  # 0.5 s minus up to 25 % jitter
    assert 0.75 <= second <= 1.0 + SLACK


@pytest.mark.slow
def test_retry_after_seconds_is_honoured(fake_server, sdk):
    """A 429 with Retry-After: 1 is retried after a full second, longer than any backoff."""
    fake_server.script(MESSAGES_PATH, *rate_limited(times=1, retry_after=1), reply())
    assert _stream_text(sdk) == answer(fake_server)
    (gap,) = gaps(fake_server.ledger.attempts())
    assert 1.0 <= gap <= 1.0 + SLACK


@pytest.mark.slow
def test_retry_after_ms_is_read_first(fake_server, sdk):
    """retry-after-ms: 700 wins over Retry-After: 5 (the SDK reads the milliseconds first)."""
    fake_server.script(MESSAGES_PATH, *rate_limited(1, retry_after=5, retry_after_ms=700), reply())
    assert _stream_text(sdk) == answer(fake_server)
    (gap,) = gaps(fake_server.ledger.attempts())
    assert 0.7 <= gap <= 0.7 + SLACK


def test_retries_run_out_into_the_typed_error(fake_server, sdk):
    """With max_retries=1, two 429s exhaust the retries and RateLimitError reaches the app."""
    fake_server.script(
        MESSAGES_PATH, *rate_limited(2, retry_after=None, retry_after_ms=10), reply()
    )
    with pytest.raises(anthropic.RateLimitError):
        sdk.with_options(max_retries=1).messages.create(**REQUEST, stream=True)
    attempts = fake_server.ledger.wait_finished(5)
    assert [a.header("x-stainless-retry-count") for a in attempts] == ["0", "1"]


# -- failures mid-stream -------------------------------------------------------------------------


def test_truncated_stream_is_accepted_silently(fake_server, sdk):
    """The known flaw: a stream ending without message_stop yields a message with no stop_reason."""
    fake_server.script(MESSAGES_PATH, truncate_after(3), reply())
    with sdk.messages.stream(**REQUEST) as stream:  # no exception anywhere
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert text == answer(fake_server, attempt)  # three tokens, returned as if complete
    assert final.stop_reason is None
    assert not any(e.kind == "terminal" for e in attempt.events)
    assert len(fake_server.ledger.attempts()) == 1  # nothing retried: the SDK saw no failure


def _read_error(wrapper: type[Exception], raw: type[Exception]) -> type[Exception]:
    """What the SDK raises when reading breaks: its wrapper (2.17 on), else the raw error."""
    return wrapper if WRAPS_STREAM_ERRORS else raw


def _caused_by(caught: pytest.ExceptionInfo[Exception], raw: type[Exception]) -> bool:
    raised = caught.value.__cause__ if WRAPS_STREAM_ERRORS else caught.value
    return isinstance(raised, raw)


def test_a_dropped_stream_raises_the_transport_error_and_is_not_retried(fake_server, sdk):
    """A connection broken mid-stream is not retried; it surfaces as httpx2's own error
    (2.16 and before: an app that catches only ``anthropic.APIConnectionError`` missed
    a mid-stream drop) or, from 2.17, as ``APIConnectionError`` caused by it."""
    fake_server.script(MESSAGES_PATH, drop_after(3), reply())
    with pytest.raises(
        _read_error(anthropic.APIConnectionError, httpx2.RemoteProtocolError)
    ) as caught:
        _stream_text(sdk)
    assert _caused_by(caught, httpx2.RemoteProtocolError)
    assert len(fake_server.ledger.wait_finished(5)) == 1


def test_an_in_band_error_event_raises_and_is_not_retried(fake_server, sdk):
    """event: error mid-stream raises APIStatusError carrying the overloaded_error object."""
    fake_server.script(MESSAGES_PATH, error_after(2), reply())
    events = iter(sdk.messages.create(**REQUEST, stream=True))
    seen = [next(events) for _ in range(4)]  # message_start, block start, two deltas
    with pytest.raises(anthropic.APIStatusError) as caught:
        next(events)
    assert caught.value.status_code == 200  # the stream's status: nothing to retry on
    assert caught.value.body["error"]["type"] == "overloaded_error"
    assert "".join(e.delta.text for e in seen[2:]) == answer(fake_server)
    assert len(fake_server.ledger.wait_finished(5)) == 1


def test_a_stall_ends_in_the_read_timeout(fake_server, sdk):
    """A stream silent for good fails at the read timeout: httpx2's ReadTimeout, which
    2.17 on wraps in ``APITimeoutError``."""
    fake_server.script(MESSAGES_PATH, stall_after(2, seconds=None))
    with pytest.raises(_read_error(anthropic.APITimeoutError, httpx2.ReadTimeout)) as caught:
        _stream_text(sdk.with_options(timeout=0.5))
    assert _caused_by(caught, httpx2.ReadTimeout)
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert attempt.end == "client_closed"
    assert len(fake_server.ledger.attempts()) == 1
