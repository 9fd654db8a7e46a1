"""SC-POST and SC-SSE checks on hand-built records: a correct client passes, each mistake fails."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from _records import request_record

from conformance import Delivery, Evidence, get_case
from conformance._profiles import get_profile
from conformance.cases.post import IMAGE_SIZE
from conformance.cases.sse import server_events, server_sequence
from fake_servers import Attempt, Connection, SentEvent

EVENTSOURCE = get_profile("seed-eventsource").at("test")
FETCH = get_profile("seed-fetch").at("test")
TOKENS = [f"tok{i}" for i in range(1, 7)]
JSON_HEADERS = (
    ("host", "127.0.0.1"),
    ("content-type", "application/json"),
    ("idempotency-key", "streamcheck-case"),
    ("content-length", "52"),
)
MULTIPART = "multipart/form-data; boundary=0123456789abcdef0123456789abcdef"


def attempt(
    seq: int,
    status: int = 200,
    events: Sequence[int] = (),
    *,
    arrived: float | None = None,
    headers: tuple[tuple[str, str], ...] = JSON_HEADERS,
    body: tuple[int, str] = (52, "aa" * 32),
    ids: bool = False,
    last_event_id: str | None = None,
) -> Attempt:
    at = float(seq) if arrived is None else arrived
    if last_event_id is not None:
        headers = (*headers, ("last-event-id", last_event_id))
    sent = tuple(
        SentEvent(i, "data", str(i) if ids else None, TOKENS[i - 1], at + 0.001 * i) for i in events
    )
    return request_record(
        seq,
        method="POST",
        headers=headers,
        body=body,
        arrived_at=at,
        step=seq - 1,
        status=status,
        events=sent,
        ended_at=at + 0.01,
        end="completed",
    )


def chunks(*indexes: int, at: float = 10.0, ids: bool = False, data: str | None = None) -> list:
    return [
        Delivery(
            "s1", "chunk", at + 0.001 * n, data=data or TOKENS[i - 1], id=str(i) if ids else None
        )
        for n, i in enumerate(indexes)
    ]


def done(at: float = 20.0) -> Delivery:
    return Delivery("s1", "done", at)


def error(kind: str = "other", at: float = 20.0) -> Delivery:
    return Delivery("s1", "error", at, error=kind)  # type: ignore[arg-type]


def connection(seq: int, up: int, fault: str = "") -> Connection:
    return Connection(seq, float(seq), ("127.0.0.1", 40000 + seq), fault, bytes_up=up)


def judge(
    case_id: str,
    attempts: Sequence[Attempt],
    deliveries: Sequence[Delivery],
    connections: Sequence[Connection] = (),
    policy=FETCH,
) -> bool:
    evidence = Evidence(tuple(attempts), tuple(connections), tuple(deliveries))
    return get_case(case_id).check(evidence, policy).ok


FULL = [*chunks(1, 2, 3, 4, 5), done()]


class TestIdenticalRetries:
    def retried(self, **third: object) -> list[Attempt]:
        return [attempt(1, 503), attempt(2, 503), attempt(3, 200, range(1, 6), **third)]  # type: ignore[arg-type]

    def test_three_identical_attempts_pass(self):
        """Two 503s and a stream, every attempt the same request, delivered once: conformant."""
        assert judge("SC-POST-1", self.retried(), FULL)

    def test_header_order_does_not_matter(self):
        """Only names and values count, not the order headers were sent in."""
        assert judge("SC-POST-1", self.retried(headers=tuple(reversed(JSON_HEADERS))), FULL)

    def test_a_header_that_counts_the_attempts_may_count_on(self):
        """x-stainless-retry-count 0, 1, 2 (the openai and anthropic SDKs) describes the
        attempt, not the request: still the same request."""
        tries = [attempt(1, 503), attempt(2, 503), attempt(3, 200, range(1, 6))]
        counted = [
            replace(a, headers=(*JSON_HEADERS, ("x-stainless-retry-count", str(i))))
            for i, a in enumerate(tries)
        ]
        assert judge("SC-POST-1", counted, FULL)

    @pytest.mark.parametrize(
        ("name", "values"),
        [
            ("x-attempt", None),  # only on the last attempt
            ("x-stainless-retry-count", ("0", "0", "1")),  # not one up per attempt
            ("x-stainless-retry-count", ("0", "2", "3")),
            ("x-request-id", ("1", "2", "3")),  # counts, but its name does not say so
            ("idempotency-key", ("k1", "k2", "k3")),  # a fresh key: a new request
        ],
    )
    def test_any_other_changed_header_fails(self, name, values):
        """A header that changes and is not a one-by-one attempt counter makes the retry
        a different request."""
        tries = [attempt(1, 503), attempt(2, 503), attempt(3, 200, range(1, 6))]
        if values is None:
            tries[2] = replace(tries[2], headers=(*JSON_HEADERS, (name, "3")))
        else:
            base = [h for h in JSON_HEADERS if h[0] != name]
            tries = [
                replace(a, headers=(*base, (name, v))) for a, v in zip(tries, values, strict=True)
            ]
        assert not judge("SC-POST-1", tries, FULL)

    def test_a_changed_body_fails(self):
        """A retried body with other bytes (same size) is not the same request."""
        assert not judge("SC-POST-1", self.retried(body=(52, "bb" * 32)), FULL)

    def test_too_few_attempts_fail(self):
        """The script needs two retries; one request cannot show identical retries."""
        assert not judge("SC-POST-1", [attempt(1, 200, range(1, 6))], FULL)

    def test_identical_but_undelivered_fails(self):
        """Identical requests do not excuse a missing chunk."""
        assert not judge("SC-POST-1", self.retried(), [*chunks(1, 2, 3, 4), done()])


class TestMultipart:
    BODY = (IMAGE_SIZE + 300, "cc" * 32)

    def sent(self, boundary: str = MULTIPART, body: tuple[int, str] = BODY) -> list[Attempt]:
        first = (("content-type", MULTIPART),)
        return [
            attempt(1, 503, headers=first, body=self.BODY),
            attempt(2, 200, range(1, 6), headers=(("content-type", boundary),), body=body),
        ]

    def test_one_boundary_and_the_whole_image_pass(self):
        """The same multipart bytes twice, with the image in them, is conformant."""
        assert judge("SC-POST-2", self.sent(), FULL)

    def test_a_new_boundary_fails(self):
        """A fresh boundary changes both the content-type header and the body."""
        other = MULTIPART.replace("0123", "fedc")
        assert not judge("SC-POST-2", self.sent(other, (self.BODY[0], "dd" * 32)), FULL)

    def test_a_body_without_the_image_fails(self):
        """A body smaller than the image cannot carry it."""
        small = (1000, "ee" * 32)
        attempts = [
            attempt(n, s, e, headers=(("content-type", MULTIPART),), body=small)
            for n, s, e in ((1, 503, ()), (2, 200, range(1, 6)))
        ]
        assert not judge("SC-POST-2", attempts, FULL)


class TestNonIdempotent:
    @pytest.mark.parametrize("case_id", ["SC-POST-3", "SC-POST-4", "SC-POST-5"])
    def test_one_attempt_and_an_error_pass(self, case_id):
        """The server saw it once and the consumer got the error: conformant."""
        assert judge(case_id, [attempt(1, 503)], [error()])

    @pytest.mark.parametrize("case_id", ["SC-POST-3", "SC-POST-4", "SC-POST-5"])
    def test_a_resent_request_fails(self, case_id):
        """Re-sending it (and delivering the second answer) runs the job twice."""
        assert not judge(case_id, [attempt(1, 503), attempt(2, 200, range(1, 6))], FULL)

    def test_a_silent_end_fails(self):
        """Sending once is not enough: the failure must reach the consumer."""
        assert not judge("SC-POST-3", [attempt(1, 503)], [])

    def test_written_once_passes(self):
        """One connection carried the request, then the consumer got the error."""
        conns = [connection(1, 300, "reset(after_bytes=0, direction=upstream)")]
        assert judge("SC-POST-6", [], [error()], conns)

    def test_written_twice_fails(self):
        """A second connection carrying the request is a re-send, whatever the server saw."""
        conns = [connection(1, 300, "reset"), connection(2, 300)]
        assert not judge("SC-POST-6", [attempt(1, 200, range(1, 6))], FULL, conns)

    def test_refused_then_sent_once_passes(self):
        """After refused connects, one request reached the server and completed."""
        assert judge("SC-POST-7", [attempt(1, 200, range(1, 6))], FULL)

    def test_refused_and_given_up_misses_the_should(self):
        """Giving up on a refused connect never reaches the server: the SHOULD is missed."""
        assert not judge("SC-POST-7", [], [error("gave_up")])


class TestServerEvents:
    def test_the_answer_is_merged_across_attempts_in_order(self):
        """A resumed stream's events join the first attempt's, each index once."""
        attempts = [attempt(1, 200, [1, 2, 3], ids=True), attempt(2, 200, [3, 4, 5], ids=True)]
        ev = Evidence(tuple(attempts))
        assert server_sequence(ev) == TOKENS[:5]
        assert server_events(ev)[3] == ("tok4", "4")


class TestParsing:
    @pytest.mark.parametrize("case_id", ["SC-SSE-1", "SC-SSE-6", "SC-SSE-11", "SC-SSE-18"])
    def test_exact_delivery_passes(self, case_id):
        """Every event once, in order, then done."""
        assert judge(case_id, [attempt(1, 200, range(1, 6))], FULL, policy=EVENTSOURCE)

    def test_a_lost_first_event_fails(self):
        """A BOM left in place hides the first line's field name: the first event is lost."""
        assert not judge(
            "SC-SSE-5",
            [attempt(1, 200, range(1, 6))],
            [*chunks(2, 3, 4, 5), done()],
            policy=EVENTSOURCE,
        )

    def test_an_extra_empty_chunk_fails(self):
        """A retry:-only block dispatched as an event adds a chunk the server never sent."""
        extra = [Delivery("s1", "chunk", 9.0, data=""), *FULL]
        assert not judge("SC-SSE-9", [attempt(1, 200, range(1, 6))], extra, policy=EVENTSOURCE)

    def test_a_replacement_character_fails(self):
        """A character split between reads and decoded apart shows up as U+FFFD."""
        broken = [*chunks(1, 2), *chunks(3, data="tok\ufffd"), *chunks(4, 5), done()]
        assert not judge("SC-SSE-11", [attempt(1, 200, range(1, 6))], broken, policy=EVENTSOURCE)

    def test_events_but_no_end_fail(self):
        """Everything delivered but no done (e.g. CR endings never ending the terminal)."""
        assert not judge("SC-SSE-1", [attempt(1, 200, range(1, 6))], chunks(1, 2, 3, 4, 5))


