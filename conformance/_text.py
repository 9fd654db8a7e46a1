"""Judging a client from the text its application sees (``AdapterInfo.reports = "text"``).

Such a client's adapter reports the answer's text as the application got it, in any
pieces: an SDK's text deltas, one string at the end. The kit then marks the answer
(``fake_servers._marks``): each token names the attempt that sent it and its place. This
module reads the marks back out of each stream's text and turns them into the events
they stand for, each with the data the checks expect at its index and the time the
piece that completed it was reported, so every check judges a text client as it judges
one that hands over events: duplicates, losses, reordering, replays and resumes alike.

Text that is no mark (a client's own words, a mark it broke) becomes a chunk of that
text, which matches no event the server sent: the checks then say what it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from conformance._evidence import Delivery, Evidence
from fake_servers import Attempt
from fake_servers._marks import complete_up_to, marks_in, unmarked

__all__ = ["from_text"]


def from_text(ev: Evidence) -> Evidence:
    """``ev`` with each stream's reported text turned into the events its marks name,
    and every event the server sent with its mark's attempt left out (``unmarked``): a
    token then reads the same whichever attempt or path sent it, as an unmarked answer's
    does, so a check that picks attempts by path, or compares two streams, judges a text
    client as it judges one that hands over events."""
    attempts = tuple(_unmark(a) for a in ev.attempts)
    sent = _sent_data(attempts)
    streams: dict[str, _Reader] = {}
    out: list[Delivery] = []
    for d in ev.deliveries:
        reader = streams.setdefault(d.stream, _Reader(d.stream, sent))
        if d.kind == "chunk":
            out.extend(reader.feed(d.data, d.at))
        else:
            out.extend(reader.flush())
            out.append(d)
    for reader in streams.values():
        out.extend(reader.flush())
    return replace(ev, attempts=attempts, deliveries=tuple(out))


_Sent = tuple[str, str | None]  # an event's data and id


def _unmark(attempt: Attempt) -> Attempt:
    events = tuple(
        replace(e, data=unmarked(e.data)) if e.kind == "data" else e for e in attempt.events
    )
    return replace(attempt, events=events)


def _sent_data(attempts: tuple[Attempt, ...]) -> dict[tuple[int, int], _Sent]:
    """By attempt seq and index, each data event an attempt sent (unmarked already), with
    the id it went with (the text cannot carry one). A mark no attempt sent is the
    client's own text."""
    return {(a.seq, e.index): (e.data, e.id) for a in attempts for e in a.data_events}


class _Reader:
    """One stream's text as it comes, piece by piece, read into events."""

    def __init__(self, stream: str, sent: dict[tuple[int, int], _Sent]) -> None:
        self._stream = stream
        self._sent = sent
        self._held = ""  # text read but not yet decided (a mark may be cut in two)
        self._at = 0.0

    def feed(self, text: str, at: float) -> Iterator[Delivery]:
        self._held += text
        self._at = at
        # Keep back a tail that could be the start of a mark the next piece completes.
        cut = complete_up_to(self._held)
        yield from self._read(self._held[:cut], at)
        self._held = self._held[cut:]

    def flush(self) -> Iterator[Delivery]:
        """What is held back, as of the piece that brought it: the stream moved on."""
        held, self._held = self._held, ""
        yield from self._read(held, self._at)

    def _read(self, text: str, at: float) -> Iterator[Delivery]:
        last = 0
        for seq, index, start, end in marks_in(text):
            yield from self._stray(text[last:start], at)
            event = self._sent.get((seq, index))
            if event is None:
                yield self._chunk(text[start:end], at)
            else:
                yield self._chunk(event[0], at, event[1], read=text[start:end])
            last = end
        yield from self._stray(text[last:], at)

    def _stray(self, text: str, at: float) -> Iterator[Delivery]:
        """Text between marks: none in a marked answer (the format's own frames carry no
        text), so any is the client's own, and is judged as the chunk it is."""
        if text.strip():
            yield self._chunk(text, at)

    def _chunk(self, data: str, at: float, event_id: str | None = None, read: str = "") -> Delivery:
        """A chunk; ``read``: the mark it was read from, kept for the timeline (``detail``)."""
        detail = f"read from the text {read!r}" if read else ""
        return Delivery(self._stream, "chunk", at, data=data, id=event_id, detail=detail)
