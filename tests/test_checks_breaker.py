"""The breaker checks' judgement on hand-built records: a correct client passes,
each mistake fails, the timing bounds sit where docs/timing-breaker.md says, and the
harness's measured noise makes a check undecidable, never a false FAIL.

Evidence carries quiet measured noise unless a test says otherwise (the runner's path);
``Noise()`` (unmeasured) keeps the stated 0.5 s slack."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest
from _records import request_record
from test_timing import BLOCK, noisy, quiet

from conformance import Delivery, Evidence, Outcome, get_case
from conformance._profiles import get_profile
from conformance.cases import breaker
from conformance.cases._common import BREAK_HOLD, PATH
from conformance.reference import ClientPolicy
from conformance.timing import AT_ONCE, UNMEASURED_SLACK, Noise
from fake_servers import Attempt, SentEvent

SEED = get_profile("seed-eventsource").at("test")
PIPELINE = get_profile("seed-pipeline").at("test")
OTHER, CANARY = breaker.OTHER, breaker.CANARY
K = SEED.breaker.threshold
TOKENS = ("a", "b", "c")


def policy_for(case_id: str, base: ClientPolicy = SEED) -> ClientPolicy:
    """The policy the runner judges the case by: the profile's, tuned by the case."""
    case = get_case(case_id)
    return case.tune(base) if case.tune is not None else base


def attempt(
    path: str,
    at: float,
    *,
    status: int = 503,
    number: int = 1,
    events: int = 0,
    lasts: float = 0.002,
    end: str = "completed",
) -> Attempt:
    sent = tuple(
        SentEvent(i, "data", None, TOKENS[i - 1], at + 0.001 * i) for i in range(1, events + 1)
    )
    return request_record(
        0,
        number=number,
        path=path,
        arrived_at=at,
        step=0,
        status=status,
        headers_at=at + 0.001,
        events=sent,
        ended_at=at + lasts,
        end=end,
    )


def failures(path: str, n: int, start: float = 0.0, gap: float = 0.01) -> list[Attempt]:
    return [attempt(path, start + i * gap, number=i + 1) for i in range(n)]


def answered(stream: str, at: float, count: int = 3) -> list[Delivery]:
    """The stream delivered the answer's chunks, then done."""
    chunks = [Delivery(stream, "chunk", at + 0.001 * i, data=TOKENS[i]) for i in range(count)]
    return [*chunks, Delivery(stream, "done", at + 0.01)]


def error(stream: str, kind: str, at: float) -> Delivery:
    return Delivery(stream, "error", at, error=kind)  # type: ignore[arg-type]


def check(
    case_id: str,
    attempts: Sequence[Attempt],
    deliveries: Sequence[Delivery],
    base: ClientPolicy = SEED,
    noise: Noise | None = None,
) -> Outcome:
    """The case's outcome, with quiet measured noise over the records unless ``noise``."""
    ev = Evidence(tuple(attempts), (), tuple(deliveries))
    ev = quiet(ev) if noise is None else replace(ev, noise=noise)
    return get_case(case_id).check(ev, policy_for(case_id, base))


def judge(
    case_id: str,
    attempts: Sequence[Attempt],
    deliveries: Sequence[Delivery],
    base: ClientPolicy = SEED,
    noise: Noise | None = None,
) -> bool:
    outcome = check(case_id, attempts, deliveries, base, noise)
    if noise is None:
        assert not outcome.undecidable, outcome  # quiet noise decides
    return outcome.ok


def failed(outcome: Outcome) -> bool:
    """A decisive FAIL: not ok, and not for the harness's noise."""
    return not outcome.ok and not outcome.undecidable


def block_before(at: float, atts: Sequence[Attempt], deliveries: Sequence[Delivery]) -> Noise:
    """Quiet noise over the records, but for the server loop blocked BLOCK until just
    after ``at``: the stamp at ``at`` may trail what it records by that much."""
    ev = Evidence(tuple(atts), (), tuple(deliveries))
    return noisy(ev, [(at - 0.005, BLOCK)], source="server").noise


