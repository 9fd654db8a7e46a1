"""Provider-faithful endpoints: the four wire formats, replies, error bodies, paths, shorthands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, connect_sse

from fake_servers import (
    FakeServer,
    ScenarioError,
    drop_after,
    error_after,
    format_names,
    get_format,
    outage,
    parse_scenario,
    rate_limited,
    register_format,
    reply,
    respond,
    sent_text,
    stall_after,
    stream,
    truncate_after,
)
from fake_servers._providers import Call, provider_for_path
from fake_servers._script import Respond, Stream

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
MESSAGES = "/v1/messages"
GEMINI = "/v1beta/models/{model}:streamGenerateContent"
GEMINI_URL = "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
GEMINI_REPLY_URL = "/v1beta/models/gemini-2.0-flash:generateContent"

# What each SDK sends when it asks to stream; the non-streaming request is the same without it.
REQUESTS: dict[str, dict[str, Any]] = {
    "openai": {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}], "stream": True},
    "responses": {"model": "gpt-x", "input": "hi", "stream": True},
    "anthropic": {
        "model": "claude-x",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    },
    "gemini": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
}
SCRIPTED = {"openai": CHAT, "responses": RESPONSES, "anthropic": MESSAGES, "gemini": GEMINI}
URLS = {"openai": CHAT, "responses": RESPONSES, "anthropic": MESSAGES, "gemini": GEMINI_URL}
PROVIDERS = tuple(SCRIPTED)


@pytest.fixture
def client(fake_server: FakeServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake_server.url, timeout=10) as http:
        yield http


def _events(client: httpx.Client, provider: str, **request: Any) -> list[ServerSentEvent]:
    body = request.pop("json", REQUESTS[provider])
    url = request.pop("url", URLS[provider])
    with connect_sse(client, "POST", url, json=body, **request) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return list(source.iter_sse())


def _text(provider: str, events: list[ServerSentEvent]) -> str:
    """The answer text an SDK would assemble from the events."""
    parts = []
    for event in events:
        if event.data == "[DONE]":
            continue
        data = json.loads(event.data)
        if provider == "openai":
            parts += [c["delta"].get("content") or "" for c in data["choices"]]
        elif provider == "responses" and data["type"] == "response.output_text.delta":
            parts.append(data["delta"])
        elif provider == "anthropic" and data["type"] == "content_block_delta":
            parts.append(data["delta"]["text"])
        elif provider == "gemini":
            parts += [p["text"] for c in data["candidates"] for p in c["content"]["parts"]]
    return "".join(parts)


# -- the four wire formats --------------------------------------------------------------


def test_chat_completions_open_with_the_role_and_close_with_finish_reason(fake_server, client):
    """A chat request gets the role chunk, one chunk per token, the stop chunk, then [DONE]."""
    fake_server.script(CHAT, reply(chunks=4))
    events = _events(client, "openai")
    chunks = [json.loads(e.data) for e in events[:-1]]
    assert events[-1].data == "[DONE]"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all({"id", "created", "model", "system_fingerprint"} <= set(c) for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 5 + ["stop"]
    assert chunks[-1]["choices"][0]["delta"] == {}
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert len(attempt.data_events) == 4
    assert [e.kind for e in attempt.events][-1] == "terminal"
    assert _text("openai", events) == sent_text(attempt, fake_server.scenario.seed)


def test_chat_completions_send_a_usage_chunk_when_asked(fake_server, client):
    """stream_options.include_usage adds a chunk with no choices and the usage before [DONE]."""
    fake_server.script(CHAT, reply(chunks=3))
    body = {**REQUESTS["openai"], "stream_options": {"include_usage": True}}
    events = _events(client, "openai", json=body)
    usage = json.loads(events[-2].data)
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 3
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 3


def test_generic_requests_keep_one_chunk_per_token(fake_server, client):
    """A request that is not a chat request (no messages) gets token chunks and [DONE] only."""
    fake_server.script("/v1/stream", stream(events=3))
    with connect_sse(client, "POST", "/v1/stream", json={"prompt": "x", "stream": True}) as src:
        events = list(src.iter_sse())
    assert len(events) == 4
    assert events[-1].data == "[DONE]"
    assert all("content" in json.loads(e.data)["choices"][0]["delta"] for e in events[:-1])


def test_responses_stream_typed_events_in_order(fake_server, client):
    """The Responses API: created, in_progress, item and part added, deltas, done..., completed."""
    fake_server.script(RESPONSES, reply(chunks=3))
    events = _events(client, "responses")
    names = [e.event for e in events]
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 3,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    payloads = [json.loads(e.data) for e in events]
    assert [p["type"] for p in payloads] == names
    assert [p["sequence_number"] for p in payloads] == list(range(len(events)))
    text = _text("responses", events)
    assert payloads[-4]["text"] == text
    completed = payloads[-1]["response"]
    assert completed["status"] == "completed"
    assert completed["output"][0]["content"][0]["text"] == text
    assert completed["usage"]["output_tokens"] == 3


def test_anthropic_stream_events_in_order(fake_server, client):
    """Anthropic Messages: message_start, block start, ping, deltas, block stop, delta, stop."""
    fake_server.script(MESSAGES, reply(chunks=3))
    events = _events(client, "anthropic")
    assert [e.event for e in events] == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * 3,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    payloads = [json.loads(e.data) for e in events]
    assert [p["type"] for p in payloads] == [e.event for e in events]
    assert payloads[0]["message"]["stop_reason"] is None
    assert payloads[-2]["delta"]["stop_reason"] == "end_turn"
    assert payloads[-2]["usage"]["output_tokens"] == 3
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert _text("anthropic", events) == sent_text(attempt, fake_server.scenario.seed)


def test_gemini_streams_candidates_and_ends_with_finish_reason(fake_server, client):
    """Gemini alt=sse: data-only candidate chunks; the last carries finishReason STOP and usage."""
    fake_server.script(GEMINI, reply(chunks=3))
    events = _events(client, "gemini")
    payloads = [json.loads(e.data) for e in events]
    assert all(e.event == "message" for e in events)  # no event: lines
    assert len(payloads) == 4
    assert [p["candidates"][0].get("finishReason") for p in payloads] == [None] * 3 + ["STOP"]
    assert all(p["candidates"][0]["content"]["role"] == "model" for p in payloads)
    assert payloads[-1]["usageMetadata"]["candidatesTokenCount"] == 3
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert attempt.path == "/v1beta/models/gemini-2.0-flash:streamGenerateContent"
    assert attempt.query == "alt=sse"
    assert _text("gemini", events) == sent_text(attempt, fake_server.scenario.seed)


# -- non-streaming replies ---------------------------------------------------------------


def _reply_text(provider: str, body: dict[str, Any]) -> str:
    if provider == "openai":
        assert body["object"] == "chat.completion"
        assert body["choices"][0]["finish_reason"] == "stop"
        return str(body["choices"][0]["message"]["content"])
    if provider == "responses":
        assert (body["object"], body["status"]) == ("response", "completed")
        return str(body["output"][0]["content"][0]["text"])
    if provider == "anthropic":
        assert (body["type"], body["stop_reason"]) == ("message", "end_turn")
        return str(body["content"][0]["text"])
    assert body["candidates"][0]["finishReason"] == "STOP"
    return str(body["candidates"][0]["content"]["parts"][0]["text"])


def _reply_request(provider: str) -> tuple[str, dict[str, Any]]:
    if provider == "gemini":
        return GEMINI_REPLY_URL, REQUESTS["gemini"]
    return URLS[provider], {k: v for k, v in REQUESTS[provider].items() if k != "stream"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_requests_that_do_not_ask_to_stream_get_the_whole_reply(fake_server, client, provider):
    """Without stream: true (Gemini: generateContent) the answer comes back as one JSON object."""
    fake_server.script(
        "/v1beta/models/{model}" if provider == "gemini" else SCRIPTED[provider], reply(4)
    )
    url, body = _reply_request(provider)
    response = client.post(url, json=body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert len(attempt.data_events) == 4
    assert attempt.events[-1].kind == "terminal"
    assert _reply_text(provider, response.json()) == sent_text(attempt, fake_server.scenario.seed)


def test_stream_false_is_a_non_streaming_request_anywhere(fake_server, client):
    """An explicit "stream": false gets the reply even from a request without messages."""
    fake_server.script("/v1/stream", reply(2))
    assert client.post("/v1/stream", json={"stream": False}).json()["object"] == "chat.completion"


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_reply_plays_the_failure_steps_too(fake_server, client, provider):
    """Truncate cuts the JSON body, drop breaks it, an in-band error becomes the overload status."""
    url, body = _reply_request(provider)
    fake_server.script(
        "/v1beta/models/{model}" if provider == "gemini" else SCRIPTED[provider],
        truncate_after(3),
        drop_after(3),
        error_after(3),
    )
    cut = client.post(url, json=body)
    assert cut.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        cut.json()
    with pytest.raises(httpx.RemoteProtocolError):
        client.post(url, json=body)
    overloaded = client.post(url, json=body)
    assert overloaded.status_code == {"openai": 500, "anthropic": 529, "gemini": 503}[provider]
    attempts = fake_server.ledger.wait_finished(5)
    assert [len(a.events) for a in attempts] == [0, 0, 0]


def test_a_reply_stall_holds_back_the_headers(fake_server, client):
    """A stall on a non-streaming request delays the headers: nothing arrives during it."""
    fake_server.script(CHAT, stall_after(2, seconds=0.3))
    url, body = _reply_request("openai")
    response = client.post(url, json=body)
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert response.status_code == 200
    assert attempt.headers_at is not None
    assert attempt.headers_at - attempt.arrived_at >= 0.3


# -- error bodies ------------------------------------------------------------------------

_ERROR_SHAPES = {
    "openai": lambda body: body["error"]["type"],
    "responses": lambda body: body["error"]["type"],
    "anthropic": lambda body: (body["type"], body["error"]["type"]),
    "gemini": lambda body: body["error"]["status"],
}
_ERROR_KINDS = {
    ("openai", 400): "invalid_request_error",
    ("openai", 429): "requests",
    ("openai", 500): "server_error",
    ("responses", 401): "invalid_request_error",
    ("responses", 503): "server_error",
    ("anthropic", 400): ("error", "invalid_request_error"),
    ("anthropic", 401): ("error", "authentication_error"),
    ("anthropic", 404): ("error", "not_found_error"),
    ("anthropic", 429): ("error", "rate_limit_error"),
    ("anthropic", 500): ("error", "api_error"),
    ("anthropic", 529): ("error", "overloaded_error"),
    ("gemini", 400): "INVALID_ARGUMENT",
    ("gemini", 429): "RESOURCE_EXHAUSTED",
    ("gemini", 503): "UNAVAILABLE",
}


@pytest.mark.parametrize(("provider", "status"), list(_ERROR_KINDS))
def test_scripted_statuses_carry_the_providers_error_body(fake_server, client, provider, status):
    """A status scripted without a body gets the error object of the path's provider."""
    fake_server.script(SCRIPTED[provider], respond(status))
    response = client.post(URLS[provider], json=REQUESTS[provider])
    assert response.status_code == status
    assert _ERROR_SHAPES[provider](response.json()) == _ERROR_KINDS[(provider, status)]
    assert str(status) in json.dumps(response.json())


