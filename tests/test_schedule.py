"""The lanes' plan (conformance._schedule.Planner): which case starts next, which plays
alone, how many play at once; pure, so judged here without a socket (and, but for the
last test, the lanes' own gate, without a thread)."""

from __future__ import annotations

import threading
import time

import pytest

from conformance import _lanes
from conformance._case import all_cases
from conformance._schedule import (
    CALM_LAG,
    CROWDED_LAG,
    DEFAULT_LANES,
    OPENING_LANES,
    WINDOW,
    Job,
    Planner,
)
from pytest_streamcheck.targets._reference import ReferenceAdapter


def _proven(lanes: int = 4) -> Planner:
    """A planner after a first case played cleanly: every lane may open."""
    p = Planner(lanes)
    p.want([Job("first")])
    assert p.take() == Job("first")
    p.finish("first", clean=True)
    return p


def _take_all(p: Planner) -> list[str]:
    taken = []
    while (job := p.take()) is not None:
        taken.append(job.id)
    return taken


def test_the_first_case_plays_alone_until_one_played_cleanly() -> None:
    """Before any case played through, one at a time: a client that does not start or
    blocks its loop is met once, as in a serial run."""
    p = Planner(4)
    p.want([Job("a"), Job("b"), Job("c")])
    assert _take_all(p) == ["a"]
    p.finish("a", clean=False)  # an ERROR proves nothing
    assert _take_all(p) == ["b"]
    p.finish("b", clean=True)
    assert _take_all(p) == ["c"]


def test_cases_start_in_the_order_wanted_up_to_the_lanes() -> None:
    p = _proven(3)
    p.want([Job(x) for x in "abcde"])
    assert _take_all(p) == ["a", "b", "c"]
    p.finish("b", clean=True)
    assert _take_all(p) == ["d"]
    assert set(p.running) == {"a", "c", "d"}


def test_a_new_wish_replaces_the_old_and_skips_what_started() -> None:
    """The caller's case first, then what comes after it; a case started (or done) is
    never handed out twice, and a case no longer wanted is not started."""
    p = _proven(2)
    p.want([Job("a"), Job("b"), Job("c")])
    assert _take_all(p) == ["a", "b"]
    p.want([Job("b"), Job("x"), Job("a"), Job("x")])
    p.finish("a", clean=True)
    assert _take_all(p) == ["x"]
    assert "c" not in p.started


def test_an_exclusive_case_waits_for_the_lanes_to_drain_and_nothing_overtakes_it() -> None:
    p = _proven(4)
    p.want([Job("a"), Job("b")])
    assert _take_all(p) == ["a", "b"]
    p.want([Job("c"), Job("herd", exclusive=True), Job("d")])
    p.finish("a", clean=True)
    assert _take_all(p) == []  # c and d may not pass the herd, the herd waits for b
    p.finish("b", clean=True)
    assert _take_all(p) == ["herd"]
    assert p.running == {"herd": "alone"}
    assert _take_all(p) == []  # nothing beside it
    p.finish("herd", clean=True)
    assert _take_all(p) == ["c", "d"]


def test_once_proven_the_exclusive_cases_play_first_back_to_back() -> None:
    """The lanes drain once for all of them (they would drain once for each, met in
    catalog order); the first case still plays first, so a broken client is met there."""
    p = Planner(4)
    p.want([Job("a"), Job("b"), Job("env", exclusive=True), Job("c"), Job("herd", True)])
    assert _take_all(p) == ["a"]
    p.finish("a", clean=True)
    assert _take_all(p) == ["env"]
    p.finish("env", clean=True)
    assert _take_all(p) == ["herd"]
    p.finish("herd", clean=True)
    assert _take_all(p) == ["b", "c"]


def test_a_rejudging_try_waits_until_every_other_case_finished() -> None:
    """The lane asks to go alone; nothing new starts, and it plays once the others are
    done; the next case starts only after it finished."""
    p = _proven(3)
    p.want([Job(x) for x in "abcd"])
    assert _take_all(p) == ["a", "b", "c"]
    p.wait_alone("b")
    assert not p.may_go_alone("b")
    p.finish("a", clean=True)
    assert _take_all(p) == []  # d waits behind the re-judging
    assert not p.may_go_alone("b")
    p.finish("c", clean=True)
    assert p.may_go_alone("b")
    assert p.may_go_alone("b")  # and stays alone for its later tries
    assert _take_all(p) == []
    p.finish("b", clean=True)
    assert _take_all(p) == ["d"]


def test_two_lanes_asking_to_go_alone_take_turns_in_the_order_they_asked() -> None:
    p = _proven(2)
    p.want([Job("a"), Job("b"), Job("c")])
    assert _take_all(p) == ["a", "b"]
    p.wait_alone("b")
    p.wait_alone("a")
    assert not p.may_go_alone("a")
    assert p.may_go_alone("b")
    assert not p.may_go_alone("a")
    p.finish("b", clean=True)
    assert p.may_go_alone("a")
    p.finish("a", clean=True)
    assert _take_all(p) == ["c"]


def test_a_case_knows_whether_it_played_beside_another() -> None:
    """So an undecidable try that played beside others is played again alone first."""
    p = _proven(2)
    p.want([Job("a"), Job("b"), Job("c")])
    assert _take_all(p) == ["a", "b"]
    assert p.beside("a")
    assert p.beside("b")
    p.finish("a", clean=True)
    p.finish("b", clean=True)
    p.want([Job("c")])
    assert _take_all(p) == ["c"]
    assert not p.beside("c")


