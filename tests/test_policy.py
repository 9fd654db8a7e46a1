"""The pure retry policy: backoff, Retry-After, the retry matrix and the commit rules."""

from __future__ import annotations

import random
from dataclasses import replace

import httpx
import pytest

from conformance._profiles import SEED_EVENTSOURCE, SEED_FETCH, SEED_PIPELINE
from conformance.reference import (
    BackoffConfig,
    ClientPolicy,
    Failure,
    GiveUp,
    Retry,
    RetryMatrix,
    RetryState,
    Surface,
    backoff_delay,
    parse_retry_after,
)

EPOCH = 784111777.0  # Sun, 06 Nov 1994 08:49:37 GMT


class FixedRandom(random.Random):
    """A random source whose every draw is the same value, for exact delays."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value
        self.draws = 0

    def random(self) -> float:
        self.draws += 1
        return self.value


def decide(state: RetryState, failure: Failure, **overrides: bool) -> Retry | GiveUp | Surface:
    kwargs = {"resumable": False, "idempotent": True, "request_sent": True} | overrides
    return state.decide(failure, now_epoch=EPOCH, **kwargs)


def fail_attempts(state: RetryState, n: int, failure: Failure) -> list[Retry | GiveUp | Surface]:
    decisions = []
    for _ in range(n):
        state.on_attempt()
        decisions.append(decide(state, failure))
    return decisions


# --- Backoff: exact values ---------------------------------------------------------------------

# The seed article: 200 ms doubling, capped at 2 s, 3 s after five attempts, 5 s after ten.
SEED_EXP = [0.2, 0.4, 0.8, 1.6, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0, 5.0, 5.0, 5.0]
FETCH_EXP = [*SEED_EXP[:10], 60.0, 60.0, 60.0]


@pytest.mark.parametrize(("attempt", "exp"), list(enumerate(SEED_EXP, start=1)))
def test_seed_family_caps_widen_with_the_attempt_count(attempt, exp):
    """Seed backoff is exp + r*exp*0.5 with caps 2 s, then 3 s from attempt 6, 5 s from 11."""
    config = SEED_EVENTSOURCE.backoff
    assert backoff_delay(config, attempt, FixedRandom(0.0), None) == pytest.approx(exp)
    assert backoff_delay(config, attempt, FixedRandom(0.5), None) == pytest.approx(exp * 1.25)
    assert backoff_delay(config, attempt, FixedRandom(0.999), None) == pytest.approx(exp * 1.4995)


@pytest.mark.parametrize(("attempt", "exp"), list(enumerate(FETCH_EXP, start=1)))
def test_fetch_policy_last_cap_is_sixty_seconds(attempt, exp):
    """The fetch client's caps are 2 s, 3 s, then 60 s from attempt 11."""
    config = SEED_FETCH.backoff
    assert backoff_delay(config, attempt, FixedRandom(0.0), None) == pytest.approx(exp)


@pytest.mark.parametrize(
    ("family", "r", "expected"),
    [
        ("full", 0.0, [0.0, 0.0, 0.0]),
        ("full", 0.5, [0.1, 0.2, 0.4]),
        ("equal", 0.0, [0.1, 0.2, 0.4]),
        ("equal", 0.5, [0.15, 0.3, 0.6]),
        ("none", 0.7, [0.2, 0.4, 0.8]),
    ],
)
def test_aws_families_exact(family, r, expected):
    """Full jitter is r*exp, equal jitter exp/2 + r*exp/2, none is exp."""
    config = BackoffConfig(family=family)
    delays = [backoff_delay(config, n, FixedRandom(r), None) for n in (1, 2, 3)]
    assert delays == pytest.approx(expected)


def test_decorrelated_chains_on_the_previous_delay():
    """Decorrelated jitter draws in [base, 3*previous] from base, capped by the attempt's cap."""
    config = BackoffConfig(family="decorrelated", base=0.2)
    rng = FixedRandom(0.5)
    first = backoff_delay(config, 1, rng, None)
    assert first == pytest.approx(0.2 + 0.5 * (0.6 - 0.2))  # 0.4
    second = backoff_delay(config, 2, rng, first)
    assert second == pytest.approx(0.2 + 0.5 * (1.2 - 0.2))  # 0.7
    assert backoff_delay(config, 3, FixedRandom(0.999), 1.9) == pytest.approx(2.0)  # the cap