def opened(extra_gap: float, cooldown: float) -> list[Attempt]:
    """K failures, then the probe ``cooldown + extra_gap`` after the last one arrived."""
    atts = failures(PATH, K)
    probe_at = atts[-1].arrived_at + cooldown + extra_gap
    return [*atts, attempt(PATH, probe_at, status=200, number=K + 1, events=3)]


class TestOpens:
    cooldown = policy_for("SC-BREAKER-1").breaker.cooldown

    def test_silence_for_the_cooldown_then_one_probe_passes(self) -> None:
        """K failures, a cooldown of silence, a probe that delivers the answer: conformant."""
        assert judge("SC-BREAKER-1", opened(0.01, self.cooldown), answered("s1", 1.0))

    def test_a_request_during_the_cooldown_fails(self) -> None:
        """A request 0.05 s after the K-th failure means the breaker never opened."""
        atts = opened(0.05 - self.cooldown, self.cooldown)
        assert not judge("SC-BREAKER-1", atts, answered("s1", 1.0))

    @pytest.mark.parametrize(("early", "ok"), [(0.001, True), (0.005, False)])
    def test_the_lower_bound_allows_only_clock_granularity(self, early: float, ok: bool) -> None:
        """Up to the lower slack early (2 ms of clock granularity plus the server's quiet
        lag) passes; 5 ms early fails."""
        assert judge("SC-BREAKER-1", opened(-early, self.cooldown), answered("s1", 1.0)) is ok

    def test_a_probe_whose_stamp_may_trail_is_undecidable(self) -> None:
        """A correct probe stamped just after a 200 ms server block: it may have arrived
        that much earlier, inside the cooldown. Undecidable, never FAIL."""
        atts = opened(0.01, self.cooldown)
        deliveries = answered("s1", 1.0)
        outcome = check(
            "SC-BREAKER-1",
            atts,
            deliveries,
            noise=block_before(atts[-1].arrived_at, atts, deliveries),
        )
        assert outcome.undecidable
        assert not outcome.ok

    def test_a_request_during_the_cooldown_fails_under_the_same_block(self) -> None:
        """No cooldown at all fails decisively, whatever the stamp's lag: the most the
        client can have waited is still short of the cooldown."""
        atts = opened(0.05 - self.cooldown, self.cooldown)
        deliveries = answered("s1", 1.0)
        noise = block_before(atts[-1].arrived_at, atts, deliveries)
        assert failed(check("SC-BREAKER-1", atts, deliveries, noise=noise))

    def test_an_extra_request_fails(self) -> None:
        """A second probe after the successful one fails the request count."""
        atts = opened(0.01, self.cooldown)
        atts.append(attempt(PATH, 2.0, status=200, number=K + 2, events=3))
        assert not judge("SC-BREAKER-1", atts, answered("s1", 1.0))

    def test_a_failed_probe_needs_another_cooldown(self) -> None:
        """SC-BREAKER-7: the request after a failed probe waits a second cooldown."""
        cooldown = policy_for("SC-BREAKER-7").breaker.cooldown
        atts = failures(PATH, K)
        probe = attempt(PATH, 0.05 + cooldown, number=K + 1)
        late = attempt(PATH, probe.arrived_at + cooldown + 0.01, status=200, events=3)
        early = attempt(PATH, probe.arrived_at + 0.02, status=200, events=3)
        assert judge("SC-BREAKER-7", [*atts, probe, late], answered("s1", 2.0))
        assert not judge("SC-BREAKER-7", [*atts, probe, early], answered("s1", 2.0))


