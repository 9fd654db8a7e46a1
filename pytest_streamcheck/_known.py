"""The known-failures file: expected failures, each with a reason."""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["KnownFailures", "parse_known_failures"]


@dataclass(frozen=True)
class KnownFailures:
    entries: tuple[tuple[str, str], ...] = ()  # (case id or glob, reason)

    def reason_for(self, case_id: str) -> str | None:
        return next(
            (r for pattern, r in self.entries if fnmatch.fnmatchcase(case_id, pattern)), None
        )


def parse_known_failures(path: Path | None, catalog: Sequence[str] = ()) -> KnownFailures:
    """Lines of ``SC-AREA-N  reason`` (globs allowed); ``#`` starts a comment.

    With the ``catalog`` ids, an id or glob that names no case is a usage error: a typo
    would otherwise hide a real failure's entry, or keep a stale one forever.
    """
    if path is None:
        return KnownFailures()
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        pattern, _, reason = line.partition(" ")
        if not reason.strip():
            raise pytest.UsageError(
                f"{path}:{number}: a known failure needs a reason after the case id: {line!r}"
            )
        if not pattern.startswith("SC-"):
            raise pytest.UsageError(f"{path}:{number}: {pattern!r} is not a case id or glob")
        if catalog and not any(fnmatch.fnmatchcase(c, pattern) for c in catalog):
            raise pytest.UsageError(f"{path}:{number}: {_no_case(pattern, catalog)}")
        entries.append((pattern, reason.strip()))
    return KnownFailures(tuple(entries))


def _no_case(pattern: str, catalog: Sequence[str]) -> str:
    what = "glob" if any(c in pattern for c in "*?[") else "id"
    close = difflib.get_close_matches(pattern, catalog, n=1)
    hint = f"; did you mean {close[0]}?" if close and what == "id" else ""
    return f"the {what} {pattern} matches no case in the catalog{hint}"
