"""Generate docs/cases.md from the registry: ``python -m conformance._doc > docs/cases.md``.

A test compares the file with this output, so the docs and the catalog never drift.
"""

from __future__ import annotations

from conformance._case import all_cases

__all__ = ["case_table"]

HEADER = """# The conformance catalog

Generated from the case registry by `python -m conformance._doc > docs/cases.md`;
`tests/test_catalog.py` fails when this file and the registry disagree.

Levels: **MUST** failures fail the run; **SHOULD** misses are NON-STRICT (they fail
only under `--streamcheck-strict`). Each requirement is checked once per transport:
GET (EventSource style) and POST with a body (fetch style).
"""


def case_table() -> str:
    lines = [HEADER]
    area = None
    for case in all_cases():
        if case.area != area:
            area = case.area
            lines += [
                "",
                f"## {area}",
                "",
                "| id | level | transport | title | requirement | source |",
                "|---|---|---|---|---|---|",
            ]
        needs = ", ".join(sorted(case.needs - {"get", "post"}))
        title = case.title + (f" (needs: {needs})" if needs else "")
        lines.append(
            f"| {case.id} | {case.level.value} | {case.transport.upper()} | {title} | "
            f"{case.requirement} | {case.source} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(case_table(), end="")
