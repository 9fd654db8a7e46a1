"""Text renderings: a failing case, and the end-of-run summary grouped by area."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_streamcheck._runner import CaseResult

__all__ = ["render_failure", "render_summary"]

VERDICTS = ("PASS", "FAIL", "NON-STRICT", "UNSUPPORTED", "ERROR")


def render_failure(result: CaseResult) -> str:
    case = result.case
    lines = [
        f"{case.id} [{case.level.value}] {case.title}  ->  {result.verdict.value}",
        f"requirement: {case.requirement}",
        f"source:      {case.source}",
        f"profile:     {result.profile} at {result.timing} timing",
    ]
    if result.outcome is not None:
        lines += [
            f"expected:    {result.outcome.expected}",
            f"observed:    {result.outcome.observed}",
        ]
        lines += [f"             {d}" for d in result.outcome.details]
    if result.evidence is not None:
        lines.append("timeline (ms since the case started):")
        lines += [f"  {row}" for row in result.evidence.timeline()]
    return "\n".join(lines)


def render_summary(results: Iterable[Mapping[str, Any]], header: str) -> list[str]:
    """Rows for the terminal: per area, the count of each verdict."""
    by_area: dict[str, Counter[str]] = {}
    total: Counter[str] = Counter()
    for r in results:
        by_area.setdefault(r["area"], Counter())[r["verdict"]] += 1
        total[r["verdict"]] += 1
    width = max([len(a) for a in by_area] + [5])
    head = f"{'area':<{width}}  " + "  ".join(f"{v:>11}" for v in VERDICTS)
    rows = [header, head]
    for area, counts in by_area.items():
        rows.append(f"{area:<{width}}  " + "  ".join(f"{counts[v]:>11}" for v in VERDICTS))
    rows.append(f"{'total':<{width}}  " + "  ".join(f"{total[v]:>11}" for v in VERDICTS))
    return rows
