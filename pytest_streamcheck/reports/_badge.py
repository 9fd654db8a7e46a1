"""A run's grade as one word or two, and as a small flat SVG badge: from its coverage only.

The label never says more than the coverage does: ``conformant`` only when the coverage
says the run is (the whole catalog selected, every applicable case judged, none failed,
errored or undecided); ``failing`` when a case failed; ``undecided J/A`` when the kit
could not judge a case (an ERROR or INCONCLUSIVE); otherwise ``partial J/A`` (judged of
applicable), with ``(S of T selected)`` when the run did not select the whole catalog.
Pure and deterministic: the same coverage draws the same bytes.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

__all__ = ["COLORS", "badge_label", "badge_svg", "grade_of"]

COLORS = {  # shields.io's palette: brightgreen, red, lightgrey, yellow
    "conformant": "#4c1",
    "failing": "#e05d44",
    "undecided": "#9f9f9f",
    "partial": "#dfb317",
}
# Approximate advance widths of Verdana 11px (the usual badge font), per character.
_NARROW = set("ijlt.,:;|!'I ()[]f/1")
_WIDE = set("mwMW@%")


def grade_of(coverage: Mapping[str, Any]) -> str:
    """``conformant``, ``failing``, ``undecided`` or ``partial`` for a coverage (its JSON)."""
    if coverage.get("conformant"):
        return "conformant"
    grades = {str(a.get("grade")) for a in coverage.get("areas") or []}
    if "failing" in grades:
        return "failing"
    if "undecided" in grades:
        return "undecided"
    return "partial"


def badge_label(coverage: Mapping[str, Any]) -> str:
    """The badge's right-hand text: the grade, with judged/applicable unless it is whole
    (``partial 150/194 judged``: the numbers count judged cases, not passes)."""
    grade = grade_of(coverage)
    if grade in ("conformant", "failing"):
        return grade
    label = f"{grade} {coverage.get('judged', 0)}/{coverage.get('applicable', 0)} judged"
    selected, total = coverage.get("selected", 0), coverage.get("total", 0)
    if selected != total:  # judged/applicable counts only what was selected: say so
        label += f" ({selected} of {total} selected)"
    return label


def _width(text: str) -> int:
    return sum(4 if c in _NARROW else 10 if c in _WIDE else 7 for c in text) + 10


def badge_svg(coverage: Mapping[str, Any], subject: str = "streamcheck") -> str:
    """A flat two-part badge: ``subject | label``, coloured by the grade."""
    label = badge_label(coverage)
    color = COLORS[grade_of(coverage)]
    left, right = _width(subject), _width(label)
    total = left + right
    s, v = html.escape(subject), html.escape(label)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="20" role="img" '
        f'aria-label="{s}: {v}"><title>{s}: {v}</title>'
        '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" '
        'stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>'
        f'<clipPath id="r"><rect width="{total}" height="20" rx="3" fill="#fff"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{left}" height="20" fill="#555"/>'
        f'<rect x="{left}" width="{right}" height="20" fill="{color}"/>'
        f'<rect width="{total}" height="20" fill="url(#s)"/></g>'
        '<g fill="#fff" text-anchor="middle" '
        'font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">'
        f'<text x="{left / 2:g}" y="15" fill="#010101" fill-opacity=".3">{s}</text>'
        f'<text x="{left / 2:g}" y="14">{s}</text>'
        f'<text x="{left + right / 2:g}" y="15" fill="#010101" fill-opacity=".3">{v}</text>'
        f'<text x="{left + right / 2:g}" y="14">{v}</text></g></svg>\n'
    )
