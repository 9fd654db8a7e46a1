"""A client whose reports reach the kit after the server saw it act is judged on the
reports, not on how soon they came: the case waits for the stream to end.

A browser page reports its chunks over a socket. On a loaded CI runner (every loop
stalled 0.34 s) SC-CANCEL-2 judged the example page before its report of the second
chunk arrived, although the server had seen the close 2 ms after sending that chunk,
and FAILed a correct page with "1 chunk(s); s1 never ended". Virtual time makes the
late report exact and the run fast.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from conformance import Verdict, run_suite
from conformance._adapter import AdapterRequest, StreamSink
from conformance._evidence import DeliveryLog
from conformance._profiles import SEED_EVENTSOURCE, SEED_FETCH
from conformance.cases._common import retry_budget, settle_time
from fake_servers import now
from pytest_streamcheck.targets._reference import ReferenceAdapter

# Later than the cases' settle time, within the stream's deadline.
LATE = max(settle_time(SEED_FETCH), settle_time(SEED_EVENTSOURCE)) + 0.5
assert min(retry_budget(SEED_FETCH, 0), retry_budget(SEED_EVENTSOURCE, 0)) - 0.5 > LATE


class _HeldBack(StreamSink):
    """Keeps every report after the first chunk back, to pass on later with its stamp."""

    def __init__(self, log: DeliveryLog, stream: str) -> None:
        super().__init__(log, stream)
        self.held: list[tuple[str, str, float]] = []

    def chunk(
        self,
        data: str,
        *,
        id: str | None = None,
        event: str | None = None,
        at: float | None = None,
    ) -> None:
        if self.chunks == 0:
            super().chunk(data, id=id, event=event, at=at)
            return
        self.chunks += 1
        self.held.append(("chunk", data, now()))

    def done(self, *, at: float | None = None) -> None:
        self.held.append(("done", "", now()))


class ReportsLate(ReferenceAdapter):
    """The reference client, its consumer's reports after the first chunk sent late."""

    info = replace(ReferenceAdapter.info, name="reports-late")

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        held = _HeldBack(sink._log, sink._stream)
        await super().stream(request, held)
        await asyncio.sleep(LATE)
        for kind, data, at in held.held:
            if kind == "chunk":
                sink.chunk(data, at=at)
            else:
                sink.done(at=at)


def test_late_reports_of_a_consumer_that_broke_out_still_pass() -> None:
    results = run_suite(ReportsLate, select=["SC-CANCEL-1", "SC-CANCEL-2"], timing="virtual")
    assert [r.verdict for r in results] == [Verdict.PASS, Verdict.PASS], [
        r.outcome and r.outcome.observed for r in results
    ]
