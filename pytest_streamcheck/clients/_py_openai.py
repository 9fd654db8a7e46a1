"""openai-python's streaming chat completions, sync (``OpenAI``) and async (``AsyncOpenAI``).

The application's way: ``client.chat.completions.create(model=..., messages=[...],
stream=True)`` and iterate the ``ChatCompletionChunk`` objects; the SDK's own retries
(its defaults), ``base_url`` the case's URL (the SDK appends ``/chat/completions``).
A chunk whose choices carry delta content is the answer's text and is delivered, dumped
as JSON (``to_dict``); the role chunk, the finish chunk and a usage chunk are framing.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import openai
from openai.types.chat import ChatCompletionChunk

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

__all__ = ["OpenAIAdapter", "OpenAIAsyncAdapter"]

PROFILE = "openai-python@1"
API_KEY = "sk-streamcheck-dummy"


def _info(name: str, *, on_loop: bool = False) -> AdapterInfo:
    return AdapterInfo(
        name=name,
        virtual_time=on_loop,  # the async client waits on the kit's loop alone
        version=openai.__version__,
        capabilities=frozenset({"post"}),  # JSON bodies only: no multipart
        api=ADAPTER_API,
        reports="json",  # each chunk object the SDK yields, dumped again
        profile=PROFILE,
        # A redirect's target (a plain endpoint) answers as the API would, too.
        wire_format="openai",
    )


def _carries_text(chunk: ChatCompletionChunk) -> bool:
    """Whether a choice carries delta content (as an application reads it: a chunk the
    SDK built from a body without ``choices`` or ``delta`` carries none)."""
    choices = getattr(chunk, "choices", None) or ()
    return any(getattr(getattr(c, "delta", None), "content", None) for c in choices)


def _create_args(request: AdapterRequest) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt_of(request)}],
        "stream": True,
        "extra_headers": request_headers(request),
    }


def _pick(chunk: ChatCompletionChunk) -> tuple[str, str | None] | None:
    """A chunk whose choices carry text, dumped as JSON; None for the framing ones."""
    return (json.dumps(chunk.to_dict(mode="json")), None) if _carries_text(chunk) else None


class OpenAIAdapter(ThreadedSyncAdapter):
    """``openai.OpenAI`` in a thread per stream, as a synchronous application runs it."""

    info = _info("openai-python")

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._tls = tls_context()

    def _client(self, request: AdapterRequest) -> openai.OpenAI:
        def make() -> openai.OpenAI:
            return openai.OpenAI(
                base_url=request.url,
                api_key=API_KEY,
                http_client=openai.DefaultHttpxClient(trust_env=False, verify=self._tls),
            )

        client: openai.OpenAI = cached(
            self._clients, self._lock, (request.request.client, request.url), make
        )
        return client

    def stream_sync(self, request: AdapterRequest, sink: StreamSink) -> None:
        limit = request.request.cancel_after
        try:
            stream = self._client(request).chat.completions.create(**_create_args(request))
        except openai.OpenAIError as exc:
            kind, status = sdk_error(openai, exc, iterating=False)
            sink.error(kind, describe(exc), status=status)
            return
        deliver(openai, stream, sink, limit, _pick)

    def close_sync(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            client.close()


class OpenAIAsyncAdapter:
    """``openai.AsyncOpenAI`` on the kit's event loop, as an asyncio application runs it."""

    # a library's client instances on the runner's loop: their work queues there
    hosts_library_clients = True
    info = _info("openai-python-async", on_loop=True)

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], openai.AsyncOpenAI] = {}
        self._tls = tls_context()

    def _client(self, request: AdapterRequest) -> openai.AsyncOpenAI:
        key = (request.request.client, request.url)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = openai.AsyncOpenAI(
                base_url=request.url,
                api_key=API_KEY,
                http_client=openai.DefaultAsyncHttpxClient(trust_env=False, verify=self._tls),
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
            stream = await self._client(request).chat.completions.create(**_create_args(request))
        except openai.OpenAIError as exc:
            kind, status = sdk_error(openai, exc, iterating=False)
            sink.error(kind, describe(exc), status=status)
            return
        await deliver_async(openai, stream, sink, limit, _pick)

    async def offline(self) -> None:
        """The SDK has no offline handling."""

    async def online(self) -> None:
        """The SDK has no online handling."""

    async def aclose(self) -> None:
        await self.reset()
