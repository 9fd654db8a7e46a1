"""Checks of what a client made of exact wire bytes: each event's type, data and id, and
the comments it handed over, against what a correct parser (WHATWG HTML §9.2.6) yields.

The server of these cases sends raw bytes and parses nothing, so the case declares
the expectation. An adapter may report the default event type as ``None`` (or "")
or as ``"message"``: both are the type ``message`` here, as the spec's dispatch step 5
makes every event a ``message`` unless an ``event`` field said otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conformance._case import Outcome
from conformance._evidence import Delivery, Evidence

__all__ = ["DEFAULT_TYPE", "Comment", "Dispatched", "handed_over", "observed_items"]

DEFAULT_TYPE = "message"
_SHOWN = 40  # characters of a data string shown before it is cut
_ROWS = 6  # items shown side by side in a failure's details


@dataclass(frozen=True)
class Dispatched:
    """An event a correct parser dispatches: its type, its data and the id in force.

    ``id`` None: no last event ID (never set, or reset by an empty ``id`` field).
    """

    data: str
    type: str = DEFAULT_TYPE
    id: str | None = None

    def describe(self) -> str:
        tail = f" id={self.id!r}" if self.id is not None else ""
        return f"event {self.type!r} data {_clip(self.data)}{tail}"


@dataclass(frozen=True)
class Comment:
    """A comment line handed to a consumer that asked: the text after the colon."""

    text: str

    def describe(self) -> str:
        return f"comment {_clip(self.text)}"


Item = Dispatched | Comment


def observed_items(ev: Evidence, stream: str = "s1") -> list[Item]:
    """What the client handed over, in order: chunks as events and comments."""
    return [_item(d) for d in ev.of(stream) if d.kind in ("chunk", "comment")]


def _item(d: Delivery) -> Item:
    if d.kind == "comment":
        return Comment(d.data)
    return Dispatched(d.data, d.event or DEFAULT_TYPE, d.id or None)


def handed_over(ev: Evidence, expected: Sequence[Item], stream: str = "s1") -> Outcome:
    """The client handed over exactly ``expected``, in order: each event's type, data and
    id, and (when ``expected`` holds comments) each comment where it came."""
    got = observed_items(ev, stream)
    if not any(isinstance(item, Comment) for item in expected):
        got = [item for item in got if isinstance(item, Dispatched)]
    want = f"exactly the {_count(expected)} a correct parser yields, in order"
    if got == list(expected):
        return Outcome.passed(want, f"{_count(got)}, each as expected")
    first = next(
        (n for n, pair in enumerate(zip(got, expected, strict=False)) if pair[0] != pair[1]),
        min(len(got), len(expected)),
    )
    seen = f"{_count(got)}; item {first + 1} differs"
    return Outcome.failed(want, seen, *_side_by_side(got, expected, first))


def _side_by_side(got: Sequence[Item], expected: Sequence[Item], first: int) -> list[str]:
    """Expected against observed, item by item, from just before the first difference."""
    start = max(0, first - 1)
    stop = min(max(len(got), len(expected)), start + _ROWS)
    rows = []
    for n in range(start, stop):
        e = expected[n].describe() if n < len(expected) else "nothing"
        g = got[n].describe() if n < len(got) else "nothing"
        mark = "  " if e == g else "!="
        rows.append(f"{mark} item {n + 1}: expected {e}; observed {g}")
    return rows


def _count(items: Sequence[Item]) -> str:
    events = sum(isinstance(item, Dispatched) for item in items)
    comments = len(items) - events
    text = f"{events} event{'' if events == 1 else 's'}"
    return text + (f" and {comments} comment{'' if comments == 1 else 's'}" if comments else "")


def _clip(text: str) -> str:
    if len(text) <= _SHOWN:
        return repr(text)
    return f"{text[:_SHOWN]!r}... ({len(text)} characters)"
