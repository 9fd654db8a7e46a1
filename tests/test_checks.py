"""The checks' judgement on hand-built records: a correct client passes, each mistake fails.

Evidence carries quiet measured noise (``test_timing.quiet``): the measured path the
runner takes; the Retry-After tests also judge it under noise and unmeasured."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

import pytest
from _records import request_record
from test_timing import noisy, quiet

from conformance import Delivery, Evidence, Outcome, get_case
from conformance._checks import delivered_exactly, ended_with_error
from conformance._profiles import get_profile
from conformance.cases._common import BREAK_HOLD
from conformance.timing import Noise
from fake_servers import Attempt, SentEvent

POLICY = get_profile("seed-eventsource").at("test")
BROKEN = 0.002 + BREAK_HOLD  # the break of an attempt whose data was sent by 0.002 s
PIPELINE = get_profile("seed-pipeline").at("test")
TOKENS = [f"tok{i}" for i in range(1, 7)]


def attempt(
    seq: int,
    status: int = 200,
    events: Sequence[int] = (),
    *,
    arrived: float = 0.0,
    ended: float | None = None,
    end: str = "completed",
    last_event_id: str | None = None,
    ids: bool = False,
) -> Attempt:
    headers = (("last-event-id", last_event_id),) if last_event_id is not None else ()
    sent = tuple(
        SentEvent(i, "data", str(i) if ids else None, TOKENS[i - 1], arrived + 0.001 * i)
        for i in events
    )
    return request_record(
        seq,
        headers=headers,
        arrived_at=arrived,
        step=seq - 1,
        status=status,
        events=sent,
        ended_at=arrived + 0.01 if ended is None else ended,
        end=end,
    )


def chunks(*indexes: int, at: float = 1.0, ids: bool = False) -> list[Delivery]:
    return [
        Delivery("s1", "chunk", at + 0.001 * n, data=TOKENS[i - 1], id=str(i) if ids else None)
        for n, i in enumerate(indexes)
    ]


def done(at: float = 2.0) -> Delivery:
    return Delivery("s1", "done", at)


def error(kind: str, status: int | None = None, at: float = 2.0) -> Delivery:
    return Delivery("s1", "error", at, error=kind, status=status)  # type: ignore[arg-type]


def check(
    case_id: str,
    attempts: Sequence[Attempt],
    deliveries: Sequence[Delivery],
    policy=POLICY,
    noise: Noise | None = None,
) -> Outcome:
    """The case's outcome, with quiet measured noise over the records unless ``noise``."""
    ev = Evidence(tuple(attempts), (), tuple(deliveries))
    ev = quiet(ev) if noise is None else replace(ev, noise=noise)
    return get_case(case_id).check(ev, policy)


def judge(
    case_id: str, attempts: Sequence[Attempt], deliveries: Sequence[Delivery], policy=POLICY
) -> bool:
    outcome = check(case_id, attempts, deliveries, policy)
    assert not outcome.undecidable, outcome  # quiet noise decides
    return outcome.ok


class TestNoRetry:
    def test_a_single_401_surfaced_passes(self):
        """One request and a non-retryable error carrying 401 is conformant."""
        assert judge("SC-RETRY-3", [attempt(1, 401)], [error("non_retryable_status", 401)])

    def test_a_retried_401_fails(self):
        """A second request for a 401 fails the case."""
        atts = [attempt(1, 401), attempt(2, 401, arrived=0.1)]
        assert not judge("SC-RETRY-3", atts, [error("non_retryable_status", 401)])

    def test_the_wrong_error_kind_fails(self):
        """A 401 reported as 'gave up' is not the non-retryable error."""
        assert not judge("SC-RETRY-3", [attempt(1, 401)], [error("gave_up", 401)])

    def test_a_silent_client_fails(self):
        """A client that surfaces nothing fails, with a message saying so."""
        case = get_case("SC-RETRY-3")
        outcome = case.check(quiet(Evidence((attempt(1, 401),), (), ())), POLICY)
        assert not outcome.ok
        assert "neither done nor an error" in outcome.observed

    def test_a_retry_after_the_clients_own_timer_is_not_sure(self):
        """A 400 retried is a sure FAIL, unless the client's silence timer fired first
        (a starved server's late answer): then the runner weighs the kit's noise."""
        atts = [attempt(1, 400), attempt(2, 400, arrived=0.5)]
        plain = check("SC-RETRY-2", atts, [error("non_retryable_status", 400)])
        assert not plain.ok
        assert plain.sure
        stalled = Delivery("s1", "state", 0.23, state="stalled")
        timed = check("SC-RETRY-2", atts, [stalled, error("non_retryable_status", 400)])
        assert not timed.ok
        assert not timed.sure