def test_each_delay_draws_exactly_once():
    """Every family calls rng.random() once per jittered delay (reproducible sequences)."""
    for family in ("seed", "full", "equal", "decorrelated"):
        rng = FixedRandom(0.3)
        backoff_delay(BackoffConfig(family=family), 4, rng, 0.5)
        assert rng.draws == 1, family


def test_attempt_is_one_based():
    """Retry number 0 is a caller bug."""
    with pytest.raises(ValueError, match="1-based"):
        backoff_delay(BackoffConfig(), 0, random.Random(1), None)


# --- Backoff: envelope over many draws ---------------------------------------------------------

ENVELOPE_CONFIGS = [
    SEED_EVENTSOURCE.backoff,
    SEED_FETCH.backoff,
    SEED_PIPELINE.backoff,
    BackoffConfig(family="full"),
    BackoffConfig(family="equal"),
    BackoffConfig(family="decorrelated"),
    BackoffConfig(family="none"),
    BackoffConfig(family="seed", base=0.05, jitter=1.0, caps=((1, 0.5),)),
]


@pytest.mark.parametrize("config", ENVELOPE_CONFIGS, ids=lambda c: f"{c.family}-{c.caps[-1][1]}")
def test_every_drawn_delay_is_inside_the_envelope(config):
    """10k seeded draws over attempts 1..15 all fall inside BackoffConfig.envelope()."""
    rng = random.Random(20240501)
    previous: float | None = None
    seen: dict[int, list[float]] = {}
    for i in range(10_000):
        attempt = i % 15 + 1
        if attempt == 1:
            previous = None
        delay = backoff_delay(config, attempt, rng, previous)
        low, high = config.envelope(attempt)
        assert low <= delay <= high, (attempt, delay, low, high)
        seen.setdefault(attempt, []).append(delay)
        previous = delay
    if config.family in ("seed", "full", "equal"):
        # jitter actually spreads: draws reach both ends of the envelope
        low, high = config.envelope(15)
        span = high - low
        assert min(seen[15]) < low + 0.05 * span
        assert max(seen[15]) > high - 0.05 * span


def test_same_seed_same_delays():
    """Two states with equally seeded random sources decide identical delays."""

    def run(seed: int) -> list[float]:
        state = RetryState(ClientPolicy(), random.Random(seed))
        return [d.delay for d in fail_attempts(state, 12, Failure("reset")) if isinstance(d, Retry)]

    assert run(5) == run(5)
    assert run(5) != run(6)


# --- Retry-After -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "5"}, 5.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"Retry-After": ".25"}, 0.25),
        ({"Retry-After": " 7 "}, 7.0),
        ({"Retry-After": "0"}, 0.0),
        ({"Retry-After": "59.999"}, 59.999),
        ({"Retry-After": "60"}, 60.0),
        ({"Retry-After": "61"}, 60.0),  # over the cap: clamped
        ({"Retry-After": "300"}, 60.0),
        ({"Retry-After": "-1"}, None),
        ({"Retry-After": "-0.5"}, None),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": ""}, None),
        ({"Retry-After": "inf"}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "1e3"}, None),
        ({"Retry-After": "1_0"}, None),
        ({"Retry-After": "0x10"}, None),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250.5"}, 0.2505),
        ({"retry-after-ms": "0"}, 0.0),
        ({"retry-after-ms": "90000"}, 60.0),
        ({"retry-after-ms": "-5"}, None),
        ({"retry-after-ms": "lots"}, None),
        ({"retry-after-ms": "100", "Retry-After": "9"}, 0.1),  # ms first
        ({"retry-after-ms": "bad", "Retry-After": "9"}, 9.0),  # garbage ms falls through
        ({"RETRY-AFTER": "4"}, 4.0),  # names are case-insensitive
        ({"Retry-After-Ms": "40"}, 0.04),
        ({"Retry-After": "Sun, 06 Nov 1994 08:50:07 GMT"}, 30.0),  # IMF-fixdate
        ({"Retry-After": "Sunday, 06-Nov-94 08:50:17 GMT"}, 40.0),  # RFC 850
        ({"Retry-After": "Sun Nov  6 08:49:47 1994"}, 10.0),  # asctime, no zone = GMT
        ({"Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT"}, 0.0),  # now
        ({"Retry-After": "Sun, 06 Nov 1994 08:00:00 GMT"}, 0.0),  # past: floored at 0
        ({"Retry-After": "Sun, 06 Nov 1994 09:49:37 GMT"}, 60.0),  # an hour: capped
        ({"Retry-After": "Sun, 32 Nov 1994 08:49:37 GMT"}, None),  # not a date
        ({}, None),
        ({"Content-Type": "text/plain"}, None),
    ],
)
def test_parse_retry_after_forms(headers, expected):
    """Every Retry-After form parses (or is ignored) as documented, clamped to the cap."""
    result = parse_retry_after(headers, now_epoch=EPOCH, cap=60.0)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


