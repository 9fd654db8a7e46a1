"""Mutants of the SSE field parsing and comments (SC-SSE-41..80).

Each is the reference client with one broken ``SSEDecoder`` in its decoder seam: a
field rule, a line rewritten before it is read, a step around each line, the bytes
before they are decoded, or what ``close()`` and ``feed_items()`` hand back.
"""

from __future__ import annotations

from dataclasses import replace

from conformance.reference import StreamError
from conformance.reference._sse import SSEComment, SSEDecoder, SSEEvent
from zoo import Expectation
from zoo.post_sse import _DecoderMutant

_BOM = b"\xef\xbb\xbf"


def _value(line: str) -> tuple[str, str]:
    """A field line's name and value, one leading space removed (as the spec reads it)."""
    name, _, value = line.partition(":")
    return name, value[1:] if value[:1] == " " else value


# -- a field rule broken ----------------------------------------------------------------


class _IgnoresEventField(SSEDecoder):
    """Ignores the event field: every event is a message."""

    def _field(self, line: str) -> None:
        if _value(line)[0] != "event":
            super()._field(line)


class _NeedsColonDecoder(SSEDecoder):
    """Ignores a line without a colon ("data" alone adds no empty line)."""

    def _field(self, line: str) -> None:
        if ":" in line:
            super()._field(line)


class _PrefixNamesDecoder(SSEDecoder):
    """Matches field names by prefix: "dataset:" and "data :" are taken for data."""

    def _field(self, line: str) -> None:
        name = _value(line)[0]
        super()._field("data" + line[len(name) :] if name.startswith("data") else line)


class _NulIdsDecoder(SSEDecoder):
    """Takes an id containing NUL like any other."""

    def _field(self, line: str) -> None:
        name, value = _value(line)
        if name == "id":
            self._id_buffer = value
        else:
            super()._field(line)


class _StrictRetryDecoder(SSEDecoder):
    """Fails the stream on a retry: value that is not a number (a strict parser's error)."""

    def _field(self, line: str) -> None:
        name, value = _value(line)
        if name == "retry" and not (value.isascii() and value.isdigit()):
            raise StreamError(f"invalid retry field {value[:20]!r}")
        super()._field(line)


# -- a line rewritten before it is read ---------------------------------------------------


class _Rewrites(SSEDecoder):
    """Reads each line as ``rewrite`` turns it (None: the line is dropped)."""

    def rewrite(self, line: str) -> str | None:
        return line

    def _interpret(self, lines: list[str]) -> list[SSEEvent]:
        kept = (self.rewrite(line) for line in lines)
        return super()._interpret([line for line in kept if line is not None])


class _StripsValuesDecoder(_Rewrites):
    """Strips all leading whitespace from a value (two spaces, a tab)."""

    def rewrite(self, line: str) -> str:
        name, colon, value = line.partition(":")
        return f"{name}:{value.lstrip()}" if name and colon else line


class _DropsEmptyDataDecoder(_Rewrites):
    """Skips a data field whose value is empty: "data:" alone dispatches nothing."""

    def rewrite(self, line: str) -> str | None:
        return None if line in ("data", "data:", "data: ") else line


class _CapsLinesDecoder(_Rewrites):
    """Cuts a line at 1 MiB (a fixed-size line buffer): a long event loses its end."""

    def rewrite(self, line: str) -> str:
        return line[: 1 << 20]


class _LastColonDecoder(_Rewrites):
    """Splits a line at its last colon: a value holding a colon makes an unknown field."""

    def rewrite(self, line: str) -> str | None:
        return None if line[:1] != ":" and line.count(":") > 1 else line


# -- a step around each line --------------------------------------------------------------


