"""The reference client's httpx shell: one resilience loop under two transports.

GET streams (EventSource style) and POST streams with a body (fetch + ReadableStream
style) share the same loop. The sans-IO core decides (``RetryState``, the breaker,
``StallWatch``, ``SSEDecoder``); this module only does the IO, the sleeping and
the clock reads.

Each ``EventStream`` runs its attempts in a reader task of its own and hands events
to the consumer through a small buffer. The reader keeps reading while the
consumer is busy, so the stall watch measures the network, not the consumer, and
a timeout can cancel the reader without ever cancelling the consumer's task.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import ssl
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self, cast

import httpx

from conformance.reference._breaker import Admit, make_breaker
from conformance.reference._config import ClientPolicy
from conformance.reference._errors import (
    CircuitOpen,
    GaveUp,
    NonRetryableStatus,
    NotIdempotent,
    Offline,
    Stalled,
    StreamError,
    Truncated,
)
from conformance.reference._policy import Failure, FailureKind, GiveUp, Retry, RetryState, Surface
from conformance.reference._sse import SSEDecoder, SSEEvent
from conformance.reference._states import State, StateChange
from conformance.reference._watch import StallWatch
from fake_servers._clock import now

__all__ = ["EventStream", "StateCallback", "StreamingClient", "default_terminal"]

StateCallback = Callable[[StateChange], None]

_TERMINAL_EVENTS = frozenset({"done", "message_stop", "response.completed"})
_ERROR_BODY_LIMIT = 64 * 1024  # bytes of an error response kept for NonRetryableStatus
_HIGH_WATER = 4096  # buffered events at which the reader waits for the consumer
_DRAIN_SECONDS = 0.5  # after the terminal event, how long the rest of the body may take


def default_terminal(ev: SSEEvent) -> bool:
    """The end-of-answer marker of the common LLM formats.

    Args:
        ev: A dispatched event.

    Returns:
        True for ``data: [DONE]`` (OpenAI) and the events ``done``, ``message_stop``
        (Anthropic) and ``response.completed`` (OpenAI Responses).
    """
    return ev.data == "[DONE]" or ev.event in _TERMINAL_EVENTS


@dataclass(frozen=True)
class _Call:
    """What one ``stream()`` call asked for."""

    method: str
    url: str
    json: Any
    data: Mapping[str, Any] | None
    files: Mapping[str, Any] | None
    headers: Mapping[str, str] | None
    idempotent: bool


@dataclass(frozen=True)
class _Prepared:
    """The request encoded once, so every attempt sends the same bytes."""

    method: str
    url: httpx.URL
    headers: httpx.Headers
    body: bytes


@dataclass(eq=False)
class _Attempt:
    """The live bookkeeping of one attempt (one HTTP request)."""

    probe: bool
    watch: StallWatch
    guard: asyncio.Timeout | None = None
    tick: asyncio.TimerHandle | None = None
    request_sent: bool = False  # request bytes were written: the server may have seen it
    delivered: bool = False  # a data event of this attempt reached the buffer
    resolved: bool = False  # the breaker has heard this attempt's outcome
    settled: bool = False  # the outcome is known; timers may no longer interrupt
    finished: bool = False  # the terminal event arrived
    paused: bool = False  # waiting for a slow consumer: not network silence
    interrupt: FailureKind | None = None  # why the guard was fired early
    replay_floor: int | None = None  # resumed: numeric ids <= this are replays
    body: str = ""  # an error response's text


@dataclass(eq=False)
class _Buffer:
    """Events on their way from the reader task to the consumer."""

    events: deque[SSEEvent] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # events or the end arrived
    drained: asyncio.Event = field(default_factory=asyncio.Event)  # the consumer emptied it
    ended: bool = False
    error: BaseException | None = None

    def push(self, events: list[SSEEvent]) -> None:
        self.events.extend(events)
        self.ready.set()

    def end(self, error: BaseException | None = None) -> None:
        if not self.ended:
            self.ended, self.error = True, error
        self.ready.set()


class EventStream:
    """One logical stream: an async iterator of data events, across any retries.

    The terminal event ends the iteration (it is not yielded). Use ``async with``
    or ``async for``: breaking out of an ``async for`` loop closes the connection
    at once, as does ``aclose()``.
    """

    def __init__(
        self, client: StreamingClient, call: _Call, on_state: StateCallback | None
    ) -> None:
        self._client = client
        self._call = call
        self._on_state = on_state
        self._retry = RetryState(client.policy, client._rng)
        self._buffer = _Buffer()
        self._wake = asyncio.Event()  # offline/online, or a breaker probe resolved
        self._task: asyncio.Task[None] | None = None
        self._attempt: _Attempt | None = None
        self._state = State.IDLE
        self._before_stall = State.CONNECTING
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self._draining = False
        self.attempts = 0  # every attempt this stream made (never reset)
        self.last_event_id = ""  # the id of the last event delivered, "" while none had one

    @property
    def state(self) -> State:
        return self._state

    @property
    def idempotent(self) -> bool:
        return self._call.idempotent

    # -- the consumer's side -------------------------------------------------
    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[SSEEvent]:
        # A generator of our own: when a consumer breaks out of ``async for``, the
        # loop drops it and asyncio's finaliser runs its ``finally`` right away.
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[SSEEvent]:
        events = self._buffer.events
        try:
            while True:
                while events:
                    yield events.popleft()
                if not await self._refill():
                    return
        finally:
            await self.aclose()

    async def __anext__(self) -> SSEEvent:
        events = self._buffer.events
        if events or await self._refill():
            return events.popleft()
        raise StopAsyncIteration

    async def _refill(self) -> bool:
        """Waits for more events; False at the end. Raises the stream's error once."""
        buffer = self._buffer
        if self._task is None and not self._closed:
            self._start()
        while not buffer.events:
            if buffer.ended:
                error, buffer.error = buffer.error, None
                if error is not None:
                    raise error
                return False
            buffer.drained.set()
            buffer.ready.clear()
            await buffer.ready.wait()
        return True

    async def aclose(self) -> None:
        """Stops the stream and closes its connection (the server sees the close).

        Idempotent: ``async with`` and the iterator's finaliser both call it when a
        consumer breaks out, and a second ``cancel()`` would interrupt httpx while it
        closes the response, leaving the connection open. Every caller awaits one
        shielded close instead.
        """
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        self._closed = True
        self._buffer.events.clear()
        self._buffer.end()
        task = self._task
        if task is None or task.done():
            return
        if self._draining:  # the answer is complete: let the body end cleanly
            await asyncio.wait({task}, timeout=_DRAIN_SECONDS)
        if not task.done():
            task.cancel()
            await asyncio.wait({task})

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._client._streams.add(self)

    # -- the reader task: the resilience loop ----------------------------------
    async def _run(self) -> None:
        try:
            await self._loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a StreamError, or a bug: the consumer must not hang
            self._set_state(State.FAILED, repr(exc))
            self._buffer.end(exc)
        finally:
            self._buffer.end()
            self._client._streams.discard(self)

    async def _loop(self) -> None:
        prepared = await self._prepare()
        retry = self._retry
        while True:
            await self._while_offline()
            probe = await self._admission()
            retry.on_attempt()
            self.attempts += 1
            failure, att = await self._attempt_once(prepared, probe)
            if failure is None:
                return
            decision = retry.decide(
                failure,
                now_epoch=time.time(),
                resumable=self._resumable(),
                idempotent=self._call.idempotent,
                request_sent=att.request_sent,
            )
            if not isinstance(decision, Retry):
                raise self._error(decision, failure, att.body)
            if failure.kind != "offline":  # offline: wait for online(), then go at once
                self._set_state(State.RETRYING, decision.reason, delay=decision.delay)
                await self._pause(decision.delay)

    async def _prepare(self) -> _Prepared:
        call = self._call
        headers = httpx.Headers({"accept": "text/event-stream", "cache-control": "no-store"})
        headers.update(call.headers or {})  # case-insensitive: the caller's win
        request = self._client._http.build_request(
            call.method, call.url, json=call.json, data=call.data, files=call.files, headers=headers
        )
        # Encoded once: a multipart boundary is random and a file object reads only
        # once, so this is how every retry sends byte-identical bodies.
        body = await request.aread()
        return _Prepared(request.method, request.url, request.headers, body)

    def _resumable(self) -> bool:
        return bool(self.last_event_id) and self._client.policy.resume and self._call.idempotent

    async def _while_offline(self) -> None:
        while self._client._offline:
            self._set_state(State.OFFLINE, "waiting for online()")
            self._wake.clear()
            await self._wake.wait()

    async def _admission(self) -> bool:
        """Asks the shared breaker; True when this attempt is the half-open probe.

        A new call meeting an open breaker fails fast; a call already retrying waits
        for it (and is woken early when a probe resolves).
        """
        breaker = self._client.breaker
        while True:
            verdict = breaker.admit(now())
            if isinstance(verdict, Admit):
                return verdict.probe
            if self.attempts == 0:
                raise CircuitOpen(verdict.until)
            delay = max(0.0, verdict.until - now())
            self._set_state(State.BREAKER_OPEN, "circuit open", delay=delay)
            await self._pause(delay)
            await self._while_offline()

    async def _pause(self, seconds: float) -> None:
        """Sleeps; offline()/online() (and a probe's outcome) cut it short."""
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    # -- one attempt -----------------------------------------------------------
    async def _attempt_once(
        self, prepared: _Prepared, probe: bool
    ) -> tuple[Failure | None, _Attempt]:
        """One request; returns its failure (None: the answer completed) and its record."""
        policy = self._client.policy
        att = _Attempt(probe, StallWatch(policy.stall_timeout, policy.stall_check_interval, now()))
        if self._resumable() and self.last_event_id.isdigit():
            att.replay_floor = int(self.last_event_id)
        self._attempt = att
        self._set_state(State.CONNECTING, f"attempt {self.attempts}")
        try:
            failure = await self._guarded(prepared, att)
        except asyncio.CancelledError:
            self._abandon(att)  # the consumer closed the stream
            raise
        finally:
            if att.tick is not None:
                att.tick.cancel()
            att.settled = True
            self._attempt = None
        self._account(att, failure)
        return failure, att

    async def _guarded(self, prepared: _Prepared, att: _Attempt) -> Failure | None:
        """The exchange under the attempt's guard: a timeout that fires at the first-chunk
        deadline, or early when the stall check or offline() abandons the connection."""
        loop = asyncio.get_running_loop()
        policy = self._client.policy
        first_chunk = policy.first_chunk_timeout
        deadline = None if first_chunk is None else loop.time() + first_chunk
        try:
            async with asyncio.timeout_at(deadline) as guard:
                att.guard = guard
                att.tick = loop.call_later(policy.stall_check_interval, self._tick, att)
                return await self._exchange(prepared, att)
        except TimeoutError:
            return None if att.finished else self._failure(att.interrupt or "timeout_first_chunk")
        except httpx.UnsupportedProtocol:
            raise  # a wrong URL, not a network failure: retrying cannot help
        except httpx.TransportError as exc:
            return None if att.finished else self._transport_failure(exc, att)

    async def _exchange(self, prepared: _Prepared, att: _Attempt) -> Failure | None:
        async def trace(name: str, info: Mapping[str, Any]) -> None:
            if name.endswith("send_request_headers.started"):
                att.request_sent = True

        headers = prepared.headers.copy()
        if self.last_event_id:
            headers["last-event-id"] = self.last_event_id
        policy = self._client.policy
        timeout = httpx.Timeout(None, connect=policy.connect_timeout, pool=policy.connect_timeout)
        request = httpx.Request(
            prepared.method,
            prepared.url,
            headers=headers,
            content=prepared.body,
            extensions={"timeout": timeout.as_dict(), "trace": trace},
        )
        response = await self._client._http.send(request, stream=True)
        try:
            if policy.idle_rule == "bytes":
                self._touch(att)
            if response.status_code != 200 or not _is_event_stream(response):
                att.body = await _error_text(response)
                headers_seen = {k.lower(): v for k, v in response.headers.items()}
                return self._failure("status", response.status_code, headers_seen)
            return await self._read(response, att)
        finally:
            self._settle(att)
            await response.aclose()

    async def _read(self, response: httpx.Response, att: _Attempt) -> Failure | None:
        decoder = self._client.decoder_class()
        touch_bytes = self._client.policy.idle_rule == "bytes"
        buffer = self._buffer
        # httpx declares an AsyncIterator but returns a generator: close it with the read.
        body = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
        async with contextlib.aclosing(body) as chunks:
            async for chunk in chunks:
                if touch_bytes:
                    self._touch(att)
                events = decoder.feed(chunk)
                if events and self._deliver(events, att):
                    await _drain(chunks)
                    return None
                if len(buffer.events) > _HIGH_WATER:
                    await self._wait_for_consumer(att)
        return self._failure("truncated")

    def _deliver(self, events: list[SSEEvent], att: _Attempt) -> bool:
        """Hands data events to the consumer; True once the terminal event arrived."""
        terminal = self._client._terminal
        cut = None
        for i, ev in enumerate(events):
            if terminal(ev):
                cut = i
                break
        out = events if cut is None else events[:cut]  # nothing after the terminal counts
        if att.replay_floor is not None:
            out = _drop_replays(out, att)
        if self._client.policy.idle_rule == "data":
            self._touch(att)
        if out:
            self._commit(att, out)
        if cut is not None:
            self._complete(att)
        return cut is not None

    def _commit(self, att: _Attempt, events: list[SSEEvent]) -> None:
        if not att.delivered:
            att.delivered = True
            if att.guard is not None and not att.guard.expired():
                att.guard.reschedule(None)  # the first-chunk deadline no longer applies
            self._retry.on_chunk()
            self._resolve(att, success=True)
            self._set_state(State.COMMITTED)
        last_id = events[-1].id
        if last_id:
            self.last_event_id = last_id
        self._buffer.push(events)

    def _complete(self, att: _Attempt) -> None:
        att.finished = True
        self._settle(att)
        self._retry.on_success()
        self._resolve(att, success=True)
        self._set_state(State.DONE)
        self._draining = True
        self._buffer.end()

    async def _wait_for_consumer(self, att: _Attempt) -> None:
        buffer = self._buffer
        att.paused = True
        buffer.drained.clear()
        await buffer.drained.wait()
        att.paused = False
        self._touch(att)  # time spent on a slow consumer is not network silence

    # -- timers and interruptions ----------------------------------------------
    def _touch(self, att: _Attempt) -> None:
        att.watch.touch(now())
        if self._state is State.STALLED:
            self._set_state(self._before_stall, "flowing again")

    def _tick(self, att: _Attempt) -> None:
        """The seed's health check, every ``stall_check_interval`` seconds."""
        if att.settled or att.interrupt is not None:
            return
        health = "ok" if att.paused else att.watch.check(now())
        # Surfaced before it is acted on, even when a late tick finds it dead at once.
        if health != "ok" and self._state is not State.STALLED:
            self._before_stall = self._state
            idle = att.watch.idle(now())
            self._set_state(State.STALLED, f"no {self._client.policy.idle_rule} for {idle:.2f}s")
        if health == "dead":
            self._interrupt(att, "stall")
            return
        att.tick = asyncio.get_running_loop().call_later(att.watch.interval, self._tick, att)

    def _interrupt(self, att: _Attempt, kind: FailureKind) -> None:
        """Abandons the attempt's connection now; the attempt fails with ``kind``."""
        guard = att.guard
        if att.settled or att.interrupt is not None or guard is None or guard.expired():
            return
        att.interrupt = kind
        guard.reschedule(asyncio.get_running_loop().time())

    def _settle(self, att: _Attempt) -> None:
        """The outcome is known: no timer may turn it into a timeout any more."""
        att.settled = True
        if att.guard is not None and not att.guard.expired():
            att.guard.reschedule(None)

    # -- outcomes --------------------------------------------------------------
    def _failure(
        self, kind: FailureKind, status: int | None = None, headers: Mapping[str, str] | None = None
    ) -> Failure:
        return Failure(kind, status, headers or {}, committed=self._retry.committed)

    def _transport_failure(self, exc: httpx.TransportError, att: _Attempt) -> Failure:
        if att.interrupt is not None:
            return self._failure(att.interrupt)
        connect = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
        return self._failure("connect" if connect and not att.request_sent else "reset")

    def _resolve(self, att: _Attempt, *, success: bool) -> None:
        """Tells the breaker this attempt's outcome, once."""
        if att.resolved:
            return
        att.resolved = True
        breaker = self._client.breaker
        if success:
            breaker.record_success(now())
        else:
            breaker.record_failure(now())
        if att.probe:
            self._client._probe_resolved()

    def _account(self, att: _Attempt, failure: Failure | None) -> None:
        """Breaker bookkeeping at the end of an attempt.

        A failure before the attempt's first data event counts; a later one does
        not (the first event already counted as a success). An attempt cut by
        offline() has no outcome.
        """
        if failure is not None and failure.kind == "offline":
            self._abandon(att)
        else:
            self._resolve(att, success=failure is None)

    def _abandon(self, att: _Attempt) -> None:
        """No outcome: if this attempt was the probe, the next caller may probe."""
        if att.resolved or not att.probe:
            return
        att.resolved = True
        self._client.breaker.probe_abandoned(now())
        self._client._probe_resolved()

    def _error(self, decision: GiveUp | Surface, failure: Failure, body: str) -> StreamError:
        if decision.reason == "not_idempotent":
            return NotIdempotent(failure)
        if isinstance(decision, GiveUp) and decision.reason != "non_retryable":
            return GaveUp(self.attempts, failure)  # "exhausted"
        # Surfaced after the commit, or a failure the matrix never retries.
        kind = failure.kind
        if kind == "status" and failure.status is not None:
            return NonRetryableStatus(failure.status, body)
        committed = self._retry.committed
        if kind == "stall":
            return Stalled(committed=committed)
        if kind == "offline":
            return Offline()
        if committed:
            return Truncated(clean=kind == "truncated")
        return GaveUp(self.attempts, failure)

    # -- called by the client --------------------------------------------------
    def _went_offline(self) -> None:
        att = self._attempt
        if att is not None:
            self._interrupt(att, "offline")
        self._wake.set()

    def _came_online(self) -> None:
        self._retry.reset()
        self._wake.set()

    def _set_state(self, state: State, detail: str = "", delay: float | None = None) -> None:
        if state is self._state and state in (State.STALLED, State.COMMITTED, State.OFFLINE):
            return
        self._state = state
        change = StateChange(state, now(), detail, delay)
        self._client._state_changed(change)
        if self._on_state is not None:
            self._on_state(change)