def test_parse_retry_after_reads_httpx_headers():
    """httpx.Headers (the shell's type) works as the mapping."""
    headers = httpx.Headers([("Retry-After", "3")])
    assert parse_retry_after(headers, now_epoch=EPOCH, cap=60.0) == 3.0


def test_retry_after_wins_over_backoff():
    """A usable server hint replaces the computed delay and draws no randomness."""
    rng = FixedRandom(0.5)
    state = RetryState(ClientPolicy(), rng)
    state.on_attempt()
    decision = decide(state, Failure("status", 429, {"Retry-After": "7"}))
    assert decision == Retry(7.0, "status 429", resume=False)
    assert rng.draws == 0


def test_retry_after_zero_means_at_once():
    """Retry-After: 0 is honoured as a zero delay."""
    state = RetryState(ClientPolicy(), FixedRandom(0.5))
    state.on_attempt()
    assert decide(state, Failure("status", 503, {"Retry-After": "0"})) == Retry(
        0.0, "status 503", resume=False
    )


def test_retry_after_capped_by_policy():
    """The policy's retry_after_cap clamps long hints."""
    state = RetryState(ClientPolicy(retry_after_cap=10.0), FixedRandom(0.0))
    state.on_attempt()
    decision = decide(state, Failure("status", 503, {"Retry-After": "120"}))
    assert isinstance(decision, Retry)
    assert decision.delay == 10.0


@pytest.mark.parametrize("value", ["garbage", "-4"])
def test_unusable_retry_after_falls_back_to_backoff(value):
    """Garbage or negative hints are ignored and the backoff applies."""
    state = RetryState(ClientPolicy(), FixedRandom(0.0))
    state.on_attempt()
    decision = decide(state, Failure("status", 503, {"Retry-After": value}))
    assert isinstance(decision, Retry)
    assert decision.delay == pytest.approx(0.2)


def test_retry_after_ignored_when_policy_says_so():
    """retry_after=False computes the backoff even when the server sent a hint."""
    state = RetryState(ClientPolicy(retry_after=False), FixedRandom(0.0))
    state.on_attempt()
    decision = decide(state, Failure("status", 429, {"Retry-After": "30"}))
    assert isinstance(decision, Retry)
    assert decision.delay == pytest.approx(0.2)


# --- The retry matrix --------------------------------------------------------------------------


def seed_expects_retry(status: int) -> bool:
    """The seed article's matrix, written out independently of RetryMatrix."""
    if status in (400, 401, 403, 404, 422):
        return False
    return status in (429, 503) or status >= 500


