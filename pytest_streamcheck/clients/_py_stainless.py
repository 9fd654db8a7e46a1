"""The Stainless-generated Python SDKs (openai-python, anthropic-sdk-python), sync and async.

Both SDKs share one client shape: ``SDK(base_url=..., api_key=..., http_client=...)``,
a ``create(..., stream=True)`` that retries what the SDK retries and returns a stream to
iterate, an ``SDKError`` root, and ``to_dict`` on what the stream yields. So one adapter
drives both, as an application does (docs/clients-python.md), told by a ``Stainless``
spec what differs: the call, its arguments, and which yielded objects carry the answer.

- openai: ``client.chat.completions.create(model=..., messages=[...], stream=True)``; a
  ``ChatCompletionChunk`` whose choices carry delta content is the answer's text (the
  role chunk, the finish chunk and a usage chunk are framing); the SDK appends
  ``/chat/completions`` to ``base_url``.
- anthropic: ``client.messages.create(model=..., max_tokens=..., messages=[...],
  stream=True)``; a ``content_block_delta`` event carries the text and is delivered with
  its type as the event name (``message_start`` and the others are framing; the SDK
  itself drops ``ping``); the SDK appends ``/v1/messages``.

Each text-bearing object is delivered dumped as JSON (``reports="json"``). The SDK is
imported when an adapter is made, so this module loads without either.
"""

from __future__ import annotations

