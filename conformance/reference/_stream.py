"""One logical stream: ``EventStream``, its reader task and the resilience loop.

Each ``EventStream`` runs its attempts in a reader task of its own and hands events
to the consumer through a small buffer. The reader keeps reading while the
consumer is busy, so the stall watch measures the network, not the consumer, and
a timeout can cancel the reader without ever cancelling the consumer's task.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self, cast

import httpx

import conformance.reference._errors as errors
from conformance.reference._attempt import _Attempt, _Buffer, _drop_replays, _numeric_id, _Wake
from conformance.reference._breaker import Admit, CircuitBreaker, NoBreaker, RatioBreaker
from conformance.reference._config import ClientPolicy
from conformance.reference._policy import Failure, FailureKind, GiveUp, Retry, RetryState, Surface
from conformance.reference._request import (
    _DRAIN_SECONDS,
    MAX_REDIRECTS,
    _Call,
    _drain,
    _error_text,
    _is_event_stream,
    _prepare_request,
    _Prepared,
    _redirect_location,
    _redirected,
)
from conformance.reference._sse import SSEComment, SSEDecoder, SSEEvent
from conformance.reference._states import State, StateChange
from conformance.reference._watch import StallWatch, next_check

__all__ = ["Clock", "EventStream", "Sleep", "StateCallback"]

StateCallback = Callable[[StateChange], None]
Clock = Callable[[], float]  # seconds on a monotonic clock, like time.monotonic
Sleep = Callable[[float], Awaitable[None]]  # waits that many seconds, like asyncio.sleep

_HIGH_WATER = 4096  # buffered events at which the reader waits for the consumer


# A provider format's own events around the answer (Anthropic Messages, OpenAI
# Responses): they carry no answer text, so the consumer never gets them and they do
# not commit the stream (a drop after message_start is still retried).
FRAMING_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_stop",
        "message_delta",
        "ping",
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    }
)


@dataclass(eq=False)
class _Shared:
    """What one client's streams share: the client's whole state, and the streams' only
    link to it.

    ``StreamingClient`` makes one and hands it to every stream it makes. The streams
    read the fields and add or remove themselves in ``streams``; the client acts on
    them through the methods.
    """

    policy: ClientPolicy
    http: httpx.AsyncClient
    rng: random.Random
    terminal: Callable[[SSEEvent], bool]  # recognises the end of an answer
    breaker: CircuitBreaker | RatioBreaker | NoBreaker  # one per client, for all its streams
    clock: Clock  # every time the client reads
    sleep: Sleep  # every wait between attempts
    on_state: StateCallback | None = None  # the client's callback
    state: State = State.IDLE  # the last state any of its streams (or the client) reached
    offline: bool = False
    streams: set[EventStream] = field(default_factory=set)  # the running ones

    def state_changed(self, change: StateChange) -> None:
        self.state = change.state
        if self.on_state is not None:
            self.on_state(change)

    def go_offline(self) -> None:
        self.offline = True
        self.state_changed(StateChange(State.OFFLINE, self.clock(), "offline()"))
        for stream in list(self.streams):
            stream._went_offline()

    def go_online(self) -> None:
        self.offline = False
        self.breaker.reset()
        if not self.streams:
            self.state_changed(StateChange(State.IDLE, self.clock(), "online()"))
        for stream in list(self.streams):
            stream._came_online()

    def probe_resolved(self) -> None:
        # Streams waiting on the breaker look again now rather than at their deadline.
        for stream in self.streams:
            if stream.state is State.BREAKER_OPEN:
                stream._wake.set()

    async def close_streams(self) -> None:
        for stream in list(self.streams):
            await stream.aclose()


class EventStream:
    """One logical stream: an async iterator of data events, across any retries.

    The terminal event ends the iteration (it is not yielded). Use ``async with``
    or ``async for``: breaking out of an ``async for`` loop closes the connection
    at once, as does ``aclose()``. ``StreamingClient.stream()`` makes them.
    """

    def __init__(
        self,
        shared: _Shared,
        call: _Call,
        on_state: StateCallback | None,
        *,
        comments: bool = False,
        decoder_class: type[SSEDecoder] = SSEDecoder,
    ) -> None:
        self._shared = shared  # the client's state: its policy, breaker, streams, ...
        self._call = call
        self._on_state = on_state
        self._comments = comments  # comment lines go to the buffer too (for items())
        self._decoder_class = decoder_class  # each attempt's decoder
        self._retry = RetryState(shared.policy, shared.rng)
        self._buffer = _Buffer()
        self._wake = _Wake()  # offline/online, or a breaker probe resolved
        self._task: asyncio.Task[None] | None = None
        self._attempt: _Attempt | None = None
        self._state = State.IDLE
        self._before_stall = State.CONNECTING
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self._draining = False
        self.attempts = 0  # every attempt this stream made (never reset)
        # The last event ID string (HTML §9.2.6): the caller's, then the id in force at the
        # last delivered event, "" when none was set or an empty ``id:`` reset it.
        self.last_event_id = call.last_event_id
        self._target: _Prepared | None = None  # the request after redirects (see _send)

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
        # Only a stream opened with comments=True buffers comments, and they are skipped.
        return cast(AsyncIterator[SSEEvent], self._iterate(skip_comments=True))

    def items(self) -> AsyncIterator[SSEEvent | SSEComment]:
        """The events and, for a stream opened with ``comments=True``, its comment lines,
        in stream order; breaking out closes the stream, as with ``async for``."""
        return self._iterate(skip_comments=False)

    async def _iterate(self, *, skip_comments: bool) -> AsyncIterator[SSEEvent | SSEComment]:
        items = self._buffer.events
        skip = skip_comments and self._comments
        try:
            while True:
                while items:
                    item = items.popleft()
                    if not (skip and isinstance(item, SSEComment)):
                        yield item
                if not await self._refill():
                    return
        finally:
            await self.aclose()

    async def __anext__(self) -> SSEEvent:
        items = self._buffer.events
        while items or await self._refill():
            item = items.popleft()
            if isinstance(item, SSEEvent):
                return item
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
        self._shared.streams.add(self)

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
            self._shared.streams.discard(self)

    async def _loop(self) -> None:
        self._target = await self._prepare()
        retry = self._retry
        while True:
            await self._while_offline()
            probe = await self._admission()
            retry.on_attempt()
            self.attempts += 1
            failure, att = await self._attempt_once(self._target, probe)
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
        return await _prepare_request(self._shared.http, self._call, self._shared.rng)

    def _resumable(self) -> bool:
        return bool(self.last_event_id) and self._shared.policy.resume and self._call.idempotent

    async def _while_offline(self) -> None:
        while self._shared.offline:
            self._set_state(State.OFFLINE, "waiting for online()")
            self._wake.clear()
            await self._wake.wait()

    async def _admission(self) -> bool:
        """Asks the shared breaker; True when this attempt is the half-open probe.

        A new call meeting an open breaker fails fast; a call already retrying waits
        for it (and is woken early when a probe resolves).
        """
        breaker = self._shared.breaker
        while True:
            verdict = breaker.admit(self._shared.clock())
            if isinstance(verdict, Admit):
                return verdict.probe
            if self.attempts == 0:
                raise errors.CircuitOpen(verdict.until)
            delay = max(0.0, verdict.until - self._shared.clock())
            self._set_state(State.BREAKER_OPEN, "circuit open", delay=delay)
            await self._pause(delay)
            await self._while_offline()

    async def _pause(self, seconds: float) -> None:
        """Sleeps with the client's sleep; offline()/online() (and a probe's outcome) cut
        it short."""
        self._wake.clear()
        await self._wake.pause(self._shared.sleep(seconds))

    # -- one attempt -----------------------------------------------------------
    async def _attempt_once(
        self, prepared: _Prepared, probe: bool
    ) -> tuple[Failure | None, _Attempt]:
        """One request; returns its failure (None: the answer completed) and its record."""
        policy = self._shared.policy
        att = _Attempt(
            probe,
            StallWatch(policy.stall_timeout, policy.stall_check_interval, self._shared.clock()),
        )
        if self._resumable():
            att.replay_floor = _numeric_id(self.last_event_id)
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
        policy = self._shared.policy
        first_chunk = policy.first_chunk_timeout
        deadline = None if first_chunk is None else loop.time() + first_chunk
        try:
            async with asyncio.timeout_at(deadline) as guard:
                att.guard = guard
                att.tick_due = loop.time()
                self._schedule_tick(att)
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

        policy = self._shared.policy
        timeout = httpx.Timeout(None, connect=policy.connect_timeout, pool=policy.connect_timeout)
        extensions = {"timeout": timeout.as_dict(), "trace": trace}
        response, problem = await self._send(prepared, extensions, att)
        try:
            if policy.idle_rule == "bytes":
                self._touch(att)
            if response.status_code != 200 or not _is_event_stream(response):
                att.body = problem or await _error_text(response)
                headers_seen = {k.lower(): v for k, v in response.headers.items()}
                return self._failure("status", response.status_code, headers_seen)
            return await self._read(response, att)
        finally:
            self._settle(att)
            await response.aclose()

    async def _send(
        self, prepared: _Prepared, extensions: dict[str, Any], att: _Attempt
    ) -> tuple[httpx.Response, str]:
        """Sends the request, following redirects as Fetch's "follow" mode does.

        Our own loop, not httpx's ``follow_redirects``: it keeps the final request for
        later attempts, ignores an empty Location and fails on a bad one (httpx would
        loop on the first and raise a transport error, which is retried, on the second).
        Retries and resumes go to the final request: HTML §9.2.3 reconnects with "the
        EventSource object's request", whose URL list, method and body the redirects
        changed (Fetch §4.4).

        A redirect that cannot be followed fails the attempt on its 3xx status, which the
        retry matrix does not retry: the same request meets the same redirect, and HTML
        §9.2.3 lets a client fail the connection when reconnecting "is known to be futile".

        Each redirect's head is bytes from the network: under idle rule "bytes" it resets
        the stall watch, so a long chain on a slow network is not taken for silence.

        Returns:
            The final response, and why it is a redirect that cannot be followed ("" when
            it is not one): a bad Location, or one more redirect than ``MAX_REDIRECTS``.
        """
        for hop in range(MAX_REDIRECTS + 1):
            response = await self._shared.http.send(
                self._request(prepared, extensions), stream=True
            )
            status = response.status_code
            location = _redirect_location(status, response.headers)
            if location is None:
                return response, ""
            if self._shared.policy.idle_rule == "bytes":
                self._touch(att)
            if hop == MAX_REDIRECTS:
                return response, f"more than {MAX_REDIRECTS} redirects"
            try:
                prepared = _redirected(prepared, status, location)
            except ValueError as exc:
                return response, str(exc)
            await response.aclose()
            self._target = prepared
        raise AssertionError("unreachable: the last hop returns")

    def _request(self, prepared: _Prepared, extensions: dict[str, Any]) -> httpx.Request:
        headers = prepared.headers.copy()
        if self.last_event_id:  # HTML §9.2.3: only a non-empty last event ID is sent
            # UTF-8 encoded, as the spec says: an id may hold any character but CR, LF
            # and NUL, and httpx would encode a str value as ASCII (and raise).
            value = self.last_event_id.encode("utf-8")
            headers = httpx.Headers([*headers.raw, (b"last-event-id", value)])
        return httpx.Request(
            prepared.method,
            prepared.url,
            headers=headers,
            content=prepared.body,
            extensions=extensions,
        )

    async def _read(self, response: httpx.Response, att: _Attempt) -> Failure | None:
        decoder = self._decoder_class()
        touch_bytes = self._shared.policy.idle_rule == "bytes"
        buffer = self._buffer
        # httpx declares an AsyncIterator but returns a generator: close it with the read.
        body = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
        async with contextlib.aclosing(body) as chunks:
            async for chunk in chunks:
                if touch_bytes:
                    self._touch(att)
                if self._comments:
                    done = self._deliver_items(decoder.feed_items(chunk), att)
                else:
                    events = decoder.feed(chunk)
                    done = bool(events) and self._deliver(events, att)
                if done:
                    await _drain(chunks)
                    return None
                if len(buffer.events) > _HIGH_WATER:
                    await self._wait_for_consumer(att)
        # HTML §9.2.6 discards an event left unterminated at the end; the decoder decides.
        events = decoder.close()
        if events and self._deliver(events, att):
            return None
        return self._failure("truncated")

    def _deliver_items(self, items: list[SSEEvent | SSEComment], att: _Attempt) -> bool:
        """``_deliver`` for a stream that keeps comments: each run of events goes through
        it, each comment goes where it came; nothing after the terminal event counts."""
        run: list[SSEEvent] = []
        for item in items:
            if isinstance(item, SSEEvent):
                run.append(item)
                continue
            if run and self._deliver(run, att):
                return True
            run = []
            self._buffer.push((item,))
        return bool(run) and self._deliver(run, att)

    def _deliver(self, events: list[SSEEvent], att: _Attempt) -> bool:
        """Hands data events to the consumer; True once the terminal event arrived."""
        terminal = self._shared.terminal
        cut = None
        for i, ev in enumerate(events):
            if terminal(ev):
                cut = i
                break
        out = events if cut is None else events[:cut]  # nothing after the terminal counts
        out = [ev for ev in out if ev.event not in FRAMING_EVENTS]
        if att.replay_floor is not None:
            out = _drop_replays(out, att)
        if self._shared.policy.idle_rule == "data":
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
        # Even "": an empty ``id:`` resets it, as does an event without an id on a new
        # connection (each starts its buffer empty, HTML §9.2.6): resuming from an older
        # id would have the server repeat the events delivered since.
        self.last_event_id = events[-1].id
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
        att.watch.touch(self._shared.clock())
        if self._state is State.STALLED:
            self._set_state(self._before_stall, "flowing again")

    def _tick(self, att: _Attempt) -> None:
        """The seed's health check, every ``stall_check_interval`` seconds."""
        if att.settled or att.interrupt is not None:
            return
        health = "ok" if att.paused else att.watch.check(self._shared.clock())
        # Surfaced before it is acted on, even when a late tick finds it dead at once.
        if health != "ok" and self._state is not State.STALLED:
            self._before_stall = self._state
            idle = att.watch.idle(self._shared.clock())
            self._set_state(State.STALLED, f"no {self._shared.policy.idle_rule} for {idle:.2f}s")
        if health == "dead":
            self._interrupt(att, "stall")
            return
        self._schedule_tick(att)

    def _schedule_tick(self, att: _Attempt) -> None:
        """The next check on a fixed grid (the seed's ``setInterval``): under load every
        wake-up is a little late, and a chain of ``call_later`` would add those up (CI:
        a 0.3 s timeout checked every 33 ms abandoned after 0.48 s). The grid keeps the
        abandonment within one interval after the timeout, plus one wake-up's lateness."""
        loop = asyncio.get_running_loop()
        att.tick_due = next_check(att.tick_due, att.watch.interval, loop.time())
        att.tick = loop.call_at(att.tick_due, self._tick, att)

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
        breaker = self._shared.breaker
        if success:
            breaker.record_success(self._shared.clock())
        else:
            breaker.record_failure(self._shared.clock())
        if att.probe:
            self._shared.probe_resolved()

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
        self._shared.breaker.probe_abandoned(self._shared.clock())
        self._shared.probe_resolved()

    def _error(self, decision: GiveUp | Surface, failure: Failure, body: str) -> errors.StreamError:
        if decision.reason == "not_idempotent":
            return errors.NotIdempotent(failure)
        if isinstance(decision, GiveUp) and decision.reason != "non_retryable":
            return errors.GaveUp(self.attempts, failure)  # "exhausted"
        # Surfaced after the commit, or a failure the matrix never retries.
        kind = failure.kind
        if kind == "status" and failure.status is not None:
            return errors.NonRetryableStatus(failure.status, body)
        committed = self._retry.committed
        if kind == "stall":
            return errors.Stalled(committed=committed)
        if kind == "offline":
            return errors.Offline()
        if committed:
            return errors.Truncated(clean=kind == "truncated")
        return errors.GaveUp(self.attempts, failure)

    # -- called through the shared state (by the client) -------------------------------------------
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
        change = StateChange(state, self._shared.clock(), detail, delay)
        self._shared.state_changed(change)
        if self._on_state is not None:
            self._on_state(change)
