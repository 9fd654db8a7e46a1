"""The planner: turns one script step into the exact bytes and pauses to play.

Pure: no IO, no clock, no global randomness. Every random choice comes from a
``random.Random`` seeded by ``(seed, path, attempt)``, so a plan is reproducible
and the app only has to play it. A plan unfolds as it is played, a bounded piece
of work at a time, so no response, however long, stalls the others.
"""

from __future__ import annotations

import email.utils
import functools
import json
import math
import random
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from typing import NamedTuple, cast

from fake_servers._formats import KIT_FORMATS, Answer, WireEvent, answer, get_format
from fake_servers._ledger import EventKind
from fake_servers._limits import MAX_WRITE_BYTES
from fake_servers._marks import mark
from fake_servers._providers import (
    Call,
    Wire,
    format_of,
    provider_error_body,
    provider_headers,
    wire_of,
)
from fake_servers._script import Framing, Gap, Headers, Raw, Respond, Stream

__all__ = [
    "BATCH",
    "Abort",
    "Action",
    "Head",
    "Hold",
    "Move",
    "PlannedEvent",
    "Send",
    "StreamPlan",
    "Yield",
    "error_body",
    "plan_raw",
    "plan_respond",
    "plan_stream",
    "retry_hint",
]

_EOL = {"lf": "\n", "cr": "\r", "crlf": "\r\n"}
_BOM = "\ufeff"
_COMMENT_TEXT = "ping"
_KEEPALIVE_TEXT = "keepalive"
STREAM_HEADERS: Headers = (("cache-control", "no-cache"), ("x-accel-buffering", "no"))
_NO_BODY_STATUSES = frozenset({204, 304})
_JSON_TYPE = "application/json"
# Work between two chances for the other responses to run: a few milliseconds at most.
BATCH = 256  # tokens, gap draws, held writes or ledger events (about 3 ms)


# PlannedEvent and Send are made once per event: named tuples, which cost a third of a
# frozen dataclass to make (and are as immutable).
class PlannedEvent(NamedTuple):
    """An event (or comment / retry field) a write completes, as the ledger records it."""

    index: int  # type: ignore[assignment]  # the field hides tuple.index, on purpose
    kind: EventKind
    id: str | None
    data: str


class Send(NamedTuple):
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


@dataclass(frozen=True)
class Head:
    """Send the status line and the headers now."""


@dataclass(frozen=True)
class Yield:
    """Nothing to send: a point where the player lets the other responses run."""


Action = Send | Hold | Abort  # what the client gets
Move = Action | Head | Yield  # what the player does, in order


@dataclass(frozen=True)
class StreamPlan:
    """One streamed response: its status and headers, and the inputs its moves unfold from.

    ``moves()`` makes the moves as they are played, a bounded amount of work at a
    time with a ``Yield`` between, so a response of a million events starts at
    once, holds little memory, and never keeps the server from the others.
    """

    status: int
    headers: Headers
    delay: float  # before anything
    step: Stream
    script: _Script
    attempt: int
    first: int  # the first event to send (after a Last-Event-ID)
    streams: bool  # an SSE stream; False: the whole reply to a request that did not ask

    def moves(self) -> Iterator[Move]:
        """Every move in order, from the start each time (the randomness is seeded)."""
        rng = random.Random(f"{self.script.seed}|{self.script.path}|{self.attempt}")
        if self.streams:
            yield Head()
            yield from _stream_actions(self.script, self.first, rng)
        else:
            yield from _reply_moves(self.script, rng)

    @property
    def data_source(self) -> DataSource | None:
        """What makes each data event's data from its index again, for the ledger.

        None when the format is not one of the kit's own (whose events are pure
        functions of index and token): the ledger then keeps the data as sent.
        """
        if type(format_of(self.script.wire)) not in KIT_FORMATS:
            return None
        script = self.script
        return DataSource(script.wire, script.seed, script.path, not self.streams, script.marked)

    @property
    def actions(self) -> tuple[Action, ...]:
        """What the client gets after the headers, all at once (for small plans and tests)."""
        moves = iter(self.moves())
        for move in moves:
            if isinstance(move, Head):
                break
        return tuple(move for move in moves if isinstance(move, Send | Hold | Abort))


