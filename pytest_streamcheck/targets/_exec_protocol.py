"""Exec protocol v1, the pure part: command lines out, checked event lines in."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any, Final, Literal, cast, get_args

from conformance._adapter import (
    AdapterInfo,
    AdapterRequest,
    Reports,
    StreamSink,
    check_api,
    check_capabilities,
)
from conformance._case import JsonBody, MultipartBody
from conformance._evidence import ERROR_KINDS, ErrorKind

__all__ = [
    "HELLO_TIMEOUT",
    "LAG_EVENT",
    "PROTOCOL_VERSION",
    "REPLIES",
    "STREAM_EVENTS",
    "ProtocolError",
    "Reply",
    "StreamEventType",
    "check_event",
    "deliver",
    "encode",
    "on_kit_clock",
    "parse_event",
    "parse_hello",
    "parse_lag",
    "probes_lag",
    "stream_command",
]

PROTOCOL_VERSION: Final = 1
# Seconds a client has to start and answer ``hello`` (an exec process, a browser page),
# unless --streamcheck-hello-timeout says otherwise.
HELLO_TIMEOUT: Final = 10.0

Reply = Literal["hello", "configured", "reset"]
StreamEventType = Literal["chunk", "comment", "state", "error", "done", "log"]
REPLIES: tuple[Reply, ...] = get_args(Reply)
STREAM_EVENTS: tuple[StreamEventType, ...] = get_args(StreamEventType)
# The client's own event-loop lag (optional: a hello with "lag_probe": true), as
# [due, woke, due, woke, ...] in seconds on the wall clock (the Unix epoch).
LAG_EVENT: Final = "lag"


class ProtocolError(ValueError):
    """A stdout line or reply that breaks protocol v1; the message says how."""


def encode(command: Mapping[str, Any]) -> bytes:
    """One command as a JSON line (ASCII-safe, no NaN: any JSON parser reads it)."""
    return json.dumps(command, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def stream_command(request: AdapterRequest) -> dict[str, Any]:
    """The ``stream`` command for ``request``, with its body mapped per the protocol."""
    req = request.request
    return {
        "cmd": "stream",
        "stream": req.stream,
        "url": request.url,
        "method": req.method,
        "headers": dict(req.headers),
        "body": _body(req.body),
        "idempotent": req.idempotent,
        "cancel_after": req.cancel_after,
        "client": req.client,
        "comments": req.comments,
        "last_event_id": req.last_event_id,
    }


def _body(body: JsonBody | MultipartBody | None) -> dict[str, Any] | None:
    if body is None:
        return None
    if isinstance(body, JsonBody):
        return {"json": body.value}
    files = [
        {
            "name": name,
            "filename": filename,
            "content_type": content_type,
            "base64": base64.b64encode(data).decode("ascii"),
        }
        for name, filename, content_type, data in body.files
    ]
    return {"multipart": {"fields": dict(body.fields), "files": files}}


def parse_event(line: bytes) -> dict[str, Any] | None:
    """One stdout line as an event object; None for a blank line.

    Raises:
        ProtocolError: the line is not UTF-8, not a JSON object, has an unknown
            ``type``, or a stream event without its string ``stream`` id.
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"is not UTF-8 ({exc.reason})") from None
    if not text.strip():
        return None
    try:
        event = json.loads(text)
    except ValueError as exc:
        raise ProtocolError(f"is not JSON ({exc})") from None
    return check_event(event)


def check_event(event: object) -> dict[str, Any]:
    """A decoded event (a JSON value: from a stdout line, or a browser page's emit) as
    an event object.

    Raises:
        ProtocolError: it is not an object, has an unknown ``type``, or is a stream
            event without its string ``stream`` id.
    """
    if not isinstance(event, dict):
        raise ProtocolError(f"is JSON but not an object (a {type(event).__name__})")
    kind = event.get("type")
    if kind not in REPLIES and kind not in STREAM_EVENTS and kind != LAG_EVENT:
        valid = ", ".join((*REPLIES, *STREAM_EVENTS, LAG_EVENT))
        raise ProtocolError(f"has an unknown type {kind!r}; protocol v1 events are {valid}")
    if kind in STREAM_EVENTS and kind != "log" and not isinstance(event.get("stream"), str):
        raise ProtocolError(f'is a {kind} event without a string "stream" id')
    return event


