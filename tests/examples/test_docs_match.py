"""docs/regression-testing.md shows the example files verbatim and every verdict rule."""

from __future__ import annotations

import re
from pathlib import Path

from conformance._verdict import RULES

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "regression-testing.md"


def _embedded() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```", text, re.DOTALL)
    return dict(blocks)


def test_the_doc_embeds_the_example_files_verbatim() -> None:
    """Each file the doc shows is the file CI runs, byte for byte."""
    blocks = _embedded()
    assert set(blocks) == {"tests/examples/chat_app.py", "tests/examples/test_chat_app.py"}
    for path, shown in blocks.items():
        assert shown == (ROOT / path).read_text(encoding="utf-8"), f"{path} drifted from the doc"


def test_the_doc_lists_every_rule() -> None:
    """The rule table names every rule the verdict can report."""
    text = DOC.read_text(encoding="utf-8")
    assert [r for r in RULES if f"| `{r}` |" not in text] == []
