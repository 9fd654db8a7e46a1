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
import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from conformance import Verdict, run_suite
from conformance._adapter import AdapterRequest, StreamSink
from conformance._profiles import SEED_EVENTSOURCE, SEED_FETCH
from conformance.cases._common import retry_budget, settle_time
from fake_servers import now
from pytest_streamcheck.targets._reference import ReferenceAdapter

# Later than the cases' settle time, within the stream's deadline.
LATE = max(settle_time(SEED_FETCH), settle_time(SEED_EVENTSOURCE)) + 0.5
assert min(retry_budget(SEED_FETCH, 0), retry_budget(SEED_EVENTSOURCE, 0)) - 0.5 > LATE


class _HeldBack:
    """A stream's sink with every report after the first chunk held back, to be passed
    on later with the stamp it had when it was made."""

    def __init__(self, sink: StreamSink) -> None:
        self._sink = sink
        self.chunks = 0
        self.held: list[Callable[[], None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sink, name)

    def chunk(self, data: str, **kw: Any) -> None:
        self.chunks += 1
        if self.chunks == 1:
            self._sink.chunk(data, **kw)
        else:
            self.held.append(functools.partial(self._sink.chunk, data, **{**kw, "at": now()}))

    def done(self, **kw: Any) -> None:
        self.held.append(functools.partial(self._sink.done, **{**kw, "at": now()}))


class ReportsLate(ReferenceAdapter):
    """The reference client, its consumer's reports after the first chunk sent late."""

    info = replace(ReferenceAdapter.info, name="reports-late")

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        held = _HeldBack(sink)
        await super().stream(request, held)  # type: ignore[arg-type]
        await asyncio.sleep(LATE)
        for report in held.held:
            report()


def test_late_reports_of_a_consumer_that_broke_out_still_pass() -> None:
    results = run_suite(ReportsLate, select=["SC-CANCEL-1", "SC-CANCEL-2"], timing="virtual")
    assert [r.verdict for r in results] == [Verdict.PASS, Verdict.PASS], [
        r.outcome and r.outcome.observed for r in results
    ]
