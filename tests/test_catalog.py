"""The catalog: well-formed case ids and texts, and docs/cases.md in step with it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conformance._case import Level, all_cases

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "cases.md"
CASES = all_cases()


def test_docs_cases_md_is_the_generated_catalog() -> None:
    """docs/cases.md is exactly what ``python -m conformance._doc`` prints."""
    generated = subprocess.run(
        [sys.executable, "-m", "conformance._doc"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert DOC.read_text(encoding="utf-8") == generated, (
        "docs/cases.md is stale: python -m conformance._doc > docs/cases.md"
    )


def test_case_ids_are_unique_and_well_formed() -> None:
    """Every id is unique and of the form SC-AREA-N, and its area is the id's middle."""
    ids = [c.id for c in CASES]
    assert CASES
    assert len(ids) == len(set(ids))
    for case in CASES:
        match = re.fullmatch(r"SC-([A-Z]+)-([1-9]\d*)", case.id)
        assert match, case.id
        assert case.area == match.group(1)


def test_every_case_has_a_requirement_and_a_source() -> None:
    """Each case has a title, a source, a requirement stating its own level's keyword,
    and needs the capability of its transport (so a client without it gets UNSUPPORTED)."""
    for case in CASES:
        assert case.title.strip(), case.id
        assert case.source.strip(), case.id
        assert case.requirement.strip(), case.id
        assert case.level.value in case.requirement, (case.id, case.requirement)
        assert case.transport in case.needs, case.id


def test_every_case_id_is_written_where_its_case_is_defined() -> None:
    """Each id stands, quoted, in exactly one case module of its area (``retry.py`` for
    SC-RETRY, ``sse*.py`` for SC-SSE), so ``grep SC-BACKOFF-7 conformance/`` finds the
    definition: no id is computed."""
    sources = {
        path: path.read_text(encoding="utf-8")
        for path in sorted((ROOT / "conformance").rglob("*.py"))
    }
    for case in CASES:
        quoted = re.compile(rf"[\"']{re.escape(case.id)}[\"']")
        found = [path for path, text in sources.items() if quoted.search(text)]
        assert len(found) == 1, (case.id, [str(p.relative_to(ROOT)) for p in found])
        (path,) = found
        assert path.parent.name == "cases", (case.id, path)
        assert path.stem.split("_")[0] == case.area.lower(), (case.id, path.name)
        assert len(quoted.findall(sources[path])) == 1, (case.id, "written twice")


def test_every_case_appears_in_docs_cases_md() -> None:
    """Each id has its row in docs/cases.md, with its level."""
    doc = DOC.read_text(encoding="utf-8")
    for case in CASES:
        assert f"| {case.id} | {case.level.value} |" in doc, case.id


def test_the_levels_in_use() -> None:
    """MUST and SHOULD cases both exist: the verdicts FAIL and NON-STRICT are reachable."""
    assert {c.level for c in CASES} >= {Level.MUST, Level.SHOULD}
