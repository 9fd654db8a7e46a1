"""The built-in ``reference`` target: the kit's own client behind the adapter contract."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from conformance._adapter import ADAPTER_API, AdapterInfo, AdapterRequest, StreamSink
from conformance._case import CAPABILITIES, JsonBody, MultipartBody
from conformance._evidence import ErrorKind
from conformance.reference import (
    CircuitOpen,
    ClientPolicy,
    GaveUp,
    NonRetryableStatus,
    Offline,
    SSEComment,
    Stalled,
    StateChange,
    StreamError,
    StreamingClient,
    Truncated,
)
from fake_servers import now
from pytest_streamcheck import __version__

if TYPE_CHECKING:  # annotations only
    import httpx

__all__ = ["ReferenceAdapter", "error_kind"]

_KINDS: tuple[tuple[type[StreamError], ErrorKind], ...] = (
    (NonRetryableStatus, "non_retryable_status"),
    (GaveUp, "gave_up"),
    (CircuitOpen, "circuit_open"),
    (Stalled, "stalled"),
    (Truncated, "truncated"),
    (Offline, "offline"),
)


def error_kind(exc: StreamError) -> tuple[ErrorKind, int | None]:
    """The vocabulary kind of a reference-client error, and the status it carries."""
    kind: ErrorKind = next((k for cls, k in _KINDS if isinstance(exc, cls)), "other")
    if isinstance(exc, NonRetryableStatus):
        return kind, exc.status
    if isinstance(exc, GaveUp):
        return kind, exc.last.status
    return kind, None


class ReferenceAdapter:
    """Drives ``conformance.reference.StreamingClient``; every capability, configurable."""

    info = AdapterInfo(
        name="streamcheck-reference",
        version=__version__,
        capabilities=frozenset(CAPABILITIES),
        api=ADAPTER_API,
        virtual_time=True,  # on the kit's clock (``clock=now``) and asyncio's sleeps
    )

    def __init__(self, seed: int = 0) -> None:
        self._policy = ClientPolicy()
        self._seed = seed
        self._sinks: dict[str, list[StreamSink]] = {}
        self._clients: dict[str, StreamingClient] = {}
        self._offline = False

    def _client(self, key: str) -> StreamingClient:
        """The client instance for ``key``: each has its own breaker and randomness."""
        client = self._clients.get(key)
        if client is None:
            rng = random.Random(f"{self._seed}:{key}")
            # On the kit clock, as the ledger and the deliveries are.
            # Not from the environment: the kit's traffic stays on loopback, and reading
            # os.environ while pytest writes PYTEST_CURRENT_TEST from the main thread
            # raised KeyError in a lane (a herd's client is made mid-case).
            client = StreamingClient(
                self._policy,
                http=self._http(),
                rng=rng,
                on_state=self._on_state(key),
                clock=now,
                trust_env=False,
            )
            if self._offline:
                client.offline()
            self._clients[key] = client
        return client

    def _http(self) -> httpx.AsyncClient | None:
        """The httpx client a new instance sends with; None: its own (the default). A
        variant overrides it, e.g. one that keeps no connection alive (benchmarks)."""
        return None

    def _on_state(self, key: str) -> Callable[[StateChange], None]:
        def forward(change: StateChange) -> None:
            # One client serves every stream with its key; states go to those still open.
            for sink in self._sinks.get(key, ()):
                sink.state(change.state.value, delay=change.delay, detail=change.detail)

        return forward

    async def configure(self, policy: ClientPolicy) -> None:
        self._policy = policy
        await self.reset()

    async def reset(self) -> None:
        clients, self._clients = self._clients, {}
        self._sinks.clear()
        self._offline = False
        for client in clients.values():
            await client.aclose()

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        req = request.request
        body = req.body
        kwargs: dict[str, object] = {}
        if isinstance(body, JsonBody):
            kwargs["json"] = body.value
        elif isinstance(body, MultipartBody):
            kwargs["data"] = dict(body.fields)
            kwargs["files"] = {name: (fn, data, ctype) for name, fn, ctype, data in body.files}
        sinks = self._sinks.setdefault(req.client, [])
        sinks.append(sink)
        try:
            async with self._client(req.client).stream(
                request.url,
                method=req.method,
                headers=dict(req.headers),
                last_event_id=req.last_event_id,
                idempotent=req.idempotent,
                comments=req.comments,
                **kwargs,  # type: ignore[arg-type]
            ) as events:
                async for event in events.items():
                    if isinstance(event, SSEComment):
                        sink.comment(event.text)  # only a request with comments gets these
                        continue
                    sink.chunk(event.data, id=event.id or None, event=event.event)
                    if req.cancel_after is not None and sink.chunks >= req.cancel_after:
                        return  # the consumer stops reading; leaving the block closes it
            sink.done()
        except StreamError as exc:
            kind, status = error_kind(exc)
            sink.error(kind, str(exc), status=status)
        finally:
            sinks.remove(sink)

    async def offline(self) -> None:
        self._offline = True
        for client in self._clients.values():
            client.offline()

    async def online(self) -> None:
        self._offline = False
        for client in self._clients.values():
            client.online()

    async def aclose(self) -> None:
        await self.reset()
