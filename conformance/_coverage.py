"""What a run judged, and whether that earns "conformant": from its case rows. Pure.

A row is a case result's JSON (``CaseResult.to_json()``: ``id``, ``area``,
``verdict``, ``skip``), so the terminal summary, the JSON report and a report read back
later all count the same way. Why these rules: docs/report-schema.md ("Coverage").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from conformance._json import fields_json
from conformance._result import SKIPS

__all__ = ["GRADES", "AreaGrade", "Coverage", "Grade", "coverage"]

Grade = Literal["passing", "partial", "failing", "undecided", "not judged", "not applicable"]
GRADES: tuple[Grade, ...] = (
    "passing",
    "partial",
    "failing",
    "undecided",
    "not judged",
    "not applicable",
)
JUDGED = ("PASS", "FAIL", "NON-STRICT")
_UNJUDGED = {"capability": "a capability is missing", "untunable": "cannot be configured"}


@dataclass(frozen=True)
class AreaGrade:
    """One area's headline: ``judged`` of its ``applicable`` cases, and the grade."""

    area: str
    grade: Grade
    judged: int
    applicable: int
    selected: int
    total: int  # the area's cases in the catalog

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class Coverage:
    """How much of the catalog a run judged, why the rest was not, and the headline."""

    total: int  # cases in the catalog
    selected: int  # cases the run was asked to play
    applicable: int  # selected cases whose rule applies to the client's profiles
    judged: int  # PASS, FAIL or NON-STRICT
    skipped: dict[str, int]  # UNSUPPORTED cases by why (conformance._result.SkipKind)
    conformant: bool
    why_not: tuple[str, ...]  # why the run is not conformant; empty when it is
    areas: tuple[AreaGrade, ...]

    def headline(self) -> str:
        """One line: what was judged of what, and the verdict on the whole."""
        verdict = "conformant" if self.conformant else "NOT conformant: " + "; ".join(self.why_not)
        return (
            f"coverage: judged {self.judged} of {self.applicable} applicable cases "
            f"({self.selected} of the catalog's {self.total} selected); {verdict}"
        )

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, skipped=dict(self.skipped))


def coverage(
    rows: Iterable[Mapping[str, Any]], catalog: Mapping[str, str], *, strict: bool = False
) -> Coverage:
    """The coverage of ``rows`` against ``catalog`` (every case id -> its area).

    Conformant only when the whole catalog was selected, every applicable case was
    judged, none failed, errored or stayed undecided (nor, ``strict``, missed a SHOULD).
    """
    rows = list(rows)
    counts = Counter(str(r["verdict"]) for r in rows)
    skipped = Counter(str(r.get("skip")) for r in rows if r["verdict"] == "UNSUPPORTED")
    applicable = [r for r in rows if _applies(r)]
    judged = sum(counts[v] for v in JUDGED)
    why = _why_not(len(rows), len(catalog), judged, skipped, counts, strict)
    # An adapter that failed to close (the row of the case whose teardown closed it):
    # the client broke, even if every case was judged before it did.
    why += tuple(f"adapter close failed: {r['teardown']}"[:300] for r in rows if r.get("teardown"))
    return Coverage(
        total=len(catalog),
        selected=len(rows),
        applicable=len(applicable),
        judged=judged,
        skipped={k: skipped[k] for k in SKIPS if skipped[k]},
        conformant=not why,
        why_not=why,
        areas=_areas(rows, catalog, strict),
    )


def _applies(row: Mapping[str, Any]) -> bool:
    """Whether a row's rule applies to the client: it was played, or only the client's
    lack of a capability or of configuration kept it from being played."""
    skip = row.get("skip")  # None in a report older than the skip field: unjudged
    return row["verdict"] != "UNSUPPORTED" or skip not in SKIPS or SKIPS[skip]


def _why_not(
    selected: int,
    total: int,
    judged: int,
    skipped: Counter[str],
    counts: Counter[str],
    strict: bool,
) -> tuple[str, ...]:
    reasons = []
    if selected < total:
        reasons.append(f"{total - selected} of the catalog's {total} cases not selected")
    if judged == 0:
        reasons.append("no case judged")
    for kind, count in skipped.items():
        if count and (kind not in SKIPS or SKIPS[kind]):  # None: a report without kinds
            reasons.append(f"{count} applicable unjudged ({_UNJUDGED.get(kind, 'unsupported')})")
    for verdict in ("FAIL", "ERROR", "INCONCLUSIVE", *(("NON-STRICT",) if strict else ())):
        if counts[verdict]:
            reasons.append(f"{counts[verdict]} {verdict}")
    return tuple(reasons)


def _areas(
    rows: Sequence[Mapping[str, Any]], catalog: Mapping[str, str], strict: bool
) -> tuple[AreaGrade, ...]:
    totals = Counter(catalog.values())
    by_area: dict[str, list[Mapping[str, Any]]] = {area: [] for area in totals}
    for row in rows:
        by_area.setdefault(str(row["area"]), []).append(row)
    return tuple(
        _grade(area, by_area[area], totals[area], strict) for area in by_area if by_area[area]
    )


def _grade(area: str, rows: Sequence[Mapping[str, Any]], total: int, strict: bool) -> AreaGrade:
    counts = Counter(str(r["verdict"]) for r in rows)
    judged = sum(counts[v] for v in JUDGED)
    applicable = sum(1 for r in rows if _applies(r))
    grade: Grade
    if counts["FAIL"] or (strict and counts["NON-STRICT"]):
        grade = "failing"
    elif counts["ERROR"] or counts["INCONCLUSIVE"]:
        grade = "undecided"
    elif applicable == 0:
        grade = "not applicable"  # to the client's profiles
    elif judged == 0:
        grade = "not judged"
    elif judged < applicable or len(rows) < total:
        grade = "partial"
    else:
        grade = "passing"
    return AreaGrade(area, grade, judged, applicable, len(rows), total)
