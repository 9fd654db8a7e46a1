"""What a run of a case comes to: its result record, and the errors a harness raises.

Every report reads ``CaseResult``, and every target raises ``HarnessError``; they live
here, below the runner, so that neither has to load the runner (the fake servers, the
proxy) to reach a record or an exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from conformance._case import Case, Outcome, Verdict
from conformance._evidence import Evidence
from conformance._json import fields_json
from conformance._profiles import Timing

__all__ = [
    "SKIPS",
    "CaseResult",
    "HarnessError",
    "LoopBlocked",
    "Rejudged",
    "RunSettings",
    "SkipKind",
    "Unresponsive",
    "verdict_of",
]

# Why a case was not played (UNSUPPORTED), and whether its rule applies to the client:
# a missing capability or a policy the client cannot take leaves an applicable rule
# unjudged; a transport no profile covers, or a rule the profile excludes, does not apply.
SkipKind = Literal["capability", "untunable", "transport", "profile"]
SKIPS: dict[SkipKind, bool] = {  # kind -> the rule applies (it went unjudged)
    "capability": True,
    "untunable": True,
    "transport": False,
    "profile": False,
}


class RunSettings(TypedDict, total=False):
    """What every runner of one run is made with (``Lanes`` hands them to each lane)."""

    timing: Timing | None
    seed: int
    case_timeout: float
    wire_format: str | None
    # Where each runner adds why its adapter's aclose() failed as it closed (the run's
    # end): shared by the run's runners, reported once by whoever ran them.
    close_failures: list[str]


class HarnessError(Exception):
    """The harness or the adapter broke; the case is ERROR, never FAIL."""


class LoopBlocked(HarnessError):
    """The adapter blocked its event loop; the kit cannot take that thread back."""


class Unresponsive(HarnessError):
    """The client stopped answering the kit's commands (``configure``, ``reset``, or its
    stdin): the run gives up on it instead of waiting out the same limit every case."""


@dataclass(frozen=True)
class Rejudged:
    """One undecidable try of a case, before it was judged again (alone, or at a coarser
    scale)."""

    factor: float  # durations times this, against the profile's timing
    observed: str
    noise: str  # the measured lag's headline
    beside: bool = False  # it played beside other cases (lanes): played again alone

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class CaseResult:
    case: Case
    verdict: Verdict
    profile: str | None
    timing: Timing
    outcome: Outcome | None = None
    reason: str = ""  # why UNSUPPORTED, ERROR or INCONCLUSIVE
    evidence: Evidence | None = None
    duration: float = 0.0
    factor: float = 1.0  # the scale the verdict was judged at, against the profile's timing
    rejudged: tuple[Rejudged, ...] = ()  # the undecidable tries before it
    skip: SkipKind | None = None  # why UNSUPPORTED
    # Why the adapter's aclose() failed as the run ended, on the run's last case: an
    # ERROR of its own (pytest: at the case's teardown), whatever the case's verdict.
    teardown: str = ""

    def to_json(self, *, timeline: bool = True, evidence: bool = True) -> dict[str, Any]:
        """The result as JSON-ready data; ``timeline`` adds the merged timeline and the
        chart, ``evidence`` the full evidence (the costly parts, for reports written out)."""
        data: dict[str, Any] = {
            **self.case.to_json(),
            "verdict": self.verdict.value,
            "profile": self.profile,
            "timing": self.timing,
            "reason": self.reason,
            "skip": self.skip,
            "teardown": self.teardown,
            "duration": round(self.duration, 4),
            "factor": self.factor,
            "rejudged": [r.to_json() for r in self.rejudged],
        }
        if self.outcome is not None:
            data.update(
                expected=self.outcome.expected,
                observed=self.outcome.observed,
                details=list(self.outcome.details),
            )
            if self.outcome.figure is not None:
                data["figure"] = self.outcome.figure.to_json()
        if self.evidence is not None:
            data["noise"] = self.evidence.noise.report()
        if self.evidence is not None and timeline:
            data["timeline"] = self.evidence.timeline()
            data["chart"] = self.evidence.chart()
        if self.evidence is not None and evidence:
            data["evidence"] = self.evidence.to_json()
        return data


def verdict_of(case: Case, outcome: Outcome) -> Verdict:
    """A decided outcome's verdict: a failed MUST is FAIL, a failed SHOULD or MAY NON-STRICT."""
    if outcome.ok:
        return Verdict.PASS
    return Verdict.FAIL if case.level.value == "MUST" else Verdict.NON_STRICT
