"""Mutants of POST streams and the SSE protocol (SC-POST, SC-SSE).

Their mistakes live inside the client, so each one adjusts every client instance
the adapter creates: a broken ``SSEDecoder`` subclass in the client's decoder
seam, or an httpx event hook (which runs on every attempt, before the request is
sent or once the response headers are in).
"""

from __future__ import annotations

import itertools
import secrets
from collections import deque
from dataclasses import replace

import httpx

from conformance._adapter import AdapterRequest, StreamSink
from conformance.reference import StreamingClient
from conformance.reference._sse import SSEDecoder, SSEEvent
from zoo import Expectation, Mutant


class _ClientMutant(Mutant):
    """A mutant whose mistake is set up on each client instance it creates."""

    def _client(self, key: str) -> StreamingClient:
        fresh = key not in self._clients
        client = super()._client(key)
        if fresh:
            self.adjust(client)
        return client

    def adjust(self, client: StreamingClient) -> None:
        raise NotImplementedError


class _DecoderMutant(_ClientMutant):
    decoder: type[SSEDecoder] = SSEDecoder

    def adjust(self, client: StreamingClient) -> None:
        client.decoder_class = self.decoder


# -- broken decoders ---------------------------------------------------------------


class _LfPairsDecoder(SSEDecoder):
    """Frames events on b"\\n\\n" only: CR and CRLF streams never complete an event."""

    def __init__(self, *, last_event_id: str = "", retry: int | None = None) -> None:
        super().__init__(last_event_id=last_event_id, retry=retry)
        self._raw = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        *blocks, self._raw = (self._raw + chunk).split(b"\n\n")
        events: list[SSEEvent] = []
        for block in blocks:
            events += super().feed(block + b"\n\n")
        return events


class _KeepsBomDecoder(SSEDecoder):
    """Never looks for a BOM: the first line's field name starts with U+FEFF."""

    def __init__(self, *, last_event_id: str = "", retry: int | None = None) -> None:
        super().__init__(last_event_id=last_event_id, retry=retry)
        self._bom_head = None

    def close(self) -> list[SSEEvent]:
        super().close()
        self._bom_head = None
        return []


class _CommentsAsDataDecoder(SSEDecoder):
    """Takes a comment line (": text") for a data line."""

    def _interpret(self, lines: list[str]) -> list[SSEEvent]:
        return super()._interpret([f"data{line}" if line[:1] == ":" else line for line in lines])


class _IgnoresIdsDecoder(SSEDecoder):
    """Drops ``id:`` fields: events carry no id and the stream cannot be resumed."""

    def _field(self, line: str) -> None:
        if line.partition(":")[0] != "id":
            super()._field(line)


class _PerReadUtf8Decoder(SSEDecoder):
    """Decodes each read on its own: a character split between reads becomes U+FFFD."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return super().feed(chunk.decode("utf-8", "replace").encode("utf-8"))


class _ForgetsCrDecoder(SSEDecoder):
    """Forgets that a read ended in CR: the LF that starts the next read ends a second line."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        events = super().feed(chunk)
        self._skip_lf = False
        return events