class TestSingleProbe:
    cooldown = policy_for("SC-BREAKER-3").breaker.cooldown

    def wave(self) -> list[Attempt]:
        return [attempt(f"{PATH}/w{i}", 0.001 * i, lasts=0.1) for i in range(10)]

    def retry(self, i: int, at: float) -> Attempt:
        return attempt(f"{PATH}/w{i}", at, number=2, lasts=0.1)

    def test_one_probe_then_the_others_pass(self) -> None:
        """One retry after the cooldown, the next only after it was answered: conformant."""
        probe_at = 0.001 + self.cooldown + 0.01
        atts = [*self.wave(), self.retry(3, probe_at), self.retry(4, probe_at + 0.2)]
        assert judge("SC-BREAKER-3", atts, [])

    def test_a_crowd_of_probes_fails(self) -> None:
        """Ten retries within milliseconds of each other after the cooldown fail."""
        probe_at = 0.001 + self.cooldown + 0.01
        atts = [*self.wave(), *(self.retry(i, probe_at + 0.002 * i) for i in range(10))]
        assert not judge("SC-BREAKER-3", atts, [])

    def test_a_retry_during_the_cooldown_fails(self) -> None:
        """A retry before the cooldown elapsed fails even when alone."""
        assert not judge("SC-BREAKER-3", [*self.wave(), self.retry(0, 0.2)], [])

    def test_a_wave_that_arrived_late_counts_from_a_possible_connect_timeout(self) -> None:
        """The first requests reached the server 0.1 s after the connect timeout (test
        timing keeps the profile's 10 s): a connect begun at the start could have failed
        at its timeout and opened the breaker, so a probe a cooldown after that passes;
        one before it still fails."""
        timeout = policy_for("SC-BREAKER-3").connect_timeout
        assert timeout == 10.0
        late = [attempt(f"{PATH}/w{i}", timeout + 0.1 + 0.001 * i, lasts=0.1) for i in range(10)]
        assert judge("SC-BREAKER-3", [*late, self.retry(3, timeout + self.cooldown + 0.01)], [])
        assert not judge("SC-BREAKER-3", [*late, self.retry(3, timeout + 0.1)], [])

    def test_no_probe_or_no_waiters_fails(self) -> None:
        """Without a probe, or with fewer than two waiting streams, the case fails."""
        assert not judge("SC-BREAKER-3", self.wave(), [])
        one = [attempt(f"{PATH}/w0", 0.0, lasts=0.1), self.retry(0, 1.0)]
        assert not judge("SC-BREAKER-3", one, [])


def canary_tail(
    start: float, *, s2_admitted: bool = True, canary_ok: bool = True
) -> tuple[list[Attempt], list[Delivery]]:
    """s2's K-1 failures and its hanging K-th request, then the canary."""
    atts: list[Attempt] = []
    deliveries: list[Delivery] = []
    if s2_admitted:
        atts += failures(OTHER, K - 1, start)
        atts.append(attempt(OTHER, start + 0.1, status=200, number=K, end="client_closed"))
    else:
        deliveries.append(error("s2", "circuit_open", start))
    if canary_ok:
        atts.append(attempt(CANARY, start + 0.2, status=200, events=3))
        deliveries += answered("canary", start + 0.21)
    else:
        deliveries.append(error("canary", "circuit_open", start + 0.2))
    return atts, deliveries


class TestClosedAgain:
    cooldown = policy_for("SC-BREAKER-5").breaker.cooldown

    def judge(self, **tail: bool) -> bool:
        atts, deliveries = canary_tail(2.0, **tail)
        return judge(
            "SC-BREAKER-5",
            [*opened(0.01, self.cooldown), *atts],
            [*answered("s1", 1.0), *deliveries],
        )

    def test_closed_and_reset_passes(self) -> None:
        """After the good probe a new stream runs K-1 failures and the canary gets through."""
        assert self.judge()

    def test_a_refused_new_stream_fails(self) -> None:
        """A new stream refused after the good probe: the breaker never closed."""
        assert not self.judge(s2_admitted=False)

    def test_a_refused_canary_fails(self) -> None:
        """A canary refused after K-1 more failures: closing did not reset the count."""
        assert not self.judge(canary_ok=False)

    def test_success_resets_the_count(self) -> None:
        """SC-BREAKER-11: K-1 failures, the answer, K-1 failures, and the canary is admitted."""
        s1 = [*failures(PATH, K - 1), attempt(PATH, 0.1, status=200, number=K, events=3)]
        for canary_ok in (True, False):
            atts, deliveries = canary_tail(1.0, canary_ok=canary_ok)
            ok = judge("SC-BREAKER-11", [*s1, *atts], [*answered("s1", 0.2), *deliveries])
            assert ok is canary_ok