@pytest.mark.parametrize(
    ("policy", "expects"),
    [
        (SEED_EVENTSOURCE, seed_expects_retry),
        (SEED_FETCH, seed_expects_retry),
        (SEED_PIPELINE, lambda s: s == 408 or seed_expects_retry(s)),
        (
            ClientPolicy(matrix=RetryMatrix(retry_5xx=False)),
            lambda s: s in (429, 503),
        ),
    ],
    ids=["eventsource", "fetch", "pipeline", "no-5xx"],
)
def test_every_status_100_to_599_is_classified(policy, expects):
    """Each status retries or gives up "non_retryable" exactly as the matrix documents."""
    for status in range(100, 600):
        state = RetryState(policy, random.Random(1))
        state.on_attempt()
        decision = decide(state, Failure("status", status))
        if expects(status):
            assert isinstance(decision, Retry), status
            assert decision.reason == f"status {status}"
        else:
            assert decision == GiveUp("non_retryable"), status


@pytest.mark.parametrize("kind", ["connect", "reset", "timeout_first_chunk", "stall", "truncated"])
def test_network_failures_retry_by_default(kind):
    """Failures with no status retry (the seed: "retry on network errors by default")."""
    state = RetryState(ClientPolicy(), FixedRandom(0.0))
    state.on_attempt()
    assert decide(state, Failure(kind)) == Retry(pytest.approx(0.2), kind, resume=False)


def test_network_failures_give_up_when_the_matrix_says_so():
    """retry_network=False makes status-less failures non-retryable."""
    policy = ClientPolicy(matrix=RetryMatrix(retry_network=False))
    state = RetryState(policy, FixedRandom(0.0))
    state.on_attempt()
    assert decide(state, Failure("reset")) == GiveUp("non_retryable")


# --- Budget and resets -------------------------------------------------------------------------


def test_max_attempts_gives_up_exhausted():
    """The pipeline's 3 attempts: two retries, then "exhausted"."""
    state = RetryState(SEED_PIPELINE, FixedRandom(0.0))
    decisions = fail_attempts(state, 3, Failure("status", 503))
    assert [type(d) for d in decisions] == [Retry, Retry, GiveUp]
    assert decisions[-1] == GiveUp("exhausted")
    assert [d.delay for d in decisions[:2]] == pytest.approx([0.25, 0.5])  # equal jitter, r=0


def test_unbounded_by_default():
    """With max_attempts=None the state keeps retrying at the widest cap."""
    state = RetryState(ClientPolicy(), FixedRandom(0.0))
    decisions = fail_attempts(state, 50, Failure("reset"))
    assert all(isinstance(d, Retry) for d in decisions)
    assert decisions[-1].delay == pytest.approx(5.0)


def test_delay_follows_the_attempt_number():
    """The n-th failed attempt waits the delay of retry number n."""
    state = RetryState(ClientPolicy(), FixedRandom(0.0))
    decisions = fail_attempts(state, 12, Failure("reset"))
    assert [d.delay for d in decisions] == pytest.approx(SEED_EXP[:12])


def test_success_resets_the_count():
    """on_success starts the retry count and the decorrelated chain over."""
    policy = ClientPolicy(max_attempts=3, backoff=BackoffConfig(family="decorrelated"))
    state = RetryState(policy, FixedRandom(0.5))
    fail_attempts(state, 2, Failure("reset"))
    state.on_success()
    assert (state.attempts, state.previous_delay) == (0, None)
    first = fail_attempts(state, 1, Failure("reset"))[0]
    assert first == Retry(pytest.approx(0.4), "reset", resume=False)  # from base again


def test_reset_gives_a_fresh_budget():
    """reset() (online) puts attempts back to 0 so an exhausted budget is available again."""
    state = RetryState(ClientPolicy(max_attempts=2), FixedRandom(0.0))
    assert fail_attempts(state, 2, Failure("reset"))[-1] == GiveUp("exhausted")
    state.reset()
    assert state.attempts == 0
    assert fail_attempts(state, 1, Failure("reset")) == [Retry(pytest.approx(0.2), "reset", False)]


def test_offline_waits_without_spending_the_budget():
    """An offline failure retries at once (the shell waits for online) even when exhausted."""
    state = RetryState(ClientPolicy(max_attempts=1), FixedRandom(0.0))
    state.on_attempt()
    assert decide(state, Failure("offline")) == Retry(0.0, "offline", resume=False)
    no_network = ClientPolicy(matrix=RetryMatrix(retry_network=False))
    assert decide(RetryState(no_network, FixedRandom(0)), Failure("offline")).delay == 0.0


