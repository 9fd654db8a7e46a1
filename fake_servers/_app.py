"""The ASGI app: checks each request, plays the script's step, records the ledger.

Every HTTP request goes straight to one raw ASGI handler (a Starlette shell takes
any other scope), so the handler controls each ``send`` and watches
``http.disconnect`` while it plays. Playing is :mod:`fake_servers._render`'s plan;
this module only does the IO and the bookkeeping around it.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import time
import types
import urllib.parse
from collections.abc import Awaitable, Callable, Coroutine, Generator, MutableMapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.applications import Starlette
from starlette.routing import Route

from fake_servers._clock import now
from fake_servers._ledger import AttemptEnd, AttemptWriter, Ledger, Rejected, Stalled
from fake_servers._limits import (
    BODY_TIMEOUT,
    MAX_FILE_BYTES,
    MAX_JSON_DEPTH,
    MAX_PARTS,
    MAX_REQUEST_BYTES,
)
from fake_servers._providers import (
    PROVIDER_PATHS,
    Call,
    provider_error_body,
    provider_for_path,
)
from fake_servers._render import (
    BATCH,
    Abort,
    Head,
    Hold,
    PlannedEvent,
    Send,
    Yield,
    error_body,
    plan_raw,
    plan_respond,
    plan_stream,
    retry_hint,
)
from fake_servers._script import Endpoint, Headers, Planner, Raw, Respond, Scenario, Stream

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

__all__ = ["Rejection", "ScriptPlayer", "build_app", "check_json", "check_multipart"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
SendFn = Callable[[Message], Awaitable[None]]


@dataclass(frozen=True)
class Rejection:
    """A request refused before the script: the status, why, and extra error fields."""

    status: int
    reason: str
    extra: dict[str, object] = field(default_factory=dict)
    headers: Headers = ()
    kind: Rejected = "body_invalid"  # for the ledger; most rejections are of the body


@dataclass(frozen=True)
class _Request:
    method: str
    path: str  # the endpoint's: the ledger counts attempts and steps by it
    query: str
    headers: Headers
    # As sent, when an SDK appended its API's path to the endpoint used as its base URL
    # (``Scenario.base_of``): it picks the provider's format and error shape.
    sent_path: str = ""
    # The port the request came from (``scope["client"]``): through the fault proxy, its
    # connection's upstream port, which links the attempt to it (``Ledger.links``).
    peer_port: int | None = None

    @property
    def wire_path(self) -> str:
        return self.sent_path or self.path

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)


@dataclass
class _Body:
    size: int = 0
    data: bytearray = field(default_factory=bytearray)  # kept only up to the limit
    sha256: Any = field(default_factory=hashlib.sha256)
    closed_at: float | None = None  # the client left before the body was complete
    timed_out: bool = False  # the body was not complete within the body timeout


@dataclass
class _PathSteps:
    """Per path: how many attempts were rejected, so rejections consume no step."""

    last_number: int = 0
    rejected: int = 0


class ScriptPlayer:
    """The raw ASGI handler: one instance serves every path of a scenario."""

    def __init__(
        self,
        scenario: Scenario,
        ledger: Ledger,
        *,
        max_file_bytes: int = MAX_FILE_BYTES,
        max_body_bytes: int = MAX_REQUEST_BYTES,
        body_timeout: float = BODY_TIMEOUT,
        wire_format: str = "auto",
    ) -> None:
        self.scenario = scenario  # swapped whole by the server; read once per request
        check_wire_format(wire_format)
        self.wire_format = wire_format
        self.marked = False  # marked answers (``FakeServer.marked``)
        self.planner: Planner | None = None  # steps chosen by a plan (``FakeServer.load``)
        self.ledger = ledger
        self.max_file_bytes = max_file_bytes
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.errors: list[BaseException] = []  # what went wrong, for FakeServer.check()
        # How to stop each response in flight (``_guarded``), by its task.
        self._cuts: dict[asyncio.Task[Any], Callable[[AttemptEnd], None]] = {}
        self._steps: dict[str, _PathSteps] = {}
        # The request each redirect was answering, by the path its Location names: a
        # client following a 301/302/303 turns a POST into a bodiless GET, and the API
        # would still answer it as the call it is (a chat completion keeps its role and
        # finish_reason chunks). Kept for the scenario that made them.
        self._redirected: tuple[Scenario, dict[str, Call]] = (scenario, {})

    def cut_all(self) -> None:
        """End every response in flight as ``server_stopped`` (call on the app's loop)."""
        for stop in list(self._cuts.values()):
            stop("server_stopped")

    async def __call__(self, scope: Message, receive: Receive, send: SendFn) -> None:
        arrived_at = now()
        scenario = self.scenario
        request = _served(_request(scope), scenario, self.wire_format)
        body = await self._read_body(receive)
        if body.closed_at is not None:
            writer = self._open(request, body, arrived_at)
            self._step_number(request.path, writer, rejected=True)  # it used no step
            writer.update(rejected="client_left")
            writer.finish("client_closed", "client left during the request body", body.closed_at)
            return
        endpoint = scenario.endpoint(request.path)
        rejection = self._intake_check(request, body, scenario, endpoint)
        writer = self._open(request, body, arrived_at)
        number = self._step_number(request.path, writer, rejected=rejection is not None)
        if rejection is not None:
            play = self._reject(rejection, writer, send, request.wire_path)
            await self._guarded(writer, receive, play)
            return
        assert endpoint is not None  # _route_check rejects unknown paths
        step_index, step = endpoint.step_for(number)
        if self.planner is not None:
            planned = self.planner(
                request.path, number, arrived_at, request.header("last-event-id")
            )
            if planned is not None:
                step_index, step = planned
        writer.update(step=step_index, ending=step.end if isinstance(step, Stream) else None)
        if isinstance(step, Respond):
            self._note_redirect(step, scenario, _call(request, body))
            play = self._respond(step, writer, send, request.wire_path)
        elif isinstance(step, Raw):
            play = self._raw(step, writer, send)
        else:
            call = self._as_called(scenario, request.path, _call(request, body))
            play = self._stream(step, writer, send, request, call, scenario.seed, number)
        await self._guarded(writer, receive, play)

    def _redirects(self, scenario: Scenario) -> dict[str, Call]:
        if self._redirected[0] is not scenario:
            self._redirected = (scenario, {})
        return self._redirected[1]

    def _note_redirect(self, step: Respond, scenario: Scenario, call: Call) -> None:
        location = dict(step.headers).get("location")
        if location is not None and 300 <= step.status < 400 and call.body is not None:
            self._redirects(scenario)[urllib.parse.urlsplit(location).path] = call

    def _as_called(self, scenario: Scenario, path: str, call: Call) -> Call:
        """``call``, or for a bodiless request a redirect sent to endpoint ``path``, the
        call redirected."""
        origin = self._redirects(scenario).get(path) if call.body is None else None
        return call if origin is None else replace(origin, path=call.path)

    # -- request intake -------------------------------------------------------
    async def _read_body(self, receive: Receive) -> _Body:
        """The whole body, or as much as came before the client left or the timeout."""
        body = _Body()
        try:
            async with asyncio.timeout(self.body_timeout):  # a slow upload holds nothing forever
                await self._receive_body(receive, body)
        except TimeoutError:
            body.timed_out = True
        return body

    async def _receive_body(self, receive: Receive, body: _Body) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                body.closed_at = now()
                return
            chunk = message.get("body", b"")
            body.size += len(chunk)
            body.sha256.update(chunk)
            if body.size <= self.max_body_bytes:
                body.data += chunk
            if not message.get("more_body", False):
                return

    def _intake_check(
        self, request: _Request, body: _Body, scenario: Scenario, endpoint: Endpoint | None
    ) -> Rejection | None:
        """Why the request is refused before the script, if it is; a kit bug is a 500."""
        try:
            return self._route_check(request, scenario, endpoint) or self._body_check(request, body)
        except Exception as error:  # recorded and answered, so the attempt is not lost
            self.errors.append(error)
            return Rejection(500, f"server error: {error!r}", kind="server_error")

    def _open(self, request: _Request, body: _Body, arrived_at: float) -> AttemptWriter:
        return self.ledger.open_attempt(
            method=request.method,
            path=request.path,
            query=request.query,
            headers=request.headers,
            body_size=body.size,
            body_sha256=body.sha256.hexdigest(),
            arrived_at=arrived_at,
            peer_port=request.peer_port,
        )

    def _step_number(self, path: str, writer: AttemptWriter, *, rejected: bool) -> int:
        """The attempt number the script sees: the ledger's, minus rejected attempts."""
        number = writer.number
        steps = self._steps.setdefault(path, _PathSteps())
        if number <= steps.last_number:  # the ledger was cleared since
            steps.rejected = 0
        steps.last_number = number
        if rejected:
            steps.rejected += 1
        return number - steps.rejected

    def _route_check(
        self, request: _Request, scenario: Scenario, endpoint: Endpoint | None
    ) -> Rejection | None:
        if endpoint is None:
            scripted = sorted(e.path for e in scenario.endpoints)
            return Rejection(
                404,
                f"no scripted endpoint at {request.path}",
                {"path": request.path, "scripted_paths": scripted},
                kind="no_endpoint",
            )
        if endpoint.method != "ANY" and request.method != endpoint.method:
            return Rejection(
                405,
                f"{request.method} not allowed on {request.path}; scripted for {endpoint.method}",
                {"path": request.path, "allowed": endpoint.method},
                (("allow", endpoint.method),),
                kind="method",
            )
        return None

    def _body_check(self, request: _Request, body: _Body) -> Rejection | None:
        if body.timed_out:
            return Rejection(
                408,
                f"request body not complete within {self.body_timeout:g} s "
                f"({body.size} bytes arrived)",
                {"limit_seconds": self.body_timeout, "size": body.size},
                kind="body_timeout",
            )
        if request.method != "POST":
            return None
        if body.size > self.max_body_bytes:
            return Rejection(
                413,
                f"request body of {body.size} bytes exceeds the limit of "
                f"{self.max_body_bytes} bytes",
                {"limit": self.max_body_bytes, "size": body.size},
            )
        content_type, params = parse_options_header(request.header("content-type"))
        if content_type == b"application/json":
            return check_json(bytes(body.data))
        if content_type == b"multipart/form-data":
            boundary = params.get(b"boundary")
            if not boundary:
                return Rejection(400, "multipart/form-data without a boundary")
            return check_multipart(bytes(body.data), boundary, self.max_file_bytes)
        if not content_type and body.size == 0:
            return None  # nothing sent, nothing to check
        return Rejection(
            415,
            f"unsupported content type {content_type.decode('latin-1') or '(none)'}; "
            "send application/json or multipart/form-data",
        )

    # -- playing ----------------------------------------------------------------
    async def _guarded(
        self, writer: AttemptWriter, receive: Receive, play: Coroutine[Any, Any, None]
    ) -> None:
        """Run ``play`` until it ends, the client leaves, or the server stops.

        The play runs in this task; a watcher task sees the client leave. Either that or
        ``cut_all`` says why, then cancels this task: one task and no ``asyncio.wait``
        per stream, which a server holding 10,000 streams pays for each of them.
        """
        task = asyncio.current_task()
        assert task is not None
        why: list[AttemptEnd] = []  # the first reason to stop is the one
        watcher = asyncio.ensure_future(_wait_disconnect(receive))

        def stop(end: AttemptEnd) -> None:
            if not why:
                why.append(end)
                task.cancel()

        watcher.add_done_callback(lambda _: stop("client_closed"))
        self._cuts[task] = stop
        try:
            await play
        except asyncio.CancelledError:
            if not why or task.uncancel() > 0:  # cancelled by someone else too
                raise
            if why[0] == "client_closed":
                writer.finish("client_closed", at=watcher.result())
            else:
                writer.finish("server_stopped")
        except Exception as error:  # keep serving; FakeServer.check() re-raises it
            self.errors.append(error)
            writer.finish("aborted", f"server error: {error!r}")
        finally:
            why.append("completed")  # nothing left to stop: the watcher's end changes nothing
            self._cuts.pop(task, None)
            watcher.cancel()

    async def _reject(
        self, rejection: Rejection, writer: AttemptWriter, send: SendFn, path: str
    ) -> None:
        status, reason, extra = rejection.status, rejection.reason, rejection.extra
        body = provider_error_body(path, status, reason, extra) or error_body(
            status, reason, **extra
        )
        headers = (
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
            *rejection.headers,
        )
        writer.update(note=rejection.reason, rejected=rejection.kind)
        await _start(send, writer, rejection.status, headers)
        await _finish_body(send, writer, body)
        writer.finish("completed", rejection.reason)

    async def _respond(self, step: Respond, writer: AttemptWriter, send: SendFn, path: str) -> None:
        if step.delay > 0:
            await asyncio.sleep(step.delay)
        status, headers, body = plan_respond(step, sent_at_epoch=time.time(), path=path)
        await _start(send, writer, status, headers, step.retry_after_date)
        await _finish_body(send, writer, body)
        writer.finish("completed")

    async def _raw(self, step: Raw, writer: AttemptWriter, send: SendFn) -> None:
        headers, writes = plan_raw(step)
        await _start(send, writer, step.status, headers)
        playback = _Playback(send, writer, stalls=False)
        for write in writes:
            await playback.write(write)
        note = f"raw: {len(step.pieces)} write(s), {step.size} bytes"
        if step.end == "abort":
            writer.finish("aborted", note)
            return  # unterminated: Hypercorn drops the connection
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        writer.finish("completed", note)

    async def _stream(
        self,
        step: Stream,
        writer: AttemptWriter,
        send: SendFn,
        request: _Request,
        call: Call,
        seed: int,
        number: int,
    ) -> None:
        plan = plan_stream(
            step,
            seed=seed,
            path=request.wire_path,
            attempt=number,
            last_event_id=request.header("last-event-id"),
            call=call,
            marked=writer.seq if self.marked else None,
        )
        source = plan.data_source
        if source is not None:  # the ledger makes each data event's data again when read
            writer.data_source(source)
        if plan.delay > 0:
            await asyncio.sleep(plan.delay)
        playback = _Playback(send, writer, stalls=plan.streams)
        for move in plan.moves():  # made as they are played: a long plan costs no stall
            if type(move) is Send:  # the usual move first
                await playback.write(move)
            elif isinstance(move, Head):
                await _start(send, writer, plan.status, plan.headers)
            elif isinstance(move, Hold):
                await playback.hold(move)
            elif isinstance(move, Yield):
                await asyncio.sleep(0)
            elif isinstance(move, Abort):
                writer.finish("aborted", _ending_note(step))
                return  # leaving the body unterminated makes Hypercorn drop the connection
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        writer.finish("completed", _ending_note(step))


def build_app(player: ScriptPlayer) -> Callable[[Message, Receive, SendFn], Awaitable[None]]:
    """The ASGI app: every HTTP request goes to ``player``, any other scope to a Starlette shell.

    The player answers every path and method itself, so HTTP requests reach it with
    Hypercorn's own ``send``: no middleware wraps each write (one write per event pays
    for two wrappers otherwise). The shell (a websocket upgrade, a lifespan) routes
    every path to the player too, as Starlette would.
    """
    shell = Starlette(routes=[Route("/{path:path}", endpoint=player)])

    async def app(scope: Message, receive: Receive, send: SendFn) -> None:
        if scope["type"] == "http":
            await player(scope, receive, send)
        else:
            await shell(scope, receive, send)

    return app


# -- helpers: sending ---------------------------------------------------------------


async def _start(
    send: SendFn,
    writer: AttemptWriter,
    status: int,
    headers: Headers,
    date_offset: float | None = None,  # a scripted Retry-After date, so far after sending
) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    writer.update(
        status=status,
        headers_at=now(),
        response_headers=tuple((k.lower(), v) for k, v in headers),
        retry_after=retry_hint(headers, date_offset),
    )


async def _finish_body(send: SendFn, writer: AttemptWriter, body: bytes) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": False})
    if body:
        writer.update(first_byte_at=now())


class _Playback:
    """Writes one stream's body and records each write in the ledger."""

    def __init__(self, send: SendFn, writer: AttemptWriter, *, stalls: bool) -> None:
        self._send = send
        self._writer = writer
        self._wrote = False
        self._stalls = stalls  # a hold is the scripted stall (else: a reply's silence)
        self._data = 0  # data events written so far

    async def write(self, action: Send) -> None:
        """Pause, then write: the one move made per event, so it is kept to one frame."""
        data, seconds, events = action
        if seconds >= SPIN:
            await asyncio.sleep(seconds)
        else:
            due = _monotonic() + seconds
            await _one_pass()
            while _monotonic() < due:
                await _one_pass()
        await self._send({"type": "http.response.body", "body": data, "more_body": True})
        at = now()
        if not self._wrote and data:
            self._wrote = True
            self._writer.update(first_byte_at=at)
        if len(events) <= BATCH:
            self._data += self._writer.events(events, at)
            return
        for start in range(0, len(events), BATCH):  # a buffered write can carry a million
            self._data += self._writer.events(events[start : start + BATCH], at)
            await _one_pass()

    async def hold(self, hold: Hold) -> None:
        """Stall: silence, or a keepalive comment every ``hold.keepalive`` seconds."""
        if self._stalls:
            self._writer.update(stall=Stalled(now(), self._data, hold.keepalive))
        if hold.keepalive is None or hold.keepalive <= 0:
            await (asyncio.sleep(hold.seconds) if hold.seconds is not None else asyncio.Future())
            return
        loop = asyncio.get_running_loop()
        end = None if hold.seconds is None else loop.time() + hold.seconds
        comment = (PlannedEvent(0, "comment", None, _comment_text(hold.comment)),)
        beat = loop.time()
        while True:
            beat += hold.keepalive  # scheduled from the start, so the beat does not drift
            if end is not None and beat >= end:
                await asyncio.sleep(end - loop.time())
                return
            await asyncio.sleep(beat - loop.time())
            await self.write(Send(hold.comment, 0.0, comment))


# A pause shorter than this is waited by letting the other responses run until it is
# over, not with a timer: epoll rounds a timer's wait up to the next millisecond on an
# idle loop, and a timer costs a handle and two heap operations per event. Every write
# waits at least one pass of the event loop, so a gapless stream cannot starve the others.
SPIN = 1e-4
_monotonic = time.monotonic  # any steady clock serves to wait out a pause


@types.coroutine
def _one_pass() -> Generator[None, None, None]:
    """Let every other ready task run once (``asyncio.sleep(0)`` without its frame)."""
    yield


def _comment_text(comment: bytes) -> str:
    return comment.decode().strip().removeprefix(":").strip()


def _ending_note(step: Stream) -> str:
    return {
        "done": "done",
        "truncate": "truncated",
        "abort": "aborted",
        "abort_mid_line": "aborted mid-line",
        "error": "in-band error",
    }[step.end]


async def _wait_disconnect(receive: Receive) -> float:
    """When the client went away (``now()`` as the message arrived)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return now()


# -- helpers: request parsing -------------------------------------------------------


def _call(request: _Request, body: _Body) -> Call:
    """What the request asked for: its path and, for a JSON object body, the object."""
    content_type, _ = parse_options_header(request.header("content-type"))
    parsed = None
    if content_type == b"application/json":
        value = _json_value(bytes(body.data))  # a POST's was checked; a GET's may be anything
        parsed = value if isinstance(value, dict) else None
    return Call(path=request.wire_path, body=parsed, body_size=body.size)


def _request(scope: Message) -> _Request:
    headers = tuple(
        (name.decode("latin-1").lower(), value.decode("latin-1"))
        for name, value in scope["headers"]
    )
    client = scope.get("client")
    return _Request(
        method=scope["method"],
        path=scope["path"],
        query=scope["query_string"].decode("latin-1"),
        headers=headers,
        peer_port=int(client[1]) if client else None,
    )


def _served(request: _Request, scenario: Scenario, wire_format: str) -> _Request:
    """The request as its endpoint serves it: an SDK's path under a base URL maps to it;
    with a default ``wire_format``, a plain path is answered as that provider's API."""
    if scenario.endpoint(request.path) is None:
        base = scenario.base_of(request.path)
        if base is not None:
            return replace(request, path=base.path, sent_path=request.path)
    elif wire_format != "auto" and provider_for_path(request.path) is None:
        sent = request.path.rstrip("/") + PROVIDER_PATHS[wire_format]
        return replace(request, sent_path=sent)
    return request


WIRE_FORMATS = ("auto", *PROVIDER_PATHS)


def check_wire_format(name: object) -> None:
    """A server's default format: ``auto`` (by the request's path) or a provider's name."""
    if name not in WIRE_FORMATS:
        raise ValueError(
            f"unknown wire format {name!r}; valid: {', '.join(repr(n) for n in WIRE_FORMATS)}"
        )


def check_json(body: bytes) -> Rejection | None:
    """A JSON body must parse within MAX_JSON_DEPTH (else 400) and be an object (else 422)."""
    value = _json_value(body)
    if isinstance(value, Rejection):
        return value
    if not isinstance(value, dict):
        return Rejection(422, f"JSON body must be an object, got {type(value).__name__}")
    return None


def _json_value(body: bytes) -> object:
    """The body's JSON value, or the Rejection (400) of a malformed or too deep body."""
    too_deep = Rejection(
        400, f"JSON body nested deeper than {MAX_JSON_DEPTH} levels", {"limit": MAX_JSON_DEPTH}
    )
    if _too_deep(body):
        return too_deep
    try:
        return json.loads(body)
    except RecursionError:  # cannot happen within MAX_JSON_DEPTH; kept as the backstop
        return too_deep
    except ValueError as error:  # also covers bad UTF-8
        return Rejection(400, f"malformed JSON body: {error}")


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 and -1 as signed bytes


def _too_deep(body: bytes) -> bool:
    """Whether arrays and objects nest past MAX_JSON_DEPTH: at C speed, with no recursion."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return False  # too few brackets to pass the limit: the common case costs two scans
    steps = _JSON_STRING.sub(b"", body).translate(_BRACKET_STEPS, _NOT_BRACKETS)
    return max(itertools.accumulate(memoryview(steps).cast("b")), default=0) > MAX_JSON_DEPTH


@dataclass
class _Part:
    name: str | None = None
    filename: str | None = None
    size: int = 0


class _TooManyParts(Exception):
    """Raised from the parser's callback: parsing stops at the limit, not at the end."""


class _MultipartScan:
    """Collects each part's name, filename and size as python-multipart parses."""

    def __init__(self) -> None:
        self.parts: list[_Part] = []
        self.ended = False
        self._field = bytearray()
        self._value = bytearray()
        self._headers: dict[bytes, bytes] = {}

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._begin,
            "on_header_field": lambda data, start, end: self._field.extend(data[start:end]),
            "on_header_value": lambda data, start, end: self._value.extend(data[start:end]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._data,
            "on_end": self._end,
        }

    def _begin(self) -> None:
        if len(self.parts) == MAX_PARTS:
            raise _TooManyParts
        self.parts.append(_Part())
        self._headers = {}

    def _header_end(self) -> None:
        self._headers[bytes(self._field).lower()] = bytes(self._value)
        self._field.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        kind, options = parse_options_header(self._headers.get(b"content-disposition"))
        part = self.parts[-1]
        if kind == b"form-data" and b"name" in options:
            part.name = options[b"name"].decode("utf-8", "replace")
        if b"filename" in options:
            part.filename = options[b"filename"].decode("utf-8", "replace")

    def _data(self, data: bytes, start: int, end: int) -> None:
        self.parts[-1].size += end - start

    def _end(self) -> None:
        self.ended = True


def check_multipart(body: bytes, boundary: bytes, max_file_bytes: int) -> Rejection | None:
    """Multipart must parse (400), keep files within the limit (413), carry a prompt (422)."""
    scan = _MultipartScan()
    try:
        parser = MultipartParser(boundary, scan.callbacks())
        parser.write(body)
        parser.finalize()
    except FormParserError as error:
        return Rejection(400, f"malformed multipart body: {error}")
    except _TooManyParts:
        return Rejection(
            413, f"multipart body has more than {MAX_PARTS} parts", {"limit": MAX_PARTS}
        )
    if not scan.ended or any(p.name is None for p in scan.parts):
        return Rejection(400, "malformed multipart body: unterminated, or a part without a name")
    for part in scan.parts:
        if part.filename is not None and part.size > max_file_bytes:
            return Rejection(
                413,
                f"file {part.filename!r} is {part.size} bytes; the limit is "
                f"{max_file_bytes} bytes per file",
                {
                    "file": part.filename,
                    "field": part.name,
                    "size": part.size,
                    "limit": max_file_bytes,
                },
            )
    if not any(p.name == "prompt" and p.filename is None for p in scan.parts):
        return Rejection(422, "multipart body has no 'prompt' field")
    return None
