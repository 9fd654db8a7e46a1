"""httpx-sse's ``aconnect_sse`` over an ``httpx.AsyncClient``: GET and POST.

The application's way (httpx-sse's README): ``async with aconnect_sse(client, method,
url, ...) as event_source``, check the response's status (``raise_for_status``), then
``async for sse in event_source.aiter_sse()``, until the answer's terminal event
(``data: [DONE]``; the events ``done``, ``message_stop``, ``response.completed``): an
application reading an LLM stream stops there, as the SDKs stop at ``[DONE]``. Every
other event the library yields is handed over as it is: its data, id and event name
(httpx-sse names an unnamed event ``message``); a stream that ends without its
terminal event is done too, as the library says. httpx-sse is a parser: it never
retries, reconnects or resumes, and it drops comment lines. The client is httpx's
default (a 5 s timeout, redirects not followed) apart from ``trust_env=False``.
"""

from __future__ import annotations

import httpx
import httpx_sse

from conformance._adapter import ADAPTER_API, AdapterInfo, AdapterRequest, StreamSink
from conformance._evidence import ErrorKind
from pytest_streamcheck.clients._py_common import HttpxClients, describe, httpx_request

__all__ = ["HttpxSSEAdapter"]

PROFILE = "httpx-sse@1"


class HttpxSSEAdapter:
    """Streams through ``httpx_sse.aconnect_sse``; one ``httpx.AsyncClient`` per client key."""

    # a library's client instances on the runner's loop: their work queues there
    hosts_library_clients = True
    info = AdapterInfo(
        name="httpx-sse",
        version=httpx_sse.__version__,
        capabilities=frozenset({"get", "post", "multipart", "raw_data", "event_fields"}),
        api=ADAPTER_API,
        profile=PROFILE,
        virtual_time=True,  # httpx.AsyncClient on the kit's loop: no thread, no clock of its own
    )

    def __init__(self) -> None:
        self._clients = HttpxClients()  # httpx's defaults (a 5 s timeout), TLS made once

    async def configure(self, policy: object) -> None:
        """Not configurable: httpx-sse has no policy to take."""

    async def reset(self) -> None:
        await self._clients.close_all()

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        req = request.request
        kwargs = httpx_request(request)
        status: int | None = None
        iterating = False
        try:
            async with httpx_sse.aconnect_sse(
                self._clients.get(req.client),
                req.method,
                request.url,
                **kwargs,
            ) as source:
                status = source.response.status_code
                source.response.raise_for_status()
                iterating = True
                async for sse in source.aiter_sse():
                    if _terminal(sse):
                        break  # the answer is complete; the application stops reading
                    sink.chunk(sse.data, id=sse.id or None, event=sse.event)
                    if req.cancel_after is not None and sink.chunks >= req.cancel_after:
                        return  # the consumer stops reading; leaving the block closes it
        except httpx.HTTPStatusError as exc:
            sink.error("non_retryable_status", describe(exc), status=exc.response.status_code)
            return
        except httpx_sse.SSEError as exc:
            # Not an event stream (a 204, a JSON error body): refused for good.
            if sink.chunks == 0:
                sink.error("non_retryable_status", describe(exc), status=status)
            else:
                sink.error("other", describe(exc))
            return
        except httpx.HTTPError as exc:
            sink.error(_transport_kind(exc, iterating=iterating), describe(exc))
            return
        sink.done()

    async def offline(self) -> None:
        """httpx-sse has no offline handling."""

    async def online(self) -> None:
        """httpx-sse has no online handling."""

    async def aclose(self) -> None:
        await self.reset()


# The answer's last event in the formats the kit serves: an application reading an LLM
# stream with httpx-sse stops there, as the SDKs do at [DONE] (not a chunk of the answer).
TERMINAL_DATA = "[DONE]"
TERMINAL_EVENTS = frozenset({"done", "message_stop", "response.completed"})


def _terminal(sse: httpx_sse.ServerSentEvent) -> bool:
    return bool(sse.data == TERMINAL_DATA or sse.event in TERMINAL_EVENTS)


def _transport_kind(exc: httpx.HTTPError, *, iterating: bool) -> ErrorKind:
    """A read timeout while streaming is httpx's silence timer; a break, a truncation;
    before the stream (connect, the head), the one attempt gave up."""
    if not iterating:
        return "gave_up"
    if isinstance(exc, httpx.TimeoutException):
        return "stalled"
    return "truncated"