class TestFailFast:
    s1 = failures(PATH, K)

    def test_circuit_open_without_a_request_passes(self) -> None:
        """After K failures a new stream gets circuit_open and sends nothing."""
        assert judge("SC-BREAKER-9", self.s1, [error("s2", "circuit_open", 0.2)])

    def test_a_new_stream_that_gets_through_fails(self) -> None:
        """A new stream reaching the server while open fails."""
        atts = [*self.s1, attempt(OTHER, 1.3, status=200, events=3)]
        assert not judge("SC-BREAKER-9", atts, answered("s2", 1.31))

    def test_another_error_kind_fails(self) -> None:
        """Failing without a request, but not as circuit_open, is not the breaker's error."""
        assert not judge("SC-BREAKER-9", self.s1, [error("s2", "gave_up", 0.2)])

    def test_before_the_kth_failure_it_proves_nothing(self) -> None:
        """If fewer than K failures were answered before the error, the case fails."""
        assert not judge("SC-BREAKER-9", self.s1, [error("s2", "circuit_open", 0.035)])


def midstream(n: int, canary_delay: float | None) -> tuple[list[Attempt], list[Delivery]]:
    """n streams that each fail after two chunks, then the canary ``canary_delay`` later."""
    atts: list[Attempt] = []
    deliveries: list[Delivery] = []
    for i in range(1, n + 1):
        start = 0.1 * i
        atts.append(attempt(PATH, start, status=200, number=i, events=2, end="aborted"))
        deliveries += answered(f"m{i}", start + 0.01, count=2)[:-1]
        deliveries.append(error(f"m{i}", "truncated", start + 0.02))
    last = 0.1 * n + 0.02
    if canary_delay is None:
        deliveries.append(error("canary", "circuit_open", last + 0.001))
    else:
        atts.append(attempt(CANARY, last + canary_delay, status=200, events=3))
        deliveries += answered("canary", last + canary_delay + 0.01)
    return atts, deliveries