def plan_stream(
    step: Stream,
    *,
    seed: int,
    path: str,
    attempt: int,
    last_event_id: str | None,
    call: Call | None = None,
    marked: int | None = None,
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
        marked: The attempt's ledger seq, for a marked answer (``fake_servers._marks``):
            each token then says which attempt sent it and where it stands.

    Returns:
        The status, headers and delay, and the moves to play.
    """
    wire = wire_of(get_format(step.format, path))
    call = call if call is not None else Call(path)
    script = _Script(step, wire, call, seed, path, marked)
    if not wire.streams(call):
        return _plan_reply(script, attempt)
    headers = (
        ("content-type", step.framing.content_type),
        *STREAM_HEADERS,
        *provider_headers(path),
        *step.headers,
    )
    first = _first_index(step, last_event_id)
    return StreamPlan(step.status, headers, step.delay, step, script, attempt, first, True)


@dataclass(frozen=True)
class DataSource:
    """The data of data event ``index`` of any answer on ``path``: what the plan sent.

    A stream's data event carries the format's event for the token; a reply's (the
    answer to a request that did not ask to stream) the token itself.
    """

    wire: Wire
    seed: int
    path: str
    reply: bool
    marked: int | None = None  # a marked answer's attempt seq (``fake_servers._marks``)

    def __call__(self, index: int) -> str:
        word = _word(self.seed, self.path, self.marked, index)
        return word if self.reply else self.wire.data_event(index, word)[1]


def _word(seed: int, path: str, marked: int | None, index: int) -> str:
    return answer(seed, path).token(index) if marked is None else mark(marked, index)


@dataclass(frozen=True)
class _Script:
    """One stream step and what its answer is made of."""

    step: Stream
    wire: Wire
    call: Call
    seed: int
    path: str
    marked: int | None = None  # a marked answer's attempt seq (``fake_servers._marks``)

    @property
    def answer(self) -> Answer:
        return answer(self.seed, self.path)

    def token(self, index: int) -> str:
        return _word(self.seed, self.path, self.marked, index)

    def text(self, tokens: list[str], first: int) -> Generator[Yield, None, str]:
        """The whole answer: the tokens before ``first`` made here, then ``tokens`` (sent)."""
        before: list[str] = []
        for index in range(1, min(first, self.step.events + 1)):
            before.append(self.token(index))
            if index % BATCH == 0:
                yield Yield()
        return "".join(before) + "".join(tokens)


def _stream_actions(script: _Script, first: int, rng: random.Random) -> Iterator[Action | Yield]:
    step = script.step
    eol = _EOL[step.framing.line_ending]
    sent = max(0, step.events - first + 1)  # data events this attempt sends
    actions = _with_stall(step, _writes(script, first=first, eol=eol, rng=rng), sent)
    if step.framing.bom:
        actions = _with_bom(actions)
    actions = _buffered(actions) if step.framing.buffered else _coalesced(actions)
    if step.framing.split > 0:
        actions = _split(actions, step.framing, rng)
    return actions


def _plan_reply(script: _Script, attempt: int) -> StreamPlan:
    """The answer to a request that did not ask to stream: one JSON body.

    The headers and the body leave when the stream would have ended (the delay
    plus every gap). A stall holds back the headers; ``truncate`` and ``abort``
    cut the body in half (ending cleanly, or breaking the connection); ``error``
    becomes the provider's overload status and error body. The ledger gets the
    tokens and the terminal only with a whole body, the one way the client can read them.
    """
    step, path = script.step, script.path
    status = script.wire.overload_reply()[0] if step.end == "error" else step.status
    content_type = step.framing.content_type
    if content_type == Framing.content_type:
        content_type = _JSON_TYPE
    headers = (("content-type", content_type), *provider_headers(path), *step.headers)
    return StreamPlan(status, headers, step.delay, step, script, attempt, 1, False)


def _reply_moves(script: _Script, rng: random.Random) -> Iterator[Move]:
    step, wire, call = script.step, script.wire, script.call
    wait = 0.0
    for index in range(step.events):
        wait += _gap(step.gap, rng)
        if index % BATCH == BATCH - 1:
            yield Yield()
    events: tuple[PlannedEvent, ...] = ()
    if step.end == "error":
        body = wire.overload_reply()[1]
    else:
        tokens = yield from _tokens(script)
        body = wire.reply(call, "".join(tokens), step.events)
        if step.end == "done":
            rows: list[tuple[int, EventKind, str | None, str]] = [
                (i, "data", None, t) for i, t in enumerate(tokens, start=1)
            ]
            rows.append((step.events + 1, "terminal", None, body.decode()))
            events = yield from _planned(rows)
        else:
            body = body[: len(body) // 2]
    if wait > 0:
        yield Hold(wait, None, b"")  # silence before the headers
    if step.stall is not None:
        yield Hold(step.stall.seconds, None, b"")
    yield Head()
    actions: Iterator[Action] = iter((Send(body, 0.0, events),))
    if step.framing.split > 0:
        actions = cast(Iterator[Action], _split(actions, step.framing, rng))
    yield from actions
    if step.end in ("abort", "abort_mid_line"):
        yield Abort()


def _tokens(script: _Script) -> Generator[Yield, None, list[str]]:
    tokens: list[str] = []
    for index in range(1, script.step.events + 1):
        tokens.append(script.token(index))
        if index % BATCH == 0:
            yield Yield()
    return tokens


def _first_index(step: Stream, last_event_id: str | None) -> int:
    """The first event to send: after a numeric Last-Event-ID when resuming is on.

    An id past the last event (however many digits: no ``int()`` of a huge string,
    which Python refuses past 4,300 digits) sends only the ending.
    """
    if not (step.ids and step.resume and last_event_id):
        return 1
    text = last_event_id.strip()
    if not (text.isascii() and text.isdecimal()):
        return 1
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(step.events)):
        return step.events + 1
    return min(int(digits), step.events) + 1


def _writes(script: _Script, *, first: int, eol: str, rng: random.Random) -> Iterator[Send | Yield]:
    """The writes in order, gaps as pauses; the stall is added afterwards."""
    step, wire = script.step, script.wire
    framing = step.framing
    if framing.retry_ms is not None:
        retry = PlannedEvent(0, "retry", None, str(framing.retry_ms))
        yield Send(f"retry: {framing.retry_ms}{eol}{eol}".encode(), events=(retry,))
    skip_opening = framing.bom and wire.opening_optional  # see Wire.opening_optional
    opening_frames = () if skip_opening else wire.opening(script.call)
    opening = _frames_text(opening_frames, eol)
    if opening:
        yield Send(opening.encode(), events=_frames(opening_frames))
    tokens: list[str] = []  # the answer as it goes, for an ending that repeats it
    token, data_event, gap = script.token, wire.data_event, step.gap
    ids, comment_every = step.ids, framing.comment_every
    fixed = gap.seconds if gap.kind == "fixed" else None  # no draw to make
    for index in range(first, step.events + 1):
        word = token(index)
        tokens.append(word)
        name, data = data_event(index, word)
        event_id = str(index) if ids else None
        if event_id is None and name is None:  # the usual event: the same bytes a token
            payload = _unnamed_event(data, eol)
        else:
            payload = _event_text(event_id, name, data, eol).encode()
        event = PlannedEvent(index, "data", event_id, data)
        wait = 0.0 if len(tokens) == 1 else fixed if fixed is not None else _gap(gap, rng)
        if comment_every > 0 and index % comment_every == 0:
            payload = f": {_COMMENT_TEXT}{eol}".encode() + payload
            comment = PlannedEvent(0, "comment", None, _COMMENT_TEXT)
            yield Send(payload, wait, (comment, event))
        else:
            yield Send(payload, wait, (event,))
    pause = _gap(step.gap, rng) if tokens else 0.0
    last = max(first, step.events + 1)
    if step.end == "done":
        answer = yield from script.text(tokens, first)
        frames = wire.ending(script.call, answer, step.events)
        terminal = PlannedEvent(last, "terminal", None, frames[-1][1])
        yield Send(_frames_text(frames, eol).encode(), pause, (*_frames(frames[:-1]), terminal))
    elif step.end == "error":
        name, data = wire.error_event(step.events)
        yield Send(_event_text(None, name, data, eol).encode(), pause, _frames([(name, data)]))
    elif step.end == "abort_mid_line":
        name, data = wire.data_event(last, script.token(last))
        yield Send(_cut_mid_line(str(last) if step.ids else None, name, data, eol), pause)


def _frames(frames: Iterable[WireEvent]) -> tuple[PlannedEvent, ...]:
    """A format's own events around the answer, as the ledger keeps them (kind frame)."""
    return tuple(PlannedEvent(0, "frame", None, data) for _, data in frames)


