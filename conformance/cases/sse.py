"""SC-SSE: the event-stream rules an EventSource client relies on, over GET and POST.

Every row changes only how the answer is laid out on the wire (line endings, a
BOM, comments, a ``retry:`` field, fragmentation, buffering, ids, the media
type); the answer itself is the server's, so the consumer must get exactly the
data events the ledger says were sent. Each row is registered for GET (the odd id)
and POST (the even id) where it is written; SC-SSE-19 on are in ``sse_request`` and
``sse_fields``.

Honouring ``retry:`` is left out on purpose: the field sets EventSource's own
reconnection delay, and the clients this kit judges replace that reconnection
with the profile's jittered backoff (seeds/000). Parsing it as a field is a MUST.
"""

from __future__ import annotations

from conformance._case import Outcome
from conformance._checks import (
    all_of,
    delivered_exactly,
    ended_with_done,
    ended_with_error,
    resumed_from_delivered,
)
from conformance._evidence import Evidence
from conformance.cases._common import Row, broken, one_stream, register_row, resumed_row
from conformance.reference import ClientPolicy
from fake_servers import Framing, Gap, Stream

__all__ = ["server_events", "server_sequence"]

PARSE = "WHATWG HTML §9.2.6 (interpreting an event stream)"
EVENTS = 6
# Exactly one token in each block of eight carries multi-byte UTF-8 (fake_servers'
# vocabulary), so an 8-event answer always has at least one character to cut.
UTF8_EVENTS = 8


def server_events(ev: Evidence) -> list[tuple[str, str | None]]:
    """The answer's data events as the server sent them: (data, id), in answer order."""
    by_index: dict[int, tuple[str, str | None]] = {}
    for attempt in ev.attempts:
        for event in attempt.data_events:
            by_index.setdefault(event.index, (event.data, event.id))
    return [by_index[i] for i in sorted(by_index)]


def server_sequence(ev: Evidence) -> list[str]:
    """The answer's data, in order, across every attempt."""
    return [data for data, _ in server_events(ev)]


def _delivered_exactly(ev: Evidence, policy: ClientPolicy) -> Outcome:
    return all_of(ended_with_done(ev), delivered_exactly(ev, server_sequence(ev)))


def _ids_delivered(ev: Evidence) -> Outcome:
    want = "every chunk carries the id the server sent with it"
    sent = server_events(ev)
    for n, (chunk, (_, expected)) in enumerate(zip(ev.chunks(), sent, strict=False), start=1):
        if chunk.id != expected:
            return Outcome.failed(
                want, f"chunk {n} carried id {chunk.id!r}, sent with {expected!r}"
            )
    return Outcome.passed(want, "they do")


def _ids_tracked(ev: Evidence, policy: ClientPolicy) -> Outcome:
    """The ids reach the consumer; the resume itself is judged as SC-COMMIT-15 judges it."""
    return all_of(_ids_delivered(ev), resumed_from_delivered(ev), _delivered_exactly(ev, policy))


def _refused_as_garbage(ev: Evidence, policy: ClientPolicy) -> Outcome:
    return all_of(delivered_exactly(ev, []), ended_with_error(ev))


