"""anthropic-sdk-python's streaming messages, sync (``Anthropic``) and async (``AsyncAnthropic``).

The application's way: ``client.messages.create(model=..., max_tokens=...,
messages=[...], stream=True)`` and iterate the raw stream events; the SDK's own
retries (its defaults), ``base_url`` the case's URL (the SDK appends ``/v1/messages``).
A ``content_block_delta`` event carries the answer's text and is delivered, dumped as
JSON (``to_dict``), with its type as the event name; ``message_start``,
``content_block_start``/``stop``, ``message_delta`` and ``message_stop`` are framing
(the SDK itself drops ``ping``).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import anthropic

from conformance._adapter import ADAPTER_API, AdapterInfo, AdapterRequest, StreamSink
from pytest_streamcheck.clients._py_common import (
    MODEL,
    ThreadedSyncAdapter,
    cached,
    deliver,
    deliver_async,
    describe,
    prompt_of,
    request_headers,
    sdk_error,
    tls_context,
)

__all__ = ["AnthropicAdapter", "AnthropicAsyncAdapter"]

PROFILE = "anthropic-python@1"
API_KEY = "sk-ant-streamcheck-dummy"
MAX_TOKENS = 1024
TEXT_EVENT = "content_block_delta"


def _info(name: str, *, on_loop: bool = False) -> AdapterInfo:
    return AdapterInfo(
        name=name,
        virtual_time=on_loop,  # the async client waits on the kit's loop alone
        version=anthropic.__version__,
        capabilities=frozenset({"post"}),  # JSON bodies only: no multipart
        api=ADAPTER_API,
        reports="json",  # each chunk object the SDK yields, dumped again
        profile=PROFILE,
        # A redirect's target (a plain endpoint) answers as the API would, too.
        wire_format="anthropic",
    )


def _create_args(request: AdapterRequest) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": MAX_TOKENS,
        "messages": [{"role": "user", "content": prompt_of(request)}],
        "stream": True,
        "extra_headers": request_headers(request),
    }


def _pick(event: Any) -> tuple[str, str | None] | None:
    """A ``content_block_delta`` event, dumped as JSON with its name; None for the others."""
    if event.type != TEXT_EVENT:
        return None
    return json.dumps(event.to_dict(mode="json")), event.type


class AnthropicAdapter(ThreadedSyncAdapter):
    """``anthropic.Anthropic`` in a thread per stream, as a synchronous application runs it."""

    info = _info("anthropic-python")

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._tls = tls_context()

    def _client(self, request: AdapterRequest) -> anthropic.Anthropic:
        def make() -> anthropic.Anthropic:
            return anthropic.Anthropic(
                base_url=request.url,
                api_key=API_KEY,
                http_client=anthropic.DefaultHttpxClient(trust_env=False, verify=self._tls),
            )

        client: anthropic.Anthropic = cached(
            self._clients, self._lock, (request.request.client, request.url), make
        )
        return client

    def stream_sync(self, request: AdapterRequest, sink: StreamSink) -> None:
        limit = request.request.cancel_after
        try:
            stream = self._client(request).messages.create(**_create_args(request))
        except anthropic.AnthropicError as exc:
            kind, status = sdk_error(anthropic, exc, iterating=False)
            sink.error(kind, describe(exc), status=status)
            return
        deliver(anthropic, stream, sink, limit, _pick)

    def close_sync(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            client.close()


class AnthropicAsyncAdapter:
    """``anthropic.AsyncAnthropic`` on the kit's event loop, as an asyncio application runs it."""

    # a library's client instances on the runner's loop: their work queues there
    hosts_library_clients = True
    info = _info("anthropic-python-async", on_loop=True)

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], anthropic.AsyncAnthropic] = {}
        self._tls = tls_context()

    def _client(self, request: AdapterRequest) -> anthropic.AsyncAnthropic:
        key = (request.request.client, request.url)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = anthropic.AsyncAnthropic(
                base_url=request.url,
                api_key=API_KEY,
                http_client=anthropic.DefaultAsyncHttpxClient(trust_env=False, verify=self._tls),
            )
        return client

    async def configure(self, policy: object) -> None:
        """Not configurable: the SDK's own policy is its profile."""

    async def reset(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.close()

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        limit = request.request.cancel_after
        try:
            stream = await self._client(request).messages.create(**_create_args(request))
        except anthropic.AnthropicError as exc:
            kind, status = sdk_error(anthropic, exc, iterating=False)
            sink.error(kind, describe(exc), status=status)
            return
        await deliver_async(anthropic, stream, sink, limit, _pick)

    async def offline(self) -> None:
        """The SDK has no offline handling."""

    async def online(self) -> None:
        """The SDK has no online handling."""

    async def aclose(self) -> None:
        await self.reset()
