"""One call's request, encoded once, and the httpx helpers around its exchange."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "_DRAIN_SECONDS",
    "_Call",
    "_Prepared",
    "_drain",
    "_error_text",
    "_is_event_stream",
    "_prepare_request",
    "_ssl_context",
]

_ERROR_BODY_LIMIT = 64 * 1024  # bytes of an error response kept for NonRetryableStatus
_DRAIN_SECONDS = 0.5  # after the terminal event, how long the rest of the body may take


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


async def _prepare_request(http: httpx.AsyncClient, call: _Call) -> _Prepared:
    """Builds the call's request with the SSE headers and encodes its body once."""
    headers = httpx.Headers({"accept": "text/event-stream", "cache-control": "no-store"})
    headers.update(call.headers or {})  # case-insensitive: the caller's win
    request = http.build_request(
        call.method, call.url, json=call.json, data=call.data, files=call.files, headers=headers
    )
    # Encoded once: a multipart boundary is random and a file object reads only
    # once, so this is how every retry sends byte-identical bodies.
    body = await request.aread()
    return _Prepared(request.method, request.url, request.headers, body)


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