def test_rejections_on_a_provider_path_use_its_error_body(fake_server, client):
    """An unscripted provider path answers 404 in the provider's shape, naming what is scripted."""
    fake_server.script(CHAT, reply())
    body = client.post(MESSAGES, json=REQUESTS["anthropic"]).json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
    assert body["error"]["scripted_paths"] == [CHAT]


def test_error_bodies_off_provider_paths_keep_the_generic_shape(fake_server, client):
    """Other paths keep the kit's generic error body, and get no request-id header."""
    fake_server.script("/v1/stream", respond(429))
    response = client.get("/v1/stream")
    assert response.json()["error"]["status"] == 429
    assert "x-request-id" not in response.headers


@pytest.mark.parametrize(
    ("path", "header"),
    [(CHAT, "x-request-id"), (RESPONSES, "x-request-id"), (MESSAGES, "request-id")],
)
def test_provider_paths_send_their_request_id_header(fake_server, client, path, header):
    """Streams and error responses carry the request-id header the provider's SDK reads."""
    fake_server.script(path, respond(500), reply(1))
    assert client.post(path, json={}).headers[header] == "req_streamcheck"
    assert client.post(path, json={"stream": True}).headers[header] == "req_streamcheck"


def test_scripted_bodies_and_headers_win(fake_server, client):
    """An explicit body is sent as given, on a provider path too."""
    fake_server.script(MESSAGES, respond(503, body={"detail": "custom"}))
    assert client.post(MESSAGES, json={}).json() == {"detail": "custom"}