@functools.lru_cache(maxsize=4096)
def _unnamed_event(data: str, eol: str) -> bytes:
    """The bytes of an event with no id and no name: formats that carry only the token
    (openai, gemini) send a few hundred different ones, made once."""
    if "\n" in data:
        return _event_text(None, None, data, eol).encode()
    return f"data: {data}{eol}{eol}".encode()


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


def _with_stall(
    step: Stream, writes: Iterable[Send | Yield], sent: int
) -> Iterator[Action | Yield]:
    """Insert the stall after ``after`` of the ``sent`` data events; end with Abort if scripted.

    The stall goes before the first write that follows them (past the last data
    event: before the ending), and replaces the gap before that write.
    """
    stall = step.stall
    if stall is None:  # the usual stream: nothing to insert
        yield from writes
        if step.end in ("abort", "abort_mid_line"):
            yield Abort()
        return
    after = min(stall.after, sent)
    comment = f": {_KEEPALIVE_TEXT}{_EOL[step.framing.line_ending]}".encode()
    data_seen = 0
    for write in writes:
        if isinstance(write, Send):
            starts_content = not write.events or any(e.kind != "retry" for e in write.events)
            if stall is not None and data_seen >= after and starts_content:
                yield Hold(stall.seconds, stall.keepalive, comment)
                write, stall = Send(write.data, 0.0, write.events), None
            data_seen += sum(1 for e in write.events if e.kind == "data")
        yield write
    if stall is not None:
        yield Hold(stall.seconds, stall.keepalive, comment)
    if step.end in ("abort", "abort_mid_line"):
        yield Abort()