def parse_hello(reply: Mapping[str, Any], default_name: str) -> tuple[AdapterInfo, list[str]]:
    """The client's identity from its ``hello`` reply.

    The list is always empty: it once held the capabilities the kit did not know,
    which are now refused (a typo would drop a capability unseen, and the cases that
    need it would end UNSUPPORTED with nothing said). Kept for its callers.

    Raises:
        ProtocolError: a wrong protocol version, a malformed field, or an unknown
            capability (named, with the ones protocol v1 knows).
    """
    if reply.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(
            f"its hello reply says protocol {reply.get('protocol')!r}; "
            f"the kit speaks protocol {PROTOCOL_VERSION}"
        )
    name = _text(reply, "name", "hello") or default_name
    version = _text(reply, "version", "hello") or "unknown"
    profile = _text(reply, "profile", "hello")
    wire_format = _text(reply, "format", "hello")
    named = reply.get("capabilities", [])
    if not isinstance(named, list) or not all(isinstance(c, str) for c in named):
        raise ProtocolError(f"hello.capabilities must be a list of strings, got {named!r}")
    try:
        capabilities = check_capabilities(named, "hello.capabilities")
        # An exec client that names no adapter API was written against API 1, which
        # had no such field: read as 1 without a word (it cannot see a Python warning).
        api = check_api(reply.get("api", 1), "hello.api")
        reports = cast("Reports", _text(reply, "reports", "hello") or "events")
        info = AdapterInfo(  # which checks ``reports`` as it is made
            name, version, capabilities, profile, wire_format, reports=reports, api=api
        )
    except ValueError as exc:
        raise ProtocolError(str(exc)) from None
    return info, []


def probes_lag(reply: Mapping[str, Any]) -> bool:
    """Whether the ``hello`` reply says the client probes its own loop (``lag_probe``).

    Raises:
        ProtocolError: the field is there and not a boolean.
    """
    value = reply.get("lag_probe", False)
    if not isinstance(value, bool):
        raise ProtocolError(f"hello.lag_probe must be true or false, got {value!r}")
    return value


def parse_lag(
    event: Mapping[str, Any], wall_offset: float, latest: float
) -> list[tuple[float, float]]:
    """A ``lag`` event's wake-ups as (due, woke) on the kit's clock.

    Args:
        event: The checked event.
        wall_offset: The wall clock minus the kit's clock, read as the event arrived:
            both processes read one system clock, so this maps the client's stamps.
        latest: The event's arrival on the kit's clock: nothing woke later than that.

    Raises:
        ProtocolError: ``rows`` is not a list of an even number of numbers.
    """
    rows = event.get("rows")
    if (
        not isinstance(rows, list)
        or len(rows) % 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in rows)
    ):
        raise ProtocolError('a lag event needs "rows": [due, woke, ...] as numbers')
    return [on_kit_clock(rows[i], rows[i + 1], wall_offset, latest) for i in range(0, len(rows), 2)]


def on_kit_clock(due: float, woke: float, offset: float, latest: float) -> tuple[float, float]:
    """A client's lag row (seconds on its own clock) as (due, woke) on the kit's clock:
    ``offset`` is its clock minus the kit's; nothing woke after ``latest`` (the row's
    arrival), and nothing was due after it woke. The exec ``lag`` event and the
    browser page's probe both map their rows here."""
    woke_at = min(woke - offset, latest)
    return min(due - offset, woke_at), woke_at


def deliver(sink: StreamSink, event: Mapping[str, Any], at: float | None = None) -> bool:
    """Hand one stream event to its sink, stamped ``at`` (default: now); True if it ends
    the stream.

    Raises:
        ProtocolError: a field has the wrong type.
        StreamCancelled: the runner cancelled the stream (from ``sink.chunk`` or
            ``sink.comment``).
    """
    kind = event["type"]
    if kind == "chunk":
        data = _text(event, "data", "chunk")
        if data is None:
            raise ProtocolError('a chunk event needs a string "data"')
        chunk_id, chunk_event = _text(event, "id", "chunk"), _text(event, "event", "chunk")
        sink.chunk(data, id=chunk_id, event=chunk_event, at=at)
    elif kind == "comment":
        text = _text(event, "text", "comment")
        if text is None:
            raise ProtocolError('a comment event needs a string "text"')
        sink.comment(text, at=at)
    elif kind == "state":
        state = _text(event, "state", "state")
        if state is None:
            raise ProtocolError('a state event needs a string "state"')
        delay = _number(event, "delay", "state")
        sink.state(state, delay=delay, detail=_text(event, "detail", "state") or "", at=at)
    elif kind == "error":
        error, detail = _error_kind(event)
        sink.error(error, detail, status=_status(event), at=at)
    elif kind == "done":
        sink.done(at=at)
    elif kind == "log":
        sink.log(_text(event, "message", "log") or "", at=at)
    return kind in ("done", "error")


def _error_kind(event: Mapping[str, Any]) -> tuple[ErrorKind, str]:
    kind = _text(event, "kind", "error")
    detail = _text(event, "detail", "error") or ""
    if kind in ERROR_KINDS:
        return kind, detail
    # A kind outside the vocabulary is the client's mistake, not the kit's: keep it visible.
    return "other", f"[kind {kind!r} is not in protocol v1] {detail}".rstrip()


def _text(event: Mapping[str, Any], key: str, where: str) -> str | None:
    value = event.get(key)
    if value is not None and not isinstance(value, str):
        raise ProtocolError(f"{where}.{key} must be a string, got {value!r}")
    return value


def _number(event: Mapping[str, Any], key: str, where: str) -> float | None:
    value = event.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError(f"{where}.{key} must be a number, got {value!r}")
    return float(value)


def _status(event: Mapping[str, Any]) -> int | None:
    value = event.get("status")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ProtocolError(f"error.status must be an integer, got {value!r}")
    return value
