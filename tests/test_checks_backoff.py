"""The backoff checks' judgement on hand-built records: a correct client passes, each
mistake fails, and the statistics' false-failure bounds hold."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest

from conformance import Delivery, Evidence, get_case
from conformance._profiles import get_profile
from conformance.cases import backoff as bk
from conformance.cases.backoff import (
    Wait,
    envelope_outcome,
    first_delay_range,
    herd_limit,
    herd_outcome,
    jitter_outcome,
    range_probability,
    scan_bound,
    scan_max,
    wait_between,
)
from conformance.reference._config import BackoffConfig, ClientPolicy
from fake_servers import Attempt, Connection, SentEvent

EVENTSOURCE = get_profile("seed-eventsource").at("test")
FETCH = get_profile("seed-fetch").at("test")
PIPELINE = get_profile("seed-pipeline").at("test")
REACTION = 0.002  # what the server sees beyond the client's delay: reaction, reconnection


def tuned(case_id: str, policy: ClientPolicy = EVENTSOURCE) -> ClientPolicy:
    tune = get_case(case_id).tune
    return tune(policy) if tune else policy


def attempt(
    arrived: float,
    status: int = 503,
    *,
    path: str = "/v1/stream",
    number: int = 1,
    lasted: float = 0.001,
) -> Attempt:
    events = () if status != 200 else (SentEvent(1, "data", None, "tok", arrived + lasted),)
    return Attempt(
        seq=number,
        number=number,
        method="GET",
        path=path,
        query="",
        headers=(),
        body_size=0,
        body_sha256="",
        arrived_at=arrived,
        step=number - 1,
        status=status,
        events=events,
        ended_at=arrived + lasted,
        end="completed",
    )


def retried(
    delays: Sequence[float], *, path: str = "/v1/stream", start: float = 0.0
) -> list[Attempt]:
    """Failures separated by ``delays`` (each seen REACTION after the failure ended), then a
    stream."""
    out = [attempt(start, path=path)]
    for n, delay in enumerate(delays, start=2):
        prev = out[-1]
        assert prev.ended_at is not None
        status = 200 if n == len(delays) + 1 else 503
        out.append(attempt(prev.ended_at + REACTION + delay, status, path=path, number=n))
    return out


def done(stream: str = "s1", at: float = 100.0) -> Delivery:
    return Delivery(stream, "done", at)


def judge(
    case_id: str,
    attempts: Sequence[Attempt],
    deliveries: Sequence[Delivery] = (),
    connections: Sequence[Connection] = (),
    policy: ClientPolicy | None = None,
) -> bool:
    case = get_case(case_id)
    policy = policy if policy is not None else tuned(case_id)
    ev = Evidence(tuple(attempts), tuple(connections), tuple(deliveries or [done()]))
    return case.check(ev, policy).ok


def lows(backoff: BackoffConfig, count: int, share: float = 0.0) -> list[float]:
    """Delays at ``share`` of each envelope, retries 1..count."""
    out = []
    for n in range(1, count + 1):
        low, high = backoff.envelope(n)
        out.append(low + share * (high - low))
    return out


class TestWaits:
    def test_the_ceiling_counts_from_the_arrival_and_the_gap_from_the_end(self):
        """The ceiling spans the failed request's answer; the gap starts at its end."""
        wait = wait_between(attempt(1.0, lasted=0.05), attempt(1.5, number=2))
        assert wait.ceiling == pytest.approx(0.5)
        assert wait.measured == pytest.approx(0.45)

    def test_a_scripted_hold_is_not_counted_as_waiting(self):
        """Time the server held its answer back is taken off the ceiling."""
        wait = wait_between(attempt(1.0, lasted=0.3), attempt(1.5, number=2), held=0.3)
        assert wait.ceiling == pytest.approx(0.2)


