"""One call's request, encoded once, the redirects it may meet, and the httpx helpers
around its exchange."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "MAX_REDIRECTS",
    "_DRAIN_SECONDS",
    "_Call",
    "_Prepared",
    "_drain",
    "_error_text",
    "_is_event_stream",
    "_prepare_request",
    "_redirect_location",
    "_redirected",
    "_ssl_context",
]

_ERROR_BODY_LIMIT = 64 * 1024  # bytes of an error response kept for NonRetryableStatus
_DRAIN_SECONDS = 0.5  # after the terminal event, how long the rest of the body may take
# WHATWG Fetch §4.4 HTTP-redirect fetch: "If request's redirect count is 20, then return
# a network error": one request and 20 redirects at most.
MAX_REDIRECTS = 20
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Fetch's request-body-header names, dropped with the body when a redirect turns the
# request into a GET; the framing headers go too, since httpx keeps any it is given.
_BODY_HEADERS = (
    "content-encoding",
    "content-language",
    "content-location",
    "content-type",
    "content-length",
    "transfer-encoding",
)


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
    content: bytes | None = None  # a raw body, sent as is
    last_event_id: str = ""  # the caller's resume point for the first request


@dataclass(frozen=True)
class _Prepared:
    """The request encoded once, so every attempt sends the same bytes."""

    method: str
    url: httpx.URL
    headers: httpx.Headers
    body: bytes


async def _prepare_request(http: httpx.AsyncClient, call: _Call, rng: random.Random) -> _Prepared:
    """Builds the call's request with the SSE headers and encodes its body once."""
    # EventSource's request: Accept (HTML §9.2.2) and cache mode "no-store", which Fetch's
    # HTTP-network-or-cache fetch sends as these two no-cache headers.
    headers = httpx.Headers(
        {"accept": "text/event-stream", "cache-control": "no-cache", "pragma": "no-cache"}
    )
    headers.update(call.headers or {})  # case-insensitive: the caller's win
    if call.files and "content-type" not in headers:
        # The boundary from the client's randomness, not httpx's os.urandom: one seed,
        # one body (the kit's two runs with one seed gave SC-POST-2 two body hashes).
        headers["content-type"] = f"multipart/form-data; boundary={rng.getrandbits(128):032x}"
    request = http.build_request(
        call.method,
        call.url,
        content=call.content,
        json=call.json,
        data=call.data,
        files=call.files,
        headers=headers,
    )
    # Encoded once: a multipart boundary is random and a file object reads only
    # once, so this is how every retry sends byte-identical bodies.
    body = await request.aread()
    return _Prepared(request.method, request.url, request.headers, body)


def _redirect_location(status: int, headers: httpx.Headers) -> str | None:
    """The Location a redirect response leads to; None when there is none to follow.

    A redirect without a Location is the response itself (Fetch §4.4: a null location
    URL returns it), so the caller fails on its status. An empty Location counts as
    none, as in Chromium: resolved per Fetch it names the request's own URL, a loop.
    """
    if status not in _REDIRECT_STATUSES:
        return None
    return next((value for value in headers.get_list("location") if value.strip()), None)


def _redirected(prepared: _Prepared, status: int, location: str) -> _Prepared:
    """The request a redirect leads to, per Fetch §4.4 HTTP-redirect fetch.

    301 and 302 turn a POST, and 303 anything but GET or HEAD, into a GET without a
    body; 307 and 308 keep the method and the very same body bytes. Authorization
    does not follow to another origin.

    Raises:
        ValueError: the Location is not an http(s) URL (Fetch: a network error).
    """
    try:
        url = prepared.url.join(location)
    except httpx.InvalidURL as exc:
        raise ValueError(f"invalid Location {location!r}: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"Location {location!r} is not an http(s) URL")
    method, body, headers = prepared.method, prepared.body, prepared.headers.copy()
    headers.pop("host", None)  # httpx sets the new one
    to_get = status in (301, 302) and method == "POST"
    if to_get or (status == 303 and method not in ("GET", "HEAD")):
        method, body = "GET", b""
        for name in _BODY_HEADERS:
            headers.pop(name, None)
    if _origin(url) != _origin(prepared.url):
        headers.pop("authorization", None)
    return _Prepared(method, url, headers, body)


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every client of the process: building one loads the CA
    bundle (~24 ms of CPU), which adds up when an application (or the kit's herd, or a
    catalog run's client per case) runs many clients. Only read once made."""
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