# -- in-band errors ------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_error_after_sends_the_in_band_error_event(fake_server, client, provider):
    """error_after(2): two tokens, then the format's error event, then a clean end."""
    fake_server.script(SCRIPTED[provider], error_after(2))
    events = _events(client, provider)
    last = events[-1]
    payload = json.loads(last.data)
    if provider == "anthropic":
        assert last.event == "error"
        assert payload == {"type": "error", "error": payload["error"]}
        assert payload["error"]["type"] == "overloaded_error"
    elif provider == "responses":
        assert (last.event, payload["type"]) == ("error", "error")
    else:
        assert last.event == "message"
        assert "message" in payload["error"]
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert len(attempt.data_events) == 2
    assert all(e.kind != "terminal" for e in attempt.events)
    assert (attempt.end, attempt.note) == ("completed", "in-band error")


# -- every script step applies to every format --------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_truncation_leaves_out_every_closing_frame(fake_server, client, provider):
    """truncate_after(3): the opening and three tokens, none of the frames that close the answer."""
    fake_server.script(SCRIPTED[provider], truncate_after(3))
    events = _events(client, provider)
    names = {e.event for e in events}
    datas = " ".join(e.data for e in events)
    assert not names & {"message_stop", "message_delta", "content_block_stop"}
    assert not names & {"response.completed", "response.output_text.done"}
    assert "[DONE]" not in datas
    assert '"finish_reason":"stop"' not in datas
    assert "finishReason" not in datas
    attempt = fake_server.ledger.wait_finished(5)[0]
    assert len(attempt.data_events) == 3
    assert _text(provider, events) == sent_text(attempt, fake_server.scenario.seed)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_drop_after_breaks_the_connection_mid_answer(fake_server, client, provider):
    """drop_after(2): the client reads two tokens, then the transfer fails."""
    fake_server.script(SCRIPTED[provider], drop_after(2, mid_line=True))
    seen: list[ServerSentEvent] = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        connect_sse(client, "POST", URLS[provider], json=REQUESTS[provider]) as source,
    ):
        seen.extend(source.iter_sse())
    assert _text(provider, seen) != ""
    assert fake_server.ledger.wait_finished(5)[0].end == "aborted"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_framing_changes_bytes_not_events(fake_server, client, provider):
    """Random splits, CRLF line endings and comments leave every format's events intact."""
    fake_server.script(
        SCRIPTED[provider],
        reply(6),
        reply(6, split=5, split_random=True, line_ending="crlf", comment_every=2),
    )
    plain = [(e.event, e.data) for e in _events(client, provider)]
    framed = [(e.event, e.data) for e in _events(client, provider)]
    assert framed == plain


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stall_stops_the_tokens_for_its_time(fake_server, client, provider):
    """stall_after(2, seconds=0.3): the third token leaves at least 0.3 s after the second."""
    fake_server.script(SCRIPTED[provider], stall_after(2, seconds=0.3, events=3))
    events = _events(client, provider)
    assert len(_text(provider, events)) > 0
    data = fake_server.ledger.wait_finished(5)[0].data_events
    assert data[2].at - data[1].at >= 0.3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ids_and_last_event_id_resume_work_on_every_format(fake_server, client, provider):
    """With ids, token events carry id: and a Last-Event-ID request continues after it."""
    fake_server.script(SCRIPTED[provider], reply(4, ids=True))
    first = _events(client, provider)
    # the decoder keeps the last id for the frames after it, so compare distinct ids
    assert list(dict.fromkeys(e.id for e in first if e.id)) == ["1", "2", "3", "4"]
    resumed = _events(client, provider, headers={"last-event-id": "2"})
    assert list(dict.fromkeys(e.id for e in resumed if e.id)) == ["3", "4"]
    second = fake_server.ledger.wait_finished(5)[1]
    assert [e.index for e in second.data_events] == [3, 4]