register_row(
    Row(
        title="CR line endings, fragmented at random, are parsed",
        requirement="A client MUST accept a lone CR as a line ending, however the stream's "
        "bytes are split across reads, and deliver every event exactly once.",
        source=PARSE,
        play=one_stream(
            lambda p: [
                Stream(events=EVENTS, framing=Framing(line_ending="cr", split=9, split_random=True))
            ]
        ),
        check=_delivered_exactly,
    ),
    get_id="SC-SSE-1",
    post_id="SC-SSE-2",
)
register_row(
    Row(
        title="CRLF line endings are parsed, also with CR and LF in different reads",
        requirement="A client MUST accept CRLF line endings, also when the CR and its LF "
        "arrive in different reads (the pair is one line ending, not two).",
        source=PARSE,
        play=one_stream(
            lambda p: [
                # named events: a CR and LF read apart as two line endings dispatch the
                # event before its type line's event ends, which a data-only one hides
                Stream(events=EVENTS, format="named", framing=Framing(line_ending="crlf", split=1))
            ]
        ),
        check=_delivered_exactly,
        needs=frozenset({"raw_data", "event_fields"}),  # the named events' types
    ),
    get_id="SC-SSE-3",
    post_id="SC-SSE-4",
)
register_row(
    Row(
        title="A leading BOM is stripped, also when its bytes arrive apart",
        requirement="A client MUST strip one leading U+FEFF BOM from the stream, also when its "
        "bytes arrive in different reads, and deliver the first event intact.",
        source=PARSE,
        # The client's own wire format (an SDK given another provider's would fail on
        # the format, not the BOM). A BOM left in place spoils the first line's field
        # name: a plain stream's first data line, Anthropic's message_start type, the
        # Responses API's response.created, OpenAI's first content chunk (its text-free
        # role chunk is left out here: Wire.opening_optional).
        play=one_stream(
            lambda p: [Stream(events=EVENTS, framing=Framing(bom=True, split=2, split_random=True))]
        ),
        check=_delivered_exactly,
    ),
    get_id="SC-SSE-5",
    post_id="SC-SSE-6",
)
register_row(
    Row(
        title="Comments are never delivered",
        requirement="A client MUST ignore comment lines (those starting with ':'): they are "
        "neither data nor events.",
        source=PARSE,
        play=one_stream(lambda p: [Stream(events=EVENTS, framing=Framing(comment_every=1))]),
        check=_delivered_exactly,
    ),
    get_id="SC-SSE-7",
    post_id="SC-SSE-8",
)
register_row(
    Row(
        title="A retry: field is a field, not data",
        requirement="A client MUST parse a 'retry:' field as a field: it is never delivered, "
        "dispatches no event of its own and does not disturb the events around it.",
        source=f"{PARSE}; the reconnection delay itself is the profile's backoff (seeds/000)",
        play=one_stream(lambda p: [Stream(events=EVENTS, framing=Framing(retry_ms=2500))]),
        check=_delivered_exactly,
    ),
    get_id="SC-SSE-9",
    post_id="SC-SSE-10",
)
register_row(
    Row(
        title="A multi-byte character cut between reads is delivered intact",
        requirement="A client MUST decode UTF-8 across read boundaries: a character whose "
        "bytes arrive in different reads is delivered intact, never as U+FFFD.",
        source=f"{PARSE} (UTF-8 decode of the stream); WHATWG Encoding (streaming decode)",
        play=one_stream(
            lambda p: [Stream(events=UTF8_EVENTS, framing=Framing(split=1))],
            progress=UTF8_EVENTS,
        ),
        check=_delivered_exactly,
    ),
    get_id="SC-SSE-11",
    post_id="SC-SSE-12",
)
_SPLIT_CRLF = Framing(line_ending="crlf", split=5, split_random=True)
register_row(
    resumed_row(
        title="Event ids are tracked and sent as Last-Event-ID on resume",
        requirement="A client MUST hand each event over with the id in force, and resume a "
        "broken stream with the last delivered id as Last-Event-ID, delivering the rest "
        "exactly once.",
        source="WHATWG HTML §9.2.6 (the id field), §9.2.4 (Last-Event-ID on reconnection)",
        cut=broken(3, ids=True, framing=_SPLIT_CRLF),
        resumed=Stream(events=EVENTS, ids=True, framing=_SPLIT_CRLF),
        check=_ids_tracked,
    ),
    get_id="SC-SSE-13",
    post_id="SC-SSE-14",
)
register_row(
    Row(
        title="A 200 that is not text/event-stream is an error, never chunks",
        requirement="A client MUST NOT deliver anything from a response whose Content-Type is "
        "not text/event-stream (as a header-rewriting proxy sends), and MUST surface an error.",
        source="WHATWG HTML §9.2.3 (a wrong Content-Type fails the connection); seeds/000 "
        "(proxies that rewrite the response headers in a way that breaks SSE parsing)",
        play=one_stream(
            lambda p: [
                Stream(events=EVENTS, framing=Framing(content_type="text/html; charset=utf-8"))
            ]
        ),
        check=_refused_as_garbage,
    ),
    get_id="SC-SSE-15",
    post_id="SC-SSE-16",
)
register_row(
    Row(
        title="A response a proxy buffers and releases at once is delivered exactly",
        requirement="A client MUST deliver every event of a response that arrives all at once "
        "at its end (a buffering proxy), exactly once and in order.",
        source=f"{PARSE}; seeds/000 (a corporate proxy that buffers SSE)",
        # Gaps make the buffering real: unbuffered, these events would arrive apart.
        play=one_stream(
            lambda p: [Stream(events=EVENTS, gap=Gap(seconds=0.01), framing=Framing(buffered=True))]
        ),
        check=_delivered_exactly,
    ),
    get_id="SC-SSE-17",
    post_id="SC-SSE-18",
)