class TestIds:
    def resumed(self, last_event_id: str | None = "3") -> list[Attempt]:
        return [
            attempt(1, 200, [1, 2, 3], ids=True, arrived=1.0),
            attempt(2, 200, [4, 5], ids=True, arrived=12.0, last_event_id=last_event_id),
        ]

    def test_ids_and_last_event_id_pass(self):
        """Chunks carry their ids and the resume sends the last one delivered."""
        got = [*chunks(1, 2, 3, ids=True), *chunks(4, 5, at=13.0, ids=True), done()]
        assert judge("SC-SSE-13", self.resumed(), got, policy=EVENTSOURCE)

    def test_chunks_without_ids_fail(self):
        """A decoder that drops id fields hands over chunks without them."""
        got = [*chunks(1, 2, 3), *chunks(4, 5, at=13.0), done()]
        assert not judge("SC-SSE-13", self.resumed(None), got, policy=EVENTSOURCE)

    def test_a_stale_last_event_id_fails(self):
        """Resuming from an older id makes the server repeat an event: a duplicate chunk."""
        attempts = [
            attempt(1, 200, [1, 2, 3], ids=True, arrived=1.0),
            attempt(2, 200, [3, 4, 5], ids=True, arrived=12.0, last_event_id="2"),
        ]
        got = [*chunks(1, 2, 3, ids=True), *chunks(3, 4, 5, at=13.0, ids=True), done()]
        assert not judge("SC-SSE-14", attempts, got)

    def test_a_missing_last_event_id_fails_even_if_replays_are_dropped(self):
        """A client that drops the replayed events but sends no Last-Event-ID still fails."""
        attempts = [
            attempt(1, 200, [1, 2, 3], ids=True, arrived=1.0),
            attempt(2, 200, [1, 2, 3, 4, 5], ids=True, arrived=12.0),
        ]
        got = [*chunks(1, 2, 3, ids=True), *chunks(4, 5, at=13.0, ids=True), done()]
        assert not judge("SC-SSE-13", attempts, got, policy=EVENTSOURCE)

    def test_an_id_never_delivered_fails(self):
        """Last-Event-ID must name an event the consumer got."""
        got = [*chunks(1, 2, 3, ids=True), *chunks(4, 5, at=13.0, ids=True), done()]
        assert not judge("SC-SSE-13", self.resumed("9"), got, policy=EVENTSOURCE)

    def test_no_resume_fails(self):
        """A broken stream surfaced instead of resumed misses the rest of the answer."""
        got = [*chunks(1, 2, 3, ids=True), error("truncated")]
        attempts = [attempt(1, 200, [1, 2, 3], ids=True)]
        assert not judge("SC-SSE-13", attempts, got, policy=EVENTSOURCE)


class TestWrongContentType:
    def test_an_error_and_no_chunk_pass(self):
        """Refusing the body and surfacing an error is conformant."""
        assert judge("SC-SSE-15", [attempt(1, 200, range(1, 6))], [error("non_retryable_status")])

    def test_delivered_chunks_fail(self):
        """Parsing the mislabelled body hands the consumer what it must not trust."""
        assert not judge("SC-SSE-16", [attempt(1, 200, range(1, 6))], FULL)

    def test_no_error_fails(self):
        """Delivering nothing is not enough: the consumer must learn it failed."""
        assert not judge("SC-SSE-15", [attempt(1, 200, range(1, 6))], [done()])


def test_every_case_of_the_areas_is_registered_once_per_transport():
    """SSE rows come in GET/POST pairs; POST cases are POST only."""
    sse = [get_case(f"SC-SSE-{n}") for n in range(1, 19)]
    assert [c.transport for c in sse] == ["get", "post"] * 9
    assert {c.transport for c in (get_case(f"SC-POST-{n}") for n in range(1, 8))} == {"post"}