def test_status_steps_before_a_reply_play_in_order(fake_server, client):
    """rate_limited then outage then reply: the attempts get 429, 429, 503, then the answer."""
    fake_server.script(MESSAGES, *rate_limited(2, retry_after=1), *outage(1), reply(2))
    responses = [client.post(MESSAGES, json=REQUESTS["anthropic"]) for _ in range(4)]
    assert [r.status_code for r in responses] == [429, 429, 503, 200]
    assert [r.headers.get("retry-after") for r in responses] == ["1", "1", None, None]
    assert "message_stop" in responses[-1].text


# -- paths and formats --------------------------------------------------------------------


def test_a_placeholder_matches_any_model_but_not_across_slashes(fake_server, client):
    """{model} matches one path segment's text; exact paths win; each concrete path counts alone."""
    exact = "/v1beta/models/pinned:streamGenerateContent"
    fake_server.script(GEMINI, respond(503), reply(2))
    fake_server.script(exact, reply(1))
    body = REQUESTS["gemini"]
    assert client.post("/v1beta/models/a:streamGenerateContent", json=body).status_code == 503
    assert client.post("/v1beta/models/b:streamGenerateContent", json=body).status_code == 503
    assert client.post("/v1beta/models/a:streamGenerateContent", json=body).status_code == 200
    pinned = client.post(exact + "?alt=sse", json=body)
    assert pinned.text.count("data:") == 2
    assert client.post("/v1beta/models/a/b:streamGenerateContent", json=body).status_code == 404


