"""The event-stream decoder: WHATWG examples, edge cases, and split-invariance properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.reference._sse import SSEComment, SSEDecoder, SSEEvent

BOM = "\ufeff"


def reference_parse(stream: bytes) -> tuple[list[SSEEvent], str, int | None]:
    """A deliberately naive, character-by-character reading of HTML §9.2.6 (the test oracle)."""
    text = stream.decode("utf-8", "replace")
    if text.startswith(BOM):
        text = text[1:]
    lines: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "\r\n":
            lines.append("".join(current))
            current = []
            if ch == "\r" and text[i + 1 : i + 2] == "\n":
                i += 1
        else:
            current.append(ch)
        i += 1
    # whatever is left in `current` is an unterminated line: never processed
    events: list[SSEEvent] = []
    data, event_type, id_buffer, last_id, retry = "", "", "", "", None
    for line in lines:
        if line == "":
            last_id = id_buffer
            if data:
                events.append(SSEEvent(event_type or "message", data[:-1], last_id, retry))
            data, event_type = "", ""
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            if value.startswith(" "):
                value = value[1:]
        else:
            name, value = line, ""
        if name == "event":
            event_type = value
        elif name == "data":
            data += value + "\n"
        elif name == "id":
            if "\x00" not in value:
                id_buffer = value
        elif name == "retry" and value and all(c in "0123456789" for c in value):
            digits = value.lstrip("0") or "0"  # past 18 digits the decoder saturates
            retry = int(digits) if len(digits) <= 18 else 10**18 - 1
    return events, last_id, retry


def decode_in_pieces(stream: bytes, cuts: list[int]) -> tuple[list[SSEEvent], SSEDecoder]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    start = 0
    for cut in [*sorted(cuts), len(stream)]:
        events += decoder.feed(stream[start:cut])
        start = cut
    events += decoder.close()
    return events, decoder


def decode(stream: bytes) -> list[SSEEvent]:
    return decode_in_pieces(stream, [])[0]


def decode_bytewise(stream: bytes) -> list[SSEEvent]:
    return decode_in_pieces(stream, list(range(len(stream))))[0]


# --- The specification's examples (HTML §9.2.5 / §9.2.6) -------------------------------------


def test_spec_stock_ticker_joins_data_lines_with_newlines():
    """Consecutive data lines form one event whose data joins them with LF."""
    assert decode(b"data: YHOO\ndata: +2\ndata: 10\n\n") == [SSEEvent(data="YHOO\n+2\n10")]


def test_spec_four_blocks_with_comment_and_id_reset():
    """Comments are skipped, ids persist, a bare `id` resets it, one leading space is stripped."""
    stream = (
        b": test stream\n\n"
        b"data: first event\nid: 1\n\n"
        b"data:second event\nid\n\n"
        b"data:  third event\n\n"
    )
    decoder = SSEDecoder()
    events = decoder.feed(stream)
    assert events == [
        SSEEvent(data="first event", id="1"),
        SSEEvent(data="second event", id=""),
        SSEEvent(data=" third event", id=""),
    ]
    assert decoder.comments_seen == 1


def test_spec_empty_data_lines_and_discarded_last_block():
    """`data` alone gives "", two give "\\n", and a block without its blank line is discarded."""
    decoder = SSEDecoder()
    events = decoder.feed(b"data\n\ndata\ndata\n\ndata:")
    assert events == [SSEEvent(data=""), SSEEvent(data="\n")]
    assert decoder.close() == []


def test_spec_colon_space_is_optional():
    """`data:test` and `data: test` give identical events."""
    assert decode(b"data:test\n\ndata: test\n\n") == [SSEEvent(data="test")] * 2


def test_spec_named_events():
    """The `event` field names the event; the name resets after each dispatch."""
    stream = b"event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\ndata: 113411\n\n"
    assert decode(stream) == [
        SSEEvent(event="add", data="73857293"),
        SSEEvent(event="remove", data="2153"),
        SSEEvent(event="message", data="113411"),
    ]


def test_spec_first_example_three_messages_with_last_unterminated():
    """Three blocks where the last lacks its blank line dispatch two events."""
    stream = (
        b"data: This is the first message.\n\n"
        b"data: This is the second message, it\ndata: has two lines.\n\n"
        b"data: This is the third message."
    )
    assert [e.data for e in decode(stream)] == [
        "This is the first message.",
        "This is the second message, it\nhas two lines.",
    ]


# --- Field rules -------------------------------------------------------------------------------


def test_block_without_data_dispatches_nothing_but_sets_last_event_id():
    """An id-only block dispatches no event but still updates the last event ID."""
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 7\nevent: ping\n\n") == []
    assert decoder.last_event_id == "7"
    assert decoder.feed(b"data: x\n\n") == [SSEEvent(data="x", id="7")]


def test_id_is_committed_only_at_the_blank_line():
    """An id line not yet followed by a blank line does not change last_event_id."""
    decoder = SSEDecoder()
    decoder.feed(b"id: 9\ndata: a\n")
    assert decoder.last_event_id == ""
    decoder.feed(b"\n")
    assert decoder.last_event_id == "9"


def test_id_containing_nul_is_ignored():
    """An id field whose value contains NUL leaves the last event ID unchanged."""
    decoder = SSEDecoder()
    events = decoder.feed(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n")
    assert [e.id for e in events] == ["1", "1"]
    assert decoder.last_event_id == "1"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"3000", 3000),
        (b"0", 0),
        (b" 15", 15),  # the one optional space
        (b"  15", None),
        (b"1.5", None),
        (b"-1", None),
        (b"", None),
        (b"12a", None),
        ("\u0663".encode(), None),  # ARABIC-INDIC DIGIT THREE: a digit, not ASCII
        (b"\xc2\xb2", None),  # SUPERSCRIPT TWO: isdigit() but not ASCII
    ],
)
def test_retry_accepts_ascii_digits_only(value, expected):
    """`retry:` sets the reconnection time only when its value is all ASCII digits."""
    decoder = SSEDecoder()
    decoder.feed(b"retry:" + value + b"\n\n")
    assert decoder.retry == expected


def test_retry_in_force_is_attached_to_later_events():
    """Events carry the reconnection time in force; an invalid retry keeps the old one."""
    decoder = SSEDecoder()
    events = decoder.feed(b"data: a\n\nretry: 500\ndata: b\n\nretry: x\ndata: c\n\n")
    assert [e.retry for e in events] == [None, 500, 500]


def test_retry_of_thousands_of_digits_saturates_instead_of_raising():
    """All ASCII digits is a valid retry, however long: Python's int() refuses past 4,300
    digits, which once killed the stream; leading zeros still count for nothing."""
    decoder = SSEDecoder()
    assert decoder.feed(b"retry: " + b"9" * 5000 + b"\ndata: a\n\n") == [
        SSEEvent(data="a", retry=10**18 - 1)
    ]
    decoder.feed(b"retry: " + b"0" * 5000 + b"1500\n\n")
    assert decoder.retry == 1500


def test_unknown_fields_and_bare_names_are_ignored():
    """Unknown field names, with or without a colon, do not affect the event."""
    assert decode(b"foo: bar\nbaz\nDATA: x\ndata: y\n\n") == [SSEEvent(data="y")]


def test_field_value_keeps_further_colons_and_trailing_spaces():
    """Only the first colon splits; only one leading space is removed."""
    assert decode(b"data: a: b :c  \n\n") == [SSEEvent(data="a: b :c  ")]


def test_empty_event_name_means_message():
    """An empty `event:` value dispatches as "message"."""
    assert decode(b"event:\ndata: x\n\n") == [SSEEvent(event="message", data="x")]


# --- Line endings, BOM, UTF-8 ------------------------------------------------------------------


@pytest.mark.parametrize("end", [b"\n", b"\r", b"\r\n"])
def test_each_line_ending(end):
    """CR, LF and CRLF all end lines."""
    stream = b"data: a" + end + b"data: b" + end + end
    assert decode(stream) == decode_bytewise(stream) == [SSEEvent(data="a\nb")]


def test_cr_then_lf_in_the_next_chunk_is_one_line_end():
    """A CR ending one chunk and an LF starting the next make a single line end."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"\r") == [SSEEvent(data="a\nb")]