class TestEnvelope:
    backoff = tuned("SC-BACKOFF-1").backoff

    def test_delays_inside_every_envelope_pass(self):
        """Delays at the bottom, middle and top of each envelope are conformant."""
        for share in (0.0, 0.5, 1.0):
            atts = retried(lows(self.backoff, 5, share))
            assert judge("SC-BACKOFF-1", atts), share

    def test_a_delay_below_its_envelope_fails_without_slack(self):
        """Retrying 1 ms before the lower end of retry 4 fails: lower bounds are strict."""
        delays = lows(self.backoff, 5)
        delays[3] -= 0.001 + REACTION + 0.001  # the ceiling also covers the answer
        assert not judge("SC-BACKOFF-1", retried(delays))

    def test_constant_delay_fails(self):
        """Every retry after the base delay (no exponential growth) fails at retry 2."""
        base = self.backoff.base
        outcome = envelope_outcome(retried([base] * 5), self.backoff, 5)
        assert not outcome.ok
        assert outcome.observed.startswith("retry 2:")

    def test_a_delay_far_above_its_envelope_fails(self):
        """A retry later than the envelope plus UPPER_BOUND_SLACK fails."""
        delays = lows(self.backoff, 5)
        delays[2] = self.backoff.envelope(3)[1] + 0.6
        assert not judge("SC-BACKOFF-1", retried(delays))

    def test_a_retry_that_never_came_fails(self):
        """Stopping after three of five retries fails, naming the missing retry."""
        atts = retried(lows(self.backoff, 5))[:4]
        outcome = envelope_outcome(atts, self.backoff, 5)
        assert not outcome.ok
        assert "retry 4 never came" in "\n".join((outcome.observed, *outcome.details))

    def test_a_stream_that_did_not_complete_fails(self):
        """Right delays but no completed stream fail."""
        atts = retried(lows(self.backoff, 5))
        assert not judge("SC-BACKOFF-1", atts, [Delivery("s1", "error", 1.0, error="gave_up")])

    def test_the_pipeline_is_judged_on_its_two_retries(self):
        """With max_attempts 3, two retries inside their envelopes are conformant."""
        policy = tuned("SC-BACKOFF-1", PIPELINE)
        assert judge("SC-BACKOFF-1", retried(lows(policy.backoff, 2)), policy=policy)


class TestCaps:
    def test_both_profiles_pass_at_their_envelopes(self):
        """Eleven retries at their envelopes' lower ends pass for EventSource and fetch."""
        for policy in (tuned("SC-BACKOFF-3"), tuned("SC-BACKOFF-4", FETCH)):
            assert judge("SC-BACKOFF-3", retried(lows(policy.backoff, 11)), policy=policy)

    def test_caps_that_never_widen_fail(self):
        """Staying at the first cap from retry 6 on fails."""
        policy = tuned("SC-BACKOFF-3")
        first_cap = policy.backoff.caps[0][1]
        delays = [*lows(policy.backoff, 5), *[first_cap] * 6]
        assert not judge("SC-BACKOFF-3", retried(delays), policy=policy)

    def test_no_cap_fails(self):
        """Doubling past the cap (base * 2^(n-1)) fails once it clears the slack."""
        policy = tuned("SC-BACKOFF-3")
        delays = [policy.backoff.base * 2 ** (n - 1) for n in range(1, 12)]
        assert not judge("SC-BACKOFF-3", retried(delays), policy=policy)

    def test_the_tuning_keeps_the_caps_apart(self):
        """At the tuned timing the last cap's lower end clears the first cap's upper end."""
        for policy in (tuned("SC-BACKOFF-3"), tuned("SC-BACKOFF-4", FETCH)):
            b = policy.backoff
            assert b.envelope(11)[0] - b.envelope(5)[1] >= 0.02
            uncapped = b.base * 2**10  # retry 11 without a cap
            assert uncapped > b.envelope(11)[1] + bk.UPPER_BOUND_SLACK

    def test_the_pipeline_is_not_applicable(self):
        """A single cap has nothing to widen."""
        assert get_case("SC-BACKOFF-3").applies(PIPELINE, "get") is not None


