"""The real openai SDK against the fake server: it streams, raises its typed errors, retries.

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

openai = pytest.importorskip("openai")

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
MESSAGES = [{"role": "user", "content": "Say something."}]


@pytest.fixture
def sdk(fake_server: FakeServer) -> Iterator[openai.OpenAI]:
    """The SDK pointed at the fake server: dummy key, two retries, short timeouts."""
    with openai.OpenAI(
        base_url=fake_server.url + "/v1", api_key="sk-test", max_retries=2, timeout=10.0
    ) as client:
        yield client


def _chat_text(sdk: openai.OpenAI, **options: object) -> str:
    chunks = sdk.chat.completions.create(model="gpt-x", messages=MESSAGES, stream=True, **options)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


# -- streaming and replies ------------------------------------------------------------


def test_chat_stream_text_is_the_servers_answer(fake_server, sdk):
    """create(stream=True) yields chunks whose contents join to exactly what the server sent."""
    fake_server.script(CHAT, reply(chunks=12))
    text = _chat_text(sdk, stream_options={"include_usage": True})
    assert text == answer(fake_server)
    assert len(fake_server.ledger.attempts()) == 1


def test_chat_stream_helper_assembles_the_final_completion(fake_server, sdk):
    """The stream() helper accumulates role, content and finish_reason from the chunks."""
    fake_server.script(CHAT, reply(chunks=6))
    with sdk.chat.completions.stream(model="gpt-x", messages=MESSAGES) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert final.choices[0].message.role == "assistant"
    assert final.choices[0].message.content == answer(fake_server)
    assert final.choices[0].finish_reason == "stop"


def test_non_streaming_chat_gets_the_whole_answer(fake_server, sdk):
    """Without stream=True the SDK parses the chat.completion object."""
    fake_server.script(CHAT, reply(chunks=5))
    completion = sdk.chat.completions.create(model="gpt-x", messages=MESSAGES)
    assert completion.choices[0].message.content == answer(fake_server)
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 5


def test_responses_stream_and_reply_carry_the_answer(fake_server, sdk):
    """The Responses API streams typed events; its reply's output_text is the same answer."""
    fake_server.script(RESPONSES, reply(chunks=7))
    events = list(sdk.responses.create(model="gpt-x", input="hi", stream=True))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == answer(fake_server)
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == deltas
    assert sdk.responses.create(model="gpt-x", input="hi").output_text == deltas


# -- typed errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (400, "BadRequestError", "invalid_request_error"),
        (401, "AuthenticationError", "invalid_request_error"),
        (403, "PermissionDeniedError", "invalid_request_error"),
        (404, "NotFoundError", "invalid_request_error"),
        (422, "UnprocessableEntityError", "invalid_request_error"),
        (429, "RateLimitError", "requests"),
        (500, "InternalServerError", "server_error"),
        (503, "InternalServerError", "server_error"),
    ],
)
def test_scripted_statuses_raise_the_sdks_typed_errors(fake_server, sdk, status, error, kind):
    """Each status raises the SDK's own exception, with the error body parsed."""
    fake_server.script(CHAT, respond(status))
    with pytest.raises(getattr(openai, error)) as caught:
        sdk.with_options(max_retries=0).chat.completions.create(
            model="gpt-x", messages=MESSAGES, stream=True
        )
    assert caught.value.status_code == status
    assert caught.value.type == kind
    assert str(status) in caught.value.message
    assert caught.value.request_id == "req_streamcheck"


@pytest.mark.parametrize("status", [400, 401, 404])
def test_non_retryable_statuses_are_sent_once(fake_server, sdk, status):
    """400/401/404 are not retried, even with retries to spare."""
    fake_server.script(CHAT, respond(status), reply())
    with pytest.raises(openai.APIStatusError):
        _chat_text(sdk)
    assert len(fake_server.ledger.wait_finished(5)) == 1


