"""Marked answers: tokens that identify themselves in the text an application sees.

Many clients hand their application neither the events nor their JSON, only the answer's
text: an SDK's text deltas, a framework's callback, a string at the end. In a marked
answer every token says which attempt sent it and where it stands, ``" [7.3]"`` being
token 3 of the attempt with ledger ``seq`` 7. Found in the concatenated text, the marks
give back which events reached the application, in what order, how often, and from
which attempt: enough to judge duplicates, losses, replays and resumes from text alone
(``conformance._text``). A mark is self-delimiting, so a client may split or join the
text anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["complete_up_to", "mark", "marks_in", "unmarked"]

# A space, then the attempt's ledger seq and the token's index in brackets.
_OPEN, _CLOSE = " [", "]"
_MARK = re.compile(r" \[(\d+)\.(\d+)\]")
_LONGEST = 48  # characters a mark can span (two 20-digit numbers and its brackets)


def mark(seq: int, index: int) -> str:
    """Token ``index`` of the attempt with ledger ``seq``."""
    return f" [{seq}.{index}]"


def marks_in(text: str) -> Iterator[tuple[int, int, int, int]]:
    """Each mark of ``text``: its attempt's seq, its index, where it starts and ends."""
    for found in _MARK.finditer(text):
        yield int(found[1]), int(found[2]), found.start(), found.end()


def unmarked(text: str) -> str:
    """``text`` with each mark's attempt left out (``" [7.3]"`` becomes ``" [3]"``): token
    3 of the answer, whichever attempt sent it, as an unmarked answer's token 3 reads
    the same on every attempt and every path."""
    return _MARK.sub(lambda found: f" [{found[2]}]", text)


def complete_up_to(text: str) -> int:
    """Where ``text`` can be read up to: before the start of a mark the next piece of
    text may complete (an open bracket with no close, or a last space)."""
    start = text.rfind(_OPEN)
    if start < 0 or _CLOSE in text[start:] or len(text) - start > _LONGEST:
        return len(text) - 1 if text.endswith(_OPEN[0]) else len(text)
    return start
