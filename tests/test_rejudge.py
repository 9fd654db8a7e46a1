"""Re-judging (conformance.timing.Rejudging): which try plays next after an undecidable
one; pure, so every transition is judged here from a table, without a runner."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from conformance.timing._rejudge import (
    _TRANSITIONS,
    FIXED_RETRIES,
    LIMIT_GROWTH,
    REJUDGE_FACTORS,
    Decided,
    Inconclusive,
    Play,
    RejudgeBudget,
    RejudgeError,
    Rejudging,
    Stage,
    Step,
    Tried,
    _Signal,
    factors_for,
)

T = 60.0  # the case's time limit in these rows
SURE = Tried(1.0)
UNSURE = Tried(1.0, undecidable=True, observed="no retry", noise="server p99 0.3 s")
CROWDED = Tried(1.0, undecidable=True, beside=True, observed="no retry", noise="lag")


def alone(factor: float, limit: float = T) -> Play:
    return Play(factor, alone=True, limit=limit)


@dataclass(frozen=True)
class Row:
    """One case's tries: what the runner saw of each, and what the policy said after it."""

    id: str
    factors: tuple[float, ...]
    seen: tuple[Tried, ...]
    said: tuple[Step | tuple[str, float, bool], ...]  # ("inconclusive", factor, budget)
    budget: float = 1000.0
    case_timeout: float = T


TUNABLE = factors_for(True)
FIXED = factors_for(False)
ROWS = [
    Row("decided at the first try", TUNABLE, (SURE,), (Decided(1.0),)),
    Row(
        "undecidable, then decided at x2",
        TUNABLE,
        (UNSURE, SURE),
        (alone(2.0), Decided(2.0)),
    ),
    Row(
        "beside other cases: the same scale alone first, then x2",
        TUNABLE,
        (CROWDED, UNSURE, SURE),
        (alone(1.0), alone(2.0), Decided(2.0)),
    ),
    Row(
        "beside, then decided alone at its own scale",
        TUNABLE,
        (CROWDED, SURE),
        (alone(1.0), Decided(1.0)),
    ),
    Row(
        "undecidable at every scale",
        TUNABLE,
        (UNSURE,) * 5,
        (alone(2.0), alone(4.0), alone(12.0), alone(30.0), ("inconclusive", 30.0, False)),
    ),
    Row(
        "the budget runs out at a re-judging try (the first try's time is not spent)",
        TUNABLE,
        (Tried(5.0, undecidable=True), Tried(3.0, undecidable=True)),
        (alone(2.0, T), ("inconclusive", 2.0, True)),
        budget=2.5,
    ),
    Row(
        "a budget spent before the case: no re-judging, not even alone",
        TUNABLE,
        (CROWDED,),
        (("inconclusive", 1.0, True),),
        budget=0.0,
    ),
    Row(
        "a fixed policy: again at its own scale, FIXED_RETRIES times",
        FIXED,
        (UNSURE,) * (1 + FIXED_RETRIES),
        (*(alone(1.0),) * FIXED_RETRIES, ("inconclusive", 1.0, False)),
    ),
    Row(
        "a fixed policy beside other cases: one more try, alone",
        FIXED,
        (CROWDED, *(UNSURE,) * (1 + FIXED_RETRIES)),
        (*(alone(1.0),) * (1 + FIXED_RETRIES), ("inconclusive", 1.0, False)),
    ),
    Row(
        "a try's limit grows with its scale, against the first try's pace",
        TUNABLE,
        (Tried(2.0, undecidable=True), *(Tried(1.0, undecidable=True),) * 4),
        (  # 2 s a unit of scale; the case's own limit (10 s) at the least
            alone(2.0, max(10.0, LIMIT_GROWTH * 2.0 * 2.0)),
            alone(4.0, LIMIT_GROWTH * 2.0 * 4.0),
            alone(12.0, LIMIT_GROWTH * 2.0 * 12.0),
            alone(30.0, LIMIT_GROWTH * 2.0 * 30.0),
            ("inconclusive", 30.0, False),
        ),
        case_timeout=10.0,
    ),
]


