"""The circuit breakers: the transition table, single-probe half-open, ratio windows."""

from __future__ import annotations

import pytest

from conformance._profiles import SEED_PIPELINE
from conformance.reference import BreakerConfig, ClientPolicy
from conformance.reference._breaker import (
    _TRANSITIONS,
    Admit,
    BreakerError,
    BreakerState,
    CircuitBreaker,
    NoBreaker,
    RatioBreaker,
    Reject,
    _Signal,
    make_breaker,
)

CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN
SEED = BreakerConfig()  # 5 consecutive failures, 60 s cooldown
RATIO = BreakerConfig(kind="ratio", ratio=0.5, min_throughput=10, window=30.0, cooldown=5.0)


def tripped(config: BreakerConfig = SEED, at: float = 100.0) -> CircuitBreaker:
    breaker = CircuitBreaker(config)
    for _ in range(config.threshold):
        breaker.record_failure(at)
    return breaker


def half_open_with_probe(at: float = 100.0) -> tuple[CircuitBreaker, float]:
    breaker = tripped(at=at)
    probe_at = at + SEED.cooldown
    assert breaker.admit(probe_at) == Admit(probe=True)
    return breaker, probe_at


# --- Consecutive breaker (the seed article) ---------------------------------------------------


def test_opens_after_threshold_consecutive_failures():
    """Four failures leave it closed; the fifth opens it for the cooldown."""
    breaker = CircuitBreaker(SEED)
    for i in range(4):
        breaker.record_failure(10.0 + i)
        assert breaker.admit(10.0 + i) == Admit(probe=False)
    breaker.record_failure(20.0)
    assert breaker.state(20.0) is OPEN
    assert breaker.admit(20.0) == Reject(until=80.0)
    assert breaker.admit(79.999) == Reject(until=80.0)


def test_success_breaks_the_run_of_failures():
    """A success in between resets the consecutive count."""
    breaker = CircuitBreaker(SEED)
    for _ in range(4):
        breaker.record_failure(1.0)
    breaker.record_success(2.0)
    assert breaker.consecutive_failures == 0
    for _ in range(4):
        breaker.record_failure(3.0)
    assert breaker.state(3.0) is CLOSED


def test_cooldown_elapsed_is_half_open():
    """At open_until the breaker is half-open."""
    breaker = tripped(at=100.0)
    assert breaker.state(159.9) is OPEN
    assert breaker.state(160.0) is HALF_OPEN


def test_exactly_one_probe_among_many_callers():
    """In half-open only the first admit() is the probe; the other 99 are rejected."""
    breaker = tripped(at=100.0)
    answers = [breaker.admit(160.0 + i * 0.01) for i in range(100)]
    probes = [a for a in answers if isinstance(a, Admit)]
    assert probes == [Admit(probe=True)]
    assert answers[0] == Admit(probe=True)
    assert all(a == Reject(until=220.0) for a in answers[1:])  # the probe's lease
    assert breaker.probe_in_flight


def test_probe_success_closes_and_resets_the_count():
    """A successful probe closes the circuit; it takes a full threshold to open again."""
    breaker, at = half_open_with_probe()
    breaker.record_success(at + 1)
    assert breaker.state(at + 1) is CLOSED
    assert breaker.admit(at + 1) == Admit(probe=False)
    for _ in range(4):
        breaker.record_failure(at + 2)
    assert breaker.state(at + 2) is CLOSED
    breaker.record_failure(at + 2)
    assert breaker.state(at + 2) is OPEN


def test_probe_failure_opens_again_for_a_full_cooldown():
    """A failed probe re-opens the circuit from the time of that failure."""
    breaker, at = half_open_with_probe()
    breaker.record_failure(at + 3)
    assert breaker.state(at + 3) is OPEN
    assert breaker.admit(at + 3) == Reject(until=at + 3 + SEED.cooldown)
    assert breaker.admit(at + 3 + SEED.cooldown) == Admit(probe=True)


def test_probe_abandoned_lets_the_next_caller_probe():
    """A cancelled probe frees the slot at once: the next admit() is the new probe."""
    breaker, at = half_open_with_probe()
    assert isinstance(breaker.admit(at + 1), Reject)
    breaker.probe_abandoned(at + 2)
    assert breaker.state(at + 2) is HALF_OPEN
    assert breaker.admit(at + 2) == Admit(probe=True)
    assert isinstance(breaker.admit(at + 3), Reject)