def _with_bom(actions: Iterable[Action | Yield]) -> Iterator[Action | Yield]:
    """The BOM as the very first byte: on the first write, or alone before a stall."""
    bom = _BOM.encode()
    pending = True
    for action in actions:
        if pending and isinstance(action, Send):
            action, pending = Send(bom + action.data, action.pause, action.events), False
        elif pending and isinstance(action, Hold | Abort):
            yield Send(bom)
            pending = False
        yield action
    if pending:
        yield Send(bom)


def _buffered(actions: Iterable[Action | Yield]) -> Iterator[Action | Yield]:
    """One write at the end carrying everything, after every pause; a stall still comes first.

    Nothing is sent before that write, so a stall played where it comes is the same
    silence as one played first. What is held back is kept as bytes and plain tuples,
    which the garbage collector does not track: a million held events cost it nothing.
    """
    data = bytearray()
    rows: list[tuple[int, EventKind, str | None, str]] = []
    pause, sends = 0.0, 0
    tail: list[Action] = []
    for action in actions:
        if isinstance(action, Send):
            data += action.data
            rows.extend((e.index, e.kind, e.id, e.data) for e in action.events)
            pause, sends = pause + action.pause, sends + 1
            if sends % BATCH == 0:
                yield Yield()
        elif isinstance(action, Abort):
            tail.append(action)
        else:
            yield action
    if sends:
        events = yield from _planned(rows)
        yield Send(bytes(data), pause, events)
    yield from tail