class TestRetriedUntilSuccess:
    ok: ClassVar[list[Attempt]] = [
        attempt(1, 503),
        attempt(2, 503, arrived=0.05),
        attempt(3, 200, [1, 2, 3, 4, 5], arrived=0.1),
    ]

    def test_three_attempts_and_the_answer_once_passes(self):
        """Two 503s then a stream, delivered once in order, is conformant."""
        assert judge("SC-RETRY-13", self.ok, [*chunks(1, 2, 3, 4, 5), done()])

    def test_giving_up_on_503_fails(self):
        """A client that stops at the first 503 fails."""
        assert not judge("SC-RETRY-13", self.ok[:1], [error("gave_up", 503)])

    def test_a_duplicated_chunk_fails(self):
        """Delivering a chunk twice fails even when the stream completes."""
        assert not judge("SC-RETRY-13", self.ok, [*chunks(1, 2, 2, 3, 4, 5), done()])


class TestCommit:
    def test_surfaced_after_chunk_two_passes(self):
        """Two chunks, then an error, with no new request, is conformant."""
        atts = [attempt(1, 200, [1, 2], end="aborted")]
        assert judge("SC-COMMIT-5", atts, [*chunks(1, 2), error("truncated")])

    def test_a_retry_after_the_commit_fails(self):
        """Re-requesting after delivering chunks fails (duplicate risk)."""
        atts = [
            attempt(1, 200, [1, 2], end="aborted", ended=BROKEN),
            attempt(2, 200, [1, 2, 3, 4, 5, 6], arrived=0.2),
        ]
        assert not judge("SC-COMMIT-5", atts, [*chunks(1, 2, at=0.005), error("truncated")])

    def test_a_restart_that_duplicates_chunks_fails(self):
        """Restarting the stream from the beginning delivers duplicates and fails."""
        got = [*chunks(1, 2, at=0.005), *chunks(1, 2, 3, 4, 5, 6, at=0.3), done()]
        assert not judge("SC-COMMIT-5", self.RESTARTED, got)

    @pytest.mark.parametrize("case_id", ["SC-COMMIT-5", "SC-COMMIT-6", "SC-COMMIT-9"])
    def test_chunks_a_quiet_client_had_time_to_read_and_dropped_fail(self, case_id):
        """The break came BREAK_HOLD after the data and every loop was quiet: a client
        that delivered none of it and retried from the start dropped what it had time to
        read, and is judged (it fails: the consumer never kept the committed chunks)."""
        outcome = check(case_id, self.RESTARTED, self.FROM_THE_RETRY)
        assert not outcome.ok
        assert not outcome.undecidable, outcome

    @pytest.mark.parametrize("case_id", ["SC-COMMIT-5", "SC-COMMIT-6", "SC-COMMIT-9"])
    def test_a_break_a_starved_consumer_may_have_lost_the_chunks_to_is_undecidable(self, case_id):
        """CI: Chromium's fetch empties its body stream when the connection resets, and
        a page that had not read the chunks by then never sees them; it retries, rightly
        for what it got. The consumer's loop blocked 60 ms over the hold leaves that open."""
        ev = noisy(Evidence(tuple(self.RESTARTED), (), tuple(self.FROM_THE_RETRY)), [(0.0, 0.06)])
        outcome = get_case(case_id).check(ev, POLICY)
        assert outcome.undecidable, outcome
        assert "premise" in outcome.expected
        assert "attempt 2" in outcome.observed

    RESTARTED = (
        attempt(1, 200, [1, 2], end="aborted", ended=BROKEN),
        attempt(2, 200, [1, 2, 3, 4, 5, 6], arrived=0.2),
    )
    FROM_THE_RETRY = (*chunks(1, 2, 3, 4, 5, 6, at=0.25), done(0.3))

    def test_a_first_attempt_the_kit_answered_too_late_is_undecidable(self):
        """CI: a loaded worker's server read the request 0.2 s after the connect, the
        reference's first-chunk timer fired before any data, and it retried: before the
        commit, so allowed; the case's premise failed, not the client."""
        timeout = PIPELINE.first_chunk_timeout
        assert timeout is not None
        late = [
            attempt(1, 200, [], arrived=0.197, ended=0.208, end="client_closed"),
            attempt(2, 200, [1, 2, 3, 4, 5, 6], arrived=0.22),
        ]
        connecting = Delivery("s1", "state", 0.001, state="connecting")
        deliveries = [connecting, *chunks(1, 2, 3, 4, 5, 6), done()]
        outcome = check("SC-COMMIT-5", late, deliveries, PIPELINE)
        assert outcome.undecidable, outcome
        assert "without a data event" in outcome.observed

    def test_a_client_that_leaves_before_its_timeouts_is_still_judged(self):
        """Leaving the first attempt sooner than any of its timeouts is no premise the
        kit broke: the retry after it is judged (and here fails)."""
        hasty = [
            attempt(1, 200, [1, 2], arrived=0.01, ended=0.02, end="client_closed"),
            attempt(2, 200, [1, 2, 3, 4, 5, 6], arrived=0.05),
        ]
        connecting = Delivery("s1", "state", 0.001, state="connecting")
        assert not judge("SC-COMMIT-5", hasty, [connecting, *chunks(1, 2), done()], PIPELINE)
        no_data = [replace(hasty[0], events=()), hasty[1]]
        assert not judge("SC-COMMIT-5", no_data, [connecting, *chunks(1, 2), done()], PIPELINE)

    def test_a_truncation_reported_as_done_fails(self):
        """A stream missing its terminal event must not be reported complete."""
        atts = [attempt(1, 200, [1, 2, 3, 4, 5, 6])]
        assert not judge("SC-COMMIT-13", atts, [*chunks(1, 2, 3, 4, 5, 6), done()])
        assert judge("SC-COMMIT-13", atts, [*chunks(1, 2, 3, 4, 5, 6), error("truncated")])

    def test_an_other_error_is_not_a_truncation(self):
        """The clean-truncation case asks for the truncated kind specifically."""
        atts = [attempt(1, 200, [1, 2])]
        assert not judge("SC-COMMIT-11", atts, [*chunks(1, 2), error("other")])


