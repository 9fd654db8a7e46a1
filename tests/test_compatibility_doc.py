"""docs/compatibility/ is the shipped adapters' matrix as one command wrote it
(`python -m pytest_streamcheck matrix --shipped --out docs/compatibility`): its page and
table are exactly what its matrix.json renders, and every shipped target is a column."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_streamcheck.__main__ import shipped_targets
from pytest_streamcheck._matrix import render_html, render_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs" / "compatibility"


def _matrix() -> dict[str, object]:
    return json.loads((DOCS / "matrix.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_the_table_and_the_page_are_what_the_matrix_renders() -> None:
    matrix = _matrix()
    assert (DOCS / "matrix.md").read_text(encoding="utf-8") == render_markdown(matrix)
    assert (DOCS / "matrix.html").read_text(encoding="utf-8") == render_html(matrix)


def test_every_shipped_target_is_a_column_with_a_report() -> None:
    columns = _matrix()["columns"]
    assert isinstance(columns, list)
    assert [c["target"] for c in columns] == shipped_targets()
    assert all(c["crashed"] is None and c["client"]["version"] for c in columns)


def test_the_weather_table_is_what_its_report_renders() -> None:
    """docs/compatibility.md's weather table is the one command's run in weather.json
    (`python -m pytest_streamcheck weather reference --shipped ...`), every shipped
    target and the textbook client a row."""
    from pytest_streamcheck._weather_cli import TABLE_END, TABLE_START
    from pytest_streamcheck.reports._weather import weather_table

    report = json.loads((DOCS / "weather.json").read_text(encoding="utf-8"))
    doc = (DOCS.parent / "compatibility.md").read_text(encoding="utf-8")
    block = doc.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    assert block == weather_table(report["runs"], report["command"])
    targets = [r["target"] for r in report["runs"]]
    assert targets == ["reference", *shipped_targets(), "textbook"]