class _EmptyBlocksDecoder(SSEDecoder):
    """Dispatches every blank-line-terminated block, even one without data (e.g. retry:)."""

    def __init__(self, *, last_event_id: str = "", retry: int | None = None) -> None:
        super().__init__(last_event_id=last_event_id, retry=retry)
        self._open = False

    def _interpret(self, lines: list[str]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        for line in lines:
            got = super()._interpret([line])
            if not line and not got and self._open:
                got = [SSEEvent(data="", id=self.last_event_id, retry=self.retry)]
            self._open = bool(line)
            events += got
        return events


class _OnePerReadDecoder(SSEDecoder):
    """Hands over at most one event per read and keeps the rest for later reads."""

    def __init__(self, *, last_event_id: str = "", retry: int | None = None) -> None:
        super().__init__(last_event_id=last_event_id, retry=retry)
        self._backlog: deque[SSEEvent] = deque()

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._backlog.extend(super().feed(chunk))
        return [self._backlog.popleft()] if self._backlog else []


class splits_on_lf_pairs(_DecoderMutant):
    decoder = _LfPairsDecoder


class keeps_bom(_DecoderMutant):
    decoder = _KeepsBomDecoder


class comments_as_data(_DecoderMutant):
    decoder = _CommentsAsDataDecoder


class ignores_ids(_DecoderMutant):
    decoder = _IgnoresIdsDecoder


class decodes_each_read(_DecoderMutant):
    decoder = _PerReadUtf8Decoder


class forgets_trailing_cr(_DecoderMutant):
    decoder = _ForgetsCrDecoder


class dispatches_empty_blocks(_DecoderMutant):
    decoder = _EmptyBlocksDecoder


class one_event_per_read(_DecoderMutant):
    decoder = _OnePerReadDecoder


# -- the request and the response around the decoder ----------------------------------


class accepts_any_content_type(_ClientMutant):
    """Reads any 200 as an event stream, whatever its Content-Type."""

    def adjust(self, client: StreamingClient) -> None:
        async def relabel(response: httpx.Response) -> None:
            if response.status_code == 200:
                response.headers["content-type"] = "text/event-stream"

        client._http.event_hooks["response"].append(relabel)


class new_idempotency_key_per_attempt(_ClientMutant):
    """Draws a fresh Idempotency-Key for every attempt: the server can no longer tell a
    retry from a new request."""

    def adjust(self, client: StreamingClient) -> None:
        counter = itertools.count(1)

        async def rekey(request: httpx.Request) -> None:
            if "idempotency-key" in request.headers:
                request.headers["idempotency-key"] = f"key-{next(counter)}"

        client._http.event_hooks["request"].append(rekey)


class new_boundary_per_attempt(_ClientMutant):
    """Encodes a multipart body again for every attempt, with a fresh random boundary."""

    def adjust(self, client: StreamingClient) -> None:
        async def rewrap(request: httpx.Request) -> None:
            kind = request.headers.get("content-type", "")
            if "boundary=" not in kind:
                return
            old = kind.split("boundary=", 1)[1]
            new = secrets.token_hex(len(old) // 2)  # same length: content-length still holds
            request.headers["content-type"] = kind.replace(old, new)
            request.stream = httpx.ByteStream(request.content.replace(old.encode(), new.encode()))

        client._http.event_hooks["request"].append(rewrap)


class marks_sent_before_connect(_ClientMutant):
    """Counts a request as sent before connecting: a refused connect is never retried
    for a non-idempotent request (a SHOULD miss)."""

    def adjust(self, client: StreamingClient) -> None:
        async def mark(request: httpx.Request) -> None:
            trace = request.extensions.get("trace")
            if trace is not None:
                await trace("zoo.send_request_headers.started", {})

        client._http.event_hooks["request"].append(mark)


class ignores_idempotent(Mutant):
    """Treats every request as idempotent: a non-idempotent POST is retried like any other."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        unsafe = replace(request, request=replace(request.request, idempotent=True))
        await super().stream(unsafe, sink)


MUTANTS: dict[str, Expectation] = {
    "splits_on_lf_pairs": Expectation("SC-SSE-1 or SC-SSE-2 or SC-SSE-3 or SC-SSE-4"),
    "forgets_trailing_cr": Expectation("SC-SSE-3 or SC-SSE-4"),
    "keeps_bom": Expectation("SC-SSE-5 or SC-SSE-6"),
    "comments_as_data": Expectation("SC-SSE-7 or SC-SSE-8"),
    "dispatches_empty_blocks": Expectation("SC-SSE-9 or SC-SSE-10"),
    "decodes_each_read": Expectation("SC-SSE-11 or SC-SSE-12"),
    "ignores_ids": Expectation("SC-SSE-13 or SC-SSE-14"),
    "accepts_any_content_type": Expectation("SC-SSE-15 or SC-SSE-16"),
    "one_event_per_read": Expectation("SC-SSE-17 or SC-SSE-18"),
    "new_idempotency_key_per_attempt": Expectation("SC-POST-1"),
    "new_boundary_per_attempt": Expectation("SC-POST-2"),
    "ignores_idempotent": Expectation("SC-POST-3 or SC-POST-4 or SC-POST-5 or SC-POST-6"),
    "marks_sent_before_connect": Expectation("SC-POST-7", level="SHOULD"),
}