class TestResume:
    first = attempt(1, 200, [1, 2, 3], end="aborted", ids=True, ended=0.01)

    def test_an_exact_resume_passes(self):
        """Resuming with the last delivered id and continuing exactly is conformant."""
        second = attempt(2, 200, [4, 5, 6], arrived=0.5, last_event_id="3", ids=True)
        assert judge(
            "SC-COMMIT-15",
            [self.first, second],
            [*chunks(1, 2, 3, ids=True, at=0.005), *chunks(4, 5, 6, at=0.6, ids=True), done(1.0)],
        )

    def test_a_resume_without_the_header_fails(self):
        """A reconnect without Last-Event-ID fails even if chunks look right."""
        second = attempt(2, 200, [1, 2, 3, 4, 5, 6], arrived=0.5, ids=True)
        deliveries = [
            *chunks(1, 2, 3, ids=True, at=0.005),
            *chunks(4, 5, 6, at=0.6, ids=True),
            done(1.0),
        ]
        assert not judge("SC-COMMIT-15", [self.first, second], deliveries)

    def test_a_replayed_duplicate_fails(self):
        """Passing on the server's replay delivers duplicates and fails."""
        second = attempt(2, 200, [1, 2, 3, 4, 5, 6], arrived=0.5, last_event_id="3", ids=True)
        deliveries = [
            *chunks(1, 2, 3, ids=True, at=0.005),
            *chunks(1, 2, 3, 4, 5, 6, at=0.6, ids=True),
            done(1.0),
        ]
        assert not judge("SC-COMMIT-17", [self.first, second], deliveries)


