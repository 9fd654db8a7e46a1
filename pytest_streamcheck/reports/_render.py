"""Text renderings: a failing case, and the end-of-run summary grouped by area."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from conformance._coverage import AreaGrade, Coverage
from conformance._result import CaseResult

__all__ = [
    "KNOWN",
    "STALE",
    "cap",
    "column_of",
    "render_failure",
    "render_summary",
    "reproduce_command",
]

VERDICTS = ("PASS", "FAIL", "NON-STRICT", "UNSUPPORTED", "ERROR", "INCONCLUSIVE")
# With a known-failures file: listed failures that failed again (xfailed, not failures
# of the run), and listed ones that pass now (stale: they fail a strict run).
KNOWN = "KNOWN"
STALE = "STALE"


# A failure's default text stays short; -vv and the JSON report have everything.
DETAIL_ROWS = 4
DETAIL_WIDTH = 300
TIMELINE_HEAD = 8
TIMELINE_TAIL = 8
MORE = "use -vv or the JSON report"


def timing_phrase(timing: str) -> str:
    """How a case's durations were played, for its failure text."""
    if timing == "virtual":
        return "in virtual time (its own durations, every stamp exact)"
    return f"at {timing} timing"


def render_failure(result: CaseResult, *, full: bool = False) -> str:
    """Requirement, source, expected, observed, and the timeline: only its first and last
    rows unless ``full`` (a jitter case's timeline has 700 rows)."""
    case = result.case
    lines = [
        f"{case.id} [{case.level.value}] {case.title}  ->  {result.verdict.value}",
        f"requirement: {case.requirement}",
        f"source:      {case.source}",
        f"profile:     {result.profile} {timing_phrase(result.timing)}",
    ]
    if result.outcome is not None:
        lines += [
            f"expected:    {result.outcome.expected}",
            f"observed:    {result.outcome.observed}",
        ]
        details = [d if full else _clip(d) for d in result.outcome.details]
        lines += [f"             {d}" for d in cap(details, DETAIL_ROWS, 0, full, "details")]
    for tried in result.rejudged:
        where = " beside other cases" if tried.beside else ""
        lines.append(f"undecidable at x{tried.factor:g}{where}: {tried.observed}; {tried.noise}")
    if result.evidence is not None:
        lines.append(f"noise:       {result.evidence.noise.headline()}")
        lines.append("timeline (ms since the case started):")
        rows = cap(result.evidence.timeline(), TIMELINE_HEAD, TIMELINE_TAIL, full, "rows")
        lines += [f"  {row}" for row in rows]
    return "\n".join(lines)


def cap(rows: Sequence[str], head: int, tail: int, full: bool, what: str) -> list[str]:
    """``rows``, or its first ``head`` and last ``tail`` with a line saying how many
    were left out."""
    if full or len(rows) <= head + tail + 1:
        return list(rows)
    left_out = len(rows) - head - tail
    return [*rows[:head], f"... {left_out} more {what} ({MORE})", *rows[len(rows) - tail :]]


def _clip(line: str) -> str:
    return line if len(line) <= DETAIL_WIDTH else f"{line[:DETAIL_WIDTH]} ... ({MORE})"


def render_summary(
    results: Iterable[Mapping[str, Any]],
    header: str,
    *,
    known: bool = False,
    covered: Coverage | None = None,
) -> list[str]:
    """Rows for the terminal: per area, the count of each verdict; with ``known`` (a
    known-failures file is in use) the listed cases are counted apart: KNOWN (out of
    FAIL and NON-STRICT, as the exit code does) and STALE (out of PASS). With
    ``covered``: each area's judged/applicable and grade, and the coverage headline."""
    columns = (*VERDICTS, KNOWN, STALE) if known else VERDICTS
    by_area: dict[str, Counter[str]] = {}
    total: Counter[str] = Counter()
    for r in results:
        column = column_of(r)
        by_area.setdefault(r["area"], Counter())[column] += 1
        total[column] += 1
    width = max([len(a) for a in by_area] + [5])
    grades = {a.area: a for a in covered.areas} if covered else {}
    head = f"{'area':<{width}}  " + "  ".join(f"{v:>12}" for v in columns)
    rows = [header, head + ("  judged/appl grade" if covered else "")]
    for area, counts in by_area.items():
        line = f"{area:<{width}}  " + "  ".join(f"{counts[v]:>12}" for v in columns)
        grade = grades.get(area)
        rows.append(line + (f"  {_judged(grade)} {grade.grade}" if grade else ""))
    line = f"{'total':<{width}}  " + "  ".join(f"{total[v]:>12}" for v in columns)
    if covered is None:
        return [*rows, line]
    return [*rows, f"{line}  {_judged(covered)}".rstrip(), covered.headline()]


def _judged(counted: Coverage | AreaGrade) -> str:
    return f"{counted.judged:>6}/{counted.applicable:<4}"


def column_of(row: Mapping[str, Any]) -> str:
    """The summary column of a case's row: its verdict, KNOWN or STALE."""
    if row.get("known_failure") and row["verdict"] in ("FAIL", "NON-STRICT"):
        return KNOWN
    return STALE if row.get("stale") else str(row["verdict"])


def reproduce_command(report: Mapping[str, Any], case: Mapping[str, Any]) -> str:
    """The command that plays ``case`` again as the run of ``report`` played it: its
    target, the one case, the run's seed, profiles and wire format, the case's timing."""
    args = ["pytest", f"--streamcheck={(report.get('client') or {}).get('target', '')}"]
    args.append(f"streamcheck::{case.get('id', '')}")
    if report.get("seed") is not None:
        args.append(f"--streamcheck-seed={report['seed']}")
    keys = [f"{p['name']}@{p['version']}" for p in report.get("profiles") or [] if "name" in p]
    if keys:
        args.append(f"--streamcheck-profile={','.join(keys)}")
    if case.get("timing"):
        args.append(f"--streamcheck-timing={case['timing']}")
    if report.get("wire_format") not in (None, "auto"):
        args.append(f"--streamcheck-format={report['wire_format']}")
    return shlex.join(args)
