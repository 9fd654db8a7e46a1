"""conformance._coverage: what a run judged of the catalog, and when it is conformant.

Pure: rows as the JSON report writes them, a catalog of ids and areas."""

from __future__ import annotations

from typing import Any

import pytest

from conformance._coverage import GRADES, coverage
from conformance._result import SKIPS

CATALOG = {"SC-A-1": "A", "SC-A-2": "A", "SC-A-3": "A", "SC-B-1": "B", "SC-B-2": "B"}


def _row(case_id: str, verdict: str, skip: str | None = None) -> dict[str, Any]:
    return {"id": case_id, "area": CATALOG[case_id], "verdict": verdict, "skip": skip}


def _all_pass(**changed: tuple[str, str | None]) -> list[dict[str, Any]]:
    return [_row(i, *changed.get(i.replace("-", "_"), ("PASS", None))) for i in CATALOG]


def test_every_case_judged_and_passed_is_conformant() -> None:
    got = coverage(_all_pass(), CATALOG)
    assert (got.total, got.selected, got.applicable, got.judged) == (5, 5, 5, 5)
    assert got.conformant
    assert got.why_not == ()
    assert [(a.area, a.grade) for a in got.areas] == [("A", "passing"), ("B", "passing")]
    assert got.headline() == (
        "coverage: judged 5 of 5 applicable cases (5 of the catalog's 5 selected); conformant"
    )


def test_a_rule_the_profile_excludes_is_not_applicable_and_costs_nothing() -> None:
    rows = _all_pass(SC_B_1=("UNSUPPORTED", "profile"), SC_B_2=("UNSUPPORTED", "transport"))
    got = coverage(rows, CATALOG)
    assert (got.applicable, got.judged, got.conformant) == (3, 3, True)
    assert got.skipped == {"transport": 1, "profile": 1}
    assert [(a.area, a.grade) for a in got.areas] == [("A", "passing"), ("B", "not applicable")]


@pytest.mark.parametrize(
    ("skip", "why"),
    [
        ("capability", "1 applicable unjudged (a capability is missing)"),
        ("untunable", "1 applicable unjudged (cannot be configured)"),
        (None, "1 applicable unjudged (unsupported)"),  # a report older than the skip field
    ],
)
def test_an_applicable_rule_left_unjudged_is_not_conformant(skip: str | None, why: str) -> None:
    """A client that lacks a capability, or cannot be configured, has not shown the rule."""
    got = coverage(_all_pass(SC_A_2=("UNSUPPORTED", skip)), CATALOG)
    assert (got.applicable, got.judged) == (5, 4)
    assert not got.conformant
    assert got.areas[0].grade == "partial"
    assert got.why_not == (why,)


def test_a_selection_is_never_conformant_and_says_what_it_left_out() -> None:
    """A `-k SC-CANCEL` run of six passing cases does not look like the whole catalog."""
    rows = [_row("SC-A-1", "PASS"), _row("SC-A-2", "PASS")]
    got = coverage(rows, CATALOG)
    assert not got.conformant
    assert got.why_not == ("3 of the catalog's 5 cases not selected",)
    assert [(a.area, a.grade, a.selected, a.total) for a in got.areas] == [("A", "partial", 2, 3)]


@pytest.mark.parametrize(
    ("verdict", "grade", "why"),
    [
        ("FAIL", "failing", "1 FAIL"),
        ("ERROR", "undecided", "1 ERROR"),
        ("INCONCLUSIVE", "undecided", "1 INCONCLUSIVE"),
    ],
)
def test_a_failure_an_error_or_an_undecided_case_is_not_conformant(
    verdict: str, grade: str, why: str
) -> None:
    got = coverage(_all_pass(SC_B_2=(verdict, None)), CATALOG)
    assert not got.conformant
    assert got.why_not == (why,)
    assert got.areas[1].grade == grade


def test_a_missed_should_fails_only_a_strict_run() -> None:
    rows = _all_pass(SC_A_1=("NON-STRICT", None))
    assert coverage(rows, CATALOG).conformant
    strict = coverage(rows, CATALOG, strict=True)
    assert (strict.conformant, strict.why_not, strict.areas[0].grade) == (
        False,
        ("1 NON-STRICT",),
        "failing",
    )


def test_nothing_judged_is_never_conformant() -> None:
    rows = [_row(i, "UNSUPPORTED", "profile") for i in CATALOG]
    got = coverage(rows, CATALOG)
    assert not got.conformant
    assert got.why_not == ("no case judged",)


def test_the_json_form_names_every_figure() -> None:
    data = coverage(_all_pass(SC_A_3=("UNSUPPORTED", "capability")), CATALOG).to_json()
    assert data["skipped"] == {"capability": 1}
    assert data["areas"][0] == {
        "area": "A",
        "grade": "partial",
        "judged": 2,
        "applicable": 3,
        "selected": 3,
        "total": 3,
    }
    assert {a["grade"] for a in data["areas"]} <= set(GRADES)
    assert set(data["skipped"]) <= set(SKIPS)


def test_an_adapter_that_failed_to_close_is_not_conformant() -> None:
    """Every case judged and passed, but the adapter's aclose failed as the run ended
    (the last row's ``teardown``): the client broke, and the headline says how."""
    rows = _all_pass()
    rows[-1]["teardown"] = "adapter aclose failed as the run ended: boom"
    got = coverage(rows, CATALOG)
    assert not got.conformant
    assert got.why_not == ("adapter close failed: adapter aclose failed as the run ended: boom",)
