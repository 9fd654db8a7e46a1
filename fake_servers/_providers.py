"""Provider wire formats: OpenAI Chat Completions and Responses, Anthropic Messages, Gemini.

A format here knows how its provider frames one answer: the frames before the
first token, one event per token, the frames that close the answer (the last
one is the terminal event), the in-band error event, the non-streaming reply,
the error body of a failed request, and whether a request asked to stream.

Pure and self-contained (no imports from the rest of the package, so
``_formats`` can register these at import). The ledger records only the
token events and the terminal event; the structural frames (``message_start``,
``response.created``, the role chunk, ...) ride in the same writes as the token
or terminal event next to them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol

__all__ = [
    "MODEL",
    "PROVIDERS",
    "PROVIDER_PATHS",
    "AnthropicFormat",
    "Call",
    "GeminiFormat",
    "OpenAIFormat",
    "ResponsesFormat",
    "Wire",
    "format_of",
    "provider_error_body",
    "provider_for_path",
    "provider_headers",
    "wire_of",
]

WireEvent = tuple[str | None, str]  # (SSE event name or None, data); as in _formats
Events = tuple[WireEvent, ...]
MODEL = "streamcheck-fake-1"
REQUEST_ID = "req_streamcheck"
CREATED = 1_700_000_000  # fixed, so the bytes are reproducible
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _json(value: object) -> str:
    return _ENCODER.encode(value)


@functools.lru_cache(maxsize=4096)
def json_string(text: str) -> str:
    """``text`` as a JSON string (raw UTF-8), remembered: the same words recur in every answer."""
    return _ENCODER.encode(text)


def _token_data(head: str, tail: str) -> Callable[[str], str]:
    """The data of an event that is ``head``, the token as JSON, ``tail``: made once a token.

    The same few hundred words recur in every answer, so every event carrying one word
    shares one string (a stream's writes hold no copy of their own).
    """

    @functools.lru_cache(maxsize=4096)
    def data(token: str) -> str:
        return head + json_string(token) + tail

    return data


@dataclass(frozen=True)
class Call:
    """What a request asked for, as far as the shape of the answer depends on it."""

    path: str
    body: Mapping[str, Any] | None = None  # the request's JSON object, if it sent one
    body_size: int = 0

    @property
    def prompt_tokens(self) -> int:
        """A stand-in input token count for usage fields: about four bytes a token."""
        return max(1, self.body_size // 4)

    def asks_not_to_stream(self, request_key: str) -> bool:
        """A JSON request with ``stream`` not true that is a provider request (has the key)."""
        if self.body is None:
            return False
        stream = self.body.get("stream")
        return stream is False or (request_key in self.body and stream is not True)


class _EventFormat(Protocol):
    """The two methods every registered format has (``_formats.EventFormat``)."""

    def data_event(self, index: int, token: str) -> WireEvent: ...

    def terminal_event(self) -> WireEvent: ...


class Wire:
    """How a format frames an answer; the defaults suit a plain SSE format."""

    overload_status = 500  # the status a non-streaming reply gets instead of an in-band error
    headers: tuple[tuple[str, str], ...] = ()  # sent with every response on its paths
    # The opening carries no text and clients do without it (OpenAI's role chunk): a
    # stream with a BOM leaves it out, so the BOM stands before a line whose loss shows
    # in the text (SC-SSE-5/6), not before one an SDK never hands over.
    opening_optional = False

    def data_event(self, index: int, token: str) -> WireEvent:
        """The event carrying ``token``, the answer's ``index``-th (1-based)."""
        raise NotImplementedError

    def terminal_event(self) -> WireEvent:
        """The event that says the answer is complete."""
        raise NotImplementedError

    def streams(self, call: Call) -> bool:
        """Whether ``call`` asked for a stream (else it gets ``reply``)."""
        return True

    def opening(self, call: Call) -> Events:
        """Frames sent before the first token event."""
        return ()

    def ending(self, call: Call, text: str, count: int) -> Events:
        """The frames that close an answer of ``count`` tokens; the last is the terminal."""
        return (self.terminal_event(),)

    def error_event(self, after: int) -> WireEvent:
        """An in-band error event sent after token ``after``."""
        return "error", _json({"error": {"type": "overloaded_error", "message": _OVERLOADED}})

    def reply(self, call: Call, text: str, count: int) -> bytes:
        """The non-streaming reply carrying the whole answer."""
        raise NotImplementedError

    def overload_reply(self) -> tuple[int, bytes]:
        """The status and body a non-streaming call gets instead of an in-band error."""
        status = self.overload_status
        return status, self.error_body(status, _OVERLOADED, {})

    def error_body(self, status: int, message: str, extra: Mapping[str, object]) -> bytes:
        """The body of a failed request in the provider's shape."""
        error: dict[str, object] = {"type": "api_error", "message": message}
        return _json({"error": {**error, **extra}}).encode()


_OVERLOADED = "Overloaded (an in-band error scripted by fake_servers)"


class _Plain(Wire):
    """A registered format that is not a provider's: tokens and its terminal event only."""

    def __init__(self, fmt: _EventFormat) -> None:
        self._fmt = fmt

    def data_event(self, index: int, token: str) -> WireEvent:
        return self._fmt.data_event(index, token)

    def terminal_event(self) -> WireEvent:
        return self._fmt.terminal_event()


def wire_of(fmt: _EventFormat) -> Wire:
    """``fmt`` itself if it is a provider format, else a plain wrapper with the defaults."""
    return fmt if isinstance(fmt, Wire) else _Plain(fmt)


def format_of(wire: Wire) -> object:
    """The registered format ``wire`` plays (``wire_of``'s argument)."""
    return wire._fmt if isinstance(wire, _Plain) else wire


def _message(status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Overloaded" if status == 529 else "Unknown Status"  # 529: Anthropic's
    return f"{status} {phrase} (scripted by fake_servers)"


# -- OpenAI Chat Completions ---------------------------------------------------------


@dataclass(frozen=True)
class OpenAIFormat(Wire):
    """OpenAI Chat Completions: ``chat.completion.chunk`` objects, then ``data: [DONE]``.

    On a Chat Completions request (a JSON body with ``messages``) the answer opens
    with the role chunk and closes with the ``finish_reason: "stop"`` chunk (and a
    usage chunk with ``stream_options.include_usage``), as the API does. Other
    requests (the kit's generic clients) get one chunk per token and ``[DONE]``.
    """

    opening_optional = True
    completion_id: str = "chatcmpl-streamcheck"
    model: str = MODEL
    created: int = CREATED
    fingerprint: str = "fp_streamcheck"
    headers = (("x-request-id", REQUEST_ID),)

    def _chunk(self, choices: list[dict[str, Any]], **extra: object) -> str:
        return _json(
            {
                "id": self.completion_id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "system_fingerprint": self.fingerprint,
                "choices": choices,
                **extra,
            }
        )

    @functools.cached_property
    def _template(self) -> tuple[str, str]:
        # The chunk around the token, encoded once: only the token varies per event.
        marker = "\0token\0"
        choice = {"index": 0, "delta": {"content": marker}, "logprobs": None, "finish_reason": None}
        head, _, tail = self._chunk([choice]).partition(_json(marker))
        return head, tail

    @functools.cached_property
    def _data(self) -> Callable[[str], str]:
        return _token_data(*self._template)

    def data_event(self, index: int, token: str) -> WireEvent:
        return None, self._data(token)

    def terminal_event(self) -> WireEvent:
        return None, "[DONE]"

    def streams(self, call: Call) -> bool:
        return not call.asks_not_to_stream("messages")

    def opening(self, call: Call) -> Events:
        if not _is_chat(call):
            return ()
        delta = {"role": "assistant", "content": "", "refusal": None}
        return ((None, self._chunk([_choice(delta, None)])),)

    def ending(self, call: Call, text: str, count: int) -> Events:
        if not _is_chat(call):
            return (self.terminal_event(),)
        frames: list[WireEvent] = [(None, self._chunk([_choice({}, "stop")]))]
        options = call.body.get("stream_options") if call.body is not None else None
        if isinstance(options, Mapping) and options.get("include_usage") is True:
            frames.append((None, self._chunk([], usage=_chat_usage(call, count))))
        return (*frames, self.terminal_event())

    def error_event(self, after: int) -> WireEvent:
        return None, _json({"error": _openai_error(500, _OVERLOADED, {})})

    def reply(self, call: Call, text: str, count: int) -> bytes:
        message: dict[str, object] = {
            "role": "assistant",
            "content": text,
            "refusal": None,
            "annotations": [],
        }
        return _json(
            {
                "id": self.completion_id,
                "object": "chat.completion",
                "created": self.created,
                "model": self.model,
                "system_fingerprint": self.fingerprint,
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
                ],
                "usage": _chat_usage(call, count),
            }
        ).encode()

    def error_body(self, status: int, message: str, extra: Mapping[str, object]) -> bytes:
        return _json({"error": _openai_error(status, message, extra)}).encode()


def _is_chat(call: Call) -> bool:
    return call.body is not None and "messages" in call.body


def _choice(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}


def _chat_usage(call: Call, count: int) -> dict[str, int]:
    prompt = call.prompt_tokens
    return {"prompt_tokens": prompt, "completion_tokens": count, "total_tokens": prompt + count}


_OPENAI_ERRORS = {  # status -> (type, code)
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    409: ("invalid_request_error", None),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}


def _openai_error(status: int, message: str, extra: Mapping[str, object]) -> dict[str, object]:
    kind, code = _OPENAI_ERRORS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {"message": message, "type": kind, "param": None, "code": code, **extra}


# -- OpenAI Responses ----------------------------------------------------------------

_RESPONSE_ID = "resp_streamcheck"
_ITEM_ID = "msg_streamcheck"
_OPENING_EVENTS = 4  # response.created, .in_progress, .output_item.added, .content_part.added


@dataclass(frozen=True)
class ResponsesFormat(Wire):
    """OpenAI Responses: typed ``response.*`` events, ``response.output_text.delta`` per token."""

    model: str = MODEL
    headers = (("x-request-id", REQUEST_ID),)

    def data_event(self, index: int, token: str) -> WireEvent:
        return _typed(
            "response.output_text.delta",
            _OPENING_EVENTS - 1 + index,
            item_id=_ITEM_ID,
            output_index=0,
            content_index=0,
            delta=token,
            logprobs=[],
        )

    def terminal_event(self) -> WireEvent:
        return _typed("response.completed", 0, response=self._response("completed", None, 0, 0))

    def streams(self, call: Call) -> bool:
        return not call.asks_not_to_stream("input")

    def opening(self, call: Call) -> Events:
        pending = self._response("in_progress", None, 0, 0)
        item = _output_item("in_progress", None)
        return (
            _typed("response.created", 0, response=pending),
            _typed("response.in_progress", 1, response=pending),
            _typed("response.output_item.added", 2, output_index=0, item=item),
            _typed(
                "response.content_part.added",
                3,
                item_id=_ITEM_ID,
                output_index=0,
                content_index=0,
                part=_output_text(""),
            ),
        )

    def ending(self, call: Call, text: str, count: int) -> Events:
        seq = _OPENING_EVENTS + count
        where = {"item_id": _ITEM_ID, "output_index": 0, "content_index": 0}
        done = self._response("completed", text, call.prompt_tokens, count)
        return (
            _typed("response.output_text.done", seq, **where, text=text, logprobs=[]),
            _typed("response.content_part.done", seq + 1, **where, part=_output_text(text)),
            _typed(
                "response.output_item.done",
                seq + 2,
                output_index=0,
                item=_output_item("completed", text),
            ),
            _typed("response.completed", seq + 3, response=done),
        )

    def error_event(self, after: int) -> WireEvent:
        return _typed(
            "error", _OPENING_EVENTS + after, code="server_error", message=_OVERLOADED, param=None
        )

    def reply(self, call: Call, text: str, count: int) -> bytes:
        return _json(self._response("completed", text, call.prompt_tokens, count)).encode()

    def error_body(self, status: int, message: str, extra: Mapping[str, object]) -> bytes:
        return _json({"error": _openai_error(status, message, extra)}).encode()

    def _response(self, status: str, text: str | None, prompt: int, count: int) -> dict[str, Any]:
        usage = None
        if text is not None:
            usage = {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": count,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + count,
            }
        return {
            "id": _RESPONSE_ID,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": self.model,
            "output": [] if text is None else [_output_item("completed", text)],
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "metadata": {},
        }


def _typed(kind: str, sequence: int, **fields: object) -> WireEvent:
    return kind, _json({"type": kind, "sequence_number": sequence, **fields})


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _output_item(status: str, text: str | None) -> dict[str, Any]:
    content = [] if text is None else [_output_text(text)]
    return {
        "id": _ITEM_ID,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


# -- Anthropic Messages ------------------------------------------------------------


_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class AnthropicFormat(Wire):
    """Anthropic Messages: ``message_start`` ... ``content_block_delta`` ... ``message_stop``."""

    message_id: str = "msg_streamcheck"
    model: str = MODEL
    overload_status = 529
    headers = (("request-id", REQUEST_ID),)

    @functools.cached_property
    def _template(self) -> tuple[str, str]:
        marker = "\0token\0"
        delta = {"type": "text_delta", "text": marker}
        event = {"type": "content_block_delta", "index": 0, "delta": delta}
        head, _, tail = _json(event).partition(_json(marker))
        return head, tail

    @functools.cached_property
    def _data(self) -> Callable[[str], str]:
        return _token_data(*self._template)

    def data_event(self, index: int, token: str) -> WireEvent:
        return "content_block_delta", self._data(token)

    def terminal_event(self) -> WireEvent:
        return "message_stop", _json({"type": "message_stop"})

    def streams(self, call: Call) -> bool:
        return not call.asks_not_to_stream("messages")

    def opening(self, call: Call) -> Events:
        message = self._message([], None, {"input_tokens": call.prompt_tokens, "output_tokens": 1})
        block = {"type": "text", "text": ""}
        start = {"type": "content_block_start", "index": 0, "content_block": block}
        return (
            ("message_start", _json({"type": "message_start", "message": message})),
            ("content_block_start", _json(start)),
            ("ping", _json({"type": "ping"})),
        )

    def ending(self, call: Call, text: str, count: int) -> Events:
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": count},
        }
        return (
            ("content_block_stop", _json({"type": "content_block_stop", "index": 0})),
            ("message_delta", _json(delta)),
            self.terminal_event(),
        )

    def error_event(self, after: int) -> WireEvent:
        error = {"type": "overloaded_error", "message": _OVERLOADED}
        return "error", _json({"type": "error", "error": error})

    def reply(self, call: Call, text: str, count: int) -> bytes:
        usage = {"input_tokens": call.prompt_tokens, "output_tokens": count}
        return _json(self._message([{"type": "text", "text": text}], "end_turn", usage)).encode()

    def error_body(self, status: int, message: str, extra: Mapping[str, object]) -> bytes:
        kind = _ANTHROPIC_ERRORS.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        error = {"type": kind, "message": message, **extra}
        return _json({"type": "error", "error": error, "request_id": REQUEST_ID}).encode()

    def _message(
        self, content: list[dict[str, str]], stop: str | None, usage: dict[str, int]
    ) -> dict[str, Any]:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }


# -- Gemini ------------------------------------------------------------------------------


_GEMINI_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@dataclass(frozen=True)
class GeminiFormat(Wire):
    """Gemini ``streamGenerateContent?alt=sse``: ``data: {"candidates": [...]}`` chunks.

    Gemini has no end-of-stream event: the last chunk carries ``finishReason``
    (here a chunk with empty text, ``finishReason: "STOP"`` and the usage), and a
    stream cut before it is only recognisable by its absence.
    """

    model: str = MODEL
    overload_status = 503

    @functools.cached_property
    def _template(self) -> tuple[str, str]:
        marker = "\0token\0"
        head, _, tail = self._chunk(marker, None, None).partition(_json(marker))
        return head, tail

    def _chunk(self, text: str, finish: str | None, usage: dict[str, int] | None) -> str:
        candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}}
        if finish is not None:
            candidate["finishReason"] = finish
        candidate["index"] = 0
        chunk: dict[str, Any] = {"candidates": [candidate]}
        if usage is not None:
            chunk["usageMetadata"] = usage
        chunk["modelVersion"] = self.model
        chunk["responseId"] = "streamcheck"
        return _json(chunk)

    @functools.cached_property
    def _data(self) -> Callable[[str], str]:
        return _token_data(*self._template)

    def data_event(self, index: int, token: str) -> WireEvent:
        return None, self._data(token)

    def terminal_event(self) -> WireEvent:
        return None, self._chunk("", "STOP", None)

    def streams(self, call: Call) -> bool:
        return ":generateContent" not in call.path

    def ending(self, call: Call, text: str, count: int) -> Events:
        return ((None, self._chunk("", "STOP", _gemini_usage(call, count))),)

    def error_event(self, after: int) -> WireEvent:
        return None, _json({"error": _gemini_error(503, _OVERLOADED, {})})

    def reply(self, call: Call, text: str, count: int) -> bytes:
        return self._chunk(text, "STOP", _gemini_usage(call, count)).encode()

    def error_body(self, status: int, message: str, extra: Mapping[str, object]) -> bytes:
        return _json({"error": _gemini_error(status, message, extra)}).encode()


