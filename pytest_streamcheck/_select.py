"""Selecting cases: ``streamcheck::SC-AREA-N`` on the command line (the node id pytest
prints), and the markers ``-m`` and ``-k`` read (level, area, transport)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

import pytest

from conformance._case import Case, all_cases

__all__ = ["SUITE", "case_marks", "marker_lines", "take_case_args"]

SUITE = "streamcheck"  # the suite's node id; each case is ``streamcheck::SC-AREA-N``
LEVELS = ("must", "should", "may")
TRANSPORTS = ("get", "post")
# ``post`` is the POST transport, so the POST area (request bodies, idempotency) has
# its own marker; every other area's marker is its name in lower case.
POST_AREA = "post_area"


def area_marker(area: str) -> str:
    return POST_AREA if area == "POST" else area.lower()


def case_marks(case: Case) -> list[pytest.MarkDecorator]:
    """The marks of a case's item: level, area, transport, and ``streamcheck(...)``
    with all three as keywords, for ``-m "streamcheck(area='POST')"``."""
    level, transport = case.level.value.lower(), case.transport
    return [
        getattr(pytest.mark, level),
        getattr(pytest.mark, area_marker(case.area)),
        getattr(pytest.mark, transport),
        pytest.mark.streamcheck(
            id=case.id, area=case.area, level=case.level.value, transport=transport
        ),
    ]


def marker_lines(cases: Iterable[Case]) -> list[str]:
    """``markers`` ini lines for every marker the cases carry (for --strict-markers)."""
    areas = dict.fromkeys(c.area for c in cases)  # in catalog order
    lines = [f"{level}: a {level.upper()} conformance case of streamcheck" for level in LEVELS]
    lines += [f"{t}: a streamcheck case on the {t.upper()} transport" for t in TRANSPORTS]
    lines += [f"{area_marker(a)}: a streamcheck case of the {a} area (SC-{a}-N)" for a in areas]
    return lines


def take_case_args(config: pytest.Config) -> frozenset[str] | None:
    """Take ``streamcheck`` and ``streamcheck::ID`` out of the paths to collect.

    Returns the ids named, or None when no case is named (every case is collected).
    An id not in the catalog is a usage error, as a missing path would be.
    """
    if (Path(config.invocation_params.dir) / SUITE).exists():
        return None  # a real path of that name: leave it to pytest
    ours = [a for a in config.args if a == SUITE or a.startswith(f"{SUITE}::")]
    if not ours:
        return None
    config.args[:] = [a for a in config.args if a not in ours]
    if SUITE in ours:
        return None
    ids = frozenset(a.split("::", 1)[1] for a in ours)
    _check_ids(ids)
    return ids


def _check_ids(ids: Iterable[str]) -> None:
    catalog = [c.id for c in all_cases()]
    for case_id in sorted(ids):
        if case_id not in catalog:
            close = difflib.get_close_matches(case_id, catalog, n=1)
            hint = f"; did you mean {SUITE}::{close[0]}?" if close else ""
            raise pytest.UsageError(f"{SUITE}::{case_id}: no such case in the catalog{hint}")