def test_auto_format_follows_the_path_and_explicit_formats_win(fake_server, client):
    """The default format is the path's provider (openai elsewhere); format= overrides it."""
    assert stream().format == "auto"
    fake_server.script(MESSAGES, stream(events=1))
    fake_server.script("/v1/other", stream(events=1))
    fake_server.script(CHAT, stream(events=1, format="anthropic"))
    assert _events(client, "anthropic")[0].event == "message_start"
    other = client.get("/v1/other").text
    assert "chat.completion.chunk" in other
    assert "message_start" in client.post(CHAT, json=REQUESTS["openai"]).text


def test_the_format_registry_knows_the_providers_and_reserves_auto():
    """Provider formats are registered; auto resolves by path and cannot be registered."""
    assert {"openai", "responses", "anthropic", "gemini", "auto"} <= set(format_names())
    assert get_format("auto", MESSAGES) is get_format("anthropic")
    assert get_format("auto", "/v1/stream") is get_format("openai")
    assert get_format("auto") is get_format("openai")
    with pytest.raises(ValueError, match="reserved"):
        register_format("auto", get_format("openai"))


@pytest.mark.parametrize(
    ("path", "provider"),
    [
        ("/v1/chat/completions", "openai"),
        ("/openai/v1/chat/completions/", "openai"),
        ("/v1/responses", "responses"),
        ("/v1/messages", "anthropic"),
        ("/v1beta/models/gemini-2.0-flash:streamGenerateContent", "gemini"),
        ("/v1/models/m:generateContent", "gemini"),
        ("/v1/stream", None),
    ],
)
def test_paths_map_to_their_provider(path, provider):
    """Provider paths are recognised by their ending."""
    assert provider_for_path(path) == provider