def test_a_lost_probe_expires_after_a_cooldown():
    """A probe that never reports is presumed lost one cooldown later."""
    breaker, at = half_open_with_probe()
    assert breaker.admit(at + SEED.cooldown - 0.001) == Reject(until=at + SEED.cooldown)
    assert breaker.admit(at + SEED.cooldown) == Admit(probe=True)


def test_outcomes_while_open_are_ignored():
    """Late results of calls admitted before the trip do not move an open breaker."""
    breaker = tripped(at=100.0)
    breaker.record_success(110.0)
    breaker.record_failure(120.0)
    assert breaker.state(130.0) is OPEN
    assert breaker.admit(130.0) == Reject(until=160.0)


def test_outcome_in_half_open_without_a_probe_is_ignored():
    """A stray outcome after the cooldown but before any probe leaves it half-open."""
    breaker = tripped(at=100.0)
    breaker.record_failure(161.0)
    breaker.record_success(162.0)
    assert breaker.state(162.0) is HALF_OPEN
    assert breaker.admit(162.0) == Admit(probe=True)


@pytest.mark.parametrize("where", ["closed", "open", "half_open", "probing"])
def test_reset_closes_with_no_history(where):
    """reset() (back online) closes the breaker and forgets failures from any state."""
    breaker = CircuitBreaker(SEED)
    for _ in range(3):
        breaker.record_failure(1.0)
    if where != "closed":
        breaker = tripped(at=1.0)
    now = 1.0 if where == "open" else 61.0
    if where == "probing":
        breaker.admit(now)
    breaker.reset()
    assert breaker.state(now) is CLOSED
    assert breaker.consecutive_failures == 0
    assert not breaker.probe_in_flight
    for _ in range(4):
        breaker.record_failure(now)
    assert breaker.admit(now) == Admit(probe=False)


def test_scaled_policy_breaker():
    """ClientPolicy.scaled() shrinks the cooldown the breaker uses."""
    breaker = tripped(ClientPolicy().scaled(0.01).breaker, at=0.0)
    assert breaker.admit(0.0) == Reject(until=pytest.approx(0.6))


# --- The transition table ---------------------------------------------------------------------


def drive(state: BreakerState) -> tuple[CircuitBreaker, float]:
    """A consecutive breaker in ``state`` (HALF_OPEN with its probe admitted) and the time."""
    if state is CLOSED:
        return CircuitBreaker(SEED), 0.0
    if state is OPEN:
        return tripped(at=0.0), 1.0
    breaker, at = half_open_with_probe(at=0.0)
    return breaker, at


def fire(breaker: CircuitBreaker, signal: _Signal, now: float) -> float:
    """Produces ``signal`` through the public API; returns the time afterwards."""
    if signal is _Signal.TRIP:
        for _ in range(SEED.threshold):
            breaker.record_failure(now)
    elif signal is _Signal.COOLED_DOWN:
        now += SEED.cooldown
    elif signal is _Signal.PROBE_SUCCEEDED:
        breaker.record_success(now)
    elif signal is _Signal.PROBE_FAILED:
        breaker.record_failure(now)
    else:
        breaker.reset()
    return now


TABLE = [(s, sig, new) for s, row in _TRANSITIONS.items() for sig, new in row.items()]


@pytest.mark.parametrize(("state", "signal", "new"), TABLE, ids=lambda v: getattr(v, "name", v))
def test_every_transition_in_the_table(state, signal, new):
    """Each (state, signal) entry of the table is reachable through the public API."""
    breaker, now = drive(state)
    assert breaker.state(now) is state
    now = fire(breaker, signal, now)
    assert breaker.state(now) is new


def test_the_table_is_the_documented_lifecycle():
    """The table holds exactly the documented transitions; every state can be reset."""
    assert set(TABLE) == {
        (CLOSED, _Signal.TRIP, OPEN),
        (CLOSED, _Signal.RESET, CLOSED),
        (OPEN, _Signal.COOLED_DOWN, HALF_OPEN),
        (OPEN, _Signal.RESET, CLOSED),
        (HALF_OPEN, _Signal.PROBE_SUCCEEDED, CLOSED),
        (HALF_OPEN, _Signal.PROBE_FAILED, OPEN),
        (HALF_OPEN, _Signal.RESET, CLOSED),
    }


