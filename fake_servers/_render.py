"""The planner: turns one script step into the exact bytes and pauses to play.

Pure: no IO, no clock, no global randomness. Every random choice comes from a
``random.Random`` seeded by ``(seed, path, attempt)``, so a plan is reproducible
and the app only has to play it.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus

from fake_servers._formats import WireEvent, get_format, token
from fake_servers._ledger import EventKind
from fake_servers._providers import (
    Call,
    Wire,
    provider_error_body,
    provider_headers,
    wire_of,
)
from fake_servers._script import Framing, Gap, Headers, Respond, Stream

__all__ = [
    "Abort",
    "Action",
    "Hold",
    "PlannedEvent",
    "Send",
    "StreamPlan",
    "error_body",
    "plan_respond",
    "plan_stream",
]

_EOL = {"lf": "\n", "cr": "\r", "crlf": "\r\n"}
_BOM = "\ufeff"
_COMMENT_TEXT = "ping"
_KEEPALIVE_TEXT = "keepalive"
STREAM_HEADERS: Headers = (("cache-control", "no-cache"), ("x-accel-buffering", "no"))
_NO_BODY_STATUSES = frozenset({204, 304})
_JSON_TYPE = "application/json"


@dataclass(frozen=True)
class PlannedEvent:
    """An event (or comment / retry field) a write completes, as the ledger records it."""

    index: int
    kind: EventKind
    id: str | None
    data: str


@dataclass(frozen=True)
class Send:
    """Wait ``pause`` seconds, then write ``data``; it completes ``events``."""

    data: bytes
    pause: float = 0.0
    events: tuple[PlannedEvent, ...] = ()


@dataclass(frozen=True)
class Hold:
    """A stall: silence, or ``comment`` every ``keepalive`` s, for ``seconds`` (None: forever)."""

    seconds: float | None
    keepalive: float | None
    comment: bytes


@dataclass(frozen=True)
class Abort:
    """Break the connection: no terminating chunk."""


Action = Send | Hold | Abort


@dataclass(frozen=True)
class StreamPlan:
    """Everything one streamed response does, in order."""

    status: int
    headers: Headers
    delay: float  # before the headers
    actions: tuple[Action, ...]
    before_headers: Hold | None = None  # a non-streaming reply's stall: no headers yet


def plan_stream(
    step: Stream,
    *,
    seed: int,
    path: str,
    attempt: int,
    last_event_id: str | None,
    call: Call | None = None,
) -> StreamPlan:
    """Plan the response to one attempt that the script answers with ``step``.

    Args:
        step: The script's stream step.
        seed: The scenario seed; the answer's tokens derive from it and ``path``.
        path: The endpoint path.
        attempt: The attempt number on the endpoint; seeds gaps and splits.
        last_event_id: The request's Last-Event-ID header, if any.
        call: What the request asked for; a provider format answers a request
            that did not ask to stream with its non-streaming reply.

    Returns:
        The status, headers, delay and the actions to play.
    """
    rng = random.Random(f"{seed}|{path}|{attempt}")
    wire = wire_of(get_format(step.format, path))
    call = call if call is not None else Call(path)
    if not wire.streams(call):
        return _plan_reply(step, wire, call, seed=seed, path=path, rng=rng)
    eol = _EOL[step.framing.line_ending]
    first = _first_index(step, last_event_id)
    script = _Script(step, wire, call, seed, path)
    writes = list(_writes(script, first=first, eol=eol, rng=rng))
    actions = _with_stall(step, writes)
    if step.framing.bom:
        actions = _with_bom(actions)
    actions = _buffered(actions) if step.framing.buffered else _coalesced(actions)
    if step.framing.split > 0:
        actions = _split(actions, step.framing, rng)
    headers = (
        ("content-type", step.framing.content_type),
        *STREAM_HEADERS,
        *provider_headers(path),
        *step.headers,
    )
    return StreamPlan(status=step.status, headers=headers, delay=step.delay, actions=actions)


@dataclass(frozen=True)
class _Script:
    """One stream step and what its answer is made of."""

    step: Stream
    wire: Wire
    call: Call
    seed: int
    path: str

    def token(self, index: int) -> str:
        return token(self.seed, self.path, index)

    def text(self) -> str:
        """The whole answer, whatever part of it this attempt sends."""
        return "".join(self.token(i) for i in range(1, self.step.events + 1))


def _plan_reply(
    step: Stream, wire: Wire, call: Call, *, seed: int, path: str, rng: random.Random
) -> StreamPlan:
    """The answer to a request that did not ask to stream: one JSON body.

    The body leaves when the stream would have ended (the delay plus every gap).
    A stall holds back the headers; ``truncate`` and ``abort`` cut the body in
    half (ending cleanly, or breaking the connection); ``error`` becomes the
    provider's overload status and error body. The ledger gets the tokens and the
    terminal only with a whole body, the one way the client can read them.
    """
    script = _Script(step, wire, call, seed, path)
    status = step.status
    events: tuple[PlannedEvent, ...] = ()
    if step.end == "error":
        status, body = wire.overload_reply()
    else:
        body = wire.reply(call, script.text(), step.events)
        if step.end == "done":
            count = step.events
            tokens = (PlannedEvent(i, "data", None, script.token(i)) for i in range(1, count + 1))
            events = (*tokens, PlannedEvent(count + 1, "terminal", None, body.decode()))
        else:
            body = body[: len(body) // 2]
    delay = step.delay + sum(_gap(step.gap, rng) for _ in range(step.events))
    actions: tuple[Action, ...] = (Send(body, 0.0, events),)
    if step.framing.split > 0:
        actions = _split(actions, step.framing, rng)
    if step.end in ("abort", "abort_mid_line"):
        actions = (*actions, Abort())
    content_type = step.framing.content_type
    if content_type == Framing.content_type:
        content_type = _JSON_TYPE
    headers = (("content-type", content_type), *provider_headers(path), *step.headers)
    hold = None if step.stall is None else Hold(step.stall.seconds, None, b"")
    return StreamPlan(status, headers, delay, actions, before_headers=hold)


def _first_index(step: Stream, last_event_id: str | None) -> int:
    """The first event to send: after a numeric Last-Event-ID when resuming is on."""
    if not (step.ids and step.resume and last_event_id):
        return 1
    text = last_event_id.strip()
    return int(text) + 1 if text.isdecimal() else 1


def _writes(script: _Script, *, first: int, eol: str, rng: random.Random) -> Iterator[Send]:
    """The writes in order, gaps as pauses; the stall is added afterwards."""
    step, wire = script.step, script.wire
    framing = step.framing
    if framing.retry_ms is not None:
        retry = PlannedEvent(0, "retry", None, str(framing.retry_ms))
        yield Send(f"retry: {framing.retry_ms}{eol}{eol}".encode(), events=(retry,))
    opening = _frames_text(wire.opening(script.call), eol)
    if opening:
        yield Send(opening.encode())
    sent = 0  # events written so far, for the gap before the next one
    for index in range(first, step.events + 1):
        name, data = wire.data_event(index, script.token(index))
        event_id = str(index) if step.ids else None
        text = _event_text(event_id, name, data, eol)
        events = [PlannedEvent(index, "data", event_id, data)]
        if framing.comment_every > 0 and index % framing.comment_every == 0:
            text = f": {_COMMENT_TEXT}{eol}{text}"
            events.insert(0, PlannedEvent(0, "comment", None, _COMMENT_TEXT))
        yield Send(text.encode(), _gap(step.gap, rng) if sent else 0.0, tuple(events))
        sent += 1
    pause = _gap(step.gap, rng) if sent else 0.0
    last = max(first, step.events + 1)
    if step.end == "done":
        frames = wire.ending(script.call, script.text(), step.events)
        terminal = PlannedEvent(last, "terminal", None, frames[-1][1])
        yield Send(_frames_text(frames, eol).encode(), pause, (terminal,))
    elif step.end == "error":
        name, data = wire.error_event(step.events)
        yield Send(_event_text(None, name, data, eol).encode(), pause)
    elif step.end == "abort_mid_line":
        name, data = wire.data_event(last, script.token(last))
        yield Send(_cut_mid_line(str(last) if step.ids else None, name, data, eol), pause)


def _frames_text(frames: tuple[WireEvent, ...], eol: str) -> str:
    return "".join(_event_text(None, name, data, eol) for name, data in frames)


def _event_text(event_id: str | None, name: str | None, data: str, eol: str) -> str:
    lines = [f"id: {event_id}"] if event_id is not None else []
    if name is not None:
        lines.append(f"event: {name}")
    lines.extend(f"data: {part}" for part in data.split("\n"))
    return eol.join(lines) + eol + eol


def _cut_mid_line(event_id: str | None, name: str | None, data: str, eol: str) -> bytes:
    """The event's bytes up to the middle of its data line, inside a character if any."""
    head = _event_text(event_id, name, "", eol).encode()
    head = head[: head.rindex(b"data: ") + len(b"data: ")]
    line = data.encode()
    wide = next((i for i, ch in enumerate(data) if ord(ch) > 0x7F), None)
    cut = len(data[:wide].encode()) + 1 if wide is not None else max(1, len(line) // 2)
    return head + line[:cut]


def _gap(gap: Gap, rng: random.Random) -> float:
    if gap.kind == "uniform":
        return rng.uniform(gap.low, gap.high)
    if gap.kind == "exponential":
        return rng.expovariate(1.0 / gap.seconds) if gap.seconds > 0 else 0.0
    return gap.seconds


def _with_stall(step: Stream, writes: list[Send]) -> tuple[Action, ...]:
    """Insert the stall after ``after`` data events and end with Abort if scripted."""
    actions: list[Action] = list(writes)
    if step.stall is not None:
        at = _stall_position(writes, step.stall.after)
        # The stall replaces the gap before the write that follows it.
        if at < len(actions):
            follower = writes[at]
            actions[at] = Send(follower.data, 0.0, follower.events)
        comment = f": {_KEEPALIVE_TEXT}{_EOL[step.framing.line_ending]}".encode()
        actions.insert(at, Hold(step.stall.seconds, step.stall.keepalive, comment))
    if step.end in ("abort", "abort_mid_line"):
        actions.append(Abort())
    return tuple(actions)


def _stall_position(writes: list[Send], after: int) -> int:
    """The write the stall goes before: after ``after`` data events (0: before any).

    Past the last data event, the stall goes before the ending (terminal or partial line).
    """
    total = sum(1 for w in writes for e in w.events if e.kind == "data")
    after = min(after, total)
    data_seen = 0
    for position, write in enumerate(writes):
        starts_content = not write.events or any(e.kind != "retry" for e in write.events)
        if data_seen >= after and starts_content:
            return position
        data_seen += sum(1 for e in write.events if e.kind == "data")
    return len(writes)


def _with_bom(actions: tuple[Action, ...]) -> tuple[Action, ...]:
    bom = _BOM.encode()
    for position, action in enumerate(actions):
        if isinstance(action, Send):
            first = Send(bom + action.data, action.pause, action.events)
            return (*actions[:position], first, *actions[position + 1 :])
        if isinstance(action, Hold):
            break  # bytes must start with the BOM: put it before the stall
    return (Send(bom), *actions)


def _buffered(actions: tuple[Action, ...]) -> tuple[Action, ...]:
    """One write at the end carrying everything; a stall still comes first."""
    sends = [a for a in actions if isinstance(a, Send)]
    others = [a for a in actions if isinstance(a, Hold)]
    tail = [a for a in actions if isinstance(a, Abort)]
    if not sends:
        return actions
    return (*others, _merge(sends, pause=sum(s.pause for s in sends)), *tail)


def _coalesced(actions: tuple[Action, ...]) -> tuple[Action, ...]:
    """Writes with no pause between them go out as one write, as a busy server's would.

    TCP would be free to merge them anyway; merging here saves a syscall and a pass
    through Hypercorn per event. Events keep their order; they share the write's time.
    """
    out: list[Action] = []
    group: list[Send] = []
    for action in (*actions, None):
        if isinstance(action, Send) and group and action.pause == 0:
            group.append(action)
            continue
        if group:
            out.append(_merge(group, pause=group[0].pause))
            group = []
        if isinstance(action, Send):
            group.append(action)
        elif action is not None:
            out.append(action)
    return tuple(out)


def _merge(sends: list[Send], pause: float) -> Send:
    if len(sends) == 1 and sends[0].pause == pause:
        return sends[0]
    return Send(b"".join(s.data for s in sends), pause, tuple(e for s in sends for e in s.events))


def _split(actions: tuple[Action, ...], framing: Framing, rng: random.Random) -> tuple[Action, ...]:
    """Cut every write into pieces of at most ``split`` bytes; the last one completes its events."""
    out: list[Action] = []
    for action in actions:
        if not isinstance(action, Send) or len(action.data) <= 1:
            out.append(action)
            continue
        pieces = list(_pieces(action.data, framing, rng))
        for number, piece in enumerate(pieces):
            pause = action.pause if number == 0 else framing.split_pause
            events = action.events if number == len(pieces) - 1 else ()
            out.append(Send(piece, pause, events))
    return tuple(out)


def _pieces(data: bytes, framing: Framing, rng: random.Random) -> Iterator[bytes]:
    start = 0
    while start < len(data):
        size = rng.randint(1, framing.split) if framing.split_random else framing.split
        yield data[start : start + size]
        start += size


def plan_respond(
    step: Respond, *, sent_at_epoch: float, path: str | None = None
) -> tuple[int, Headers, bytes]:
    """The status, headers and body of a plain response.

    Args:
        step: The script's respond step.
        sent_at_epoch: Wall-clock (Unix) time of sending, for a Retry-After date.
        path: The request path; on a provider's path an unscripted body is that
            provider's error body (so its SDK parses it).

    Returns:
        Status, headers (with content-type and content-length unless the script
        set them) and body.
    """
    headers = list(step.headers)
    names = {name.lower() for name, _ in headers}
    if path is not None:
        headers += [(k, v) for k, v in provider_headers(path) if k not in names]
    body = step.body
    if step.status in _NO_BODY_STATUSES:
        body = b""  # HTTP forbids one; Hypercorn would fail sending it
    elif body is None:
        provider_body = provider_error_body(path, step.status) if path is not None else None
        body = provider_body if provider_body is not None else error_body(step.status)
        if "content-type" not in names:
            headers.append(("content-type", "application/json"))
    if step.retry_after_date is not None:
        when = math.ceil(sent_at_epoch + step.retry_after_date)
        date = datetime.fromtimestamp(when, tz=UTC)
        headers.append(("retry-after", email.utils.format_datetime(date, usegmt=True)))
    if "content-length" not in names and step.status not in _NO_BODY_STATUSES:
        headers.append(("content-length", str(len(body))))
    return step.status, tuple(headers), body


def error_body(status: int, message: str | None = None, **extra: object) -> bytes:
    """A JSON error body in the usual LLM API shape that names ``status``."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown Status"
    error: dict[str, object] = {
        "type": _error_type(status),
        "message": message or f"{status} {phrase} (scripted by fake_servers)",
        "status": status,
    }
    error.update(extra)
    return json.dumps({"error": error}, ensure_ascii=False).encode()


def _error_type(status: int) -> str:
    known = {
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        405: "method_not_allowed",
        413: "request_too_large",
        415: "unsupported_media_type",
        429: "rate_limit_error",
        503: "overloaded_error",
    }
    if status in known:
        return known[status]
    return "api_error" if status >= 500 else "invalid_request_error"