class TestReset:
    policy = tuned("SC-BACKOFF-5")
    first_path, second_path = bk.RESET_PATHS

    def evidence(self, second_delay: float) -> list[Attempt]:
        first = retried(lows(self.policy.backoff, 2, 0.5), path=self.first_path)
        start = first[-1].arrived_at + 0.1
        second = retried([second_delay], path=self.second_path, start=start)
        return [*first, *second]

    def test_starting_over_passes(self):
        """The second stream's first retry inside retry 1's envelope is conformant."""
        low, high = self.policy.backoff.envelope(1)
        for delay in (low, high):
            assert judge("SC-BACKOFF-5", self.evidence(delay), [done("s1"), done("s2")])

    def test_carrying_the_count_over_fails(self):
        """A first retry at retry 3's (or 4's) envelope fails: the count was not reset."""
        for n in (3, 4):
            delay = self.policy.backoff.envelope(n)[0]
            assert not judge("SC-BACKOFF-5", self.evidence(delay), [done("s1"), done("s2")])

    def test_the_tuning_separates_the_envelopes_beyond_the_slack(self):
        """Retry 3's lower end lies RESET_GAP above retry 1's upper end, beyond QUIET_SLACK."""
        b = self.policy.backoff
        assert b.envelope(3)[0] - b.envelope(1)[1] == pytest.approx(bk.RESET_GAP)
        assert bk.RESET_GAP > bk.QUIET_SLACK

    def test_a_first_stream_that_failed_fails(self):
        """Without two completed streams there is no reset to judge."""
        ev = self.evidence(self.policy.backoff.envelope(1)[0])
        assert not judge("SC-BACKOFF-5", ev, [Delivery("s1", "error", 1.0), done("s2")])


class TestRetryAfter:
    hint = bk._hint(EVENTSOURCE)

    def test_waiting_the_hint_passes(self):
        """Retry 2 after the whole hint is conformant."""
        atts = retried([EVENTSOURCE.backoff.envelope(1)[0], self.hint])
        assert judge("SC-BACKOFF-7", atts, policy=EVENTSOURCE)

    def test_taking_the_shorter_backoff_fails(self):
        """Retry 2 after its own backoff, ignoring the longer hint, fails."""
        b = EVENTSOURCE.backoff
        atts = retried([b.envelope(1)[0], b.envelope(2)[1]])
        assert not judge("SC-BACKOFF-7", atts, policy=EVENTSOURCE)

    def test_the_hint_exceeds_the_backoff(self):
        """The hint is longer than retry 2's backoff, so the case tests what it says."""
        assert self.hint > EVENTSOURCE.backoff.envelope(2)[1]
        assert get_case("SC-BACKOFF-7").applies(EVENTSOURCE, "get") is None
        no_hints = replace(EVENTSOURCE, retry_after=False)
        assert get_case("SC-BACKOFF-7").applies(no_hints, "get") is not None


def uniform_waits(rng: random.Random, spread: tuple[float, float], n: int = 50) -> list[Wait]:
    low, high = spread
    waits = []
    for _ in range(n):
        delay = low + rng.random() * (high - low)
        waits.append(Wait(delay + 0.003, delay + REACTION))
    return waits