# -- retries ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_5xx_is_retried_with_growing_jittered_backoff(fake_server, sdk):
    """Two 503s, then the answer: retry counts 0, 1, 2, about 0.4 s then 0.8 s apart."""
    fake_server.script(CHAT, *outage(times=2, status=503), reply(chunks=4))
    assert _chat_text(sdk) == answer(fake_server)
    attempts = fake_server.ledger.attempts()
    assert [a.header("x-stainless-retry-count") for a in attempts] == ["0", "1", "2"]
    first, second = gaps(attempts)
    assert 0.375 <= first <= 0.5 + SLACK  # 0.5 s minus up to 25 % jitter
    assert 0.75 <= second <= 1.0 + SLACK


@pytest.mark.slow
def test_retry_after_seconds_is_honoured(fake_server, sdk):
    """A 429 with Retry-After: 1 is retried after a full second, longer than any backoff."""
    fake_server.script(CHAT, *rate_limited(times=1, retry_after=1), reply())
    assert _chat_text(sdk) == answer(fake_server)
    (gap,) = gaps(fake_server.ledger.attempts())
    assert 1.0 <= gap <= 1.0 + SLACK


@pytest.mark.slow
def test_retry_after_ms_is_read_first(fake_server, sdk):
    """retry-after-ms: 700 is honoured to the millisecond's intent (0.7 s, not the backoff)."""
    fake_server.script(CHAT, *rate_limited(1, retry_after=None, retry_after_ms=700), reply())
    assert _chat_text(sdk) == answer(fake_server)
    (gap,) = gaps(fake_server.ledger.attempts())
    assert 0.7 <= gap <= 0.7 + SLACK


def test_retry_after_beyond_two_minutes_gives_up_at_once(fake_server, sdk):
    """Retry-After: 300 exceeds the SDK's 120 s cap, so it raises instead of waiting."""
    fake_server.script(CHAT, *rate_limited(1, retry_after=300), reply())
    with pytest.raises(openai.RateLimitError):
        _chat_text(sdk)
    assert len(fake_server.ledger.wait_finished(5)) == 1


# -- failures mid-stream -------------------------------------------------------------------------


def test_truncated_stream_is_accepted_silently(fake_server, sdk):
    """The known flaw: a body ending without [DONE] or finish_reason ends the iteration quietly."""
    fake_server.script(CHAT, truncate_after(3), reply())
    chunks = list(
        sdk.chat.completions.create(model="gpt-x", messages=MESSAGES, stream=True)
    )  # no exception
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert text == answer(fake_server, attempt)  # three tokens, returned as if complete
    assert all(c.choices[0].finish_reason is None for c in chunks)
    assert not any(e.kind == "terminal" for e in attempt.events)
    assert len(fake_server.ledger.attempts()) == 1  # nothing retried: the SDK saw no failure


def test_a_dropped_stream_raises_and_is_not_retried(fake_server, sdk):
    """A connection broken mid-stream raises APIConnectionError; streams are never retried."""
    fake_server.script(CHAT, drop_after(3), reply())
    with pytest.raises(openai.APIConnectionError):
        _chat_text(sdk)
    assert len(fake_server.ledger.wait_finished(5)) == 1


def test_an_in_band_error_raises_api_error(fake_server, sdk):
    """data: {"error": ...} mid-stream raises openai.APIError after the tokens before it."""
    fake_server.script(CHAT, error_after(2), reply())
    chunks = iter(sdk.chat.completions.create(model="gpt-x", messages=MESSAGES, stream=True))
    seen = [next(chunks).choices[0].delta.content for _ in range(3)]  # role chunk, two tokens
    with pytest.raises(openai.APIError, match="in-band error"):
        next(chunks)
    assert "".join(text or "" for text in seen) == answer(fake_server)
    assert len(fake_server.ledger.wait_finished(5)) == 1


def test_a_stall_ends_in_the_read_timeout(fake_server, sdk):
    """A stream silent for good fails with APITimeoutError once the read timeout passes."""
    fake_server.script(CHAT, stall_after(2, seconds=None))
    with pytest.raises(openai.APITimeoutError):
        _chat_text(sdk.with_options(timeout=0.5))
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert attempt.end == "client_closed"
    assert len(fake_server.ledger.attempts()) == 1
