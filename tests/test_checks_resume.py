"""Resumption judged from the ledger (``resumed_from_delivered``): the Last-Event-ID the
server received and the data the consumer got, never the ids the client reports.

SC-COMMIT-15 to 18 and the resume part of SC-SSE-13/14 share the function."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from test_checks import attempt, chunks, done, judge
from test_timing import noisy, quiet

from conformance import Delivery, Evidence
from conformance._checks import resumed_from_delivered
from conformance.cases._common import BREAK_HOLD
from fake_servers import Attempt

FIRST = attempt(1, 200, [1, 2, 3], end="aborted", ids=True, ended=0.01)


def resumed(last_event_id: str | None, events: Sequence[int] = (4, 5, 6)) -> list[Attempt]:
    return [FIRST, attempt(2, 200, events, arrived=0.5, last_event_id=last_event_id, ids=True)]


def got(*indexes: int, ids: bool) -> list[Delivery]:
    return [*chunks(*indexes, at=0.005, ids=ids), done(1.0)]


@pytest.mark.parametrize("case_id", ["SC-COMMIT-15", "SC-COMMIT-16"])
def test_a_client_that_shows_no_ids_but_resumes_right_passes(case_id: str) -> None:
    """hides_ids: Last-Event-ID=3 on the wire, the answer exactly once, chunks id=None."""
    assert judge(case_id, resumed("3"), got(1, 2, 3, 4, 5, 6, ids=False))


def test_the_same_holds_when_the_server_replays() -> None:
    """SC-COMMIT-17: the server ignores Last-Event-ID; the client drops the replay."""
    atts = resumed("3", events=(1, 2, 3, 4, 5, 6))
    assert judge("SC-COMMIT-17", atts, got(1, 2, 3, 4, 5, 6, ids=False))
    assert not judge("SC-COMMIT-17", atts, got(1, 2, 3, 1, 2, 3, 4, 5, 6, ids=False))


@pytest.mark.parametrize(
    ("header", "why"),
    [(None, "no header"), ("2", "a stale id"), ("9", "an id never sent"), ("4", "not yet got")],
)
def test_a_wrong_last_event_id_fails_even_when_the_data_is_exact(
    header: str | None, why: str
) -> None:
    """The consumer got 1-6 exactly (a client that drops repeats), but the resumed
    request did not name event 3, the last one delivered of those sent before it."""
    outcome = resumed_from_delivered(
        Evidence(tuple(resumed(header)), (), tuple(got(1, 2, 3, 4, 5, 6, ids=False)))
    )
    assert not outcome.ok, why
    assert f"Last-Event-ID={header}" in outcome.observed
    assert "#3 id=3" in outcome.details[0]


def test_the_last_delivered_event_counts_not_the_last_sent() -> None:
    """The consumer got only 1-2 of the first attempt (the rest of the delivery does not
    follow the answer): resuming from 2 names the last delivered event."""
    ev = Evidence(tuple(resumed("2")), (), tuple(got(1, 2, ids=False)))
    assert resumed_from_delivered(ev).ok


def test_every_resumed_attempt_is_judged() -> None:
    """Two resumes: each names the last delivered event sent before it."""
    second = attempt(2, 200, [4], arrived=0.5, last_event_id="3", ids=True, end="aborted")
    third = attempt(3, 200, [5, 6], arrived=0.9, last_event_id="3", ids=True)
    ev = Evidence((FIRST, second, third), (), tuple(got(1, 2, 3, 4, 5, 6, ids=False)))
    outcome = resumed_from_delivered(ev)
    assert not outcome.ok
    assert outcome.observed == "attempt 3: Last-Event-ID=3"
    third = replace(third, headers=(("last-event-id", "4"),))
    assert resumed_from_delivered(replace(ev, attempts=(FIRST, second, third))).ok


def test_no_resumed_attempt_fails() -> None:
    ev = Evidence((FIRST,), (), tuple(got(1, 2, 3, ids=False)))
    assert resumed_from_delivered(ev).observed == "1 attempt(s)"


def test_events_the_break_discarded_and_the_replay_delivered_leave_it_undecidable() -> None:
    """CI: Chromium's EventSource got a reset right behind events 1-3, delivered none of
    them, reconnected 3 s later with no Last-Event-ID (right: nothing was delivered),
    and the server replayed 1-6. The consumer's 1-3 came from the replay, after the
    resume: the premise (a resume after delivered events) did not hold."""
    replay = [FIRST, attempt(2, 200, [1, 2, 3, 4, 5, 6], arrived=3.0, ids=True)]
    late = [*chunks(1, 2, 3, 4, 5, 6, at=3.01, ids=True), done(3.1)]
    outcome = resumed_from_delivered(Evidence(tuple(replay), (), tuple(late)))
    assert outcome.undecidable
    assert "premise not met" in outcome.observed


def test_a_replay_the_client_dropped_after_delivering_still_needs_the_header() -> None:
    """The consumer got 1-3 before the resume, the client sent no Last-Event-ID, the
    server replayed and the client dropped the repeats: the data is exact, the header
    is wrong, and the delivery times say so."""
    replay = [FIRST, attempt(2, 200, [1, 2, 3, 4, 5, 6], arrived=3.0, ids=True)]
    early = [*chunks(1, 2, 3, at=0.005), *chunks(4, 5, 6, at=3.01), done(3.1)]
    outcome = resumed_from_delivered(Evidence(tuple(replay), (), tuple(early)))
    assert not outcome.ok
    assert not outcome.undecidable
    assert outcome.observed == "attempt 2: Last-Event-ID=None"


BROKEN_LATE = attempt(1, 200, [1, 2, 3], end="aborted", ids=True, ended=0.003 + BREAK_HOLD)
FRESH = [BROKEN_LATE, attempt(2, 200, [1, 2, 3, 4, 5, 6], arrived=0.2, ids=True)]
FROM_THE_FRESH = [*chunks(1, 2, 3, 4, 5, 6, at=0.25, ids=True), done(0.3)]


def test_events_a_quiet_client_had_time_to_read_before_the_break_are_judged() -> None:
    """The break came BREAK_HOLD after events 1-3 and every loop was quiet: a consumer
    that got none of them before the resume dropped what it had time to read."""
    outcome = resumed_from_delivered(quiet(Evidence(tuple(FRESH), (), tuple(FROM_THE_FRESH))))
    assert not outcome.ok
    assert not outcome.undecidable, outcome
    assert outcome.observed == "no event sent before attempt 2 was delivered"


def test_a_break_a_starved_consumer_may_have_lost_the_events_to_is_undecidable() -> None:
    """A consumer loop blocked past the hold: the break may have discarded 1-3 unread
    (Chromium's fetch), and nothing delivered before the resume is then right."""
    ev = noisy(Evidence(tuple(FRESH), (), tuple(FROM_THE_FRESH)), [(0.0, 0.06)])
    outcome = resumed_from_delivered(ev)
    assert outcome.undecidable, outcome
    assert "premise" in f"{outcome.expected} {outcome.observed}"


def test_a_delivery_just_before_a_late_replay_stamp_may_be_the_replays() -> None:
    """CI, Chromium's EventSource at x4: the consumer got 1-6 8.1 ms before the server
    stamped the replay's writes, its loop 18 ms late then. A stamp taken after the write
    returned can trail the bytes by that lag, so the delivery may have come from the
    replay: undecidable. Quiet, 8 ms before the stamp is surely before."""
    first = attempt(1, 200, [1, 2, 3], end="aborted", ids=True, ended=0.003 + BREAK_HOLD)
    replay = attempt(2, 200, [1, 2, 3, 4, 5, 6], arrived=0.1074, ids=True)
    replay = replace(replay, events=tuple(replace(e, at=0.1188) for e in replay.events))
    got_them = [*chunks(1, 2, 3, 4, 5, 6, at=0.1107, ids=True), done(0.1114)]
    ev = Evidence((first, replay), (), tuple(got_them))
    starved = noisy(ev, [(0.1170, 0.018)], source="server")
    assert resumed_from_delivered(starved).undecidable
    calm = resumed_from_delivered(quiet(ev))
    assert not calm.ok
    assert not calm.undecidable


def test_a_break_before_the_clients_code_had_the_response_is_undecidable() -> None:
    """Every loop quiet, but the client's code got the response only after the break (a
    page's fetch resolved 11 ms after it beside 2 CPU burners, the head 62 ms on its
    way): the data was never readable, and nothing delivered before the resume is right.
    A response the client had in time excuses nothing."""
    ev = quiet(Evidence(tuple(FRESH), (), tuple(FROM_THE_FRESH)))
    assert BROKEN_LATE.ended_at is not None
    late = replace(ev, noise=replace(ev.noise, heads={1: BROKEN_LATE.ended_at + 0.011}))
    outcome = resumed_from_delivered(late)
    assert outcome.undecidable, outcome
    assert "its response reached the client's code" in outcome.observed
    in_time = replace(ev, noise=replace(ev.noise, heads={1: 0.001}))
    outcome = resumed_from_delivered(in_time)
    assert not outcome.ok
    assert not outcome.undecidable, outcome
