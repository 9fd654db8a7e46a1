"""Mutants of the SSE request and connection (SC-SSE-19..40, 81 and 82).

Most mistakes are httpx event hooks on every client instance (``_ClientMutant``): a
request hook runs before each request is sent, a response hook once its headers are
in, so rewriting a redirect's status or Location changes what the client makes of it.
The rest swap the client's stream class or the policy it follows.
"""

from __future__ import annotations

from dataclasses import replace

import httpx

from conformance._adapter import AdapterRequest, StreamSink
from conformance.reference import StreamingClient
from conformance.reference._attempt import _Attempt
from conformance.reference._client import EventStream
from conformance.reference._policy import Failure
from conformance.reference._request import _Prepared
from zoo import Expectation, Mutant, _matrix, _policy_mutant
from zoo.post_sse import _ClientMutant


class _RequestMutant(_ClientMutant):
    """A mistake made to every request before it is sent (``edit``)."""

    def edit(self, request: httpx.Request) -> None:
        raise NotImplementedError

    def adjust(self, client: StreamingClient) -> None:
        async def hook(request: httpx.Request) -> None:
            self.edit(request)

        client._http.event_hooks["request"].append(hook)


class _ResponseMutant(_ClientMutant):
    """A mistake in how every response's headers are read (``edit``)."""

    def edit(self, response: httpx.Response) -> None:
        raise NotImplementedError

    def adjust(self, client: StreamingClient) -> None:
        async def hook(response: httpx.Response) -> None:
            self.edit(response)

        client._http.event_hooks["response"].append(hook)


# -- the request's headers ---------------------------------------------------------------


class accepts_anything(_RequestMutant):
    """Sends Accept: */* instead of text/event-stream (a SHOULD miss)."""

    def edit(self, request: httpx.Request) -> None:
        request.headers["accept"] = "*/*"


class cache_control_no_store(_RequestMutant):
    """Sends Cache-Control: no-store, which does not stop a cache from serving a stored
    stream, instead of no-cache."""

    def edit(self, request: httpx.Request) -> None:
        request.headers["cache-control"] = "no-store"


class no_pragma(_RequestMutant):
    """Sends no Pragma: no-cache (a SHOULD miss)."""

    def edit(self, request: httpx.Request) -> None:
        request.headers.pop("pragma", None)


class empty_last_event_id(_RequestMutant):
    """Sends an empty Last-Event-ID while it has no id to send."""

    def edit(self, request: httpx.Request) -> None:
        request.headers.setdefault("last-event-id", "")


class mangles_wide_ids(_RequestMutant):
    """Sends Last-Event-ID as ASCII, a "?" for every other character (an id is text)."""

    def edit(self, request: httpx.Request) -> None:
        sent = {name.lower(): value for name, value in request.headers.raw}.get(b"last-event-id")
        if sent is not None:
            text = sent.decode("utf-8", "replace").encode("ascii", "replace").decode()
            request.headers["last-event-id"] = text


class drops_caller_headers_on_retry(_RequestMutant):
    """Sends the caller's credentials and x- headers on the first request to a URL only."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def edit(self, request: httpx.Request) -> None:
        url = str(request.url)
        if url in self._seen:
            for name in [n for n in request.headers if n == "authorization" or n[:2] == "x-"]:
                del request.headers[name]
        self._seen.add(url)


class ignores_callers_last_event_id(Mutant):
    """Drops the Last-Event-ID its caller set: the first request starts the stream over."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        fresh = replace(request, request=replace(request.request, last_event_id=None))
        await super().stream(fresh, sink)


# -- redirects ---------------------------------------------------------------------------


class follows_no_redirect(_ResponseMutant):
    """Never follows a redirect: a 3xx is taken for the final answer."""

    def edit(self, response: httpx.Response) -> None:
        response.headers.pop("location", None)


class keeps_post_on_303(_ResponseMutant):
    """Follows 301, 302 and 303 as if they were 307 and 308: a POST is sent again, body
    and all, where Fetch turns it into a GET."""

    def edit(self, response: httpx.Response) -> None:
        if response.status_code in (301, 302, 303):
            response.status_code = 308 if response.status_code == 301 else 307


class turns_307_into_get(_ResponseMutant):
    """Follows 307 and 308 as if they were 303: a POST goes on as a GET without its body."""

    def edit(self, response: httpx.Response) -> None:
        if response.status_code in (307, 308):
            response.status_code = 303


class _ForgetsRedirects(EventStream):
    async def _attempt_once(
        self, prepared: _Prepared, probe: bool
    ) -> tuple[Failure | None, _Attempt]:
        try:
            return await super()._attempt_once(prepared, probe)
        finally:
            self._target = prepared  # the next attempt starts from the original again


class retries_the_original_request(_ClientMutant):
    """After a redirect, sends every retry as the original request (a 303's POST again)."""

    def adjust(self, client: StreamingClient) -> None:
        client.stream_class = _ForgetsRedirects


_REDIRECTS = frozenset({301, 302, 303, 307, 308})

retries_broken_redirects = _policy_mutant("retries_broken_redirects", _matrix(extra=_REDIRECTS))
retries_broken_redirects.__doc__ = (
    "Retries a redirect it cannot follow (no Location, a loop) as a transient failure."
)

retries_204 = _policy_mutant("retries_204", _matrix(extra=frozenset({204})))
retries_204.__doc__ = "Retries a 204 No Content as if it were a 503."


MUTANTS: dict[str, Expectation] = {
    "accepts_anything": Expectation("SC-SSE-19 or SC-SSE-20", level="SHOULD"),
    # the cache headers are EventSource's (GET): on a POST their cases are UNSUPPORTED
    "cache_control_no_store": Expectation("SC-SSE-21"),
    "no_pragma": Expectation("SC-SSE-23", level="SHOULD"),
    "empty_last_event_id": Expectation("SC-SSE-25 or SC-SSE-26"),
    "drops_caller_headers_on_retry": Expectation("SC-SSE-27 or SC-SSE-28"),
    "ignores_callers_last_event_id": Expectation("SC-SSE-29 or SC-SSE-30"),
    "follows_no_redirect": Expectation("SC-SSE-31 or SC-SSE-33"),
    "keeps_post_on_303": Expectation("SC-SSE-32"),
    "turns_307_into_get": Expectation("SC-SSE-34"),
    "retries_the_original_request": Expectation("SC-SSE-35 or SC-SSE-36"),
    "retries_broken_redirects": Expectation("SC-SSE-37 or SC-SSE-38"),
    "retries_204": Expectation("SC-SSE-39 or SC-SSE-40"),
    "mangles_wide_ids": Expectation("SC-SSE-81 or SC-SSE-82"),
}