class TestJitter:
    spread = first_delay_range(tuned("SC-BACKOFF-9").backoff)

    def test_the_tuned_range_is_wide_against_noise(self):
        """The jitter range is JITTER_SPAN wide at the tuned timing, for every profile."""
        for policy in (EVENTSOURCE, FETCH, PIPELINE):
            low, high = first_delay_range(tuned("SC-BACKOFF-9", policy).backoff)
            assert high - low == pytest.approx(bk.JITTER_SPAN)

    def test_uniform_jitter_passes(self):
        """Many runs of a correct client's delays pass (J1 and J2 fail with p < 4e-8)."""
        rng = random.Random(7)
        assert all(
            jitter_outcome(uniform_waits(rng, self.spread), self.spread).ok for _ in range(2000)
        )

    def test_no_jitter_fails(self):
        """Every delay at the exponential (no jitter) fails: none reaches the top."""
        low, _ = self.spread
        waits = [Wait(low + 0.01, low + 0.005)] * 50
        outcome = jitter_outcome(waits, self.spread)
        assert not outcome.ok
        assert "top" in outcome.observed

    def test_jitter_twice_as_wide_fails(self):
        """0-100 % jitter instead of the declared 0-50 % overshoots the range."""
        low, high = self.spread
        rng = random.Random(3)
        wide = uniform_waits(rng, (low, low + 2 * (high - low)))
        outcome = jitter_outcome(wide, self.spread)
        assert not outcome.ok
        assert "overshoot" in outcome.observed

    def test_identical_delays_fail_wherever_they_fall(self):
        """A herd in lockstep (one shared delay) misses either the top or the bottom."""
        low, high = self.spread
        for share in (0.1, 0.6, 0.95):
            delay = low + share * (high - low)
            assert not jitter_outcome([Wait(delay, delay)] * 50, self.spread).ok

    def test_a_few_late_outliers_are_tolerated(self):
        """Up to JITTER_OUTLIERS of the delays may be late by scheduling noise."""
        rng = random.Random(11)
        waits = uniform_waits(rng, self.spread)
        late = [replace(w, measured=w.measured + 0.2) for w in waits[:5]]
        assert jitter_outcome(late + waits[5:], self.spread).ok
        later = [replace(w, measured=w.measured + 0.2) for w in waits[:20]]
        assert not jitter_outcome(later + waits[20:], self.spread).ok

    def test_the_case_reads_one_wait_per_client(self):
        """The case check pairs each client's two attempts; a client that never retried fails."""
        rng = random.Random(5)
        low, high = self.spread
        atts = []
        for i in range(bk.JITTER_CLIENTS):
            delay = low + rng.random() * (high - low)
            atts.extend(retried([delay], path=bk._jitter_path(i), start=i * 0.003))
        assert judge("SC-BACKOFF-9", atts)
        assert not judge("SC-BACKOFF-9", atts[:-1])


class TestScanStatistics:
    def test_scan_max_counts_the_busiest_window(self):
        """The busiest half-open window is found, whatever the order."""
        assert scan_max([0.0, 0.05, 0.09, 0.1, 0.5], 0.1) == 3
        assert scan_max([0.5, 0.1, 0.0], 0.2) == 2
        assert scan_max([], 0.1) == 0

    def test_scan_max_matches_brute_force(self):
        """On random samples the sweep agrees with counting every window."""
        rng = random.Random(1)
        for _ in range(200):
            times = [rng.random() for _ in range(rng.randint(1, 30))]
            brute = max(sum(1 for t in times if s <= t < s + 0.15) for s in times)
            assert scan_max(times, 0.15) == brute

    def test_the_scan_bound_is_an_upper_bound(self):
        """Monte Carlo frequencies stay below the bound (n=50, w=0.2)."""
        rng = random.Random(2)
        trials = 4000
        for k in (18, 20, 22):
            hits = sum(scan_max([rng.random() for _ in range(50)], 0.2) >= k for _ in range(trials))
            assert hits / trials <= scan_bound(50, 0.2, k)

    def test_the_herd_limit_is_below_the_risk(self):
        """The limit for 50 clients and a fifth of the range fails with p < 1e-7."""
        limit = herd_limit(50, bk.HERD_WINDOW)
        assert scan_bound(50, bk.HERD_WINDOW, limit) < bk.HERD_RISK
        assert scan_bound(50, bk.HERD_WINDOW, limit - 1) >= bk.HERD_RISK
        assert limit == 31

    def test_the_range_probability_matches_simulation(self):
        """P(50 uniform points within 0.9) agrees with simulation; within 0.6 it is < 1e-9."""
        rng = random.Random(4)
        trials = 20000
        hits = 0
        for _ in range(trials):
            pts = [rng.random() for _ in range(50)]
            hits += max(pts) - min(pts) < 0.9
        assert hits / trials == pytest.approx(range_probability(50, 0.9), abs=0.01)
        assert range_probability(50, bk.HERD_RANGE) < 1e-9


