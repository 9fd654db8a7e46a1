"""SC-SSE, field parsing: event types, fields, ids, retry, BOM, blank lines, large events,
and comments handed to a consumer that asks for them.

Ids SC-SSE-41 to SC-SSE-80 belong to this module, each written where its case is made.

Each row sends exact bytes (a ``Raw`` step: the server parses nothing) and declares
what a correct parser (WHATWG HTML §9.2.6) dispatches from them: each event's type,
data and last event ID, in order, and for the comment rows each comment line where it
came. Unless a row ends ``truncated``, the wire ends with ``data: [DONE]`` and a
blank line, the answer's terminal event (never delivered), so the stream completes.
An adapter may report the default type as ``None`` or ``"message"``
(``conformance._checks_sse``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from conformance._case import Capability, Outcome
from conformance._checks import all_of, ended_with_done, ended_with_error
from conformance._checks_sse import DEFAULT_TYPE, Comment, Dispatched, handed_over
from conformance._evidence import Evidence
from conformance.cases._common import Row, one_stream, register_row
from conformance.reference import ClientPolicy
from fake_servers import Raw, Step

__all__ = ["ROWS", "wire_of"]

PARSE = "WHATWG HTML §9.2.6 (interpreting an event stream)"
DONE = b"data: [DONE]\n\n"
BOM = b"\xef\xbb\xbf"
D, C = Dispatched, Comment
LARGE = 5 * 1024 * 1024  # characters of the large event's data
PIECE = 64 * 1024  # the large event crosses the wire in writes of this size


@dataclass(frozen=True)
class _Row:
    get: str  # the GET case's id
    post: str  # the POST case's id
    title: str
    requirement: str
    step: str  # the spec's words the row checks, for the case's source
    wire: Callable[[], tuple[bytes, ...]]  # the body's writes, before the terminal event
    expected: Callable[[], tuple[Dispatched | Comment, ...]]
    ends: Literal["done", "truncated"] = "done"
    comments: bool = False  # the consumer asks for comment lines (capability "comments")


def _fixed(*values: bytes) -> Callable[[], tuple[bytes, ...]]:
    return lambda: values


def _yields(*items: Dispatched | Comment) -> Callable[[], tuple[Dispatched | Comment, ...]]:
    return lambda: items


@functools.cache
def _large_data() -> str:
    return "".join(chr(c) for c in range(48, 112)) * (LARGE // 64)


def _large_wire() -> tuple[bytes, ...]:
    line = b"data: " + _large_data().encode() + b"\n\n"
    return (*(line[i : i + PIECE] for i in range(0, len(line), PIECE)), b"data: after\n\n")


def _hundred_in_one_write() -> tuple[bytes, ...]:
    return (b"".join(b"data: %d\n\n" % n for n in range(1, 101)),)


ROWS: tuple[_Row, ...] = (
    _Row(
        get="SC-SSE-41",
        post="SC-SSE-42",
        title="An event field sets the event's type",
        requirement="A client MUST hand each event over with the type its 'event' field set, "
        "also when the field comes after the data in the block.",
        step='the "event" field sets the event type buffer; dispatch step 6 gives it to the event',
        wire=_fixed(
            b"event: delta\ndata: a\n\n",
            b"event: usage\ndata: b\n\n",
            b"data: c\nevent: tool_call\n\n",
        ),
        expected=_yields(D("a", "delta"), D("b", "usage"), D("c", "tool_call")),
    ),
    _Row(
        get="SC-SSE-43",
        post="SC-SSE-44",
        title="An event without a type is a message; a type lasts one event",
        requirement="A client MUST give an event without an 'event' field (or with an empty "
        "one) the type message, and MUST NOT carry a type over to the events after it.",
        step='dispatch step 5 (type "message"), step 6 (only a non-empty event type buffer '
        "changes it), step 7 (the buffer is emptied after each event)",
        wire=_fixed(
            b"data: a\n\n",
            b"event: delta\ndata: b\n\n",
            b"data: c\n\n",
            b"event: message\ndata: d\n\n",
            b"event: delta\nevent:\ndata: e\n\n",
        ),
        expected=_yields(D("a"), D("b", "delta"), D("c"), D("d"), D("e")),
    ),
    _Row(
        get="SC-SSE-45",
        post="SC-SSE-46",
        title="A line without a colon is a field with an empty value",
        requirement="A client MUST read a line without a colon as a field named by the whole "
        "line with an empty value: 'data' alone adds an empty data line, 'event' alone "
        "empties the event type.",
        step='"the string is not empty but does not contain a U+003A COLON": "the whole line '
        'as the field name, and the empty string as the field value"',
        wire=_fixed(b"data\ndata: x\n\n", b"event: delta\nevent\ndata: y\n\n"),
        expected=_yields(D("\nx"), D("y")),
    ),
    _Row(
        get="SC-SSE-47",
        post="SC-SSE-48",
        title="Unknown fields are ignored; field names are matched exactly",
        requirement="A client MUST ignore fields it does not know, compare field names exactly "
        "(no case folding, no prefix), and dispatch nothing for a block of unknown fields.",
        step='"Otherwise: The field is ignored"; "Field names must be compared literally, with '
        'no case folding performed"',
        wire=_fixed(
            b"foo: bar\ndata: a\nDATA: no\nData: no\ndata : no\n\n",
            b"dataset: no\ndata: b\nbar\n\n",
            b"x-custom: 1\n\n",
            b"data: c\n\n",
        ),
        expected=_yields(D("a"), D("b"), D("c")),
    ),
    _Row(
        get="SC-SSE-49",
        post="SC-SSE-50",
        title="Exactly one leading space is removed from a value",
        requirement="A client MUST remove exactly one leading space from a field value and "
        "nothing else: a second space, a tab and trailing spaces stay.",
        step='"If value starts with a U+0020 SPACE character, remove it from value"',
        wire=_fixed(
            b"data:  two\n\n",
            b"data:x\n\n",
            b"data:   \n\n",
            b"data:\ttab\n\n",
            b"event:  delta\ndata: f\n\n",
        ),
        expected=_yields(D(" two"), D("x"), D("  "), D("\ttab"), D("f", " delta")),
    ),
    _Row(
        get="SC-SSE-51",
        post="SC-SSE-52",
        title="Data lines are joined with LF, without a trailing LF",
        requirement="A client MUST join an event's data lines with one LF each and remove only "
        "the final LF, so an empty data line keeps its place.",
        step='the "data" field: "Append the field value to the data buffer, then append a '
        'single U+000A LINE FEED (LF)"; dispatch step 3 removes the last LF',
        wire=_fixed(b"data: a\ndata: b\ndata: c\n\n", b"data: x\ndata:\n\n", b"data:\ndata: y\n\n"),
        expected=_yields(D("a\nb\nc"), D("x\n"), D("\ny")),
    ),
    _Row(
        get="SC-SSE-53",
        post="SC-SSE-54",
        title="A data field with an empty value dispatches an event with empty data",
        requirement="A client MUST dispatch an event whose only data field is empty ('data:', "
        "'data' or 'data: '), with the data \"\".",
        step='the "data" field appends LF even to an empty value, so the data buffer is not '
        "empty (dispatch step 2 goes on) and step 3 leaves the empty string",
        wire=_fixed(b"data:\n\n", b"data\n\n", b"data: \n\n", b"event: delta\ndata:\n\n"),
        expected=_yields(D(""), D(""), D(""), D("", "delta")),
    ),
    _Row(
        get="SC-SSE-55",
        post="SC-SSE-56",
        title="A block without data dispatches nothing and resets the type",
        requirement="A client MUST NOT dispatch a block without a data field, and MUST empty "
        "its event type there: the next event is a message.",
        step='dispatch step 2: "If the data buffer is an empty string, set the data buffer and '
        'the event type buffer to the empty string and return"',
        wire=_fixed(
            b"event: delta\n\n",
            b"data: a\n\n",
            b"event: usage\nretry: 10\nfoo: bar\n\n",
            b"data: b\n\n",
        ),
        expected=_yields(D("a"), D("b")),
    ),
    _Row(
        get="SC-SSE-57",
        post="SC-SSE-58",
        title="An event left unterminated at the end of the stream is discarded",
        requirement="A client MUST discard an event that the end of the stream cuts off before "
        "its blank line, even a terminal 'data: [DONE]': the answer is truncated, not complete.",
        step='"Once the end of the file is reached, any pending data must be discarded. (If the '
        "file ends in the middle of an event, before the final empty line, the incomplete event "
        'is not dispatched.)"',
        wire=_fixed(b"data: a\n\n", b"data: b\n\n", b"data: [DONE]\n"),
        expected=_yields(D("a"), D("b")),
        ends="truncated",
    ),
    _Row(
        get="SC-SSE-59",
        post="SC-SSE-60",
        title="An id containing NUL is ignored",
        requirement="A client MUST ignore an 'id' field whose value contains U+0000 NULL: the "
        "last event ID stays what it was.",
        step='the "id" field: "If the field value does not contain U+0000 NULL, then set the '
        'last event ID buffer to the field value. Otherwise, ignore the field."',
        wire=_fixed(
            b"id: 1\ndata: a\n\n",
            b"id: 2\x00\ndata: b\n\n",
            b"id: \x003\ndata: c\n\n",
            b"id: 4\ndata: d\n\n",
        ),
        expected=_yields(D("a", id="1"), D("b", id="1"), D("c", id="1"), D("d", id="4")),
    ),
    _Row(
        get="SC-SSE-61",
        post="SC-SSE-62",
        title="An id lasts until the stream changes it; an empty id clears it",
        requirement="A client MUST hand every event over with the last event ID in force: set "
        "by the latest 'id' field, also one in a block without data, until an empty 'id' "
        "clears it.",
        step='dispatch step 1 sets the last event ID even without data; "The buffer does not '
        "get reset, so the last event ID string of the event source remains set to this "
        'value until the next time it is set by the server"; step 5 (lastEventId)',
        wire=_fixed(
            b"id: 7\ndata: a\n\n",
            b"data: b\n\n",
            b"id: 8\n\n",
            b"data: c\n\n",
            b"id\ndata: d\n\n",
            b"data: e\n\n",
            b"id: 9\ndata: f\n\nid:\ndata: g\n\n",
        ),
        expected=_yields(
            D("a", id="7"),
            D("b", id="7"),
            D("c", id="8"),
            D("d"),
            D("e"),
            D("f", id="9"),
            D("g"),
        ),
    ),
    _Row(
        get="SC-SSE-63",
        post="SC-SSE-64",
        title="A retry: value that is not all ASCII digits is ignored",
        requirement="A client MUST ignore a 'retry' field unless its value is all ASCII digits "
        "(however many), and MUST go on with the stream: never an error, never data.",
        step='the "retry" field: "If the field value consists of only ASCII digits, then '
        'interpret the field value as an integer in base ten ... Otherwise, ignore the field."',
        wire=_fixed(
            b"retry: 1.5\ndata: a\n\n",
            b"retry: 10s\n\n",
            b"retry: -1\ndata: b\n\n",
            b"retry:\nretry\ndata: c\n\n",
            b"retry: \xd9\xa3\n\n",  # ARABIC-INDIC DIGIT THREE: a digit, not ASCII
            b"retry: " + b"9" * 5000 + b"\ndata: d\n\n",
            b"retry: 3000\ndata: e\n\n",
        ),
        expected=_yields(D("a"), D("b"), D("c"), D("d"), D("e")),
    ),
    _Row(
        get="SC-SSE-65",
        post="SC-SSE-66",
        title="Only the first BOM is stripped; a later U+FEFF is text",
        requirement="A client MUST strip one leading BOM only: a second one starts the first "
        "line's field name (an unknown field), and U+FEFF inside a value is data.",
        step='"Streams must be decoded using the UTF-8 decode algorithm", which "strips one '
        'leading UTF-8 Byte Order Mark (BOM)"',
        wire=_fixed(BOM + BOM + b"data: x\n\n", b"data: " + BOM + b"y\n\n", b"data: w\n\n"),
        expected=_yields(D("\ufeffy"), D("w")),
    ),
    _Row(
        get="SC-SSE-67",
        post="SC-SSE-68",
        title="Runs of blank lines dispatch no extra events",
        requirement="A client MUST NOT dispatch anything for the blank lines after the first "
        "one that ends an event, whatever their line endings (LF, CR, CRLF mixed).",
        step='"If the line is empty (a blank line): Dispatch the event"; dispatch step 2 '
        "returns without an event when the data buffer is empty",
        wire=_fixed(b"\n\n\r\n", b"data: a\n\n\n\n\r\n\r\r", b"data: b\r\n\r\n\n\n", b"\n\n\n"),
        expected=_yields(D("a"), D("b")),
    ),
    _Row(
        get="SC-SSE-69",
        post="SC-SSE-70",
        title="A 5 MiB event is delivered whole",
        requirement="A client MUST deliver an event of 5 MiB of data, which arrives over many "
        "reads, whole: the format has no limit on a line's length.",
        step='"Lines must be processed, in the order they are received" (no length limit; the '
        "ABNF's any-char repeats without bound, §9.2.5)",
        wire=_large_wire,
        expected=lambda: (D(_large_data()), D("after")),
    ),
    _Row(
        get="SC-SSE-71",
        post="SC-SSE-72",
        title="100 events in one read are delivered in order",
        requirement="A client MUST deliver every event of a read that completes 100 of them, "
        "each once and in order.",
        step='"Lines must be processed, in the order they are received"; each blank line '
        "dispatches its event",
        wire=_hundred_in_one_write,
        expected=lambda: tuple(D(str(n)) for n in range(1, 101)),
    ),
    _Row(
        get="SC-SSE-73",
        post="SC-SSE-74",
        title="A comment is handed to a consumer that asks, its text intact",
        requirement="A client with the comments capability MUST hand each comment line to a "
        "consumer that asks for them, as the text after the colon with exactly one leading "
        "space removed (an empty comment too).",
        step='a line that "starts with a U+003A COLON character" is ignored by the parser; the '
        'consumer that asks watches heartbeats: seeds/000 §"Connection Open" Is Not "Data '
        'Flowing"',
        wire=_fixed(
            b": keepalive\n\n",
            b":ping\n",
            b":\n",
            b":  two spaces\n",
            b": \xe2\x98\x83 \xc3\xa9\n",
            b"data: a\n\n",
        ),
        expected=_yields(C("keepalive"), C("ping"), C(""), C(" two spaces"), C("☃ é"), D("a")),
        comments=True,
    ),
    _Row(
        get="SC-SSE-75",
        post="SC-SSE-76",
        title="Comments come in stream order among the events",
        requirement="A client with the comments capability MUST hand comments over where they "
        "came among the events, and a comment inside an event's block MUST NOT split it.",
        step="lines are processed in the order they are received; a comment line changes no "
        'buffer; seeds/000 §"Connection Open" Is Not "Data Flowing"',
        wire=_fixed(b": one\ndata: a\n: inside\ndata: b\n\n: two\n\ndata: c\n\n: three\n"),
        expected=_yields(C("one"), C("inside"), D("a\nb"), C("two"), D("c"), C("three")),
        comments=True,
    ),
    _Row(
        get="SC-SSE-77",
        post="SC-SSE-78",
        title="A line is split at its first colon only",
        requirement="A client MUST split a field line at its first colon: later colons belong "
        "to the value (data, event type and id alike).",
        step='"Collect the characters on the line before the first U+003A COLON character" '
        '(the name) and "after the first" (the value)',
        wire=_fixed(
            b"data: a:b\n\n",
            b"data::\n\n",
            b"event: x:y\ndata: c\n\n",
            b"id: 1:2\ndata: d\n\n",
            b"data:: e\n\n",
        ),
        expected=_yields(D("a:b"), D(":"), D("c", "x:y"), D("d", id="1:2"), D(": e", id="1:2")),
    ),
    _Row(
        get="SC-SSE-79",
        post="SC-SSE-80",
        title="Bytes that are not UTF-8 become U+FFFD; the stream goes on",
        requirement="A client MUST decode the stream as UTF-8 with replacement: each invalid "
        "sequence becomes U+FFFD (one per maximal invalid subpart), never an error or a gap.",
        step='"Streams must be decoded using the UTF-8 decode algorithm"; WHATWG Encoding '
        '(UTF-8 decode, error mode "replacement")',
        wire=_fixed(
            b"data: a\xffb\n\n",
            b"data: \xe2\x82\n\n",
            b"data: \xed\xa0\x80\n\n",
            b"data: ok\n\n",
        ),
        expected=_yields(D("a\ufffdb"), D("\ufffd"), D("\ufffd\ufffd\ufffd"), D("ok")),
    ),
)


def wire_of(row: _Row) -> tuple[bytes, ...]:
    """The writes the server sends for ``row``: its wire, then the terminal event."""
    return row.wire() if row.ends == "truncated" else (*row.wire(), DONE)


def _steps(row: _Row) -> Callable[[ClientPolicy], Sequence[Step]]:
    return lambda policy: [Raw(wire_of(row))]


def _check(row: _Row) -> Callable[[Evidence, ClientPolicy], Outcome]:
    def check(ev: Evidence, policy: ClientPolicy) -> Outcome:
        ending = ended_with_done(ev) if row.ends == "done" else ended_with_error(ev, ("truncated",))
        return all_of(handed_over(ev, row.expected()), ending)

    return check


def _as_row(row: _Row) -> Row:
    return Row(
        title=row.title,
        requirement=row.requirement,
        source=f"{PARSE}: {row.step}",
        play=one_stream(_steps(row), comments=row.comments),
        check=_check(row),
        needs=_needs(row),
    )


def _needs(row: _Row) -> frozenset[Capability]:
    """Each row's data, handed over as the wire had it; its event types and ids only
    where the row expects one other than the default (a data-only client reports
    neither, and passes a row that has none); the comments where it asks for them."""
    items = [item for item in row.expected() if isinstance(item, Dispatched)]
    fields = any(item.type != DEFAULT_TYPE or item.id is not None for item in items)
    needs: set[Capability] = {"raw_data"}
    if fields:
        needs.add("event_fields")
    if row.comments:
        needs.add("comments")
    return frozenset(needs)


for _row in ROWS:
    register_row(_as_row(_row), get_id=_row.get, post_id=_row.post)
