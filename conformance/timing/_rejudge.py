"""Re-judging a case the measured noise left undecidable: which try plays next. Pure.

No threads, no clock: the runner plays each try that ``Rejudging`` asks for and reports
what it saw (``Tried``: how long it took, whether ``sure`` left it undecidable, whether
it played beside another case). The policy is a state machine written down as data,
``_TRANSITIONS``, as the breaker's is (``conformance.reference._breaker``):

- FIRST: the case at its own scale (beside other cases, when lanes run);
- AGAIN_ALONE: undecidable after it played beside another case: the same scale again,
  alone, for the noise may have been the other case's;
- NEXT_SCALE: undecidable: the next of the policy's scales (``factors_for``), alone;
- DECIDED: a sure verdict; INCONCLUSIVE: undecidable at every scale, or the run's
  re-judging budget is spent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, auto

from conformance._case import Outcome
from conformance._evidence import Evidence
from conformance._result import Rejudged

__all__ = [
    "FIXED_RETRIES",
    "LIMIT_GROWTH",
    "REJUDGE_BUDGET",
    "REJUDGE_FACTORS",
    "Decided",
    "Inconclusive",
    "Play",
    "RejudgeBudget",
    "RejudgeError",
    "Rejudging",
    "Stage",
    "Step",
    "Tried",
    "factors_for",
    "sure",
]

# Re-judging a case the measured noise left undecidable (docs/timing.md): every duration
# of its policy times each factor in turn (same ratios, so the same relations are judged,
# with more room for noise), while the run's re-judging budget lasts. x2 settles the
# herd's statistic cheaply; x30 outgrows a starved loop's noise.
REJUDGE_FACTORS = (2.0, 4.0, 12.0, 30.0)
# A client that cannot be configured is re-judged at its own scale this many times.
FIXED_RETRIES = 2
REJUDGE_BUDGET = 120.0  # seconds of re-judging per run, in all: a starved run still ends
LIMIT_GROWTH = 2.0  # a re-judging try's limit, against its first try's pace


class RejudgeBudget:
    """Seconds of re-judging left to a run, shared by every runner (lane) it has."""

    def __init__(self, seconds: float = REJUDGE_BUDGET) -> None:
        self.left = seconds

    def spend(self, seconds: float) -> None:
        self.left -= seconds

    @property
    def spent(self) -> bool:
        return self.left <= 0


def factors_for(tunable: bool) -> tuple[float, ...]:
    """The scales a case may be judged at: its own, then coarser ones if it can be."""
    if tunable:
        return (1.0, *REJUDGE_FACTORS)
    return (1.0,) * (1 + FIXED_RETRIES)  # a fixed policy: again at its own scale


class Stage(Enum):
    FIRST = auto()  # the case at its own scale, beside other cases if lanes run
    AGAIN_ALONE = auto()  # the first try's scale again, alone: it played beside others
    NEXT_SCALE = auto()  # the policy's next scale, alone
    DECIDED = auto()
    INCONCLUSIVE = auto()


class _Signal(Enum):
    SURE = auto()  # the try's verdict is sure
    CROWDED = auto()  # undecidable, and it played beside another case
    UNDECIDABLE = auto()  # undecidable, and a scale is left
    EXHAUSTED = auto()  # undecidable, and no scale is left or the budget is spent


_TRANSITIONS: dict[Stage, dict[_Signal, Stage]] = {
    Stage.FIRST: {
        _Signal.SURE: Stage.DECIDED,
        _Signal.CROWDED: Stage.AGAIN_ALONE,
        _Signal.UNDECIDABLE: Stage.NEXT_SCALE,
        _Signal.EXHAUSTED: Stage.INCONCLUSIVE,
    },
    Stage.AGAIN_ALONE: {
        _Signal.SURE: Stage.DECIDED,
        _Signal.UNDECIDABLE: Stage.NEXT_SCALE,
        _Signal.EXHAUSTED: Stage.INCONCLUSIVE,
    },
    Stage.NEXT_SCALE: {
        _Signal.SURE: Stage.DECIDED,
        _Signal.UNDECIDABLE: Stage.NEXT_SCALE,
        _Signal.EXHAUSTED: Stage.INCONCLUSIVE,
    },
}


class RejudgeError(RuntimeError):
    """A report that the transition table does not allow in the current stage (a bug)."""


@dataclass(frozen=True)
class Play:
    """Play the case at ``factor`` times its policy's durations, within ``limit`` seconds;
    ``alone``: a re-judging try, played with no other case at once."""

    factor: float
    alone: bool
    limit: float


@dataclass(frozen=True)
class Decided:
    """The last try's verdict stands; it was judged at ``factor``."""

    factor: float


@dataclass(frozen=True)
class Inconclusive:
    """Undecidable at every scale tried, the last at ``factor``; ``reason`` says so."""

    factor: float
    reason: str