class TestMidstream:
    @pytest.mark.parametrize(
        ("case_id", "base", "n"),
        [
            ("SC-BREAKER-13", SEED, K),
            ("SC-BREAKER-21", PIPELINE, PIPELINE.breaker.min_throughput),
        ],
    )
    def test_the_canary_must_connect_at_once(
        self, case_id: str, base: ClientPolicy, n: int
    ) -> None:
        """Admitted within AT_ONCE of half the cooldown (plus the quiet path floor) passes;
        later or refused fails."""
        cooldown = policy_for(case_id, base).breaker.cooldown
        prompt = AT_ONCE * cooldown / 2
        assert judge(case_id, *midstream(n, 0.005), base=base)
        assert judge(case_id, *midstream(n, prompt), base=base)
        assert not judge(case_id, *midstream(n, prompt + 0.1), base=base)
        assert not judge(case_id, *midstream(n, None), base=base)

    @pytest.mark.parametrize(
        ("case_id", "base", "n"),
        [
            ("SC-BREAKER-13", SEED, K),
            ("SC-BREAKER-21", PIPELINE, PIPELINE.breaker.min_throughput),
        ],
    )
    def test_unmeasured_noise_allows_the_stated_slack(
        self, case_id: str, base: ClientPolicy, n: int
    ) -> None:
        """Without measured noise the canary may be UNMEASURED_SLACK later, not more."""
        unmeasured = Noise()
        cooldown = policy_for(case_id, base).breaker.cooldown
        prompt = AT_ONCE * cooldown / 2 + UNMEASURED_SLACK
        assert judge(case_id, *midstream(n, prompt - 0.01), base=base, noise=unmeasured)
        outcome = check(case_id, *midstream(n, prompt + 0.01), base=base, noise=unmeasured)
        assert failed(outcome)

    def test_a_canary_the_harness_delayed_is_undecidable(self) -> None:
        """A canary the client loop held back (a block as long as a cooldown): as late as
        an open breaker's, so undecidable, never FAIL."""
        cooldown = policy_for("SC-BREAKER-13").breaker.cooldown
        atts, deliveries = midstream(K, cooldown + 0.005)
        last = 0.1 * K + 0.02
        ev = Evidence(tuple(atts), (), tuple(deliveries))
        outcome = check(
            "SC-BREAKER-13", atts, deliveries, noise=noisy(ev, [(last + 0.002, cooldown)]).noise
        )
        assert outcome.undecidable
        assert not outcome.ok

    def test_a_retried_stream_fails(self) -> None:
        """A mid-stream failure that is retried breaks the premise (and the commit)."""
        atts, deliveries = midstream(K, 0.005)
        atts.append(attempt(PATH, 0.15, status=200, number=K + 1, events=3))
        assert not judge("SC-BREAKER-13", atts, deliveries)

    @staticmethod
    def _lost_first() -> tuple[list[Attempt], list[Delivery]]:
        """m1's two chunks never reached the consumer, the break BREAK_HOLD after them:
        the client retried m1 (a failure before the first chunk, to it) and the retry's
        chunks were delivered; the other streams as a correct client makes them."""
        atts, deliveries = midstream(K, 0.005)
        atts[0] = attempt(PATH, 0.1, status=200, events=2, lasts=0.002 + BREAK_HOLD, end="aborted")
        atts.append(attempt(PATH, 0.16, status=200, number=K + 1, events=2))
        kept = [d for d in deliveries if not (d.stream == "m1" and d.kind == "chunk")]
        return atts, [*kept, *answered("m1", 0.17, count=2)[:-1]]

    def test_chunks_a_quiet_client_dropped_before_the_break_fail(self) -> None:
        atts, deliveries = self._lost_first()
        outcome = check("SC-BREAKER-13", atts, deliveries)
        assert failed(outcome), outcome

    def test_a_break_a_starved_consumer_may_have_lost_the_chunks_to_is_undecidable(
        self,
    ) -> None:
        """Chromium's fetch drops the chunks a page had not read when the reset comes:
        with the consumer's loop blocked past the hold, m1's retry may be right."""
        atts, deliveries = self._lost_first()
        ev = noisy(Evidence(tuple(atts), (), tuple(deliveries)), [(0.1, 0.06)])
        outcome = check("SC-BREAKER-13", atts, deliveries, noise=ev.noise)
        assert outcome.undecidable, outcome
        assert "premise" in outcome.expected


def planned(
    plan_for: breaker.Plan, *, canary_ok: bool, refused: int | None = None
) -> tuple[list[Attempt], list[Delivery]]:
    """Records of a plan as a correct client makes them; stream ``refused`` fails fast."""
    atts: list[Attempt] = []
    deliveries: list[Delivery] = []
    streams = [item for item in plan_for if not isinstance(item, float)]
    for i, steps in enumerate(streams, start=1):
        if i == refused:
            deliveries.append(error(f"p{i}", "circuit_open", i))
            continue
        atts += [attempt(f"{PATH}/{i}", i + 0.01 * n, number=n + 1) for n in range(len(steps))]
        deliveries.append(error(f"p{i}", "gave_up", i + 0.5))
    if canary_ok:
        atts.append(attempt(CANARY, 50.0, status=200, events=3))
        deliveries += answered("canary", 50.01)
    else:
        deliveries.append(error("canary", "circuit_open", 50.0))
    return atts, deliveries


