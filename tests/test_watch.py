"""The stall watch: silence measured on an injected clock."""

from __future__ import annotations

import pytest

from conformance.reference import ClientPolicy
from conformance.reference._watch import StallWatch, next_check


def seed_watch(started: float = 1000.0) -> StallWatch:
    policy = ClientPolicy()
    return StallWatch(policy.stall_timeout, policy.stall_check_interval, started)


def test_seed_numbers_ok_stalled_dead():
    """The seed's 90 s / 10 s: ok below 10 s, stalled from 10 s to 90 s, dead past 90 s."""
    watch = seed_watch(1000.0)
    assert watch.check(1000.0) == "ok"
    assert watch.check(1009.999) == "ok"
    assert watch.check(1010.0) == "stalled"
    assert watch.check(1090.0) == "stalled"
    assert watch.check(1090.001) == "dead"


def test_touch_resets_the_silence():
    """Every received byte (a touch) starts the silence over, even from stalled."""
    watch = seed_watch(0.0)
    watch.touch(50.0)
    assert watch.check(59.0) == "ok"
    assert watch.check(139.0) == "stalled"
    watch.touch(139.0)
    assert watch.check(139.5) == "ok"
    assert watch.idle(140.0) == pytest.approx(1.0)


def test_keepalive_ticks_keep_a_stream_alive_forever():
    """Touches every 15 s (comment heartbeats) never let the watch reach stalled."""
    watch = seed_watch(0.0)
    for tick in range(1, 100):
        now = tick * 15.0
        assert watch.check(now - 0.001) == "stalled"  # 15 s of silence before each tick
        watch.touch(now)
        assert watch.check(now) == "ok"
    assert watch.check(99 * 15.0 + 90.0) == "stalled"


def test_dead_stream_noticed_within_timeout_plus_interval():
    """Checking every interval, a dead stream is found no later than timeout + interval."""
    watch = seed_watch(0.0)
    checks = [n * watch.interval for n in range(1, 20)]
    first_dead = next(t for t in checks if watch.check(t) == "dead")
    assert 90.0 < first_dead <= 90.0 + watch.interval


def test_late_touch_does_not_move_time_backwards():
    """A touch stamped earlier than the last activity is ignored."""
    watch = seed_watch(100.0)
    watch.touch(50.0)
    assert watch.last_activity == 100.0
    assert watch.idle(90.0) == 0.0  # a clock reading before the start is no silence


@pytest.mark.parametrize(("timeout", "interval"), [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0)])
def test_non_positive_durations_are_refused(timeout, interval):
    """A zero or negative timeout or interval is a configuration error."""
    with pytest.raises(ValueError, match="positive"):
        StallWatch(timeout, interval, 0.0)


def test_scaled_policy_watch():
    """ClientPolicy.scaled(0.01) gives a 0.9 s timeout checked every 0.1 s."""
    policy = ClientPolicy().scaled(0.01)
    watch = StallWatch(policy.stall_timeout, policy.stall_check_interval, 0.0)
    assert [watch.check(t) for t in (0.05, 0.1, 0.9, 0.91)] == ["ok", "stalled", "stalled", "dead"]


def test_checks_keep_their_grid_when_one_runs_late() -> None:
    """A late check does not push the next one back: the grid stays due + k·interval."""
    assert next_check(1.0, 0.1, now=1.01) == pytest.approx(1.1)  # ran 10 ms late
    assert next_check(1.0, 0.1, now=1.0) == pytest.approx(1.1)


def test_missed_checks_are_skipped_not_made_up() -> None:
    """A loop blocked past several grid points runs the next one still ahead of it."""
    assert next_check(1.0, 0.1, now=1.25) == pytest.approx(1.3)
    assert next_check(1.0, 0.1, now=1.1) == pytest.approx(1.2)  # exactly on a point: later


def test_a_chain_of_late_checks_does_not_drift() -> None:
    """Ten checks each 20 ms late: the tenth is due where the grid says, not 200 ms on."""
    due = 0.0
    for _ in range(10):
        due = next_check(due, 0.1, now=due + 0.02)
    assert due == pytest.approx(1.0)
