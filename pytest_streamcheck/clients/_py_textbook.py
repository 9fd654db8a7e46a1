"""The textbook client: what the seed article's first version did, with no resilience.

"The first version of our generator did the textbook thing: open an EventSource, listen
for message, render. It worked for 92% of users." (seeds/000). Here as the fetch form
of it, in Python: one request (GET, or POST with the body), no timeout but the
connect's, every ``data:`` event handed to the application as it comes, and the answer
is complete when the body ends. No retry, no resume, no stall watch, no check of the
status's content type or of the terminal event: a 5xx or a broken connection is an
error the user sees, a body cut short is a whole answer. The kit ships it as the
baseline of the weather report (``python -m pytest_streamcheck weather reference
textbook``), never as a client to copy. Its browser twin is ``browser:eventsource``.
"""

from __future__ import annotations

import httpx

from conformance._adapter import ADAPTER_API, AdapterInfo, AdapterRequest, StreamSink
from pytest_streamcheck.clients._py_common import HttpxClients, describe, httpx_request

__all__ = ["TextbookAdapter"]


class TextbookAdapter:
    """One ``httpx.AsyncClient`` per client key; each stream is one request, read once."""

    hosts_library_clients = True
    info = AdapterInfo(
        name="textbook",
        version="1",
        capabilities=frozenset({"get", "post", "multipart", "raw_data", "event_fields"}),
        api=ADAPTER_API,
        virtual_time=True,  # httpx.AsyncClient on the kit's loop, no clock of its own
    )

    def __init__(self) -> None:
        # fetch waits as long as it takes: no timeout but the connect's
        self._clients = HttpxClients(timeout=httpx.Timeout(None, connect=10.0))

    async def configure(self, policy: object) -> None:
        """Not configurable: the textbook has no policy."""

    async def reset(self) -> None:
        await self._clients.close_all()

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        req = request.request
        kwargs = httpx_request(request)
        try:
            async with self._clients.get(req.client).stream(req.method, request.url, **kwargs) as r:
                if r.status_code >= 400:
                    sink.error(
                        "non_retryable_status", f"HTTP {r.status_code}", status=r.status_code
                    )
                    return
                await _read(r, sink, req.cancel_after)
        except httpx.HTTPError as exc:
            sink.error("truncated" if sink.chunks else "gave_up", describe(exc))
            return
        sink.done()

    async def offline(self) -> None:
        """The textbook has no offline handling."""

    async def online(self) -> None:
        """The textbook has no online handling."""

    async def aclose(self) -> None:
        await self.reset()


async def _read(response: httpx.Response, sink: StreamSink, cancel_after: int | None) -> None:
    """Every event's data to the application, until the body ends (the answer is done)."""
    data: list[str] = []
    event_id: str | None = None
    name: str | None = None
    async for line in response.aiter_lines():
        if line == "":
            if data:
                sink.chunk("\n".join(data), id=event_id, event=name)
                if cancel_after is not None and sink.chunks >= cancel_after:
                    return
            data, name = [], None
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "id":
            event_id = value or None
        elif field == "event":
            name = value or None