# --- Commit rules ------------------------------------------------------------------------------


def test_first_chunk_commits():
    """on_chunk sets committed; attempts are counted by on_attempt."""
    state = RetryState(ClientPolicy(), random.Random(1))
    assert not state.committed
    state.on_attempt()
    state.on_chunk()
    state.on_chunk()
    assert (state.committed, state.attempts) == (True, 1)


@pytest.mark.parametrize("kind", ["reset", "stall", "truncated", "offline"])
def test_after_commit_errors_are_surfaced_unless_resumable(kind):
    """Once a chunk reached the consumer a non-resumable failure is surfaced, not retried."""
    state = RetryState(ClientPolicy(), FixedRandom(0.0))
    state.on_attempt()
    state.on_chunk()
    assert decide(state, Failure(kind)) == Surface(kind)
    assert decide(state, Failure(kind), resumable=True, idempotent=False) == Surface(kind)


def test_after_commit_resumable_retries_with_resume():
    """A resumable committed stream reconnects with resume=True after the backoff."""
    state = RetryState(ClientPolicy(), FixedRandom(0.0))
    state.on_attempt()
    state.on_chunk()
    assert decide(state, Failure("reset"), resumable=True) == Retry(
        pytest.approx(0.2), "reset", resume=True
    )


def test_committed_flag_on_the_failure_counts_too():
    """Failure(committed=True) is treated as after the commit even before on_chunk."""
    state = RetryState(ClientPolicy(), FixedRandom(0.0))
    state.on_attempt()
    assert decide(state, Failure("reset", committed=True)) == Surface("reset")


def test_resumed_attempt_answered_with_a_non_retryable_status_gives_up():
    """A resume reconnect that gets a 401 stops: the matrix comes first."""
    state = RetryState(ClientPolicy(), FixedRandom(0.0))
    state.on_attempt()
    state.on_chunk()
    assert decide(state, Failure("status", 401), resumable=True) == GiveUp("non_retryable")


def test_resumes_also_spend_the_budget():
    """Resume reconnects count as attempts and stop at max_attempts."""
    state = RetryState(ClientPolicy(max_attempts=2), FixedRandom(0.0))
    state.on_attempt()
    state.on_chunk()
    assert isinstance(decide(state, Failure("reset"), resumable=True), Retry)
    state.on_attempt()
    assert decide(state, Failure("reset"), resumable=True) == GiveUp("exhausted")


@pytest.mark.parametrize(
    "failure", [Failure("status", 503), Failure("status", 429), Failure("reset"), Failure("stall")]
)
def test_not_idempotent_is_never_resent_once_sent(failure):
    """idempotent=False with request bytes written gives up "not_idempotent"."""
    state = RetryState(SEED_FETCH, FixedRandom(0.0))
    state.on_attempt()
    assert decide(state, failure, idempotent=False, request_sent=True) == GiveUp("not_idempotent")


def test_not_idempotent_connect_failure_before_sending_retries():
    """A non-idempotent request that never left (connect failure) may be retried."""
    state = RetryState(SEED_FETCH, FixedRandom(0.0))
    state.on_attempt()
    decision = decide(state, Failure("connect"), idempotent=False, request_sent=False)
    assert decision == Retry(pytest.approx(0.2), "connect", resume=False)


def test_not_idempotent_non_retryable_reports_the_status_reason():
    """A 401 on a POST is reported as non-retryable, the more useful reason."""
    state = RetryState(SEED_FETCH, FixedRandom(0.0))
    state.on_attempt()
    assert decide(state, Failure("status", 401), idempotent=False) == GiveUp("non_retryable")


def test_decisions_are_frozen_values():
    """Failure and decisions are immutable and compare by value."""
    failure = Failure("status", 503, {"Retry-After": "1"})
    with pytest.raises(AttributeError):
        failure.status = 500  # type: ignore[misc]
    assert replace(failure, status=500).status == 500
    assert Failure("reset").headers == {}
    assert hash(Retry(1.0, "x", False)) == hash(Retry(1.0, "x", False))