def test_cr_at_chunk_end_completes_the_line_at_once():
    """A trailing CR ends its line immediately: the event is not held back for the next chunk."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r\r") == [SSEEvent(data="a")]
    assert decoder.feed(b"\ndata: b\n\n") == [SSEEvent(data="b")]


def test_empty_chunk_keeps_the_pending_cr():
    """An empty chunk between CR and LF does not turn CRLF into two line ends."""
    decoder = SSEDecoder()
    decoder.feed(b"data: a\r")
    decoder.feed(b"")
    assert decoder.feed(b"\n\n") == [SSEEvent(data="a")]


def test_leading_bom_is_stripped_even_when_split():
    """A leading BOM split over three chunks is removed."""
    decoder = SSEDecoder()
    events = [*decoder.feed(b"\xef"), *decoder.feed(b"\xbb"), *decoder.feed(b"\xbfdata: x\n\n")]
    assert events == [SSEEvent(data="x")]


def test_only_one_leading_bom_is_stripped():
    """A second BOM is text: it becomes part of the first field name, an unknown field."""
    assert decode(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n") == [SSEEvent(data="y")]


def test_bom_in_the_middle_is_data():
    """A BOM after the start is ordinary text."""
    assert decode(b"data: \xef\xbb\xbfx\n\n") == [SSEEvent(data=BOM + "x")]


def test_partial_bom_prefix_that_is_not_a_bom_is_kept():
    """Bytes that only begin like a BOM are decoded normally (with replacement)."""
    assert decode(b"\xef\xbbdata: x\n\n") == reference_parse(b"\xef\xbbdata: x\n\n")[0]


def test_multibyte_utf8_split_inside_a_character():
    """A character split across chunks decodes intact."""
    stream = "data: h\u00e9llo \u4e16\u754c \U0001f600\n\n".encode()
    assert decode_bytewise(stream) == [SSEEvent(data="h\u00e9llo \u4e16\u754c \U0001f600")]


def test_invalid_utf8_is_replaced():
    """Invalid bytes become U+FFFD, as the stream-level decoder would produce."""
    stream = b"data: a\xff\xe2\x82\nb\n\ndata: \xf0\x9f\n\n"
    assert decode(stream) == decode_bytewise(stream) == reference_parse(stream)[0]


# --- Bookkeeping and lifecycle -----------------------------------------------------------------


def test_counters():
    """bytes_seen counts every byte fed; comments_seen counts comment lines."""
    decoder = SSEDecoder()
    decoder.feed(b"\xef\xbb\xbf: hi\n")
    decoder.feed(b":\n: ping\ndata: x\n\n")
    assert decoder.bytes_seen == 3 + 5 + 2 + 7 + 8 + 1
    assert decoder.comments_seen == 3


def test_feed_items_hands_over_comments_where_they_were():
    """Comments come with the events, in stream order, one leading space removed; a
    comment inside an event block comes before the event its blank line dispatches."""
    decoder = SSEDecoder()
    items = decoder.feed_items(b": one\ndata: a\n:inside\ndata: b\n\n:\n:  two\ndata: c\n\n")
    assert items == [
        SSEComment("one"),
        SSEComment("inside"),
        SSEEvent(data="a\nb"),
        SSEComment(""),
        SSEComment(" two"),
        SSEEvent(data="c"),
    ]
    assert decoder.comments_seen == 4


def test_feed_items_across_chunks_and_feed_still_drops_comments():
    """A comment split across reads comes once, when its line ends; feed() never
    returns comments, even on the same decoder."""
    decoder = SSEDecoder()
    assert decoder.feed_items(b": keep") == []
    assert decoder.feed_items(b"alive\ndata: x\n") == [SSEComment("keepalive")]
    assert decoder.feed(b"\n: dropped\n") == [SSEEvent(data="x")]
    assert decoder.feed_items(b"data: y\n\n") == [SSEEvent(data="y")]
    assert decoder.comments_seen == 2


def test_close_discards_the_unterminated_event_and_keeps_stream_state():
    """close() drops a pending event but keeps last_event_id and retry for the next connection."""
    decoder = SSEDecoder()
    decoder.feed(b"retry: 100\nid: 4\ndata: a\n\nid: 5\ndata: partial")
    assert decoder.close() == []
    assert (decoder.last_event_id, decoder.retry) == ("4", 100)
    assert decoder.feed(b"\xef\xbb\xbfdata: b\n\n") == [SSEEvent(data="b", id="4", retry=100)]


def test_resumed_decoder_starts_from_a_given_id():
    """A decoder built with last_event_id attaches it to events that carry no id."""
    decoder = SSEDecoder(last_event_id="41", retry=250)
    assert decoder.feed(b"data: x\n\n") == [SSEEvent(data="x", id="41", retry=250)]


def test_long_line_in_tiny_chunks():
    """A 200 kB data line fed 7 bytes at a time arrives whole."""
    payload = "x\u00e9" * 70_000
    stream = b"data: " + payload.encode() + b"\r\n\r\n"
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for i in range(0, len(stream), 7):
        events += decoder.feed(stream[i : i + 7])
    assert events == [SSEEvent(data=payload)]


# --- Properties --------------------------------------------------------------------------------

TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    max_size=12,
)
ASCII_DIGITS = st.text(alphabet="0123456789", min_size=1, max_size=5)


@st.composite
def lines(draw: st.DrawFn) -> str:
    kind = draw(
        st.sampled_from(
            [
                "data",
                "data",
                "data",
                "blank",
                "blank",
                "comment",
                "id",
                "event",
                "retry",
                "unknown",
                "bare",
            ]
        )
    )
    space = draw(st.sampled_from(["", " ", "  "]))
    if kind == "blank":
        return ""
    if kind == "comment":
        return ":" + draw(TEXT)
    if kind == "id":
        return "id:" + space + draw(st.one_of(TEXT, st.just("a\x00b"), ASCII_DIGITS))
    if kind == "retry":
        return "retry:" + space + draw(st.one_of(ASCII_DIGITS, TEXT))
    if kind == "bare":
        return draw(st.sampled_from(["data", "id", "event", "retry", "x"]))
    if kind == "unknown":
        return draw(st.sampled_from(["foo", "Data", "ev", "retry2"])) + ":" + space + draw(TEXT)
    return kind + ":" + space + draw(TEXT)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    body = draw(st.lists(lines(), max_size=25))
    ends = draw(
        st.lists(st.sampled_from(["\n", "\r", "\r\n"]), min_size=len(body), max_size=len(body))
    )
    text = "".join(line + end for line, end in zip(body, ends, strict=True))
    if draw(st.booleans()):
        text += draw(TEXT)  # an unterminated tail
    bom = draw(st.sampled_from(["", "", BOM, BOM + BOM]))
    return (bom + text).encode()


def cuts_for(stream: bytes) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=20)


@settings(max_examples=400, deadline=None)
@given(data=st.data(), stream=streams())
def test_any_split_gives_the_events_of_the_reference_parser(data, stream):
    """However the bytes are cut (inside UTF-8, between CR and LF), the events match the spec."""
    cuts = data.draw(cuts_for(stream))
    expected, last_id, retry = reference_parse(stream)
    events, decoder = decode_in_pieces(stream, cuts)
    assert events == expected
    assert (decoder.last_event_id, decoder.retry) == (last_id, retry)
    assert decoder.bytes_seen == len(stream)


@settings(max_examples=150, deadline=None)
@given(stream=streams())
def test_byte_at_a_time_equals_one_chunk(stream):
    """Feeding one byte at a time gives exactly the events of feeding everything at once."""
    assert decode_bytewise(stream) == decode(stream)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), stream=streams())
def test_feed_items_gives_feeds_events_and_every_comment(data, stream):
    """Under any split, feed_items' events are feed's, and each comment line comes once."""
    decoder = SSEDecoder()
    items: list[SSEEvent | SSEComment] = []
    start = 0
    for cut in [*sorted(data.draw(cuts_for(stream))), len(stream)]:
        items += decoder.feed_items(stream[start:cut])
        start = cut
    assert [i for i in items if isinstance(i, SSEEvent)] == decode(stream)
    assert sum(isinstance(i, SSEComment) for i in items) == decoder.comments_seen


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    parts=st.lists(
        st.one_of(
            st.binary(max_size=8),
            st.sampled_from([b"\r", b"\n", b"\r\n", b"data:", b"id:", b"\xef\xbb\xbf", b":"]),
        ),
        max_size=30,
    ),
)
def test_arbitrary_bytes_match_the_reference_parser(data, parts):
    """Even invalid UTF-8 and stray separators decode as the whole-stream reference does."""
    stream = b"".join(parts)
    cuts = data.draw(cuts_for(stream))
    expected, last_id, retry = reference_parse(stream)
    events, decoder = decode_in_pieces(stream, cuts)
    assert events == expected
    assert (decoder.last_event_id, decoder.retry) == (last_id, retry)