class TestRatio:
    def test_the_plans_reach_exactly_what_they_claim(self) -> None:
        """Opening plan: min-throughput calls, half failing, the last one a failure."""
        plan = breaker._planned(breaker._plan_opens(PIPELINE))
        calls = [type(step).__name__ for steps in plan for step in steps]
        assert len(calls) == PIPELINE.breaker.min_throughput
        assert calls.count("Respond") == 5
        assert calls[-1] == "Respond"
        below = breaker._planned(breaker._plan_below_minimum(PIPELINE))
        assert sum(len(steps) for steps in below) == PIPELINE.breaker.min_throughput - 1
        window = breaker._plan_window(PIPELINE)
        assert PIPELINE.breaker.window < next(i for i in window if isinstance(i, float))

    @pytest.mark.parametrize(
        ("case_id", "plan", "opens"),
        [
            ("SC-BREAKER-15", breaker._plan_opens, True),
            ("SC-BREAKER-17", breaker._plan_below_minimum, False),
            ("SC-BREAKER-19", breaker._plan_window, False),
        ],
    )
    def test_the_canary_decides(
        self, case_id: str, plan: Callable[[ClientPolicy], breaker.Plan], opens: bool
    ) -> None:
        """The canary is refused exactly when the ratio opens the breaker."""
        steps = plan(policy_for(case_id, PIPELINE))
        assert judge(case_id, *planned(steps, canary_ok=not opens), base=PIPELINE)
        assert not judge(case_id, *planned(steps, canary_ok=opens), base=PIPELINE)

    def test_a_stream_refused_midway_fails(self) -> None:
        """A planned stream that met an open breaker breaks the plan's calls."""
        steps = breaker._plan_below_minimum(policy_for("SC-BREAKER-17", PIPELINE))
        records = planned(steps, canary_ok=True, refused=2)
        assert not judge("SC-BREAKER-17", *records, base=PIPELINE)


class TestPolicies:
    def test_fast_keeps_the_cooldown_to_backoff_ratio(self) -> None:
        """The fast variant scales the cooldown and every backoff duration alike."""
        fast = breaker._fast(SEED)
        assert fast.breaker.cooldown == pytest.approx(breaker.FAST_COOLDOWN)
        ratio = SEED.breaker.cooldown / SEED.backoff.cap(1)
        assert fast.breaker.cooldown / fast.backoff.cap(1) == pytest.approx(ratio)
        assert fast.breaker.threshold == SEED.breaker.threshold
        assert breaker._fast_single(SEED).breaker.threshold == 1

    def test_cases_apply_to_their_breaker_kind(self) -> None:
        """Consecutive cases skip the pipeline profile; ratio cases skip the seed ones."""
        assert get_case("SC-BREAKER-1").applies(PIPELINE, "get") is not None
        assert get_case("SC-BREAKER-1").applies(SEED, "get") is None
        assert get_case("SC-BREAKER-15").applies(SEED, "get") is not None
        assert get_case("SC-BREAKER-15").applies(PIPELINE, "get") is None

    def test_fail_fast_needs_a_cooldown_above_the_slack(self) -> None:
        """A cooldown too short to tell waiting from failing fast is not applicable."""
        short = policy_for("SC-BREAKER-1")  # 0.25 s
        assert get_case("SC-BREAKER-9").applies(short, "get") is not None
        assert get_case("SC-BREAKER-9").applies(SEED, "get") is None


# -- BREAKER-23 to 26: new streams once the cooldown has passed ---------------------------

NEW_COOLDOWN = policy_for("SC-BREAKER-23").breaker.cooldown
LATER = failures(PATH, K)[-1].arrived_at + 1.5 * NEW_COOLDOWN  # when the play goes on