def _planned(
    rows: Iterable[tuple[int, EventKind, str | None, str]],
) -> Generator[Yield, None, tuple[PlannedEvent, ...]]:
    events: list[PlannedEvent] = []
    for row in rows:
        events.append(PlannedEvent(*row))
        if len(events) % BATCH == 0:
            yield Yield()
    return tuple(events)


def _coalesced(actions: Iterable[Action | Yield]) -> Iterator[Action | Yield]:
    """Writes with no pause between them go out as one write, as a busy server's would.

    TCP would be free to merge them anyway; merging here saves a syscall and a pass
    through Hypercorn per event. Events keep their order; they share the write's time.
    A write grows to MAX_WRITE_BYTES at most, so a gapless stream still goes out (and
    lets the others run) a piece at a time.
    """
    group: list[Send] = []
    size = 0
    for action in actions:
        if type(action) is Send:  # the usual action first
            if group and action.pause == 0 and size + len(action.data) <= MAX_WRITE_BYTES:
                group.append(action)
                size += len(action.data)
                continue
            if group:
                yield group[0] if len(group) == 1 else _merge(group)
            group, size = [action], len(action.data)
            continue
        if isinstance(action, Yield):
            yield action  # the group stays open across it
            continue
        if group:
            yield group[0] if len(group) == 1 else _merge(group)
            group, size = [], 0
        yield action
    if group:
        yield group[0] if len(group) == 1 else _merge(group)


def _merge(sends: list[Send]) -> Send:
    """One write of ``sends``, after the first one's pause, completing all their events."""
    events = tuple(e for s in sends for e in s.events)
    return Send(b"".join(s.data for s in sends), sends[0].pause, events)


def _split(
    actions: Iterable[Action | Yield], framing: Framing, rng: random.Random
) -> Iterator[Action | Yield]:
    """Cut every write into pieces of at most ``split`` bytes; the last one completes its events."""
    for action in actions:
        if not isinstance(action, Send) or len(action.data) <= 1:
            yield action
            continue
        pieces = _pieces(action.data, framing, rng)
        piece, pause = next(pieces), action.pause
        for following in pieces:  # every piece but the last completes nothing
            yield Send(piece, pause)
            piece, pause = following, framing.split_pause
        yield Send(piece, pause, action.events)


def _pieces(data: bytes, framing: Framing, rng: random.Random) -> Iterator[bytes]:
    start = 0
    while start < len(data):
        size = rng.randint(1, framing.split) if framing.split_random else framing.split
        yield data[start : start + size]
        start += size


def plan_raw(step: Raw) -> tuple[Headers, tuple[Send, ...]]:
    """The headers and the writes of a raw step: its pieces as they are, ``pause`` apart."""
    headers = (("content-type", step.content_type), *STREAM_HEADERS, *step.headers)
    sends = tuple(Send(piece, step.pause if n else 0.0) for n, piece in enumerate(step.pieces))
    return headers, sends


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


def retry_hint(headers: Headers, date_offset: float | None = None) -> float | None:
    """Seconds a response with ``headers`` asks the client to wait, for the ledger.

    Args:
        headers: The headers as sent.
        date_offset: How far after sending the scripted Retry-After date lies at least
            (``Respond.retry_after_date``); it wins over the headers.

    Returns:
        The wait (retry-after-ms, then a numeric Retry-After), or None. A literal HTTP
        date in the script is relative to nothing a reader of the ledger knows: no hint.
    """
    if date_offset is not None:
        return date_offset
    values = {k.lower(): v.strip() for k, v in headers}
    if "retry-after-ms" in values:
        ms = _seconds(values["retry-after-ms"])
        if ms is not None:
            return ms / 1000
    return _seconds(values["retry-after"]) if "retry-after" in values else None


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


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