def test_one_lane_is_one_case_at_a_time() -> None:
    p = _proven(1)
    p.want([Job("a"), Job("b")])
    assert _take_all(p) == ["a"]
    assert not p.beside("a")


def _finish_many(p: Planner, lag: float, n: int = WINDOW) -> None:
    for i in range(n):
        case = f"case-{lag}-{i}-{len(p.started)}"
        p.want([Job(case)])
        assert p.take() is not None
        p.finish(case, clean=True, lag=lag)


def test_the_lanes_in_use_halve_when_the_noise_is_high_and_reopen_one_by_one() -> None:
    p = _proven(4)
    assert p.cap == 4
    _finish_many(p, CROWDED_LAG * 2, WINDOW - 1)
    assert p.cap == 4  # one window's median decides, not one case
    _finish_many(p, CROWDED_LAG * 2, 1)
    assert p.cap == 2
    _finish_many(p, CROWDED_LAG * 2)
    assert p.cap == 1
    _finish_many(p, CROWDED_LAG * 2)
    assert p.cap == 1
    _finish_many(p, (CALM_LAG + CROWDED_LAG) / 2)  # between: no change
    assert p.cap == 1
    _finish_many(p, CALM_LAG / 2)
    assert p.cap == 2
    for _ in range(4):
        _finish_many(p, CALM_LAG / 2)
    assert p.cap == 4  # never more than the lanes


def test_a_run_opens_four_lanes_and_more_only_while_calm() -> None:
    """DEFAULT_LANES (6) is the most; beside 4 CPU burners, six from the start re-judged
    more than four, so a run opens OPENING_LANES and grows one a calm window."""
    p = _proven(DEFAULT_LANES)
    assert p.cap == OPENING_LANES == 4
    _finish_many(p, (CALM_LAG + CROWDED_LAG) / 2)  # neither calm nor crowded: stays
    assert p.cap == 4
    _finish_many(p, CALM_LAG / 2)
    assert p.cap == 5
    for _ in range(3):
        _finish_many(p, CALM_LAG / 2)
    assert p.cap == DEFAULT_LANES == 6
    assert _proven(2).cap == 2  # fewer asked: all of them open


def test_an_exclusive_cases_own_noise_does_not_close_lanes() -> None:
    """Fifty clients in one loop are the case's own load, not the machine's."""
    p = _proven(4)
    for i in range(WINDOW):
        p.want([Job(f"herd{i}", exclusive=True)])
        assert p.take() is not None
        p.finish(f"herd{i}", clean=True, lag=CROWDED_LAG * 5)
    assert p.cap == 4


def test_a_lane_that_could_not_start_gives_its_case_back() -> None:
    p = _proven(3)
    p.want([Job("a"), Job("b"), Job("c")])
    assert _take_all(p) == ["a", "b", "c"]
    p.give_back("c", exclusive=False)
    assert p.lanes == 2
    p.finish("a", clean=True)
    assert _take_all(p) == ["c"]


def test_lanes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Planner(0)


def test_the_catalogs_exclusive_cases_are_the_statistics_the_envelopes_and_the_blink() -> None:
    """Written once, on the cases: the backoff envelopes' tight upper bounds (alone), the
    jitter and herd statistics (quiet_gc) and the blink's five reconnects (alone)."""
    exclusive = [c.id for c in all_cases() if c.exclusive]
    assert exclusive == [
        "SC-BACKOFF-1",
        "SC-BACKOFF-2",
        "SC-BACKOFF-3",
        "SC-BACKOFF-4",
        "SC-BACKOFF-9",
        "SC-BACKOFF-10",
        "SC-BACKOFF-11",
        "SC-OFFLINE-7",
        "SC-OFFLINE-8",
    ]


def test_when_every_lane_waits_to_go_alone_the_first_to_ask_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two lanes ask to re-judge alone, one after the other: the second's asking wakes
    the first (before, nothing did, and under xdist four lanes waited forever)."""
    monkeypatch.setattr(_lanes, "WAKE", 60.0)  # only a notification can wake a waiter
    owner = _lanes.Lanes(ReferenceAdapter, [], lanes=2)  # never started: no runner
    owner._planner = _proven(2)
    owner._planner.want([Job("a"), Job("b")])
    assert _take_all(owner._planner) == ["a", "b"]
    first, second = _lanes._Lane(owner, 0), _lanes._Lane(owner, 1)
    first.case, second.case = "a", "b"
    entered: list[str] = []

    def rejudge(lane: _lanes._Lane) -> None:
        with lane.alone():
            entered.append(str(lane.case))
        with owner._cond:
            owner._planner.finish(str(lane.case), clean=True)
            owner._cond.notify_all()

    threads = [threading.Thread(target=rejudge, args=(lane,)) for lane in (first, second)]
    threads[0].start()
    deadline = time.monotonic() + 5
    while owner._planner.running.get("a") != "waiting" and time.monotonic() < deadline:
        time.sleep(0.01)
    threads[1].start()
    for thread in threads:
        thread.join(10)
    assert entered == ["a", "b"]