def held(path: str, at: float, hold: float) -> Attempt:
    """A request whose answer the server held back ``hold`` (a probe still unresolved)."""
    a = attempt(path, at, status=200, lasts=hold + 0.01)
    sent = tuple(
        SentEvent(i, "data", None, TOKENS[i - 1], at + hold + 0.001 * i) for i in (1, 2, 3)
    )
    return replace(a, events=sent, headers_at=at + hold)


class TestNextStream:
    """SC-BREAKER-23/24: after the cooldown a new stream is the probe, then a canary."""

    def judge(self, s2: bool = True, canary_delay: float | None = 0.005) -> Outcome:
        atts = failures(PATH, K)
        deliveries: list[Delivery] = []
        if s2:
            atts.append(attempt(OTHER, LATER, status=200, events=3))
            deliveries += answered("s2", LATER + 0.005)
        else:
            deliveries.append(error("s2", "circuit_open", LATER))
        done_at = deliveries[-1].at
        if canary_delay is None:
            deliveries.append(error("canary", "circuit_open", done_at + 0.002))
        else:
            atts.append(attempt(CANARY, done_at + canary_delay, status=200, events=3))
            deliveries += answered("canary", done_at + canary_delay + 0.005)
        return check("SC-BREAKER-23", atts, deliveries)

    def test_a_new_probe_that_closes_the_breaker_passes(self) -> None:
        """s2 gets through after the cooldown, and the canary right after it."""
        assert self.judge().ok

    def test_a_new_stream_refused_after_the_cooldown_fails(self) -> None:
        """The breaker never closes for new streams: s2 gets circuit_open."""
        assert failed(self.judge(s2=False))

    def test_a_canary_refused_after_the_good_probe_fails(self) -> None:
        """The good probe did not close it: the next stream is refused."""
        assert failed(self.judge(canary_delay=None))

    def test_a_canary_held_for_a_new_cooldown_fails(self) -> None:
        """A canary that waited a whole new cooldown was held by a breaker that re-opened."""
        assert failed(self.judge(canary_delay=NEW_COOLDOWN + 0.01))

    def test_s1_probing_itself_is_undecidable_or_the_opens_flaw(self) -> None:
        """s1 probing after the cooldown means the play cancelled it late: undecidable.
        Its next request at once is BREAKER-1's flaw: FAIL."""
        for gap, undecidable in ((NEW_COOLDOWN + 0.05, True), (0.01, False)):
            atts = [*failures(PATH, K), attempt(PATH, 0.04 + gap, status=200, number=K + 1)]
            outcome = check("SC-BREAKER-23", atts, answered("s1", 1.0))
            assert not outcome.ok
            assert outcome.undecidable is undecidable