Step = Play | Decided | Inconclusive


@dataclass(frozen=True)
class Tried:
    """What the runner saw of the try it was asked to play."""

    took: float  # seconds it played: the first try's set the pace of the rest
    undecidable: bool = False  # ``sure`` left its outcome undecidable
    beside: bool = False  # it played while another case played too (a first try only)
    observed: str = ""  # an undecidable try's outcome, for the record
    noise: str = ""  # an undecidable try's measured lag (headline), for the record


class Rejudging:
    """One case's tries: ``play`` is the try to play now; ``next`` takes what the runner
    saw of it and says what follows. A re-judging try's time is spent from the run's
    ``budget``; its limit grows with its scale (``LIMIT_GROWTH``)."""

    def __init__(
        self, factors: Sequence[float], *, budget: RejudgeBudget, case_timeout: float
    ) -> None:
        if not factors:
            raise ValueError("factors: at least the case's own scale")
        self._left = list(factors[1:])  # the scales not played yet, in order
        self._budget = budget
        self._case_timeout = case_timeout
        self._pace = 0.0  # seconds per unit of scale the first try took
        self._stage = Stage.FIRST
        self._tries: list[Rejudged] = []
        self._play = Play(factors[0], alone=False, limit=case_timeout)

    @property
    def stage(self) -> Stage:
        return self._stage

    @property
    def play(self) -> Play:
        """The try to play now (the last one asked for, once the case is judged)."""
        return self._play

    @property
    def tries(self) -> tuple[Rejudged, ...]:
        """The undecidable tries so far, in order."""
        return tuple(self._tries)

    def next(self, tried: Tried) -> Step:
        """What follows the try ``play`` asked for, which the runner saw as ``tried``."""
        if self._stage not in _TRANSITIONS:
            raise RejudgeError(f"a try reported in {self._stage.name}: the case is judged")
        factor = self._play.factor
        if self._play.alone:
            self._budget.spend(tried.took)
        else:
            self._pace = tried.took / factor
        if tried.undecidable:
            record = Rejudged(factor, tried.observed, tried.noise, tried.beside)
            self._tries.append(record)
        signal = self._signal(tried)
        stage = _TRANSITIONS[self._stage].get(signal)
        if stage is None:
            raise RejudgeError(f"{signal.name} is no report for a try in {self._stage.name}")
        self._stage = stage
        if stage is Stage.DECIDED:
            return Decided(factor)
        if stage is Stage.INCONCLUSIVE:
            return Inconclusive(factor, _inconclusive(self._tries, self._budget.spent))
        if stage is Stage.NEXT_SCALE:
            factor = self._left.pop(0)
        # A try's durations grow with its scale: a re-judging try gets LIMIT_GROWTH
        # times the first try's pace, and the case's own limit at the least.
        limit = max(self._case_timeout, LIMIT_GROWTH * self._pace * factor)
        self._play = Play(factor, alone=True, limit=limit)
        return self._play

    def _signal(self, tried: Tried) -> _Signal:
        if not tried.undecidable:
            return _Signal.SURE
        if self._budget.spent:
            return _Signal.EXHAUSTED
        if tried.beside:  # first alone at the same scale: the noise may have been theirs
            return _Signal.CROWDED
        return _Signal.UNDECIDABLE if self._left else _Signal.EXHAUSTED


def _inconclusive(tries: Sequence[Rejudged], out_of_budget: bool) -> str:
    scales = ", ".join(f"x{t.factor:g}" for t in tries)
    why = " (the run's re-judging budget is spent)" if out_of_budget else ""
    return (
        f"undecidable at every scale tried ({scales}){why}: the harness's own measured "
        f"noise hides the difference between a correct and a broken client. Last try: "
        f"{tries[-1].observed}; {tries[-1].noise}"
    )


def sure(outcome: Outcome, evidence: Evidence, ran_out: bool) -> Outcome:
    """A failure stands unless a deadline ran out (one of the case's waits, or the
    client's own silence timer) while the kit's own loops were starved
    (``Noise.overloaded``), while a request was held on its way beyond every loop
    (``Noise.held_in_transit``), or while a browser page stood still
    (``Noise.page_stalled``). What it waited for may have been late for the kit's
    slowness; such a failure is undecidable, and re-judged. A failure no deadline
    decided stands: a 5 MiB event that starves the loops by itself and arrives cut
    still FAILs."""
    if outcome.ok or outcome.undecidable or outcome.sure:
        return outcome
    noise = evidence.noise
    decided_by_a_deadline = ran_out or evidence.timer_fired
    why = (
        (noise.overloaded() or noise.held_in_transit() or noise.page_stalled())
        if decided_by_a_deadline
        else None
    )
    if why is None:
        return outcome
    return dataclasses.replace(outcome, undecidable=True, observed=f"{outcome.observed}; {why}")
