"""An incremental, sans-IO decoder for ``text/event-stream`` (WHATWG HTML §9.2.6).

It works on bytes: CR and LF never occur inside a multi-byte UTF-8 sequence, so
lines are split before decoding and every complete run of lines is decoded in
one call. Only the unfinished last line is buffered, as bytes, so any split of
the input gives the same events, and a long line arriving in many small chunks
costs linear time.

Comment lines are counted and dropped by ``feed``; ``feed_items`` hands them over
too, as ``SSEComment``, in stream order, for consumers that watch keepalives.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SSEComment", "SSEDecoder", "SSEEvent"]

_BOM = b"\xef\xbb\xbf"
# A ``retry:`` of more digits saturates here (about 31 million years): Python refuses
# int() of a string past 4,300 digits, and no longer delay means anything.
_RETRY_DIGITS = 18
_RETRY_CAP = 10**_RETRY_DIGITS - 1


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event.

    ``id`` is the last event ID in force when it was dispatched (it persists
    across events); ``retry`` is the reconnection time in milliseconds in force,
    if the stream has set one.
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


@dataclass(frozen=True)
class SSEComment:
    """One comment line: its text after the colon, one leading space removed (as for a
    field value). The spec ignores comments; this is for consumers that ask."""

    text: str


_new = object.__new__


def _new_event(event: str, data: str, last_id: str, retry: int | None) -> SSEEvent:
    """Builds an event without the frozen dataclass ``__init__``: it sets each field with
    ``object.__setattr__``, which made event construction a third of the decoding time."""
    ev = _new(SSEEvent)
    fields = ev.__dict__
    fields["event"] = event or "message"
    fields["data"] = data
    fields["id"] = last_id
    fields["retry"] = retry
    return ev


class SSEDecoder:
    """Turns the bytes of one event stream into events, chunk by chunk.

    Attributes:
        last_event_id: The last event ID string; set when an event block ends,
            kept across events and across ``close()``. An ``id`` containing NUL
            is ignored.
        retry: The last valid ``retry:`` value (ASCII digits only), in ms.
        bytes_seen: Bytes fed so far, BOM included.
        comments_seen: Comment lines (starting with ``:``) seen so far.

    A decoder built with ``last_event_id`` starts its last-event-ID buffer from it
    (as Chromium's parser does; the spec starts each stream's buffer empty), so
    events of a resumed stream that carry no ``id`` keep the resume point.
    """

    def __init__(self, *, last_event_id: str = "", retry: int | None = None) -> None:
        """Starts a stream, optionally carrying state over from an earlier connection.

        Args:
            last_event_id: The last event ID already in force (a resumed stream).
            retry: The reconnection time already in force, in ms.
        """
        self.last_event_id = last_event_id
        self.retry = retry
        self.bytes_seen = 0
        self.comments_seen = 0
        self._pending: list[bytes] = []  # the unfinished line, no CR/LF in it
        self._bom_head: bytes | None = b""  # None once the BOM question is settled
        self._skip_lf = False  # the previous chunk ended in CR: a leading LF belongs to it
        # While feed_items runs: each comment, with the count of events dispatched before it.
        self._comments: list[tuple[int, SSEComment]] | None = None
        self._reset_event()

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consumes the next bytes of the stream.

        Args:
            chunk: Any number of bytes; boundaries need not align with lines,
                events or UTF-8 sequences.

        Returns:
            The events completed by this chunk, in order.
        """
        self.bytes_seen += len(chunk)
        if self._bom_head is not None or self._skip_lf:
            chunk = self._stream_start_and_split_crlf(chunk)
        if b"\r" in chunk:
            # A CR at the very end may be the first half of a CRLF split across chunks.
            self._skip_lf = chunk[-1] == 0x0D
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = chunk.rfind(b"\n")
        pending = self._pending
        if end < 0:
            if chunk:
                pending.append(chunk)
            return []
        if pending:
            complete = b"".join(pending) + chunk[:end]
            pending.clear()
        else:
            complete = chunk[:end]
        if end + 1 < len(chunk):
            pending.append(chunk[end + 1 :])
        return self._interpret(complete.decode("utf-8", "replace").split("\n"))

    def feed_items(self, chunk: bytes) -> list[SSEEvent | SSEComment]:
        """Like ``feed``, but comment lines come too, each where it was in the stream.

        Returns:
            The events completed by this chunk and its complete comment lines, in order.
        """
        comments: list[tuple[int, SSEComment]] = []
        self._comments = comments
        try:
            events = self.feed(chunk)
        finally:
            self._comments = None
        if not comments:
            return list(events)
        items: list[SSEEvent | SSEComment] = []
        taken = 0
        for before, comment in comments:
            items += events[taken:before]
            taken = max(taken, before)
            items.append(comment)
        return items + events[taken:]

    def close(self) -> list[SSEEvent]:
        """Ends the stream: an event not yet terminated by a blank line is discarded.

        The decoder may then be fed the next connection's stream: ``last_event_id``
        and ``retry`` carry over (as in EventSource), and a leading BOM is
        stripped again.

        Returns:
            Always an empty list (the spec never dispatches an unterminated event).
        """
        self._pending.clear()
        self._bom_head = b""
        self._skip_lf = False
        self._reset_event()
        return []

    def _stream_start_and_split_crlf(self, chunk: bytes) -> bytes:
        """The rare cases: a BOM at the stream start, or the LF of a CRLF cut after the CR."""
        if self._bom_head is not None:
            # Hold back up to 3 bytes until it is clear whether they are a BOM.
            head = self._bom_head + chunk
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._bom_head = head
                return b""
            self._bom_head = None
            chunk = head[len(_BOM) :] if head.startswith(_BOM) else head
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
        return chunk

    def _reset_event(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id_buffer = self.last_event_id

    def _interpret(self, lines: list[str]) -> list[SSEEvent]:
        """Applies complete lines to the event being built; returns dispatched events."""
        events: list[SSEEvent] = []
        data = self._data
        for line in lines:
            if not line:  # a blank line ends the block
                self.last_event_id = self._id_buffer
                if data:
                    events.append(
                        _new_event(self._event, "\n".join(data), self._id_buffer, self.retry)
                    )
                    data.clear()
                self._event = ""
            elif line[:6] == "data: ":  # the hot path: most lines are data lines
                data.append(line[6:])
            elif line[:5] == "data:":
                data.append(line[5:])
            elif line[0] == ":":
                self.comments_seen += 1
                if self._comments is not None:
                    text = line[2:] if line[1:2] == " " else line[1:]
                    self._comments.append((len(events), SSEComment(text)))
            else:
                self._field(line)
        return events

    def _field(self, line: str) -> None:
        """Applies one non-data field line (``name: value`` or a bare ``name``)."""
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":  # "data" without a colon: an empty data line
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._id_buffer = value
        elif name == "retry" and value.isascii() and value.isdigit():
            digits = value.lstrip("0") or "0"
            self.retry = int(digits) if len(digits) <= _RETRY_DIGITS else _RETRY_CAP
