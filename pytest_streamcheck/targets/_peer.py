"""What the two protocol-v1 adapters share: the client's identity from its ``hello``,
the commands waiting for their reply, the open streams, and failing every waiter at once.

The exec adapter reads its client's messages from a pipe, the browser adapter from a
page's binding calls; both route them here, to the command or stream waiting for them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conformance._adapter import AdapterInfo, StreamSink
from conformance._result import HarnessError
from pytest_streamcheck.targets._exec_protocol import REPLIES

__all__ = ["OpenStream", "Peer"]


@dataclass
class OpenStream:
    sink: StreamSink
    ended: asyncio.Future[None]
    cancel_after: int | None  # the consumer stops reading after this many chunks
    over: bool = False  # its done/error arrived, or its consumer stopped reading

    def consumer_stopped(self) -> bool:
        return self.cancel_after is not None and self.sink.chunks >= self.cancel_after


class Peer:
    """Identity, reply waiters and open streams of an adapter that speaks protocol v1.

    ``_streams`` may be read from another thread (the browser's): every look at it
    here takes a snapshot first.
    """

    @property
    def _who(self) -> str:
        """Who the client is, for messages (each adapter says it its own way)."""
        raise NotImplementedError

    def __init__(self) -> None:
        self._info: AdapterInfo | None = None
        self._replies: dict[str, deque[asyncio.Future[dict[str, Any]]]] = {
            r: deque() for r in REPLIES
        }
        self._streams: dict[str, OpenStream] = {}
        self._finished: set[str] = set()  # streams whose late events are dropped quietly

    @property
    def info(self) -> AdapterInfo:
        """The client's name, version and capabilities, from its ``hello`` reply."""
        if self._info is None:
            raise HarnessError(
                f"{self._who}: info is known only after the handshake; await adapter.start() first"
            )
        return self._info

    @info.setter
    def info(self, value: AdapterInfo) -> None:
        # Settable as ClientAdapter declares it; lets a caller override what the client said.
        self._info = value

    def _hand_reply(self, kind: str, event: dict[str, Any], note: Callable[[str], None]) -> None:
        """Give a reply to the oldest command still waiting for one of its kind."""
        waiters = self._replies[kind]
        while waiters and waiters[0].done():  # abandoned by a cancelled caller
            waiters.popleft()
        if waiters:
            waiters.popleft().set_result(event)
        else:
            note(f"[kit] ignored an unexpected {kind!r} reply")

    def _note_stray(self, event: dict[str, Any], note: Callable[[str], None]) -> None:
        """An event for no open stream: a stream-less log is kept, a late one dropped."""
        sid = event.get("stream")
        if event["type"] == "log" and sid is None:
            note(f"[log] {event.get('message', '')}")
        elif sid not in self._finished:
            note(f"[kit] dropped a {event['type']} event for unknown stream {sid!r}")

    def _waiting_for(self) -> str:
        waits = [f"the `{reply}` reply" for reply, q in self._replies.items() if q]
        waits += [
            f"stream {sid!r} ({entry.sink.chunks} chunk{'' if entry.sink.chunks == 1 else 's'}"
            " delivered)"
            for sid, entry in list(self._streams.items())
        ]
        return f" while the kit was waiting for {', '.join(waits)}" if waits else ""

    def _resolve_all(self, message: str) -> None:
        """Every command and stream still waiting fails with ``message``."""
        for waiters in self._replies.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(HarnessError(message))
            waiters.clear()
        for entry in list(self._streams.values()):
            if not entry.ended.done():
                entry.ended.set_exception(HarnessError(message))