class _LineByLine(SSEDecoder):
    """Reads one line at a time; ``after`` may change the outcome of each."""

    def _interpret(self, lines: list[str]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        for line in lines:
            before = (self._event, bool(self._data))
            events += self.after(line, super()._interpret([line]), *before)
        return events

    def after(self, line: str, got: list[SSEEvent], kind: str, had_data: bool) -> list[SSEEvent]:
        return got


class _KeepsTypeDecoder(_LineByLine):
    """Keeps an event's type for the events after it."""

    def after(self, line: str, got: list[SSEEvent], kind: str, had_data: bool) -> list[SSEEvent]:
        if not line:
            self._event = kind
        return got


class _DatalessTypeDecoder(_LineByLine):
    """Keeps the type of a block without data for the next event."""

    def after(self, line: str, got: list[SSEEvent], kind: str, had_data: bool) -> list[SSEEvent]:
        if not line and not had_data:
            self._event = kind
        return got


class _IdPerEventDecoder(_LineByLine):
    """Forgets the id after each event: it applies only to the event it came with."""

    def after(self, line: str, got: list[SSEEvent], kind: str, had_data: bool) -> list[SSEEvent]:
        if not line:
            self._id_buffer = self.last_event_id = ""
        return got


class _EveryBlankLineDecoder(_LineByLine):
    """Dispatches an event at every blank line, even after another blank line."""

    def after(self, line: str, got: list[SSEEvent], kind: str, had_data: bool) -> list[SSEEvent]:
        return got if line or got else [SSEEvent(data="", id=self.last_event_id)]


# -- the bytes before they are decoded, and what comes back ---------------------------------


class _StripsEveryBomDecoder(SSEDecoder):
    """Removes every U+FEFF from the stream, not only the leading one."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return super().feed(chunk.replace(_BOM, b""))


class _DropsBadBytesDecoder(SSEDecoder):
    """Drops bytes that are not UTF-8 instead of decoding them as U+FFFD."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return super().feed(chunk.decode("utf-8", "ignore").encode())


class _LastPerReadDecoder(SSEDecoder):
    """Hands over only the last event of each read (a latest-value slot)."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return super().feed(chunk)[-1:]


class _JoinsWithoutLfDecoder(SSEDecoder):
    """Joins an event's data lines with nothing between them."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return [replace(ev, data=ev.data.replace("\n", "")) for ev in super().feed(chunk)]


class _DispatchesAtEndDecoder(SSEDecoder):
    """Dispatches the event the end of the stream cut off before its blank line."""

    def close(self) -> list[SSEEvent]:
        data = "\n".join(self._data)
        cut = [SSEEvent(self._event or "message", data, self._id_buffer)] if self._data else []
        super().close()
        return cut


class _StripsCommentsDecoder(SSEDecoder):
    """Strips all whitespace from a comment's text."""

    def feed_items(self, chunk: bytes) -> list[SSEEvent | SSEComment]:
        items = super().feed_items(chunk)
        return [SSEComment(i.text.strip()) if isinstance(i, SSEComment) else i for i in items]


class _CommentsLastDecoder(SSEDecoder):
    """Hands a read's comments over after its events."""

    def feed_items(self, chunk: bytes) -> list[SSEEvent | SSEComment]:
        items = super().feed_items(chunk)
        return sorted(items, key=lambda item: isinstance(item, SSEComment))


def _mutant(name: str, decoder: type[SSEDecoder]) -> type[_DecoderMutant]:
    """The reference client with ``decoder`` in its seam; the decoder's doc is the mistake."""
    attributes = {"decoder": decoder, "__doc__": decoder.__doc__}
    return type(name, (_DecoderMutant,), attributes)


ignores_event_field = _mutant("ignores_event_field", _IgnoresEventField)
keeps_event_type = _mutant("keeps_event_type", _KeepsTypeDecoder)
needs_a_colon = _mutant("needs_a_colon", _NeedsColonDecoder)
prefix_field_names = _mutant("prefix_field_names", _PrefixNamesDecoder)
strips_value_whitespace = _mutant("strips_value_whitespace", _StripsValuesDecoder)
joins_data_without_lf = _mutant("joins_data_without_lf", _JoinsWithoutLfDecoder)
drops_empty_data = _mutant("drops_empty_data", _DropsEmptyDataDecoder)
keeps_dataless_type = _mutant("keeps_dataless_type", _DatalessTypeDecoder)
dispatches_at_end = _mutant("dispatches_at_end", _DispatchesAtEndDecoder)
keeps_nul_ids = _mutant("keeps_nul_ids", _NulIdsDecoder)
id_per_event = _mutant("id_per_event", _IdPerEventDecoder)
strict_retry = _mutant("strict_retry", _StrictRetryDecoder)
strips_every_bom = _mutant("strips_every_bom", _StripsEveryBomDecoder)
dispatches_every_blank_line = _mutant("dispatches_every_blank_line", _EveryBlankLineDecoder)
caps_long_lines = _mutant("caps_long_lines", _CapsLinesDecoder)
last_event_per_read = _mutant("last_event_per_read", _LastPerReadDecoder)
strips_comment_text = _mutant("strips_comment_text", _StripsCommentsDecoder)
comments_after_events = _mutant("comments_after_events", _CommentsLastDecoder)
splits_at_last_colon = _mutant("splits_at_last_colon", _LastColonDecoder)
drops_bad_bytes = _mutant("drops_bad_bytes", _DropsBadBytesDecoder)

MUTANTS: dict[str, Expectation] = {
    "ignores_event_field": Expectation("SC-SSE-41 or SC-SSE-42"),
    "keeps_event_type": Expectation("SC-SSE-43 or SC-SSE-44"),
    "needs_a_colon": Expectation("SC-SSE-45 or SC-SSE-46"),
    "prefix_field_names": Expectation("SC-SSE-47 or SC-SSE-48"),
    "strips_value_whitespace": Expectation("SC-SSE-49 or SC-SSE-50"),
    "joins_data_without_lf": Expectation("SC-SSE-51 or SC-SSE-52"),
    "drops_empty_data": Expectation("SC-SSE-53 or SC-SSE-54"),
    "keeps_dataless_type": Expectation("SC-SSE-55 or SC-SSE-56"),
    "dispatches_at_end": Expectation("SC-SSE-57 or SC-SSE-58"),
    "keeps_nul_ids": Expectation("SC-SSE-59 or SC-SSE-60"),
    "id_per_event": Expectation("SC-SSE-61 or SC-SSE-62"),
    "strict_retry": Expectation("SC-SSE-63 or SC-SSE-64"),
    "strips_every_bom": Expectation("SC-SSE-65 or SC-SSE-66"),
    "dispatches_every_blank_line": Expectation("SC-SSE-67 or SC-SSE-68"),
    "caps_long_lines": Expectation("SC-SSE-69 or SC-SSE-70"),
    "last_event_per_read": Expectation("SC-SSE-71 or SC-SSE-72"),
    "strips_comment_text": Expectation("SC-SSE-73 or SC-SSE-74"),
    "comments_after_events": Expectation("SC-SSE-75 or SC-SSE-76"),
    "splits_at_last_colon": Expectation("SC-SSE-77 or SC-SSE-78"),
    "drops_bad_bytes": Expectation("SC-SSE-79 or SC-SSE-80"),
}
