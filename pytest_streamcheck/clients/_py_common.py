"""What the shipped Python adapters share: the request's parts, the error vocabulary, threads.

Each adapter reports only what its library hands the application: the chunks an
application would show, the exception it would catch (named in the kit's error
vocabulary), and the end of the iteration. None of them can take the kit's policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import httpx

from conformance._adapter import AdapterRequest, StreamCancelled, StreamSink
from conformance._case import JsonBody, MultipartBody
from conformance._evidence import ErrorKind
from conformance.reference._request import _ssl_context
from fake_servers import Ledger
from fake_servers._noise import Source, ThreadLagProbe

__all__ = [
    "MODEL",
    "RETRIED_4XX",
    "HttpxClients",
    "ThreadedSyncAdapter",
    "cached",
    "deliver",
    "deliver_async",
    "describe",
    "http_status_kind",
    "httpx_request",
    "prompt_of",
    "request_headers",
    "sdk_error",
    "tls_context",
]

MODEL = "streamcheck-fake-1"
# The Stainless SDKs retry these 4xx statuses (and every 5xx); any other 4xx fails at once.
RETRIED_4XX = frozenset({408, 409, 429})


def tls_context() -> ssl.SSLContext:
    """The default verifying TLS context (httpx's ``verify=True``), one per process.

    Every client an adapter makes shares it: making one per client costs ~20 ms of CPU
    (loading the CA bundle), and the herd cases make 50 at once, which stalled the kit's
    event loop for a second. The traffic is plain HTTP on loopback; it changes nothing.
    """
    return _ssl_context()


def prompt_of(request: AdapterRequest) -> str:
    """The case's prompt: its JSON body's ``"prompt"``, else the whole body as text."""
    body = request.request.body
    if isinstance(body, JsonBody):
        value = body.value
        if isinstance(value, dict):
            prompt = value.get("prompt")
            if isinstance(prompt, str):
                return prompt
        return str(value)
    return "Hello"


class HttpxClients:
    """One ``httpx.AsyncClient`` per client key (own pool, as separate users' clients),
    made on first use with ``options``; ``close_all`` closes them (an adapter's reset)."""

    def __init__(self, **options: Any) -> None:
        self._options = {"trust_env": False, "verify": tls_context(), **options}
        self._clients: dict[str, httpx.AsyncClient] = {}

    def get(self, key: str) -> httpx.AsyncClient:
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = httpx.AsyncClient(**self._options)
        return client

    async def close_all(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.aclose()


def httpx_request(request: AdapterRequest) -> dict[str, Any]:
    """The keyword arguments of the request's httpx call: its headers (with the
    Last-Event-ID it resumes from) and its body, JSON or multipart."""
    req = request.request
    headers = dict(req.headers)
    if req.last_event_id is not None:
        headers["Last-Event-ID"] = req.last_event_id
    kwargs: dict[str, Any] = {"headers": headers}
    if isinstance(req.body, JsonBody):
        kwargs["json"] = req.body.value
    elif isinstance(req.body, MultipartBody):
        kwargs["data"] = dict(req.body.fields)
        kwargs["files"] = {name: (fn, data, ctype) for name, fn, ctype, data in req.body.files}
    return kwargs


def request_headers(request: AdapterRequest) -> dict[str, str]:
    """The case's request headers (idempotency-key, ...), for ``extra_headers``."""
    return dict(request.request.headers)


def http_status_kind(status: int) -> ErrorKind:
    """A status the SDK raised after its retries: retried ones ``gave_up``, others at once."""
    return "gave_up" if status in RETRIED_4XX or status >= 500 else "non_retryable_status"


def sdk_error(sdk: ModuleType, exc: Exception, *, iterating: bool) -> tuple[ErrorKind, int | None]:
    """The kit's name for a Stainless SDK's exception (openai, anthropic), and its status.

    Before the stream is handed over (``create()``), the SDK has retried what it retries:
    a status error is ``gave_up`` (a status it retries) or ``non_retryable_status``; a
    connection error or timeout is ``gave_up``. While iterating, the SDK never retries:
    its read timeout is a stall, a broken connection or an in-band ``error`` event a
    truncation, and anything else (a body it cannot parse) ``other``.
    """
    if not iterating:
        if isinstance(exc, sdk.APIStatusError):
            status = int(exc.status_code)
            return http_status_kind(status), status
        return "gave_up", None
    if isinstance(exc, sdk.APITimeoutError) or _is_timeout(exc):
        return "stalled", None
    if isinstance(exc, sdk.APIError) or _is_transport_error(exc):
        return "truncated", None
    return "other", None


def _is_timeout(exc: BaseException) -> bool:
    # httpx and httpx2 (the SDKs' transport) name their timeouts alike: ReadTimeout, ...
    return any(
        cls.__name__ == "TimeoutException" and cls.__module__.startswith("httpx")
        for cls in type(exc).__mro__
    )


def _is_transport_error(exc: BaseException) -> bool:
    return any(
        cls.__name__ in {"TransportError", "StreamError", "HTTPError"}
        and cls.__module__.startswith("httpx")
        for cls in type(exc).__mro__
    )


def describe(exc: BaseException) -> str:
    """``Type: message``, as an application's log line would read."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ThreadedSyncAdapter:
    """Runs a synchronous client's ``stream_sync`` in a thread of its own, per stream.

    The contract's ``SyncClientAdapter`` runs in the event loop's default executor,
    which has at most ``cpu_count + 4`` threads (6 on a 2-core machine): a case that
    opens 50 streams at once (the herd) would queue them. An application's threads are
    its own, so each stream gets one. When the runner cancels the stream, the sink is
    cancelled and the next delivery raises ``StreamCancelled``, which leaves the
    client's loop (and its ``with`` block, which closes the stream), as in
    ``SyncClientAdapter``.
    """

    _thread_lag: ThreadLagProbe | None = None  # while a case plays (``measure_lag``)

    def stream_sync(self, request: AdapterRequest, sink: StreamSink) -> None:
        raise NotImplementedError

    def close_sync(self) -> None:
        """Release the clients."""

    async def configure(self, policy: object) -> None:
        """Not configurable: the library's own policy is its profile."""

    async def reset(self) -> None:
        await asyncio.to_thread(self.close_sync)

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if finished.done():
                return
            if error is None:
                finished.set_result(None)
            else:
                finished.set_exception(error)

        def run() -> None:
            error: BaseException | None = None
            try:
                with contextlib.suppress(StreamCancelled):
                    self.stream_sync(request, sink)
            except BaseException as exc:  # handed to the awaiting task
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(settle, error)

        name = f"streamcheck-{type(self).__name__}-{request.stream}"
        threading.Thread(target=run, name=name, daemon=True).start()
        try:
            await asyncio.shield(finished)
        except asyncio.CancelledError:
            sink.cancel()  # the thread notices at its next delivery
            raise

    def measure_lag(self, ledger: Ledger | None) -> None:
        """From any thread: while a case plays, probe how late a thread of this process
        wakes (``Source.THREADS``, a hosting source); None stops it. The streams' threads
        sleep their backoff and then wait for the CPU and the GIL: fifty of them on a
        loaded machine woke late together, and the kit's loops, probed only near each
        wait's ends, had not counted it (CI: openai-python failed SC-BACKOFF-10)."""
        probe, self._thread_lag = self._thread_lag, None
        if probe is not None:
            probe.stop()
        if ledger is not None:
            self._thread_lag = ThreadLagProbe(ledger, Source.THREADS)
            self._thread_lag.start()

    async def offline(self) -> None:
        """The libraries have no offline handling."""

    async def online(self) -> None:
        """The libraries have no online handling."""

    async def aclose(self) -> None:
        self.measure_lag(None)
        await asyncio.to_thread(self.close_sync)


def cached(
    store: dict[tuple[str, str], Any],
    lock: threading.Lock,
    key: tuple[str, str],
    make: Callable[[], Any],
) -> Any:
    """``store[key]``, made by ``make()`` once (under ``lock``: streams run in threads)."""
    with lock:
        client = store.get(key)
        if client is None:
            client = store[key] = make()
        return client


# An event the library yields -> (the chunk's data, its event name) if it carries
# answer text, else None (a framing event: not a chunk).
Pick = Callable[[Any], "tuple[str, str | None] | None"]


def _hand(sink: StreamSink, event: Any, pick: Pick, limit: int | None) -> bool:
    """Report ``event`` if it is a chunk; True once the consumer stops reading."""
    picked = pick(event)
    if picked is not None:
        sink.chunk(picked[0], event=picked[1])
    return limit is not None and sink.chunks >= limit


def _failed(sdk: ModuleType, sink: StreamSink, exc: Exception) -> None:
    kind, status = sdk_error(sdk, exc, iterating=True)
    sink.error(kind, describe(exc), status=status)


def deliver(sdk: ModuleType, stream: Any, sink: StreamSink, limit: int | None, pick: Pick) -> None:
    """Iterate an SDK's sync stream as an application does: each chunk to the sink,
    ``done`` at its end, an exception as the kit's error; leaving the ``with`` block (the
    consumer stopped reading at ``limit``) closes it."""
    try:
        with stream:
            for event in stream:
                if _hand(sink, event, pick, limit):
                    return
    except StreamCancelled:
        raise
    except Exception as exc:
        _failed(sdk, sink, exc)
        return
    sink.done()


async def deliver_async(
    sdk: ModuleType, stream: Any, sink: StreamSink, limit: int | None, pick: Pick
) -> None:
    """``deliver`` for an SDK's async stream."""
    try:
        async with stream:
            async for event in stream:
                if _hand(sink, event, pick, limit):
                    return
    except StreamCancelled:
        raise
    except Exception as exc:
        _failed(sdk, sink, exc)
        return
    sink.done()
