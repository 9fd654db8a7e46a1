"""The SSE field cases (SC-SSE-41..80): their checks on hand-built deliveries, and their
declared expectations against two parsers that read the same wire."""

from __future__ import annotations

import pytest
from test_sse_decoder import reference_parse

from conformance import Delivery, Evidence, get_case
from conformance._checks_sse import Comment, Dispatched, handed_over
from conformance._profiles import get_profile
from conformance.cases.sse_fields import ROWS, wire_of
from conformance.reference._sse import SSEComment, SSEDecoder, SSEEvent

POLICY = get_profile("seed-eventsource").at("test")


def chunk(data: str, event: str | None = None, id: str | None = None) -> Delivery:
    return Delivery("s1", "chunk", 0.0, data=data, event=event, id=id)


def evidence(*deliveries: Delivery, end: str = "done") -> Evidence:
    ending = (
        Delivery("s1", "done", 1.0)
        if end == "done"
        else Delivery("s1", "error", 1.0, error="truncated")  # type: ignore[arg-type]
    )
    return Evidence(attempts=(), deliveries=(*deliveries, ending))


def test_the_default_type_may_be_none_empty_or_message() -> None:
    """An adapter reports the default type as None, "" or "message": all are message."""
    ev = evidence(chunk("a"), chunk("b", ""), chunk("c", "message"), chunk("d", "delta"))
    want = [Dispatched("a"), Dispatched("b"), Dispatched("c"), Dispatched("d", "delta")]
    assert handed_over(ev, want).ok
    assert not handed_over(ev, [*want[:3], Dispatched("d")]).ok


def test_comments_count_only_where_expected() -> None:
    """Comment deliveries are judged when the expectation has comments, else set aside."""
    ev = evidence(Delivery("s1", "comment", 0.0, data="ping"), chunk("a", id="1"))
    assert handed_over(ev, [Dispatched("a", id="1")]).ok
    assert handed_over(ev, [Comment("ping"), Dispatched("a", id="1")]).ok
    assert not handed_over(ev, [Dispatched("a", id="1"), Comment("ping")]).ok


def test_a_mismatch_shows_expected_against_observed_from_the_first_difference() -> None:
    """The observed line names the first differing item; the details pair the two lists
    from just before it, long data cut to its start and length."""
    long = "x" * 100
    outcome = handed_over(evidence(chunk("a"), chunk(long)), [Dispatched("a"), Dispatched("b")])
    assert not outcome.ok
    assert outcome.observed == "2 events; item 2 differs"
    assert outcome.details[0] == (
        "   item 1: expected event 'message' data 'a'; observed event 'message' data 'a'"
    )
    assert outcome.details[1].startswith("!= item 2: expected event 'message' data 'b'; ")
    assert outcome.details[1].endswith("... (100 characters)")
    missing = handed_over(evidence(), [Dispatched("a", id="7")])
    assert missing.details == (
        "!= item 1: expected event 'message' data 'a' id='7'; observed nothing",
    )


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.get)
def test_each_row_passes_its_correct_deliveries_and_fails_a_missing_one(row) -> None:  # type: ignore[no-untyped-def]
    """The case passes exactly its declared items and the declared ending."""
    items = row.expected()
    deliveries = [
        Delivery("s1", "comment", 0.0, data=i.text)
        if isinstance(i, Comment)
        else chunk(i.data, i.type, i.id)
        for i in items
    ]
    for case_id in (row.get, row.post):
        check = get_case(case_id).check
        assert check(evidence(*deliveries, end=row.ends), POLICY).ok
        assert not check(evidence(*deliveries[:-1], end=row.ends), POLICY).ok
        wrong_end = "done" if row.ends == "truncated" else "truncated"
        assert not check(evidence(*deliveries, end=wrong_end), POLICY).ok


def _as_items(found: list[SSEEvent | SSEComment]) -> list[Dispatched | Comment]:
    return [
        Comment(i.text) if isinstance(i, SSEComment) else Dispatched(i.data, i.event, i.id or None)
        for i in found
        if not (isinstance(i, SSEEvent) and i.data == "[DONE]")
    ]


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.get)
def test_each_rows_expectation_is_what_the_parsers_read(row) -> None:  # type: ignore[no-untyped-def]
    """The declared items are what the reference decoder reads from the wire, write by
    write, and what the naive reading of §9.2.6 in test_sse_decoder reads from it whole."""
    decoder = SSEDecoder()
    found: list[SSEEvent | SSEComment] = []
    for piece in wire_of(row):
        found += decoder.feed_items(piece) if row.comments else decoder.feed(piece)
    found += decoder.close()
    expected = list(row.expected())
    assert _as_items(found) == expected
    events, _, _ = reference_parse(b"".join(wire_of(row)))
    assert _as_items(list(events)) == [i for i in expected if isinstance(i, Dispatched)]