def _shape(step: Step) -> Step | tuple[str, float, bool]:
    if isinstance(step, Inconclusive):
        return ("inconclusive", step.factor, "budget is spent" in step.reason)
    return step


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_the_policy_says_what_follows_each_try(row: Row) -> None:
    budget = RejudgeBudget(row.budget)
    rejudging = Rejudging(row.factors, budget=budget, case_timeout=row.case_timeout)
    assert rejudging.play == Play(1.0, alone=False, limit=row.case_timeout)
    said = []
    for tried in row.seen:
        step = rejudging.next(tried)
        said.append(_shape(step))
        if isinstance(step, Play):
            assert rejudging.play == step
    assert tuple(said) == row.said
    assert rejudging.stage in (Stage.DECIDED, Stage.INCONCLUSIVE)
    # Each undecidable try is on the record, at the scale it was asked to play.
    plays = [Play(1.0, alone=False, limit=T), *(s for s in said if isinstance(s, Play))]
    assert [(r.factor, r.beside) for r in rejudging.tries] == [
        (plays[i].factor, t.beside) for i, t in enumerate(row.seen) if t.undecidable
    ]
    # Only the re-judging tries spend the run's budget: the first is the case's own.
    assert budget.left == pytest.approx(row.budget - sum(t.took for t in row.seen[1:]))


def test_the_tries_are_recorded_with_what_they_observed() -> None:
    rejudging = Rejudging(TUNABLE, budget=RejudgeBudget(), case_timeout=T)
    rejudging.next(CROWDED)
    rejudging.next(UNSURE)
    step = rejudging.next(UNSURE)
    assert step == alone(4.0)
    first, again, x2 = rejudging.tries
    assert (first.factor, first.beside, again.factor, again.beside) == (1.0, True, 1.0, False)
    assert (x2.factor, x2.observed, x2.noise) == (2.0, "no retry", "server p99 0.3 s")


def test_an_inconclusive_reason_names_every_scale_and_the_last_try() -> None:
    rejudging = Rejudging(FIXED, budget=RejudgeBudget(), case_timeout=T)
    for _ in range(FIXED_RETRIES):
        rejudging.next(UNSURE)
    step = rejudging.next(UNSURE)
    assert isinstance(step, Inconclusive)
    assert step.reason.startswith("undecidable at every scale tried (x1, x1, x1): ")
    assert step.reason.endswith("Last try: no retry; server p99 0.3 s")
    assert "budget" not in step.reason


def test_the_scales() -> None:
    assert factors_for(True) == (1.0, *REJUDGE_FACTORS)
    assert factors_for(False) == (1.0,) * (1 + FIXED_RETRIES)


def test_every_stage_ends_sure_or_inconclusive_and_only_a_first_try_can_be_crowded() -> None:
    for stage, moves in _TRANSITIONS.items():
        assert moves[_Signal.SURE] is Stage.DECIDED, stage
        assert moves[_Signal.EXHAUSTED] is Stage.INCONCLUSIVE, stage
        assert (_Signal.CROWDED in moves) == (stage is Stage.FIRST), stage
    assert Stage.DECIDED not in _TRANSITIONS
    assert Stage.INCONCLUSIVE not in _TRANSITIONS


def test_a_report_the_table_does_not_allow_is_a_bug() -> None:
    rejudging = Rejudging(TUNABLE, budget=RejudgeBudget(), case_timeout=T)
    rejudging.next(UNSURE)
    with pytest.raises(RejudgeError, match="CROWDED is no report for a try in NEXT_SCALE"):
        rejudging.next(CROWDED)  # a try that played alone cannot have played beside
    judged = Rejudging(TUNABLE, budget=RejudgeBudget(), case_timeout=T)
    judged.next(SURE)
    with pytest.raises(RejudgeError, match="in DECIDED"):
        judged.next(SURE)
    with pytest.raises(ValueError, match="factors"):
        Rejudging((), budget=RejudgeBudget(), case_timeout=T)
