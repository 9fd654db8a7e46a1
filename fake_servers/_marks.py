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

__all__ = ["MARK", "mark", "marks_in"]

# A space, then the attempt's ledger seq and the token's index in brackets.
MARK = re.compile(r" \[(\d+)\.(\d+)\]")


def mark(seq: int, index: int) -> str:
    """Token ``index`` of the attempt with ledger ``seq``."""
    return f" [{seq}.{index}]"


def marks_in(text: str) -> Iterator[tuple[int, int, int, int]]:
    """Each mark of ``text``: its attempt's seq, its index, where it starts and ends."""
    for found in MARK.finditer(text):
        yield int(found[1]), int(found[2]), found.start(), found.end()