def test_a_request_asks_to_stream_unless_it_says_otherwise():
    """Only a provider request without stream: true (or any stream: false) is non-streaming."""
    chat = get_format("openai")
    assert chat.streams(Call(CHAT, {"messages": [], "stream": True}))  # type: ignore[attr-defined]
    assert not chat.streams(Call(CHAT, {"messages": []}))  # type: ignore[attr-defined]
    assert chat.streams(Call(CHAT, {"prompt": "x"}))  # type: ignore[attr-defined]
    assert chat.streams(Call(CHAT, None))  # type: ignore[attr-defined]
    assert not chat.streams(Call(CHAT, {"stream": False}))  # type: ignore[attr-defined]


# -- shorthands ------------------------------------------------------------------------------


def test_shorthands_build_the_steps_they_name():
    """Each shorthand is the step(s) of the failure it names."""
    limited = rate_limited(times=2, retry_after=1)
    assert limited == (limited[0], limited[0])
    assert limited[0] == Respond(status=429, headers=(("retry-after", "1"),))
    assert rate_limited(1, retry_after=None, retry_after_ms=250)[0].headers == (
        ("retry-after-ms", "250"),
    )
    assert outage(times=3, status=503) == (Respond(status=503),) * 3
    assert reply(chunks=7) == Stream(events=7)
    assert drop_after(3) == Stream(events=3, end="abort")
    assert drop_after(3, mid_line=True).end == "abort_mid_line"
    assert truncate_after(3) == Stream(events=3, end="truncate")
    assert error_after(2) == Stream(events=2, end="error")
    stalled = stall_after(3, seconds=None)
    assert (stalled.events, stalled.stall) == (5, stalled.stall)
    assert stalled.stall is not None
    assert (stalled.stall.after, stalled.stall.seconds) == (3, None)
    assert stall_after(8, seconds=1.5, keepalive=0.5).events == 8
    assert reply(3, gap=0.01, format="gemini").format == "gemini"


@pytest.mark.parametrize(
    ("build", "field", "problem"),
    [
        (lambda: rate_limited(times=0), "times", "expected an integer >= 1, got 0"),
        (lambda: outage(status=700), "status", "expected an integer 100..599, got 700"),
        (lambda: drop_after(-1), "chunks", "expected an integer >= 0, got -1"),
        (lambda: truncate_after("3"), "chunks", 'expected an integer >= 0, got "3"'),
        (lambda: stall_after(4, events=2), "events", "expected an integer >= chunks (4), got 2"),
        (lambda: stall_after(1, seconds=-1), "seconds", "expected a number >= 0, got -1"),
        (lambda: reply(3, chunkz=2), "chunkz", 'unknown key for a "reply" step; did you mean'),
        (lambda: drop_after(1, after=2), "after", 'unknown key for a "drop_after" step'),
        (lambda: error_after(1, end="done"), "end", 'unknown key for a "error_after" step'),
    ],
)
def test_shorthands_refuse_bad_arguments_naming_the_field(build, field, problem):
    """Shorthands validate like the builders: a ScenarioError naming the field."""
    with pytest.raises(ScenarioError) as caught:
        build()
    assert caught.value.field == field
    assert caught.value.problem.startswith(problem)


