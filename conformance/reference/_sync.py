"""A blocking façade: the async ``StreamingClient`` on a private event-loop thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Self, TypeVar

from conformance.reference._client import EventStream, StreamingClient
from conformance.reference._sse import SSEEvent

__all__ = ["SyncStreamingClient"]

_T = TypeVar("_T")


class SyncStreamingClient:
    """``StreamingClient`` (same arguments, minus ``http``) for code without a loop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sc-sync", daemon=True)
        self._thread.start()

        async def create() -> StreamingClient:  # httpx binds to the loop it first runs on
            return StreamingClient(*args, **kwargs)

        self.client = self._call(create())

    def stream(self, url: str, **options: Any) -> Iterator[SSEEvent]:
        """Like ``StreamingClient.stream``; closing the iterator closes the stream.

        ``options`` are ``StreamingClient.stream``'s: ``method``, a body (``json``,
        ``data``/``files`` or raw ``content`` bytes), ``headers`` sent on every
        attempt, ``last_event_id`` to resume a stream read earlier, ``idempotent``
        and ``on_state`` (called on the client's loop thread).
        """
        events = self.client.stream(url, **options)
        try:
            while batch := self._call(_next_batch(events)):
                yield from batch
        finally:
            self._call(events.aclose())

    def offline(self) -> None:
        self._call(_run(self.client.offline))

    def online(self) -> None:
        self._call(_run(self.client.online))

    def close(self) -> None:
        """Closes every stream and the httpx client, then ends the loop thread."""
        if self._loop.is_closed():
            return
        self._call(self.client.aclose())
        self._call(self._loop.shutdown_asyncgens())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()


async def _run(action: Callable[[], None]) -> None:  # on the loop thread, before we return
    action()


async def _next_batch(events: EventStream) -> list[SSEEvent]:
    """The next event and whatever else is already buffered; [] at the end."""
    try:
        first = await events.__anext__()
    except StopAsyncIteration:
        return []
    buffered = events._buffer.events
    batch = [first, *(e for e in buffered if isinstance(e, SSEEvent))]  # events only
    buffered.clear()
    return batch
