"""The reference client's httpx shell: one resilience loop under two transports.

GET streams (EventSource style) and POST streams with a body (fetch + ReadableStream
style) share the same loop. The sans-IO core decides (``RetryState``, the breaker,
``StallWatch``, ``SSEDecoder``); the shell only does the IO, the sleeping and the
clock reads. ``StreamingClient`` lives here; its streams are in ``_stream``, their
bookkeeping in ``_attempt`` and the request and response helpers in ``_request``. The
client keeps its state in one ``_Shared`` object that each of its streams receives:
neither class touches the other's private members.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, Self

import httpx

# Re-exported: the kit's tests and its zoo of mutants import them from here.
from conformance.reference._attempt import _Attempt as _Attempt
from conformance.reference._attempt import _drop_replays as _drop_replays
from conformance.reference._breaker import CircuitBreaker, NoBreaker, RatioBreaker, make_breaker
from conformance.reference._config import ClientPolicy
from conformance.reference._request import _Call, _ssl_context
from conformance.reference._sse import SSEDecoder, SSEEvent
from conformance.reference._states import State
from conformance.reference._stream import Clock, EventStream, Sleep, StateCallback, _Shared

__all__ = ["Clock", "EventStream", "Sleep", "StateCallback", "StreamingClient", "default_terminal"]

_TERMINAL_EVENTS = frozenset({"done", "message_stop", "response.completed"})


def default_terminal(ev: SSEEvent) -> bool:
    """The end-of-answer marker of the common LLM formats.

    Args:
        ev: A dispatched event.

    Returns:
        True for ``data: [DONE]`` (OpenAI), the events ``done``, ``message_stop``
        (Anthropic) and ``response.completed`` (OpenAI Responses), and Gemini's chunk
        with a ``finishReason``.
    """
    if ev.data == "[DONE]" or ev.event in _TERMINAL_EVENTS:
        return True
    # Gemini has no end event: its last chunk carries the finish reason.
    return ev.event in (None, "message") and '"finishReason"' in ev.data


class StreamingClient:
    """A resilient SSE client: GET (EventSource) and POST (fetch) streams over one loop.

    One circuit breaker per client is shared by all its streams; it counts every
    attempt that fails before its first data event (any status, connect, reset,
    first-chunk timeout, stall) and none that fails later. ``offline()`` and
    ``online()`` are the browser's network events: while offline, streams wait
    (the seed article's choice) and only a committed stream that cannot resume
    raises ``Offline``. The stream's own ``retry:`` field is not used: the policy's
    backoff decides. Call everything from the event loop's thread.

    Time comes from the ``clock`` and ``sleep`` it is given, ``time.monotonic`` and
    ``asyncio.sleep`` by default; the first-chunk timeout and the stall checks run on
    the event loop's own timers, so the clock must keep pace with the loop's.
    """

    # Each attempt's event-stream decoder; a seam for subclasses (the kit's zoo swaps it).
    decoder_class: type[SSEDecoder] = SSEDecoder
    # The streams' class, a seam of the same kind.
    stream_class: type[EventStream] = EventStream

    def __init__(
        self,
        policy: ClientPolicy | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
        on_state: StateCallback | None = None,
        terminal: Callable[[SSEEvent], bool] = default_terminal,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        trust_env: bool = True,
    ) -> None:
        """Creates a client.

        Args:
            policy: Retry matrix, backoff, breaker, timeouts; the seed article's by default.
            http: An httpx client to send with (not closed by ``aclose()``); by default
                one is created with no pool limit (streams hold connections for long).
            rng: The jitter's random source.
            on_state: Called with every state change of every stream.
            terminal: Recognises the event that ends an answer.
            clock: Seconds on a monotonic clock: the times of state changes, of the
                breaker's cooldown and of the stall watch (the time a ``CircuitOpen``
                names is on it too).
            sleep: Awaited with the seconds of every wait between attempts (backoff,
                Retry-After, an open breaker); ``offline()`` and ``online()`` cut it
                short. A test can pass one that returns at once.
            trust_env: Whether the httpx client it creates reads proxy settings from the
                environment (httpx's default).
        """
        policy = policy or ClientPolicy()
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=policy.connect_timeout),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
            verify=_ssl_context(),
            trust_env=trust_env,
        )
        self._shared = _Shared(
            policy=policy,
            http=self._http,
            rng=rng or random.Random(),
            terminal=terminal,
            breaker=make_breaker(policy.breaker),
            on_state=on_state,
            clock=clock,
            sleep=sleep,
        )

    @property
    def policy(self) -> ClientPolicy:
        """The policy every stream of this client follows."""
        return self._shared.policy

    @property
    def breaker(self) -> CircuitBreaker | RatioBreaker | NoBreaker:
        """The circuit breaker all streams of this client share."""
        return self._shared.breaker

    @property
    def state(self) -> State:
        """The state the client's streams last reached (``IDLE`` before any)."""
        return self._shared.state

    def stream(
        self,
        url: str,
        *,
        method: str = "GET",
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        files: Mapping[str, Any] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        last_event_id: str | None = None,
        idempotent: bool | None = None,
        on_state: StateCallback | None = None,
        comments: bool = False,
    ) -> EventStream:
        """A stream of the data events at ``url``; nothing is sent before iteration.

        Every request carries ``Accept: text/event-stream`` and ``Cache-Control`` and
        ``Pragma: no-cache`` (EventSource's "no-store"); redirects are followed (at most
        20, as Fetch does) and later attempts go to where they led.

        Args:
            url: The endpoint.
            method: "GET" for EventSource-style streams, "POST" to send a body.
            json: A JSON body.
            data: Form fields (multipart when ``files`` is given).
            files: Multipart files, as httpx takes them.
            content: A raw body, sent byte for byte; set its Content-Type in ``headers``.
                Use only one of ``json``, ``data``/``files`` and ``content``.
            headers: Extra request headers, sent on every attempt (the caller's value
                wins over the SSE defaults above, compared case-insensitively).
            last_event_id: Resume a stream read earlier: the first request carries it
                as ``Last-Event-ID`` (None or "": no header until the stream sends ids).
            idempotent: May the request run twice? Default: True for GET only.
                A non-idempotent request is re-sent only if no byte of it was written.
            on_state: Called with this stream's state changes.
            comments: Keep the stream's comment lines (keepalives) for the consumer:
                ``EventStream.items()`` then yields each as an ``SSEComment`` among
                the events, in stream order. Iterating the stream itself always
                yields events only.

        Returns:
            An ``EventStream`` (async iterator and async context manager).

        Raises:
            ValueError: more than one kind of body, or a ``last_event_id`` that cannot
                be a header value (CR, LF or NUL in it).
        """
        if content is not None and (json is not None or data or files):
            raise ValueError("content= is a whole body: leave json, data and files unset")
        if last_event_id and any(c in last_event_id for c in "\r\n\0"):
            raise ValueError(f"last_event_id {last_event_id!r} holds CR, LF or NUL")
        method = method.upper()
        call = _Call(
            method,
            url,
            json,
            data,
            files,
            headers,
            idempotent=method == "GET" if idempotent is None else idempotent,
            content=content,
            last_event_id=last_event_id or "",
        )
        return self.stream_class(
            self._shared, call, on_state, comments=comments, decoder_class=self.decoder_class
        )

    @property
    def is_offline(self) -> bool:
        return self._shared.offline

    def offline(self) -> None:
        """The network is gone: open connections are closed and no attempt is made
        until ``online()``; waiting streams keep waiting (as in the seed article)."""
        self._shared.go_offline()

    def online(self) -> None:
        """The network is back: attempts and the breaker start over, streams connect now."""
        self._shared.go_online()

    async def aclose(self) -> None:
        """Closes every open stream, then the httpx client if this client created it."""
        await self._shared.close_streams()
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