@pytest.mark.parametrize(
    ("state", "signal"),
    [(s, sig) for s in BreakerState for sig in _Signal if sig not in _TRANSITIONS[s]],
    ids=lambda v: v.name,
)
def test_signals_outside_the_table_are_refused(state, signal):
    """A transition the table lacks raises BreakerError instead of corrupting the state."""
    breaker, now = drive(state)
    with pytest.raises(BreakerError):
        breaker._fire(signal, now)
    assert breaker.state(now) is state


# --- Ratio breaker (the seed library) ---------------------------------------------------------


def test_ratio_waits_for_minimum_throughput():
    """Nine failures out of nine calls do not open it; the tenth call does."""
    breaker = RatioBreaker(RATIO)
    for i in range(9):
        breaker.record_failure(float(i))
    assert breaker.state(9.0) is CLOSED
    breaker.record_failure(9.5)
    assert breaker.state(9.5) is OPEN
    assert breaker.admit(9.5) == Reject(until=14.5)


def test_ratio_threshold_is_inclusive():
    """40 % failures stay closed; reaching 50 % over >= 10 calls opens it."""
    breaker = RatioBreaker(RATIO)
    for _ in range(6):
        breaker.record_success(1.0)
    for _ in range(4):
        breaker.record_failure(1.0)
    breaker.record_failure(1.0)  # 5 / 11
    assert breaker.state(1.0) is CLOSED
    assert breaker.counts(1.0) == (5, 11)
    breaker.record_failure(1.0)  # 6 / 12 = 0.5
    assert breaker.state(1.0) is OPEN


def test_ratio_window_expiry_forgets_old_calls():
    """Calls older than the window no longer count toward throughput or ratio."""
    breaker = RatioBreaker(RATIO)
    for _ in range(9):
        breaker.record_failure(0.0)
    assert breaker.counts(29.9) == (9, 9)
    assert breaker.counts(30.0) == (0, 0)
    breaker.record_failure(30.0)
    assert breaker.state(30.0) is CLOSED
    assert breaker.counts(30.0) == (1, 1)


def test_ratio_window_slides():
    """Old successes expiring can leave a failure-heavy window that opens on the next failure."""
    breaker = RatioBreaker(RATIO)
    for _ in range(10):
        breaker.record_success(0.0)
    for _ in range(9):
        breaker.record_failure(20.0)
    assert breaker.state(20.0) is CLOSED  # 9 / 19
    breaker.record_failure(31.0)  # the successes expired: 10 / 10
    assert breaker.state(31.0) is OPEN


def test_ratio_half_open_single_probe_then_closed_with_empty_window():
    """The ratio breaker shares the single-probe half-open; closing clears the window."""
    breaker = RatioBreaker(RATIO)
    for _ in range(10):
        breaker.record_failure(0.0)
    assert breaker.state(5.0) is HALF_OPEN
    answers = [breaker.admit(5.0) for _ in range(20)]
    assert answers.count(Admit(probe=True)) == 1
    assert sum(isinstance(a, Reject) for a in answers) == 19
    breaker.record_success(6.0)
    assert breaker.state(6.0) is CLOSED
    assert breaker.counts(6.0) == (0, 0)


def test_ratio_probe_failure_reopens():
    """A failed ratio probe re-opens for the cooldown."""
    breaker = RatioBreaker(RATIO)
    for _ in range(10):
        breaker.record_failure(0.0)
    assert breaker.admit(5.0) == Admit(probe=True)
    breaker.record_failure(5.5)
    assert breaker.admit(5.5) == Reject(until=10.5)


def test_pipeline_policy_uses_the_ratio_breaker():
    """The seed library's pipeline policy gets a RatioBreaker with a 5 s cooldown."""
    breaker = make_breaker(SEED_PIPELINE.breaker)
    assert isinstance(breaker, RatioBreaker)
    assert breaker.config.cooldown == 5.0


# --- Factory and the null breaker -------------------------------------------------------------


def test_make_breaker_by_kind():
    """make_breaker returns the breaker the config's kind names."""
    assert isinstance(make_breaker(SEED), CircuitBreaker)
    assert isinstance(make_breaker(RATIO), RatioBreaker)
    assert isinstance(make_breaker(BreakerConfig(kind="none")), NoBreaker)


def test_no_breaker_never_opens():
    """NoBreaker admits every call whatever happens."""
    breaker = make_breaker(BreakerConfig(kind="none"))
    for i in range(100):
        breaker.record_failure(float(i))
    breaker.probe_abandoned(100.0)
    breaker.reset()
    assert breaker.state(100.0) is CLOSED
    assert breaker.admit(100.0) == Admit(probe=False)
    breaker.record_success(101.0)