class TestHerd:
    policy = tuned("SC-BACKOFF-11")
    spread = first_delay_range(policy.backoff)

    def arrivals(self, delays: Sequence[float], cut: float = 1.0) -> list[float]:
        return [cut + 0.01 + d for d in delays]

    def test_uniform_reconnects_pass(self):
        """Reconnects drawn uniformly over the range pass, run after run."""
        rng = random.Random(9)
        low, high = self.spread
        for _ in range(500):
            delays = [low + rng.random() * (high - low) for _ in range(50)]
            assert herd_outcome(self.arrivals(delays), 50, self.spread, 1.0).ok

    def test_lockstep_fails_even_when_the_server_spreads_it(self):
        """One shared delay fails, even with 2 ms of queueing between reconnects."""
        delays = [self.spread[0] + 0.002 * i for i in range(50)]
        outcome = herd_outcome(self.arrivals(delays), 50, self.spread, 1.0)
        assert not outcome.ok
        assert outcome.observed.startswith("bunched")

    def test_half_the_herd_in_one_window_fails(self):
        """Reconnects spread over the range but with 35 in one window fail."""
        low, high = self.spread
        delays = [low + (high - low) * i / 14 for i in range(15)] + [low + 0.01] * 35
        assert not herd_outcome(self.arrivals(delays), 50, self.spread, 1.0).ok

    def test_missing_reconnects_fail(self):
        """A client that never reconnected fails the herd."""
        low, high = self.spread
        delays = [low + (high - low) * i / 48 for i in range(49)]
        outcome = herd_outcome(self.arrivals(delays), 50, self.spread, 1.0)
        assert not outcome.ok
        assert "49 of 50" in outcome.observed

    def test_the_case_needs_the_cut(self):
        """Without the streams open at the cut, the scenario did not happen: fail."""
        assert not judge("SC-BACKOFF-11", [], policy=self.policy)

    def test_the_case_reads_reconnects_per_client(self):
        """The case check takes each herd path's second attempt as its reconnect."""
        low, high = self.spread
        cut = 1.0
        atts: list[Attempt] = []
        conns: list[Connection] = []
        for i in range(bk.HERD_CLIENTS):
            path = bk._herd_path(i)
            atts.append(attempt(0.1, 200, path=path, lasted=0.9))
            delay = low + (high - low) * i / (bk.HERD_CLIENTS - 1)
            atts.append(attempt(cut + 0.01 + delay, 200, path=path, number=2))
            conns.append(
                Connection(i, 0.1, ("127.0.0.1", 1000 + i), "", closed_at=cut, closed_by="offline")
            )
        assert judge("SC-BACKOFF-11", atts, connections=conns, policy=self.policy)
        same = [replace(a, arrived_at=cut + 0.5) if a.number == 2 else a for a in atts]
        assert not judge("SC-BACKOFF-11", same, connections=conns, policy=self.policy)


class TestRegistration:
    def test_rows_get_and_post_ids(self):
        """Rows 1-5 exist for GET (odd) and POST (even); the herd is GET only."""
        for n in range(1, 11):
            case = get_case(f"SC-BACKOFF-{n}")
            assert case.transport == ("get" if n % 2 else "post")
            assert case.level.value == "MUST"
        assert get_case("SC-BACKOFF-11").transport == "get"
        with pytest.raises(KeyError):
            get_case("SC-BACKOFF-12")

    def test_every_tuned_case_turns_the_breaker_off(self):
        """Tuned cases measure backoff only: no breaker, no first-chunk timer."""
        for n in (1, 3, 5, 9, 11):
            for policy in (EVENTSOURCE, FETCH, PIPELINE):
                t = tuned(f"SC-BACKOFF-{n}", policy)
                assert t.breaker.kind == "none"
                assert t.first_chunk_timeout is None
                assert t.backoff.jitter == policy.backoff.jitter
