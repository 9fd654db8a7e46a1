"""--streamcheck-lanes: cases play side by side, each lane with its own client, while
the items report in catalog order with the verdicts of a serial run; exclusive cases
play alone; one lane plays one case at a time; -x stops the run."""

from __future__ import annotations

import json
import re

import pytest
from plugin_targets import sct_lanes
from plugin_targets._pytester import PLAIN, prepare, suite

from pytest_streamcheck._items import INCONCLUSIVE_HEAD

TARGET = "plugin_targets.sct_lanes:make_adapter"
# Cases of several areas that each wait a while (backoffs, cooldowns, stalls).
SHARED = (
    "SC-RETRY-29",
    "SC-RETRY-30",
    "SC-BACKOFF-5",
    "SC-BACKOFF-6",
    "SC-BREAKER-1",
    "SC-BREAKER-2",
    "SC-STALL-1",
    "SC-STALL-2",
)


@pytest.fixture(autouse=True)
def _isolated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    prepare(pytester, monkeypatch)
    sct_lanes.RECORD.clear()


def _rows(pytester: pytest.Pytester) -> list[tuple[str, str]]:
    data = json.loads((pytester.path / "r.json").read_text())
    return [(c["id"], c["verdict"]) for c in data["cases"]]


def _judged(result: pytest.RunResult, count: int) -> None:
    """Every case passed, but for at most one INCONCLUSIVE (a setup error saying so): a
    loaded CI's xdist workers can starve the kit's loops, and these tests are about the
    lanes, not about what noise a verdict survives. A FAIL is never excused."""
    outcomes = result.parseoutcomes()
    undecided = result.stdout.str().count(INCONCLUSIVE_HEAD)
    errors = outcomes.get("errors", outcomes.get("error", 0))
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    assert errors == undecided <= 1, result.stdout.str()
    assert outcomes.get("passed", 0) + errors == count, outcomes


def _reported(result: pytest.RunResult) -> list[str]:
    # -v's progress lines only: a case undecided under load (INCONCLUSIVE) is named again
    # in the short summary at the end ("ERROR streamcheck::SC-STALL-1 - ...").
    return re.findall(r"^streamcheck::(SC-[A-Z]+-\d+) ", result.stdout.str(), re.MULTILINE)


def test_lanes_play_at_once_and_report_in_catalog_order(pytester: pytest.Pytester) -> None:
    """Three lanes: up to three clients busy at once, three adapters made; -v lists the
    items in catalog order, and the report's rows are a serial run's."""
    args = [*suite(TARGET, *SHARED), "-v", "--streamcheck-report=r.json"]
    result = pytester.runpytest(*args, "--streamcheck-lanes=3")
    _judged(result, len(SHARED))
    assert _reported(result) == list(SHARED)
    assert sct_lanes.RECORD.most_at_once >= 2
    assert sct_lanes.RECORD.made == 3
    side_by_side = _rows(pytester)

    sct_lanes.RECORD.clear()
    serial = pytester.runpytest(*args, "--streamcheck-lanes=1")
    _judged(serial, len(SHARED))
    serial_rows = _rows(pytester)
    assert [c for c, _ in serial_rows] == [c for c, _ in side_by_side] == list(SHARED)
    assert {v for _, v in serial_rows + side_by_side} <= {"PASS", "INCONCLUSIVE"}
    assert (sct_lanes.RECORD.most_at_once, sct_lanes.RECORD.made) == (1, 1)


def test_an_exclusive_case_plays_with_no_other_case_at_once(pytester: pytest.Pytester) -> None:
    """The herd (50 clients, exclusive) among shared cases on four lanes: no other
    client has a stream open when one of the herd's starts, and none starts a stream
    while the herd plays."""
    ids = ("SC-BACKOFF-5", "SC-BACKOFF-6", "SC-BACKOFF-8", "SC-BACKOFF-11", "SC-BREAKER-1")
    result = pytester.runpytest(*suite(TARGET, *ids), "--streamcheck-lanes=4")
    _judged(result, len(ids))
    starts = sct_lanes.RECORD.starts
    herd = [others for stream, others in starts if stream.startswith("h")]
    assert len(herd) >= 50
    assert set(herd) == {0}
    first = next(i for i, (s, _) in enumerate(starts) if s.startswith("h"))
    last = max(i for i, (s, _) in enumerate(starts) if s.startswith("h"))
    assert all(s.startswith("h") for s, _ in starts[first : last + 1])
    assert sct_lanes.RECORD.most_at_once >= 2  # the shared ones did play side by side


def test_x_stops_the_run_and_reports_only_what_ran(pytester: pytest.Pytester) -> None:
    """-x with four lanes: the first failure stops the run; cases played ahead of it
    are dropped, so the report holds exactly the items pytest reported."""
    ids = ("SC-RETRY-1", "SC-RETRY-3", *SHARED[2:])
    result = pytester.runpytest(
        *PLAIN,
        "--streamcheck=sct_reference:retries_401",  # fails SC-RETRY-3 only
        "-k",
        " or ".join(ids),
        "-x",
        "--streamcheck-report=r.json",
        "--streamcheck-lanes=4",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    rows = _rows(pytester)
    assert ("SC-RETRY-3", "FAIL") in rows
    assert len(rows) == outcomes.get("passed", 0) + 1 < len(ids)


def test_the_first_case_plays_alone_when_the_client_cannot_start(
    pytester: pytest.Pytester,
) -> None:
    """A client that does not start is started once, however many lanes: the first
    case is its ERROR, every later one says so at once."""
    pytester.makepyfile(
        sct_nostart="""
from pytest_streamcheck.targets._reference import ReferenceAdapter

STARTS = []


class NoStart(ReferenceAdapter):
    async def start(self):
        STARTS.append(1)
        raise RuntimeError("no client here")


def make_adapter():
    return NoStart()
"""
    )
    result = pytester.runpytest_subprocess(
        *suite("sct_nostart:make_adapter", *SHARED[:4]), "--streamcheck-lanes=4"
    )
    result.assert_outcomes(errors=4)
    assert result.stdout.str().count("no client here") >= 1
    result.stdout.fnmatch_lines(["*the client did not start (see the first ERROR)*"])


def test_a_client_in_virtual_time_plays_in_one_lane(pytester: pytest.Pytester) -> None:
    """Virtual time is exact and all CPU: lanes would only share one GIL, and a lane's
    loop is a clock of its own, so every case plays in the one lane."""
    result = pytester.runpytest(
        *suite("reference", "SC-RETRY-1", "SC-RETRY-2", "SC-RETRY-3"),
        "--streamcheck-lanes=3",
        "--streamcheck-report=r.json",
    )
    result.assert_outcomes(passed=3)
    cases = json.loads((pytester.path / "r.json").read_text())["cases"]
    starts = [c["chart"]["started_at"] for c in cases]
    assert {c["timing"] for c in cases} == {"virtual"}
    assert starts == sorted(starts)  # one clock, one case after another
    assert len(set(starts)) == 3
