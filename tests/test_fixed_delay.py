"""A client whose every instance waits the same fixed delay, started at staggered times
by the harness, fails the jitter and herd cases through the real suite (issue 16); the
reference client passes the same cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_zoo import run_suite
from zoo import MUTANTS

CASES = ("SC-BACKOFF-9", "SC-BACKOFF-10", "SC-BACKOFF-11")
SELECTION = " or ".join(CASES)
PROFILE = MUTANTS["fixed_delay"].profile


def verdicts(
    pytester: pytest.Pytester, target: str, timing: str
) -> dict[tuple[str, str], dict[str, Any]]:
    """Run the three cases against ``target``; each (case, profile) row of the JSON report."""
    report = pytester.path / "report.json"
    run_suite(
        pytester,
        target,
        CASES,
        PROFILE,
        f"--streamcheck-report={report}",
        f"--streamcheck-timing={timing}",
    )
    data = json.loads(Path(report).read_text(encoding="utf-8"))
    return {(row["id"], row["profile"]): row for row in data["cases"]}


def test_the_selection_is_the_mutants_catching_cases() -> None:
    """The zoo names exactly these three cases as the ones that catch ``fixed_delay``."""
    assert MUTANTS["fixed_delay"].cases == SELECTION


# Virtual time judges exactly; test timing is the real-time path, which load must never
# turn into a PASS (issue 27): both must FAIL the fixed delay and PASS the reference.
TIMINGS = ("virtual", "test")


@pytest.mark.parametrize("timing", TIMINGS)
def test_a_fixed_delay_fails_jitter_and_herd(pytester: pytest.Pytester, timing: str) -> None:
    """Every instance waiting one fixed delay is caught by each case, for each profile:
    FAIL, never PASS, and never left undecided by the kit's own noise."""
    rows = verdicts(pytester, "zoo:fixed_delay", timing)
    assert {case for case, _ in rows} == set(CASES)
    for (case, profile), row in rows.items():
        why = (case, profile, f"x{row['factor']:g}", row.get("observed"), row.get("reason"))
        assert row["verdict"] == "FAIL", why


@pytest.mark.parametrize("timing", TIMINGS)
def test_the_reference_passes_the_same_cases(pytester: pytest.Pytester, timing: str) -> None:
    """The reference client's jittered delays pass the cases that catch the fixed delay."""
    rows = verdicts(pytester, "reference", timing)
    assert {case for case, _ in rows} == set(CASES)
    for (case, profile), row in rows.items():
        why = (case, profile, f"x{row['factor']:g}", row.get("observed"), row.get("reason"))
        assert row["verdict"] == "PASS", why
