"""Hostile Python targets for tests/test_hostile_clients.py: adapters that hang in
the ways a careless adapter does. None of them touches the network unless it says so
(the ones that fail to close are the reference client, which does)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import httpx

from conformance._adapter import AdapterInfo, AdapterRequest, StreamSink
from conformance._case import Capability
from conformance.reference import ClientPolicy
from pytest_streamcheck.targets._reference import ReferenceAdapter

__all__ = [
    "RELEASE",
    "blocks_loop",
    "close_blocks",
    "close_hangs",
    "close_raises",
    "configure_hangs",
    "mute",
    "never_returns",
    "sleeps_in_stream",
]

CAPABILITIES: frozenset[Capability] = frozenset({"get", "post", "configurable"})
# Set by the test that used ``blocks_loop`` once it is over: the blocked loop thread
# then ends (an in-process run must leave no thread behind). BLOCK_CAP bounds it anyway.
RELEASE = threading.Event()
BLOCK_CAP = 60.0


class _Quiet:
    """An adapter whose every command succeeds at once and whose streams do nothing."""

    def __init__(self, name: str) -> None:
        self.info = AdapterInfo(name=name, version="1.0", capabilities=CAPABILITIES)

    async def configure(self, policy: ClientPolicy) -> None:
        pass

    async def reset(self) -> None:
        pass

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        raise NotImplementedError

    async def offline(self) -> None:
        pass

    async def online(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class NeverReturns(_Quiet):
    """``stream()`` awaits forever: no request, no delivery (cancellation ends it)."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        await asyncio.Event().wait()


class Mute(_Quiet):
    """Makes the request and reads the response to its end, but reports nothing and
    never returns: the client's failure (it acted on the stream), not a hung adapter."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        req = request.request
        async with (
            httpx.AsyncClient() as client,
            client.stream(req.method, request.url, headers=dict(req.headers)) as response,
        ):
            async for _ in response.aiter_bytes():
                pass
        await asyncio.Event().wait()


class ConfigureHangs(_Quiet):
    """``configure()`` awaits forever: an adapter that stops answering the kit."""

    async def configure(self, policy: ClientPolicy) -> None:
        await asyncio.Event().wait()


class BlocksLoop(_Quiet):
    """``stream()`` makes a blocking call on the event loop's thread (until RELEASE)."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        RELEASE.wait(BLOCK_CAP)


class SleepsInStream(_Quiet):
    """``stream()`` calls time.sleep(1000) on the event loop's thread, as a careless
    adapter would; only the end of the process ends it."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        time.sleep(1000)  # noqa: ASYNC251 - the very mistake this adapter stands for


def never_returns() -> NeverReturns:
    return NeverReturns("sct-never-returns")


def mute() -> Mute:
    return Mute("sct-mute")


def configure_hangs() -> ConfigureHangs:
    return ConfigureHangs("sct-configure-hangs")


def blocks_loop() -> BlocksLoop:
    return BlocksLoop("sct-blocks-loop")


def sleeps_in_stream() -> SleepsInStream:
    return SleepsInStream("sct-sleeps-in-stream")


# -- adapters that pass their cases and then fail to close ------------------------------------


class _ClosesBadly(ReferenceAdapter):
    """The reference client, which passes; its aclose() closes it, then misbehaves."""

    async def aclose(self) -> None:
        await super().aclose()
        await self.misbehave()

    async def misbehave(self) -> None:
        raise NotImplementedError


class CloseRaises(_ClosesBadly):
    async def misbehave(self) -> None:
        raise RuntimeError("the connection pool was already closed")


class CloseHangs(_ClosesBadly):
    async def misbehave(self) -> None:
        await asyncio.Event().wait()  # cancellation ends it


class CloseBlocks(_ClosesBadly):
    async def misbehave(self) -> None:
        RELEASE.wait(BLOCK_CAP)  # a blocking call on the loop's thread (until RELEASE)


def _named(cls: type[_ClosesBadly], name: str) -> _ClosesBadly:
    adapter = cls()
    adapter.info = dataclasses.replace(ReferenceAdapter.info, name=name)
    return adapter


def close_raises() -> _ClosesBadly:
    return _named(CloseRaises, "sct-close-raises")


def close_hangs() -> _ClosesBadly:
    return _named(CloseHangs, "sct-close-hangs")


def close_blocks() -> _ClosesBadly:
    return _named(CloseBlocks, "sct-close-blocks")