import functools
import importlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from conformance._adapter import ADAPTER_API, AdapterInfo, AdapterRequest, StreamSink
from pytest_streamcheck.clients._py_common import (
    MODEL,
    Pick,
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

__all__ = [
    "ANTHROPIC",
    "OPENAI",
    "AnthropicAdapter",
    "AnthropicAsyncAdapter",
    "OpenAIAdapter",
    "OpenAIAsyncAdapter",
    "Stainless",
    "StainlessAdapter",
    "StainlessAsyncAdapter",
]


@dataclass(frozen=True)
class Stainless:
    """What one Stainless SDK's adapters need to know that the other's do not."""

    library: str  # the module: "openai", "anthropic"
    name: str  # the sync adapter's name; the async one's adds "-async"
    profile: str
    wire_format: str  # a redirect's target (a plain endpoint) answers as the API would
    api_key: str
    sync_client: str  # the client class, sync and async
    async_client: str
    error: str  # the root exception class
    create: Callable[[Any], Callable[..., Any]]  # client -> its streaming call
    pick: Pick  # a yielded object -> (its data, its event name), or None: framing
    arguments: Mapping[str, Any] = field(default_factory=dict)  # beyond model and messages

    @functools.cached_property
    def sdk(self) -> ModuleType:
        return importlib.import_module(self.library)

    def info(self, *, on_loop: bool) -> AdapterInfo:
        return AdapterInfo(
            name=f"{self.name}-async" if on_loop else self.name,
            virtual_time=on_loop,  # the async client waits on the kit's loop alone
            version=str(self.sdk.__version__),
            capabilities=frozenset({"post"}),  # JSON bodies only: no multipart
            api=ADAPTER_API,
            reports="json",  # each object the SDK yields, dumped again
            profile=self.profile,
            wire_format=self.wire_format,
        )

    def create_args(self, request: AdapterRequest) -> dict[str, Any]:
        return {
            "model": MODEL,
            **self.arguments,
            "messages": [{"role": "user", "content": prompt_of(request)}],
            "stream": True,
            "extra_headers": request_headers(request),
        }

    def client(self, request: AdapterRequest, tls: Any, *, on_loop: bool) -> Any:
        sdk = self.sdk
        make = getattr(sdk, self.async_client if on_loop else self.sync_client)
        http = sdk.DefaultAsyncHttpxClient if on_loop else sdk.DefaultHttpxClient
        return make(
            base_url=request.url,
            api_key=self.api_key,
            http_client=http(trust_env=False, verify=tls),
        )


def _openai_pick(chunk: Any) -> tuple[str, str | None] | None:
    """A chunk whose choices carry delta content (as an application reads it: a chunk the
    SDK built from a body without ``choices`` or ``delta`` carries none), as JSON."""
    choices = getattr(chunk, "choices", None) or ()
    if not any(getattr(getattr(c, "delta", None), "content", None) for c in choices):
        return None
    return json.dumps(chunk.to_dict(mode="json")), None


def _anthropic_pick(event: Any) -> tuple[str, str | None] | None:
    """A ``content_block_delta`` event, as JSON with its name."""
    if event.type != "content_block_delta":
        return None
    return json.dumps(event.to_dict(mode="json")), event.type


OPENAI = Stainless(
    library="openai",
    name="openai-python",
    profile="openai-python@1",
    wire_format="openai",
    api_key="sk-streamcheck-dummy",
    sync_client="OpenAI",
    async_client="AsyncOpenAI",
    error="OpenAIError",
    create=lambda client: client.chat.completions.create,
    pick=_openai_pick,
)
ANTHROPIC = Stainless(
    library="anthropic",
    name="anthropic-python",
    profile="anthropic-python@1",
    wire_format="anthropic",
    api_key="sk-ant-streamcheck-dummy",
    sync_client="Anthropic",
    async_client="AsyncAnthropic",
    error="AnthropicError",
    create=lambda client: client.messages.create,
    pick=_anthropic_pick,
    arguments={"max_tokens": 1024},
)


class _Info:
    """``info`` of an adapter class, from its ``spec`` when first read: the SDK (its
    version) is imported then, not when this module loads."""

    def __init__(self, *, on_loop: bool) -> None:
        self._on_loop = on_loop
        self._made: dict[type, AdapterInfo] = {}

    def __get__(self, obj: object, owner: type) -> AdapterInfo:
        made = self._made.get(owner)
        if made is None:
            made = self._made[owner] = owner.spec.info(on_loop=self._on_loop)  # type: ignore[attr-defined]
        return made


class StainlessAdapter(ThreadedSyncAdapter):
    """An SDK's sync client in a thread per stream, as a synchronous application runs it."""

    spec: Stainless
    info = _Info(on_loop=False)

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._tls = tls_context()

    def _client(self, request: AdapterRequest) -> Any:
        key = (request.request.client, request.url)
        make = functools.partial(self.spec.client, request, self._tls, on_loop=False)
        return cached(self._clients, self._lock, key, make)

    def stream_sync(self, request: AdapterRequest, sink: StreamSink) -> None:
        spec, sdk = self.spec, self.spec.sdk
        try:
            stream = spec.create(self._client(request))(**spec.create_args(request))
        except getattr(sdk, spec.error) as exc:
            kind, status = sdk_error(sdk, exc, iterating=False)
            sink.error(kind, describe(exc), status=status)
            return
        deliver(sdk, stream, sink, request.request.cancel_after, spec.pick)

    def close_sync(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            client.close()


class StainlessAsyncAdapter:
    """An SDK's async client on the kit's event loop, as an asyncio application runs it."""

    # a library's client instances on the runner's loop: their work queues there
    hosts_library_clients = True
    spec: Stainless
    info = _Info(on_loop=True)

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], Any] = {}
        self._tls = tls_context()

    def _client(self, request: AdapterRequest) -> Any:
        key = (request.request.client, request.url)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = self.spec.client(request, self._tls, on_loop=True)
        return client

    async def configure(self, policy: object) -> None:
        """Not configurable: the SDK's own policy is its profile."""

    async def reset(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.close()

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        spec, sdk = self.spec, self.spec.sdk
        try:
            stream = await spec.create(self._client(request))(**spec.create_args(request))
        except getattr(sdk, spec.error) as exc:
            kind, status = sdk_error(sdk, exc, iterating=False)
            sink.error(kind, describe(exc), status=status)
            return
        await deliver_async(sdk, stream, sink, request.request.cancel_after, spec.pick)

    async def offline(self) -> None:
        """The SDK has no offline handling."""

    async def online(self) -> None:
        """The SDK has no online handling."""

    async def aclose(self) -> None:
        await self.reset()


class OpenAIAdapter(StainlessAdapter):
    """``openai.OpenAI``, streaming chat completions."""

    spec = OPENAI


class OpenAIAsyncAdapter(StainlessAsyncAdapter):
    """``openai.AsyncOpenAI``, streaming chat completions."""

    spec = OPENAI


class AnthropicAdapter(StainlessAdapter):
    """``anthropic.Anthropic``, streaming messages."""

    spec = ANTHROPIC


class AnthropicAsyncAdapter(StainlessAsyncAdapter):
    """``anthropic.AsyncAnthropic``, streaming messages."""

    spec = ANTHROPIC