def _drop_replays(events: list[SSEEvent], att: _Attempt) -> list[SSEEvent]:
    """After a resume, drops what a replaying server sends again (numeric ids <= the
    resume point); the first newer id ends the replay. Opaque ids are trusted."""
    kept: list[SSEEvent] = []
    for ev in events:
        floor = att.replay_floor
        if floor is not None and ev.id.isdigit():
            if int(ev.id) <= floor:
                continue
            att.replay_floor = None
        kept.append(ev)
    return kept


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every client: building one loads the CA bundle (~20 ms),
    which adds up when an application (or the kit's herd) runs many clients."""
    return httpx.create_ssl_context()


def _is_event_stream(response: httpx.Response) -> bool:
    media = str(response.headers.get("content-type", "")).split(";", 1)[0].strip().lower()
    return media == "text/event-stream"


async def _error_text(response: httpx.Response) -> str:
    """Up to ``_ERROR_BODY_LIMIT`` bytes of an error body, as text."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= _ERROR_BODY_LIMIT:
            break
    return bytes(body[:_ERROR_BODY_LIMIT]).decode(response.encoding or "utf-8", "replace")


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Reads the rest of the body after the terminal event, briefly, so the server
    sees a complete exchange rather than a client that hung up."""
    with contextlib.suppress(httpx.HTTPError, TimeoutError):
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in chunks:
                pass


class StreamingClient:
    """A resilient SSE client: GET (EventSource) and POST (fetch) streams over one loop.

    One circuit breaker per client is shared by all its streams; it counts every
    attempt that fails before its first data event (any status, connect, reset,
    first-chunk timeout, stall) and none that fails later. ``offline()`` and
    ``online()`` are the browser's network events: while offline, streams wait
    (the seed article's choice) and only a committed stream that cannot resume
    raises ``Offline``. The stream's own ``retry:`` field is not used: the policy's
    backoff decides. Call everything from the event loop's thread.
    """

    # Each attempt's event-stream decoder; a seam for subclasses (the kit's zoo swaps it).
    decoder_class: type[SSEDecoder] = SSEDecoder

    def __init__(
        self,
        policy: ClientPolicy | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
        on_state: StateCallback | None = None,
        terminal: Callable[[SSEEvent], bool] = default_terminal,
    ) -> None:
        """Creates a client.

        Args:
            policy: Retry matrix, backoff, breaker, timeouts; the seed article's by default.
            http: An httpx client to send with (not closed by ``aclose()``); by default
                one is created with no pool limit (streams hold connections for long).
            rng: The jitter's random source.
            on_state: Called with every state change of every stream.
            terminal: Recognises the event that ends an answer.
        """
        self.policy = policy or ClientPolicy()
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=self.policy.connect_timeout),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
            verify=_ssl_context(),
        )
        self._rng = rng or random.Random()
        self._on_state = on_state
        self._terminal = terminal
        self.breaker = make_breaker(self.policy.breaker)
        self.state = State.IDLE
        self._offline = False
        self._streams: set[EventStream] = set()

    def stream(
        self,
        url: str,
        *,
        method: str = "GET",
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        files: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool | None = None,
        on_state: StateCallback | None = None,
    ) -> EventStream:
        """A stream of the data events at ``url``; nothing is sent before iteration.

        Args:
            url: The endpoint.
            method: "GET" for EventSource-style streams, "POST" to send a body.
            json: A JSON body.
            data: Form fields (multipart when ``files`` is given).
            files: Multipart files, as httpx takes them.
            headers: Extra request headers.
            idempotent: May the request run twice? Default: True for GET only.
                A non-idempotent request is re-sent only if no byte of it was written.
            on_state: Called with this stream's state changes.

        Returns:
            An ``EventStream`` (async iterator and async context manager).
        """
        method = method.upper()
        call = _Call(
            method,
            url,
            json,
            data,
            files,
            headers,
            idempotent=method == "GET" if idempotent is None else idempotent,
        )
        return EventStream(self, call, on_state)

    @property
    def is_offline(self) -> bool:
        return self._offline

    def offline(self) -> None:
        """The network is gone: open connections are closed and no attempt is made
        until ``online()``; waiting streams keep waiting (as in the seed article)."""
        self._offline = True
        self._state_changed(StateChange(State.OFFLINE, now(), "offline()"))
        for stream in list(self._streams):
            stream._went_offline()

    def online(self) -> None:
        """The network is back: attempts and the breaker start over, streams connect now."""
        self._offline = False
        self.breaker.reset()
        if not self._streams:
            self._state_changed(StateChange(State.IDLE, now(), "online()"))
        for stream in list(self._streams):
            stream._came_online()

    async def aclose(self) -> None:
        """Closes every open stream, then the httpx client if this client created it."""
        for stream in list(self._streams):
            await stream.aclose()
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _state_changed(self, change: StateChange) -> None:
        self.state = change.state
        if self._on_state is not None:
            self._on_state(change)

    def _probe_resolved(self) -> None:
        # Streams waiting on the breaker look again now rather than at their deadline.
        for stream in self._streams:
            if stream.state is State.BREAKER_OPEN:
                stream._wake.set()