def _gemini_usage(call: Call, count: int) -> dict[str, int]:
    prompt = call.prompt_tokens
    return {
        "promptTokenCount": prompt,
        "candidatesTokenCount": count,
        "totalTokenCount": prompt + count,
    }


def _gemini_error(status: int, message: str, extra: Mapping[str, object]) -> dict[str, object]:
    return {
        "code": status,
        "message": message,
        "status": _GEMINI_STATUSES.get(status, "UNKNOWN"),
        **extra,
    }


# -- which provider a path belongs to ------------------------------------------------------

PROVIDERS: dict[str, Wire] = {
    "openai": OpenAIFormat(),
    "responses": ResponsesFormat(),
    "anthropic": AnthropicFormat(),
    "gemini": GeminiFormat(),
}


def provider_for_path(path: str) -> str | None:
    """The provider whose API ``path`` is (by its ending), or None for any other path.

    ``.../chat/completions`` is openai, ``.../responses`` responses, ``.../messages``
    anthropic, and ``...:streamGenerateContent`` / ``...:generateContent`` gemini.
    """
    path = path.rstrip("/")
    if path.endswith((":streamGenerateContent", ":generateContent")):
        return "gemini"
    for ending, name in (
        ("/chat/completions", "openai"),
        ("/responses", "responses"),
        ("/messages", "anthropic"),
    ):
        if path.endswith(ending):
            return name
    return None


# The path each provider's SDK appends to its base URL (one each; provider_for_path
# reads the endings): a server with a default format answers its plain endpoints as
# though the request had come on the endpoint's path plus this.
PROVIDER_PATHS: dict[str, str] = {
    "openai": "/chat/completions",
    "responses": "/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/streamcheck-fake-1:streamGenerateContent",
}


def provider_headers(path: str) -> tuple[tuple[str, str], ...]:
    """The headers ``path``'s provider sends with every response (its request id)."""
    name = provider_for_path(path)
    return () if name is None else PROVIDERS[name].headers


def provider_error_body(
    path: str, status: int, message: str | None = None, extra: Mapping[str, object] | None = None
) -> bytes | None:
    """The error body for ``status`` in the shape of ``path``'s provider; None off their paths."""
    name = provider_for_path(path)
    if name is None:
        return None
    return PROVIDERS[name].error_body(status, message or _message(status), extra or {})
