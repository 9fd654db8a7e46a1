"""The known-failures file: expected failures, each with a reason."""

from __future__ import annotations

import fnmatch
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


def parse_known_failures(path: Path | None) -> KnownFailures:
    """Lines of ``SC-AREA-N  reason`` (globs allowed); ``#`` starts a comment."""
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
        entries.append((pattern, reason.strip()))
    return KnownFailures(tuple(entries))