class TestRetryAfter:
    def _atts(self, gap: float) -> list[Attempt]:
        return [attempt(1, 429, ended=0.01), attempt(2, 200, [1, 2, 3, 4, 5], arrived=0.01 + gap)]

    def test_waiting_the_hint_passes(self):
        """A retry 1.05 s after 'Retry-After: 1' is conformant."""
        assert judge("SC-RETRY-29", self._atts(1.05), [*chunks(1, 2, 3, 4, 5, at=2), done(3)])

    def test_an_early_retry_fails(self):
        """A retry 0.2 s after 'Retry-After: 1' ignored the hint."""
        assert not judge("SC-RETRY-29", self._atts(0.2), [*chunks(1, 2, 3, 4, 5, at=2), done(3)])

    def test_unmeasured_noise_decides_too(self):
        """Without measured noise (the stated slacks) the same records pass and fail."""
        answer = [*chunks(1, 2, 3, 4, 5, at=2), done(3)]
        assert check("SC-RETRY-29", self._atts(1.05), answer, noise=Noise()).ok
        early = check("SC-RETRY-29", self._atts(0.2), answer, noise=Noise())
        assert not early.ok
        assert not early.undecidable

    def test_noise_smaller_than_the_flaw_is_absorbed(self):
        """A 200 ms block as the 429 ended: the flaw (the hint ignored) is half the hint,
        500 ms, so a correct wait still passes and an early one still fails."""
        answer = [*chunks(1, 2, 3, 4, 5, at=2), done(3)]
        for gap, ok in ((1.05, True), (0.2, False)):
            atts = self._atts(gap)
            noise = noisy(Evidence(tuple(atts), (), tuple(answer)), [(0.01, 0.2)]).noise
            outcome = check("SC-RETRY-29", atts, answer, noise=noise)
            assert outcome.ok is ok
            assert not outcome.undecidable

    def test_noise_as_large_as_the_flaw_is_undecidable(self):
        """A 600 ms block as the 429 ended: the client may have waited half the hint
        less than measured. Undecidable, never FAIL."""
        answer = [*chunks(1, 2, 3, 4, 5, at=2), done(3)]
        atts = self._atts(1.05)
        noise = noisy(Evidence(tuple(atts), (), tuple(answer)), [(0.01, 0.6)]).noise
        outcome = check("SC-RETRY-29", atts, answer, noise=noise)
        assert outcome.undecidable
        assert not outcome.ok

    def test_the_cap_bounds_what_is_required(self):
        """With the cap below the hint, waiting the cap is enough."""
        capped = replace(POLICY, retry_after_cap=0.5)
        assert judge(
            "SC-RETRY-29", self._atts(0.55), [*chunks(1, 2, 3, 4, 5, at=2), done(3)], policy=capped
        )


class TestBounded:
    def test_exactly_the_limit_and_the_last_status_passes(self):
        """Three attempts and gave_up carrying the last (502) status is conformant."""
        atts = [attempt(1, 503), attempt(2, 503), attempt(3, 502)]
        assert judge("SC-RETRY-35", atts, [error("gave_up", 502)], policy=PIPELINE)

    @pytest.mark.parametrize("count", [2, 4])
    def test_another_count_fails(self, count):
        """Fewer or more attempts than the profile's limit fail."""
        atts = [attempt(i, 503) for i in range(1, count)] + [attempt(count, 502)]
        assert not judge("SC-RETRY-35", atts, [error("gave_up", 502)], policy=PIPELINE)

    def test_surfacing_the_first_status_fails(self):
        """The error must carry the last status, not the first."""
        atts = [attempt(1, 503), attempt(2, 503), attempt(3, 502)]
        assert not judge("SC-RETRY-35", atts, [error("gave_up", 503)], policy=PIPELINE)


def test_mismatch_messages_name_the_duplicate():
    """A duplicate chunk is described as one in the observed text."""
    ev = quiet(Evidence((), (), tuple(chunks(1, 1))))
    outcome = delivered_exactly(ev, ["tok1", "tok2"])
    assert "duplicate" in outcome.observed


def test_ended_with_error_reports_the_status_mismatch():
    """An error with the wrong status says which status it carried."""
    ev = quiet(Evidence((), (), (error("non_retryable_status", 403),)))
    outcome = ended_with_error(ev, ["non_retryable_status"], status=401)
    assert not outcome.ok
    assert "403" in outcome.observed
