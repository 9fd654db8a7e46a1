"""Planning for cases side by side: which case starts next, which plays alone. Pure.

No threads, no IO, no imports of the kit: ``conformance._lanes`` runs the plan on
threads (one ``SuiteRunner`` a lane), and the plugin reads ``DEFAULT_LANES`` from here
without loading the servers. Why these rules: ``conformance._lanes`` and docs/timing.md
("Cases side by side").
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "CALM_LAG",
    "CROWDED_LAG",
    "DEFAULT_LANES",
    "OPENING_LANES",
    "WINDOW",
    "Job",
    "Planner",
]

# Cases at once by default, at most; a run opens OPENING_LANES of them and more only
# while its noise stays calm (measured on a 2-core machine, docs/timing.md: quiet, 6
# lanes played the catalog in 13.0 s against 14.6 s for 4; beside 4 CPU burners, 6 from
# the start re-judged more and took 22.8 s against 18.6 s).
DEFAULT_LANES = 6
OPENING_LANES = 4
# The lanes in use follow the noise: over the last WINDOW cases that played shared, the
# median of each one's worst loop p99 lag (seconds). Above CROWDED_LAG the lanes in use
# halve; below CALM_LAG one more opens (docs/timing.md, "Cases side by side").
WINDOW = 8
CROWDED_LAG = 0.020
CALM_LAG = 0.010
Mode = Literal["shared", "alone", "waiting"]


@dataclass(frozen=True)
class Job:
    """A case to play: its id, and whether it must play with no other case at once."""

    id: str
    exclusive: bool = False


@dataclass
class Planner:
    """Which case starts next and which plays alone: pure state, no threads, no IO.

    ``want`` says which cases are wanted, in order (the one a caller waits for first);
    ``take`` hands out the next case to start, or None while it must wait: once a case
    has played through, the wanted exclusive cases first, back to back, so the lanes
    drain once for all of them rather than once for each; ``finish``
    reports a case done. A lane whose case must be re-judged asks to go alone
    (``wait_alone``) and plays once ``may_go_alone`` says so: from then on nothing new
    starts until every other case has finished, and the first to ask goes first.
    """

    lanes: int  # the most cases at once
    limit: int = 0  # the lanes in use now (adapted to the noise); 0: OPENING_LANES
    proven: bool = False  # a case played through cleanly: lanes beyond the first may open
    pending: list[Job] = field(default_factory=list)
    running: dict[str, Mode] = field(default_factory=dict)
    waiters: list[str] = field(default_factory=list)  # ids waiting to play alone, in order
    started: set[str] = field(default_factory=set)
    crowded: set[str] = field(default_factory=set)  # ids that played beside another case
    recent: list[float] = field(default_factory=list)  # lags of the last shared cases

    def __post_init__(self) -> None:
        if self.lanes < 1:
            raise ValueError(f"lanes must be at least 1, got {self.lanes}")
        self.limit = min(self.limit or OPENING_LANES, self.lanes)

    @property
    def cap(self) -> int:
        """Cases that may play at once now."""
        return min(self.limit, self.lanes) if self.proven else 1

    def want(self, jobs: Sequence[Job]) -> None:
        """The cases wanted, in order; replaces the previous wish (started ones run on)."""
        seen: set[str] = set()
        self.pending = []
        for job in jobs:
            if job.id not in self.started and job.id not in seen:
                seen.add(job.id)
                self.pending.append(job)

    def take(self) -> Job | None:
        """The next case to start now, or None: nothing wanted, or it must wait."""
        if not self.pending or any(m != "shared" for m in self.running.values()):
            return None  # someone plays alone, or waits to: let the others drain
        job = self._next()
        if job.exclusive:
            if self.running:
                return None  # nothing overtakes it: the lanes drain, then it plays
        elif len(self.running) >= self.cap:
            return None
        self.pending.remove(job)
        self.started.add(job.id)
        if self.running:  # it and every case in play now play side by side
            self.crowded.update(self.running, (job.id,))
        self.running[job.id] = "alone" if job.exclusive else "shared"
        return job

    def _next(self) -> Job:
        """The first wanted case; once the client is proven, the first exclusive one."""
        if self.proven:
            return next((j for j in self.pending if j.exclusive), self.pending[0])
        return self.pending[0]

    def beside(self, case_id: str) -> bool:
        """Whether ``case_id`` has played while another case played too."""
        return case_id in self.crowded

    def wait_alone(self, case_id: str) -> None:
        """The lane playing ``case_id`` must play its next try alone."""
        if self.running.get(case_id) == "shared":
            self.running[case_id] = "waiting"
            self.waiters.append(case_id)

    def may_go_alone(self, case_id: str) -> bool:
        """Whether ``case_id`` may play its try now: every other case finished or waiting,
        and it asked first. It then stays alone until it finishes."""
        mode = self.running.get(case_id)
        if mode == "alone":
            return True
        if mode != "waiting" or self.waiters[0] != case_id:
            return False
        if any(m != "waiting" for k, m in self.running.items() if k != case_id):
            return False
        self.waiters.pop(0)
        self.running[case_id] = "alone"
        return True

    def finish(self, case_id: str, *, clean: bool, lag: float | None = None) -> None:
        """``case_id`` is done. ``clean``: it played (no harness error); ``lag``: its worst
        loop's p99 lag (seconds), which counts towards the lanes in use if it played
        shared to the end (an exclusive case's fifty clients are its own load)."""
        mode = self.running.pop(case_id, None)
        self.crowded.discard(case_id)
        if case_id in self.waiters:
            self.waiters.remove(case_id)
        if clean:
            self.proven = True
        if mode != "shared" or lag is None:
            return
        self.recent = [*self.recent[-(WINDOW - 1) :], lag]
        if len(self.recent) < WINDOW:
            return
        typical = statistics.median(self.recent)
        if typical > CROWDED_LAG and self.limit > 1:
            self.limit = max(1, self.limit // 2)
            self.recent = []
        elif typical < CALM_LAG and self.limit < self.lanes:
            self.limit += 1
            self.recent = []

    def give_back(self, case_id: str, exclusive: bool) -> None:
        """A lane could not start: ``case_id`` is wanted first again, with one lane less."""
        self.running.pop(case_id, None)
        self.started.discard(case_id)
        self.pending.insert(0, Job(case_id, exclusive))
        self.lanes = max(1, self.lanes - 1)