def test_scenario_files_spell_shorthands_as_step_kinds():
    """A file step of a shorthand kind expands to the steps of the Python call."""
    text = """
[[endpoint]]
path = "/v1/messages"
[[endpoint.step]]
kind = "rate_limited"
times = 2
retry_after = 1
[[endpoint.step]]
kind = "outage"
times = 1
[[endpoint.step]]
kind = "stall_after"
chunks = 2
seconds = 0.5
[[endpoint.step]]
kind = "reply"
chunks = 3
gap = 0.01
"""
    steps = parse_scenario(text, format="toml").endpoints[0].steps
    assert steps == (
        *rate_limited(2, retry_after=1),
        *outage(1),
        stall_after(2, 0.5),
        reply(3, gap=0.01),
    )


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ('kind = "drop_after"', "endpoint[0].step[0].chunks: required key is missing"),
        (
            'kind = "truncate_after"\nchunks = 1\nchnks = 2',
            'endpoint[0].step[0].chnks: unknown key for a "truncate_after" step; did you mean',
        ),
        ('kind = "rate_limitd"', 'did you mean "rate_limited"?'),
    ],
)
def test_scenario_file_shorthand_errors_name_the_step_and_field(step, message):
    """Shorthand steps in files are checked like any other step."""
    with pytest.raises(ScenarioError, match=None) as caught:
        parse_scenario(f'[[endpoint]]\npath = "/a"\n[[endpoint.step]]\n{step}\n', format="toml")
    assert message in str(caught.value)


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_chat_call_redirected_to_a_get_is_answered_as_the_chat_call(status: int) -> None:
    """A client that follows a 301/302/303 sends a bodiless GET, as Fetch turns a POST
    (SC-SSE-32): the answer keeps the role and finish_reason chunks of the call it
    redirected, so an SDK that needs them is judged on the redirect, not on the server."""
    http_client = httpx.Client(timeout=10, follow_redirects=True)
    with FakeServer(wire_format="openai") as server, http_client as http:
        server.script("/v1/origin", Respond(status=status, headers=(("location", "/v1/moved"),)))
        server.script("/v1/moved", Stream(events=3))
        server.script("/v1/plain", Stream(events=3))
        body = REQUESTS["openai"]
        with connect_sse(http, "POST", f"{server.url}/v1/origin", json=body) as source:
            assert source.response.request.method == "GET"  # httpx follows as Fetch does
            chunks = [json.loads(e.data) for e in source.iter_sse() if e.data != "[DONE]"]
        plain = [json.loads(e.data) for e in _plain_get(http, f"{server.url}/v1/plain")]
    deltas = [c["choices"][0] for c in chunks]
    assert deltas[0]["delta"].get("role") == "assistant"
    assert deltas[-1]["finish_reason"] == "stop"
    # A bodiless GET where no redirect leads is a generic client's: a chunk per token.
    assert [c["choices"][0]["finish_reason"] for c in plain] == [None, None, None]


def _plain_get(http: httpx.Client, url: str) -> list[ServerSentEvent]:
    with connect_sse(http, "GET", url) as source:
        return [e for e in source.iter_sse() if e.data != "[DONE]"]


def test_a_bom_stands_before_a_line_whose_loss_shows_in_the_text() -> None:
    """With a BOM, OpenAI's text-free role chunk is left out (SC-SSE-5/6): a client that
    keeps the BOM then loses the first content chunk, which its application would miss."""
    from fake_servers import Framing

    with FakeServer() as server, httpx.Client(timeout=10) as http:
        server.script(CHAT, Stream(events=3, framing=Framing(bom=True)))
        server.script("/v1/plain/chat/completions", Stream(events=3))
        body = http.post(f"{server.url}{CHAT}", json=REQUESTS["openai"]).content
        plain = http.post(f"{server.url}/v1/plain/chat/completions", json=REQUESTS["openai"])
    first = body.removeprefix("\ufeff".encode()).split(b"\n\n")[0]
    assert body.startswith("\ufeff".encode())
    assert json.loads(first.removeprefix(b"data: "))["choices"][0]["delta"]["content"]
    assert b'"role":"assistant"' in plain.content  # without a BOM, the API's opening
