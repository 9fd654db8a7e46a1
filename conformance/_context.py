"""One case's play: the ``CaseContext`` it plays against, on the adapter's loop.

``CaseRun`` starts the case's streams through the adapter, waits on the ledger and the
deliveries for the case, and tells who hung: the adapter, or the client. It holds the
case's server, proxy and adapter, not the runner that made it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import traceback
from collections.abc import Callable, Iterator
from typing import Literal

from conformance._adapter import AdapterRequest, ClientAdapter, StreamSink
from conformance._case import (
    REQUEST_FIELDS_SINCE,
    RequestUnsupported,
    StreamRequest,
    newer_fields,
)
from conformance._evidence import DeliveryLog
from conformance._result import HarnessError
from conformance.reference._config import ClientPolicy
from fake_servers import FakeServer, FaultProxy, Ledger, now

__all__ = ["POLL", "SETTLE", "CaseRun", "quiet_gc"]

POLL = 0.002  # seconds between looks at the ledger and deliveries while waiting
SETTLE = 0.5  # seconds to let the server record the end of in-flight attempts


class CaseRun:
    """The ``CaseContext`` a case plays against; lives on the adapter's loop."""

    def __init__(
        self,
        server: FakeServer,
        proxy: FaultProxy,
        adapter: ClientAdapter,
        policy: ClientPolicy,
        transport: Literal["get", "post"],
        *,
        virtual: bool = False,
    ) -> None:
        self.policy = policy
        self.transport = transport
        self.server = server
        self.proxy = proxy
        self.ledger: Ledger = server.ledger
        self.deliveries = DeliveryLog()
        self._adapter = adapter
        self._streams: dict[str, tuple[asyncio.Task[None], StreamSink]] = {}
        self._started: dict[str, float] = {}  # when each stream was started
        self._overdue: dict[str, float] = {}  # streams waited on in vain, and for how long
        self.failures: list[str] = []  # adapter exceptions: harness errors
        self.ran_out = False  # a wait ended at its deadline, what it waited for not there
        # In virtual time a wait is woken by every change it may be waiting on (the
        # ledger, the deliveries, a stream's end) instead of polling: a poll every 2 ms
        # would make the clock jump 45,000 times through a 90 s silence.
        self._changed: asyncio.Event | None = None
        if virtual:
            self._changed = changed = asyncio.Event()
            self.ledger.on_change = self.deliveries.on_change = changed.set

    def start(self, request: StreamRequest) -> None:
        info = self._adapter.info
        newer = newer_fields(request, info.api or 1)
        if newer:
            named = ", ".join(f"StreamRequest.{name}" for name in newer)
            since = max(REQUEST_FIELDS_SINCE[name] for name in newer)
            raise RequestUnsupported(
                f"the case sets {named} (adapter API {since}), and {info.name} declares "
                f"API {info.api}: it would ignore the field"
            )
        sink = StreamSink(self.deliveries, request.stream)
        adapter_request = AdapterRequest(self.proxy.url + request.path, request)
        task = asyncio.get_running_loop().create_task(self._run(adapter_request, sink))
        if self._changed is not None:
            task.add_done_callback(lambda _: self._wake())
        self._streams[request.stream] = (task, sink)
        self._started[request.stream] = now()

    async def _run(self, request: AdapterRequest, sink: StreamSink) -> None:
        try:
            await self._adapter.stream(request, sink)
        except asyncio.CancelledError:
            raise
        except HarnessError as exc:  # the adapter's own account (an exec client's stderr)
            self.failures.append(str(exc))
        except Exception as exc:  # the adapter broke, not the client
            self.failures.append(
                f"adapter.stream raised {type(exc).__name__}: {exc}\n"
                + "".join(traceback.format_exception(exc)[-3:])
            )

    async def wait_ended(self, stream: str, timeout: float) -> bool:
        ended = await self.wait_until(
            lambda: self.deliveries.ended(stream) or self._gone(stream), timeout
        )
        if not ended:
            self._overdue.setdefault(stream, timeout)
        return ended

    def hung(self) -> str | None:
        """Why the adapter, not the client, is to blame for a stream the case waited on.

        A case waits with ``wait_ended`` only for a stream it expects to end. When that
        wait ran out and, as the case ends, the adapter's ``stream()`` call is still
        running, nothing at all (not even a state) was delivered for the stream, and no
        request reached the proxy or the server after it was started, then the client
        never acted on it: the adapter hung. Anything short of that (a stream it
        cancelled or never waited on, a client that sent a request or reported a state
        and then went quiet) is the client's to answer for, and its check judges it.
        """
        for stream, waited in self._overdue.items():
            if self._never_acted_on(stream):
                # One first line for every case it happens to: the summary groups by it.
                return (
                    f"the adapter hung on stream {stream!r}: its adapter.stream() call never "
                    "returned, delivered nothing and sent no request\n"
                    f"The case waited {waited:.2f}s for the stream to end; when the case "
                    "ended, the call was still running, nothing (no chunk, state, done or "
                    "error) had been delivered for the stream, and no request had reached "
                    "the proxy or the server since it was started. The adapter or its "
                    "client hung: this is not judged as a failure of the client"
                )
        return None

    def _never_acted_on(self, stream: str) -> bool:
        entry, since = self._streams.get(stream), self._started.get(stream)
        if entry is None or since is None or entry[0].done():
            return False
        if any(d.stream == stream for d in self.deliveries.all()):
            return False
        requested = any(a.arrived_at >= since for a in self.ledger.attempts())
        return not requested and not any(c.opened_at >= since for c in self.ledger.connections())

    def _gone(self, stream: str) -> bool:
        entry = self._streams.get(stream)
        return entry is not None and entry[0].done()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Whether ``predicate`` came true within ``timeout``; a wait that ran out says so
        (``ran_out``: the overload rule reads it)."""
        met = await self._poll(predicate, timeout)
        self.ran_out = self.ran_out or not met
        return met

    async def settle(self) -> None:
        """Let the server record the end of in-flight attempts: the kit's own tidying,
        not one of the case's waits."""
        await self._poll(lambda: all(a.finished for a in self.ledger.attempts()), SETTLE)

    async def _poll(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = now() + timeout
        while not predicate():
            if now() >= deadline or self.failures:
                return predicate()
            if self._changed is None:
                await asyncio.sleep(POLL)
                continue
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), deadline - now())
        return True

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def detach(self) -> None:
        """Stop being woken by the ledger (the case is over; it outlives this run)."""
        if self._changed is not None:
            self.ledger.on_change = self.deliveries.on_change = None

    async def hold(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def cancel(self, stream: str) -> None:
        task, sink = self._streams[stream]
        sink.cancel()
        task.cancel()
        await asyncio.wait([task], timeout=2.0)

    async def offline(self) -> None:
        await self._adapter.offline()

    async def online(self) -> None:
        await self._adapter.online()

    async def close(self) -> None:
        tasks = [task for task, _ in self._streams.values() if not task.done()]
        for task, sink in self._streams.values():
            sink.cancel()
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)


@contextlib.contextmanager
def quiet_gc(on: bool) -> Iterator[None]:
    """Keep the kit's own garbage collector out of a measurement: no collection while
    the case plays, and the heap frozen.

    A collection holds the GIL, so it pauses every loop of the process, and a busy
    machine preempts it midway (beside 2 CPU burners a young collection of 9 ms of CPU
    held every loop for 215 ms): the server would stamp every arrival due in that pause
    late, together. The collector runs again on its own once the case is over; a
    collection forced as it ended landed inside the probes' window (docs/timing.md).
    A host that froze its heap keeps it frozen, and one that turned collection off
    keeps it off: undoing either would undo what it chose.
    """
    if not on:
        yield
        return
    freeze = not gc.get_freeze_count()
    enabled = gc.isenabled()
    if freeze:
        gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if freeze:
            gc.unfreeze()
