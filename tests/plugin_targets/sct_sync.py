"""Synchronous targets: ``SyncClientAdapter`` around the reference client's blocking
façade (``SyncStreamingClient``), for the plugin's pytester tests."""

from __future__ import annotations

import random
import threading
from collections.abc import Generator, Iterable

from conformance._adapter import AdapterInfo, AdapterRequest, StreamSink, SyncClientAdapter
from conformance._case import Capability, JsonBody, MultipartBody
from conformance.reference import ClientPolicy, StreamError, SyncStreamingClient
from pytest_streamcheck.targets._reference import error_kind

__all__ = ["HANG_CAP", "SyncReference", "get_only", "hangs_on_post", "streamcheck_adapter", "terse"]

FULL: tuple[Capability, ...] = ("get", "post", "configurable", "offline")
TERSE_DETAIL = "request failed"
# A hang that ignores cancellation. It ends when the adapter is closed (which the
# runner does after the time limit), so the test process never waits out the cap:
# interpreter exit joins the executor thread the hang runs in.
HANG_CAP = 30.0


class SyncReference(SyncClientAdapter):
    """A blocking client: one ``SyncStreamingClient``, rebuilt on every reset."""

    def __init__(
        self,
        name: str = "sct-sync",
        capabilities: Iterable[Capability] = FULL,
        *,
        keep_detail: bool = True,
    ) -> None:
        self.info = AdapterInfo(name=name, version="1.0", capabilities=frozenset(capabilities))
        self._keep_detail = keep_detail
        self._policy = ClientPolicy()
        self._client = self._new_client()

    def _new_client(self) -> SyncStreamingClient:
        return SyncStreamingClient(self._policy, rng=random.Random(0))

    def configure_sync(self, policy: ClientPolicy) -> None:
        self._policy = policy
        self.reset_sync()

    def reset_sync(self) -> None:
        self._client.close()
        self._client = self._new_client()

    def stream_sync(self, request: AdapterRequest, sink: StreamSink) -> None:
        req = request.request
        options: dict[str, object] = {"method": req.method, "headers": dict(req.headers)}
        if isinstance(req.body, JsonBody):
            options["json"] = req.body.value
        elif isinstance(req.body, MultipartBody):
            options["data"] = dict(req.body.fields)
            options["files"] = {f: (name, data, ctype) for f, name, ctype, data in req.body.files}
        events = self._client.stream(request.url, idempotent=req.idempotent, **options)
        try:
            for event in events:
                sink.chunk(event.data, id=event.id or None, event=event.event)
                if req.cancel_after is not None and sink.chunks >= req.cancel_after:
                    return  # the consumer stops reading
            sink.done()
        except StreamError as exc:
            kind, status = error_kind(exc)
            sink.error(kind, str(exc) if self._keep_detail else TERSE_DETAIL, status=status)
        finally:
            if isinstance(events, Generator):  # closing it closes the client's stream
                events.close()

    def offline_sync(self) -> None:
        self._client.offline()

    def online_sync(self) -> None:
        self._client.online()

    def close_sync(self) -> None:
        self._client.close()


class HangsOnPost(SyncReference):
    """A POST stream blocks its thread and never looks at the sink; GET streams work."""

    def __init__(self) -> None:
        super().__init__("sct-hangs-on-post")
        self._closed = threading.Event()

    def stream_sync(self, request: AdapterRequest, sink: StreamSink) -> None:
        if request.request.method == "POST":
            self._closed.wait(HANG_CAP)
            return
        super().stream_sync(request, sink)

    def close_sync(self) -> None:
        self._closed.set()
        super().close_sync()


def streamcheck_adapter() -> SyncReference:
    return SyncReference()


def terse() -> SyncReference:
    """Drops the server's message from every error's detail (a SHOULD miss)."""
    return SyncReference("sct-terse", keep_detail=False)


def get_only() -> SyncReference:
    """Lacks the "post" capability."""
    return SyncReference("sct-get-only", ("get", "configurable"))


def hangs_on_post() -> SyncReference:
    return HangsOnPost()
