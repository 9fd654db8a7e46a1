"""The suite in virtual time: exact verdicts, one evidence per seed, and no verdict at all
for a client that waits outside the kit's loop (issue 27)."""

from __future__ import annotations

import asyncio
import functools
import json
import time
import types
from collections import Counter
from dataclasses import replace

import pytest

from conformance import HarnessError, Verdict, run_suite
from conformance._adapter import AdapterRequest, StreamSink
from conformance._evidence import without_ports
from pytest_streamcheck.targets._reference import ReferenceAdapter

ESCAPED = "waited outside the kit's event loop"


def test_the_reference_passes_the_whole_catalog_exactly() -> None:
    # A factory that pickles: on a machine with cores to spare a worker plays some cases.
    results = run_suite(functools.partial(ReferenceAdapter, seed=3), seed=3)
    verdicts = Counter(r.verdict for r in results)
    assert set(verdicts) == {Verdict.PASS, Verdict.UNSUPPORTED}, [
        (r.case.id, r.verdict, r.reason or (r.outcome and r.outcome.observed))
        for r in results
        if r.verdict not in (Verdict.PASS, Verdict.UNSUPPORTED)
    ]
    played = [r for r in results if r.verdict == Verdict.PASS]
    assert {r.timing for r in results} == {"virtual"}
    assert all(not r.rejudged and r.factor == 1.0 for r in played)


# The OS picks the ports (without_ports): everything else in the evidence, every stamp
# included, must be the same.
SOME = [
    *("SC-RETRY-1", "SC-RETRY-12", "SC-BACKOFF-3", "SC-BACKOFF-9", "SC-BREAKER-1", "SC-STALL-1"),
    "SC-POST-2",  # a multipart body: its boundary is the client's, drawn from the seed
    "SC-OFFLINE-7",  # five streams deliver at one instant
]


def _evidence(seed: int) -> dict[str, str]:
    results = run_suite(lambda: ReferenceAdapter(seed=seed), select=SOME, seed=seed)
    return {
        r.case.id: without_ports(json.dumps(r.evidence.to_json(), sort_keys=True))
        for r in results
        if r.evidence is not None
    }


def test_one_seed_gives_one_evidence_stamps_included() -> None:
    first, again, other = _evidence(7), _evidence(7), _evidence(8)
    assert set(first) == set(SOME)
    assert first == again
    assert first["SC-BACKOFF-9"] != other["SC-BACKOFF-9"]  # the seed draws the jitter


# -- the guard: a client that waits outside the loop gets no verdict ---------------------
class SleepsInAThread(ReferenceAdapter):
    """Waits in a worker thread before each stream, as a client whose backoff sleeps
    in ``asyncio.to_thread`` would: virtual time would measure it as no wait at all."""

    info = replace(ReferenceAdapter.info, name="sleeps-in-a-thread")

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        await asyncio.to_thread(time.sleep, 0.01)
        await super().stream(request, sink)


class SleepsOnTheLoop(ReferenceAdapter):
    """Blocks the loop with ``time.sleep`` before each stream."""

    info = replace(ReferenceAdapter.info, name="sleeps-on-the-loop")

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        time.sleep(0.01)  # noqa: ASYNC251 - the mistake the guard exists to see
        await super().stream(request, sink)


@pytest.mark.parametrize(
    ("adapter", "escape"),
    [
        (SleepsInAThread, "time.sleep(0.01) in an executor's thread"),
        (SleepsOnTheLoop, "time.sleep(0.01) blocked the loop"),
    ],
    ids=["thread", "time.sleep"],
)
def test_a_client_that_waits_outside_the_loop_gets_no_verdict(
    adapter: type[ReferenceAdapter], escape: str
) -> None:
    first, second = run_suite(adapter, select=["SC-RETRY-1", "SC-RETRY-2"])
    assert first.verdict == Verdict.ERROR
    assert ESCAPED in first.reason, first.reason
    assert escape in first.reason, first.reason
    assert "test_virtual_runs.py" in first.reason  # where it happened
    assert "--streamcheck-timing=real" in first.reason  # and what to do
    assert second.verdict == Verdict.ERROR  # once per run: later cases say so at once
    assert second.reason.startswith("not run: the client waited outside the kit's loop in ")


def test_the_same_client_is_judged_in_real_time() -> None:
    """Asked for real time, the kit judges it by its measured noise, as before."""
    (result,) = run_suite(SleepsInAThread, select=["SC-RETRY-1"], timing="test")
    assert (result.verdict, result.timing) == (Verdict.PASS, "test")


def test_virtual_time_asked_of_a_client_that_cannot_take_it_is_refused() -> None:
    class Elsewhere(ReferenceAdapter):
        info = replace(ReferenceAdapter.info, name="elsewhere", virtual_time=False)

    with pytest.raises(HarnessError, match="does not declare that it waits on the kit's"):
        run_suite(Elsewhere, select=["SC-RETRY-1"], timing="virtual")


# -- an HTTP date: the client reads the wall clock after the server wrote it -------------
class ReadsTheWallLate(ReferenceAdapter):
    """Takes a Retry-After date at face value with no cap of the kit's (not configurable)."""

    info = replace(
        ReferenceAdapter.info,
        name="reads-the-wall-late",
        capabilities=ReferenceAdapter.info.capabilities - {"configurable"},
    )


def test_a_date_read_a_second_after_it_was_written_still_asks_for_the_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In virtual time the wall time between the server writing a Retry-After date and
    the client reading its own clock is none of the measured wait: the date's headroom
    covers it. Without it, this client waited under the hint and FAILed."""
    import conformance.reference._stream as stream_module

    later = types.SimpleNamespace(time=lambda: time.time() + 1.0)
    monkeypatch.setattr(stream_module, "time", later)
    results = run_suite(ReadsTheWallLate, select=["SC-RETRY-31", "SC-RETRY-32"])
    assert [r.verdict for r in results] == [Verdict.PASS] * 2, [
        r.outcome and r.outcome.observed for r in results
    ]
    assert {r.timing for r in results} == {"virtual"}
