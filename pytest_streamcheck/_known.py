"""The known-failures file: expected failures, each with a reason."""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from fake_servers._files import FileRefused, read_text_limited, shown_path

__all__ = ["MAX_KNOWN_FAILURES_BYTES", "KnownFailures", "parse_known_failures"]

MAX_KNOWN_FAILURES_BYTES = 1024 * 1024  # a line per case of the catalog is some 20 KiB


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
    where = shown_path(path)
    for number, line in enumerate(_read(path).splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        pattern, _, reason = line.partition(" ")
        if not reason.strip():
            raise pytest.UsageError(
                f"{where}:{number}: a known failure needs a reason after the case id: {line!r}"
            )
        if not pattern.startswith("SC-"):
            raise pytest.UsageError(f"{where}:{number}: {pattern!r} is not a case id or glob")
        if catalog and not any(fnmatch.fnmatchcase(c, pattern) for c in catalog):
            raise pytest.UsageError(f"{where}:{number}: {_no_case(pattern, catalog)}")
        entries.append((pattern, reason.strip()))
    return KnownFailures(tuple(entries))


def _read(path: Path) -> str:
    try:
        return read_text_limited(path, MAX_KNOWN_FAILURES_BYTES, "bytes per known-failures file")
    except FileRefused as exc:
        raise pytest.UsageError(
            f"--streamcheck-known-failures: {shown_path(path)}: {exc}"
        ) from None


def _no_case(pattern: str, catalog: Sequence[str]) -> str:
    what = "glob" if any(c in pattern for c in "*?[") else "id"
    close = difflib.get_close_matches(pattern, catalog, n=1)
    hint = f"; did you mean {close[0]}?" if close and what == "id" else ""
    return f"the {what} {pattern} matches no case in the catalog{hint}"
