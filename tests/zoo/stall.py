"""Mutants of stalls, offline/online and cancellation (SC-STALL, SC-OFFLINE, SC-CANCEL)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from typing import Any

from conformance._adapter import AdapterRequest, StreamSink
from conformance.reference import StreamingClient
from conformance.reference._client import EventStream
from fake_servers import now
from pytest_streamcheck.targets._reference import ReferenceAdapter
from zoo import Expectation, Mutant, _policy_mutant, _Sink

# -- stalls ----------------------------------------------------------------------

never_detects_stalls = _policy_mutant(
    "never_detects_stalls", lambda p: replace(p, stall_timeout=1e9)
)
# Its timeout sits below the legitimate gap (2/3 of the profile's timeout).
abandons_too_early = _policy_mutant(
    "abandons_too_early", lambda p: replace(p, stall_timeout=p.stall_timeout / 3)
)
# Under rule "data", keepalive comments (any byte) reset its idle timer.
keepalive_resets_data_timer = _policy_mutant(
    "keepalive_resets_data_timer", lambda p: replace(p, idle_rule="bytes")
)
# Under rule "bytes", keepalive comments do not count as heartbeats.
ignores_keepalive_bytes = _policy_mutant(
    "ignores_keepalive_bytes", lambda p: replace(p, idle_rule="data")
)


class _HidingSink(_Sink):
    """Drops one state on its way to the consumer."""

    hidden = "stalled"

    def state(self, state: str, *, delay: float | None = None, detail: str = "") -> None:
        if state != self.hidden:
            super().state(state, delay=delay, detail=detail)


class hides_stalled_state(Mutant):
    """Abandons stalled streams in time, but never tells the consumer they stalled."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        await ReferenceAdapter.stream(self, request, _HidingSink(sink, self))


class retries_stall_after_commit(Mutant):
    """A stall after the first chunk starts the whole request again (duplicates)."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        wrapped = _Sink(sink, self)
        for _ in range(2):
            self._stalled_after_chunks = False
            await ReferenceAdapter.stream(self, request, wrapped)
            if not self._stalled_after_chunks:
                return

    def on_error(self, sink: _Sink, kind: str, detail: str, status: int | None) -> None:
        if kind == "stalled" and sink.chunks:
            self._stalled_after_chunks = True
            return
        sink.pass_error(kind, detail, status)


# -- offline / online ------------------------------------------------------------


class ignores_offline(Mutant):
    """offline() drops the open connections but the streams reconnect at once."""

    async def offline(self) -> None:
        for client in self._clients.values():
            for stream in list(client._shared.streams):
                stream._went_offline()


class no_reconnect_on_online(Mutant):
    """online() clears the flag and the breaker but never wakes the waiting streams."""

    async def online(self) -> None:
        self._offline = False
        for client in self._clients.values():
            client._shared.offline = False
            client.breaker.reset()


class online_waits_backoff(Mutant):
    """online() resets the breaker, then lets each stream wait out its capped backoff
    before reconnecting, instead of going at once."""

    async def online(self) -> None:
        self._offline = False
        loop = asyncio.get_running_loop()
        for client in self._clients.values():
            client._shared.offline = False
            client.breaker.reset()
            for stream in list(client._shared.streams):
                cap = client.policy.backoff.cap(max(1, stream.attempts))
                loop.call_later(cap, stream._came_online)


class online_keeps_breaker(Mutant):
    """online() wakes the streams but leaves an open breaker open."""

    async def online(self) -> None:
        self._offline = False
        for client in self._clients.values():
            client._shared.offline = False
            for stream in list(client._shared.streams):
                stream._came_online()


class online_keeps_attempts(Mutant):
    """online() wakes the streams but their attempt counts carry on."""

    async def online(self) -> None:
        self._offline = False
        for client in self._clients.values():
            client._shared.offline = False
            client.breaker.reset()
            for stream in list(client._shared.streams):
                stream._wake.set()


# -- mutants of the stream object ----------------------------------------------------


class _PatchedClient(StreamingClient):
    """A reference client whose streams are of ``stream_class``; its own close still
    closes them properly, so a mutant's leak ends with the case."""

    stream_class: type[EventStream] = EventStream

    def stream(self, url: str, **options: Any) -> EventStream:
        events = super().stream(url, **options)
        events.__class__ = self.stream_class
        return events

    async def aclose(self) -> None:
        for events in list(self._shared.streams):
            await EventStream.aclose(events)
        if self._owns_http:
            await self._http.aclose()


class _StreamMutant(Mutant):
    stream_class: type[EventStream] = EventStream

    def _client(self, key: str) -> StreamingClient:
        client = self._clients.get(key)
        if client is None:
            patched = type("Client", (_PatchedClient,), {"stream_class": self.stream_class})
            client = patched(
                self._policy, rng=random.Random(f"0:{key}"), on_state=self._on_state(key), clock=now
            )
            if self._offline:
                client.offline()
            self._clients[key] = client
        return client


class _CountsOfflineCuts(EventStream):
    def _account(self, att: Any, failure: Any) -> None:
        self._resolve(att, success=failure is None)  # offline cuts count as failures


class counts_offline_failures(_StreamMutant):
    """Connections it closed because the network went offline count against its breaker."""

    stream_class = _CountsOfflineCuts


class _KeepsReading(EventStream):
    async def aclose(self) -> None:
        return  # the consumer left; the connection stays open and keeps reading


class leaks_on_consumer_exit(_StreamMutant):
    """A consumer that stops reading leaves the connection open, still reading."""

    stream_class = _KeepsReading


MUTANTS: dict[str, Expectation] = {
    "never_detects_stalls": Expectation("SC-STALL-1 or SC-STALL-4"),
    "abandons_too_early": Expectation("SC-STALL-7 or SC-STALL-8"),
    "keepalive_resets_data_timer": Expectation("SC-STALL-9", profile="seed-pipeline"),
    "ignores_keepalive_bytes": Expectation("SC-STALL-9 or SC-STALL-10"),
    "hides_stalled_state": Expectation("SC-STALL-5 or SC-STALL-6"),
    "retries_stall_after_commit": Expectation("SC-STALL-3"),
    "ignores_offline": Expectation("SC-OFFLINE-1 or SC-OFFLINE-2"),
    "no_reconnect_on_online": Expectation("SC-OFFLINE-3"),
    "online_waits_backoff": Expectation("SC-OFFLINE-3 or SC-OFFLINE-4"),
    "online_keeps_breaker": Expectation("SC-OFFLINE-5 or SC-OFFLINE-6"),
    "online_keeps_attempts": Expectation("SC-OFFLINE-3 or SC-OFFLINE-4", profile="seed-pipeline"),
    "counts_offline_failures": Expectation("SC-OFFLINE-7 or SC-OFFLINE-8"),
    "leaks_on_consumer_exit": Expectation("SC-CANCEL-1 or SC-CANCEL-3 or SC-CANCEL-6"),
}