class TestNewCallers:
    """SC-BREAKER-25/26: callers refused while open; after it one probe among new ones."""

    hold = policy_for("SC-BREAKER-25").breaker.cooldown / 2

    def refused(self) -> list[Delivery]:
        return [error(f"f{i}", "circuit_open", 0.05) for i in (1, 2, 3)]

    def new_callers(self, through: int, after: float = 0.0) -> tuple[list[Attempt], list[Delivery]]:
        """n1 the probe; ``through`` more new callers arrive ``after`` it, 1 ms apart."""
        atts = [held(f"{PATH}/n1", LATER, self.hold)]
        deliveries = answered("n1", LATER + self.hold + 0.01)
        for i in range(2, 5):
            if i - 1 <= through:
                atts.append(
                    attempt(f"{PATH}/n{i}", LATER + after + 0.001 * i, status=200, events=3)
                )
            else:
                deliveries.append(error(f"n{i}", "circuit_open", LATER + 0.001))
        return atts, deliveries

    def judge(self, through: int = 0, after: float = 0.0, noise: Noise | None = None) -> Outcome:
        atts, deliveries = self.new_callers(through, after)
        return check(
            "SC-BREAKER-25",
            [*failures(PATH, K), *atts],
            [*self.refused(), *deliveries],
            noise=noise,
        )

    def test_one_probe_and_the_rest_refused_passes(self) -> None:
        """n1 is the probe; n2-n4 fail fast: conformant."""
        assert self.judge().ok

    def test_every_new_caller_let_through_fails(self) -> None:
        """n2-n4 reach the server with the probe, before it resolved."""
        outcome = self.judge(through=3)
        assert failed(outcome)
        assert "4 requests before the probe resolved" in outcome.observed

    def test_callers_admitted_after_the_probe_resolved_pass(self) -> None:
        """A client whose new callers wait: they go once the probe's first event is in."""
        assert self.judge(through=3, after=self.hold + 0.005).ok

    def test_a_crowd_the_server_stamped_late_is_undecidable(self) -> None:
        """With the server loop blocked 200 ms before the probe's first event, that stamp
        may trail the event: the others may have come after it. Undecidable, not FAIL."""
        atts, deliveries = self.new_callers(3)
        ev = Evidence((*failures(PATH, K), *atts), (), (*self.refused(), *deliveries))
        noise = noisy(ev, [(LATER + self.hold - 0.005, BLOCK)], source="server").noise
        outcome = self.judge(through=3, noise=noise)
        assert outcome.undecidable
        assert not outcome.ok

    def test_a_second_probe_after_a_client_stall_of_a_lease_is_undecidable(self) -> None:
        """The client loop stalled a whole cooldown just before the probe arrived: the
        client may have admitted it that much earlier, and let n2 through as a new probe
        once its lease ran out (the reference does). Undecidable, not FAIL; a stall a
        little short of that leaves the crowd a sure FAIL."""
        atts, deliveries = self.new_callers(1)
        ev = Evidence((*failures(PATH, K), *atts), (), (*self.refused(), *deliveries))
        cooldown = 2 * self.hold
        for stall, undecidable in ((cooldown, True), (cooldown / 4, False)):
            noise = noisy(ev, [(LATER - stall - 0.001, stall)]).noise
            outcome = self.judge(through=1, noise=noise)
            assert not outcome.ok
            assert outcome.undecidable is undecidable, (stall, outcome)

    def test_no_probe_after_the_cooldown_fails(self) -> None:
        """Every new caller refused: the breaker never closes."""
        deliveries = [error(f"n{i}", "circuit_open", LATER) for i in range(1, 5)]
        assert failed(check("SC-BREAKER-25", failures(PATH, K), [*self.refused(), *deliveries]))

    def test_a_caller_let_through_while_open_fails(self) -> None:
        """f1 reached the server right after the trip: it did not fail fast."""
        atts, deliveries = self.new_callers(0)
        f1 = attempt(f"{PATH}/f1", 0.06, status=200, events=3)
        refused = [*answered("f1", 0.07), *self.refused()[1:]]
        outcome = check("SC-BREAKER-25", [*failures(PATH, K), f1, *atts], [*refused, *deliveries])
        assert failed(outcome)

    def test_a_caller_that_reached_the_server_after_the_cooldown_is_the_probe(self) -> None:
        """f1 reaching the server only after the cooldown (its client waits, or the play
        was late) is judged as the probe; the new callers after it are fine."""
        f1 = held(f"{PATH}/f1", 0.04 + NEW_COOLDOWN + 0.02, self.hold)
        atts = [attempt(f"{PATH}/n{i}", LATER + 0.2, status=200, events=3) for i in range(1, 5)]
        deliveries = [*answered("f1", f1.ended_at or 0.0)]
        deliveries += [d for i in range(1, 5) for d in answered(f"n{i}", LATER + 0.21)]
        deliveries += self.refused()[1:]
        assert check("SC-BREAKER-25", [*failures(PATH, K), f1, *atts], deliveries).ok
