"""Cases side by side: lanes, each a ``SuiteRunner`` of its own (server, proxy, client).

A case mostly waits (for backoffs, cooldowns, stalls), so a run plays several at once,
each in a lane with its own fake server, fault proxy and adapter instance (the factory
makes a fresh client): lanes share no ledger, no breaker, no randomness. What may
overlap, and why (docs/timing.md, "Cases side by side"):

- A case's noise is measured on its own lane's three loops during its own play (the
  lane's ledger is cleared as the case starts), so the load other lanes put on those
  loops (CPU, the GIL, the collector) is in the lag its intervals allow. A check sure
  under that noise is sure; one that is not is undecidable, never FAIL, and then:
- a re-judging try (x2, x4, x12, x30) plays **alone**: no other case plays meanwhile;
- an exclusive case (``Case.exclusive``: the jitter and herd statistics over fifty
  clients) plays alone;
- the first case plays alone, and lanes open only once a case has played through
  cleanly: a client that does not start, or blocks its loop, is met once, as in a
  serial run, and every later case says so at once;
- an undecidable try that played beside other cases plays again alone at its own
  scale first (``conformance.timing.Rejudging``), then at x2, x4, x12 and x30 as in a serial run;
- the lanes in use follow the noise (``Planner.finish``): when the typical p99 lag of
  the last cases passes ``CROWDED_LAG`` they halve; below ``CALM_LAG`` one reopens.

In virtual time a case is exact whatever plays beside it, and all CPU: lanes there are
processes (a process's threads share one GIL), one per core the run may use
(``processes``), and no case plays alone. The first lane plays in this process, each
further one in a worker (``conformance._worker``) made from the pickled factory; a
factory that does not pickle, or a worker that fails, leaves the run to this process.

``Planner`` is the pure part (which case starts next, which plays alone; unit-tested
without threads); ``Lanes`` is the thin part that runs it on threads. One lane is
the serial run: each case plays on the caller's thread, as before lanes existed.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Unpack

from conformance._adapter import AdapterInfo, ClientAdapter
from conformance._case import Case, Verdict
from conformance._profiles import Profile
from conformance._result import CaseResult, HarnessError, RunSettings
from conformance._runner import CASE_TIMEOUT, SuiteRunner
from conformance._schedule import DEFAULT_LANES, Job, Planner
from conformance._worker import ProcessRunner, WorkerGone, default_processes, factory_bytes
from conformance.timing._rejudge import RejudgeBudget

__all__ = ["DEFAULT_LANES", "Lanes", "lag_of"]

# A lane's thread is joined for this long at close beyond the case's own time limit.
JOIN_SLACK = 20.0
# Seconds between looks at the plan while waiting on it, should a notification be missed.
WAKE = 0.25


def lag_of(result: CaseResult) -> float | None:
    """The worst loop's p99 lag in a result's evidence (seconds), if it was measured."""
    if result.evidence is None:
        return None
    p99s = [s["p99"] for s in result.evidence.noise.summary().values() if s.get("samples")]
    return max(p99s, default=None)


@dataclass
class _Raised:
    """A lane's case raised what is no harness error (a bug in the kit): re-raised to
    the caller that waits for the case."""

    error: BaseException


class _Lane:
    def __init__(self, owner: Lanes, index: int) -> None:
        self.owner = owner
        self.index = index
        self.runner: SuiteRunner | ProcessRunner | None = None
        self.jobs: queue.SimpleQueue[Case | None] = queue.SimpleQueue()
        self.case: str | None = None  # the case it plays
        self.alive = True
        self.thread = threading.Thread(
            target=owner._work, args=(self,), name=f"streamcheck-lane-{index}", daemon=True
        )

    # The runner's gate (conformance._runner.Gate).
    def beside(self) -> bool:
        with self.owner._cond:
            return self.case is not None and self.owner._planner.beside(self.case)

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Around a re-judging try: wait until no other case plays, then hold them off."""
        owner = self.owner
        with owner._cond:
            assert self.case is not None
            owner._planner.wait_alone(self.case)
            # The others may all be waiting too: the first to have asked must hear of it.
            owner._cond.notify_all()
            while not owner._planner.may_go_alone(self.case):
                owner._cond.wait(WAKE)
        yield


class Lanes:
    """Plays cases on up to ``lanes`` runners at once; results in any order asked.

    ``result(case, upcoming)`` returns one case's result, starting it (and, on free
    lanes, the ``upcoming`` cases, in order) as the planner allows. ``start`` starts
    the first lane at once (so a client that cannot start raises ``HarnessError``);
    otherwise a client that does not start makes that case an ERROR and every later
    case says so at once. ``close`` stops every lane; cases not asked for are dropped.
    ``processes``: the processes a run in virtual time may play in, at most (None:
    ``default_processes()``, one a core); it plays in ``min(lanes, processes)``.
    """

    def __init__(
        self,
        adapter_factory: Callable[[], ClientAdapter],
        profiles: Sequence[Profile] | None,
        *,
        lanes: int = DEFAULT_LANES,
        processes: int | None = None,
        **settings: Unpack[RunSettings],
    ) -> None:
        # Every lane's runner is made with the same settings; only the gate differs.
        asked = None if profiles is None else tuple(profiles)  # None: the client's own
        self._factory, self._asked, self._settings = adapter_factory, asked, settings
        self._processes = default_processes() if processes is None else max(1, processes)
        self._pickled: bytes | None = None  # the factory, once lanes run in processes
        self._virtual = False  # the client plays in virtual time (known once it started)
        self._timing = settings.get("timing")
        self._case_timeout = settings.get("case_timeout", CASE_TIMEOUT)
        self._planner = Planner(lanes)
        self.lanes = lanes
        self._budget = RejudgeBudget()
        self._cond = threading.Condition()
        self._cases: dict[str, Case] = {}
        self._results: dict[str, CaseResult | _Raised] = {}
        self._lanes: list[_Lane] = []
        self._serial: SuiteRunner | None = None
        self._start_error: str | None = None
        self._broken: SuiteRunner | None = None  # an unusable runner: answers at once
        self._closed = False
        self._taken: set[str] = set()  # results handed out

    @property
    def profiles(self) -> tuple[Profile, ...] | None:
        """The profiles the cases are judged under, once a lane has started."""
        started = self._started()
        return None if started is None else started.profiles

    @property
    def info(self) -> AdapterInfo | None:
        """What the client says of itself, once a lane has started it."""
        started = self._started()
        return None if started is None else started.info

    def _started(self) -> SuiteRunner | None:
        runners = [self._serial, *(lane.runner for lane in self._lanes)]
        return next((r for r in runners if isinstance(r, SuiteRunner)), None)

    def _runner(self, lane: _Lane | None) -> SuiteRunner:
        return SuiteRunner(
            self._factory, self._asked, gate=lane, budget=self._budget, **self._settings
        )

    def _lane_runner(self, lane: _Lane) -> SuiteRunner | ProcessRunner:
        """A lane's runner: beyond the first, in virtual time, one in a worker process."""
        if lane.index > 0 and self._pickled is not None:
            return ProcessRunner(self._pickled, self._asked, **self._settings)
        return self._runner(lane)

    def _go_virtual(self) -> int:
        """The client plays in virtual time: exact and all CPU, so no case need play
        alone, and each lane is a process (a process's threads share one GIL), as many
        as the cores the run may use, when the factory can be sent to a worker (it
        pickles); else one lane. Returns the lanes."""
        self._virtual = True
        wanted = min(self.lanes, self._processes)
        if wanted > 1:
            self._pickled = factory_bytes(self._factory)
        self._planner.lanes = wanted if self._pickled is not None else 1
        return self._planner.lanes

    # -- the caller's side ---------------------------------------------------------------
    def start(self) -> Lanes:
        """Start the first lane now; HarnessError (nothing left running) if it cannot."""
        if self.lanes == 1:
            self._serial = self._runner(None).start()
            return self
        lane = self._new_lane()
        try:
            lane.runner = self._runner(lane).start()
        except BaseException:
            lane.alive = False
            lane.jobs.put(None)
            raise
        if lane.runner.timing == "virtual" and self._go_virtual() == 1:
            self._serial, lane.runner = lane.runner, None
            self._lanes.remove(lane)
            lane.alive = False
            lane.jobs.put(None)
            lane.thread.join()
            self.lanes = 1
        return self

    def result(self, case: Case, upcoming: Sequence[Case] = ()) -> CaseResult:
        """``case``'s result, played now unless it already was; ``upcoming``: the cases
        expected next, in order, which free lanes may start meanwhile."""
        if self.lanes == 1:
            return self._serial_result(case)
        with self._cond:
            for c in (case, *upcoming):
                self._cases[c.id] = c
            if case.id in self._taken:  # asked again (a rerun plugin): it plays again
                self._taken.discard(case.id)
                self._planner.started.discard(case.id)
            if not self._stopped:
                self._planner.want([self._job(c) for c in (case, *upcoming)])
                self._dispatch()
            while case.id not in self._results:
                if self._stopped and case.id not in self._planner.started:
                    self._results[case.id] = self._at_once(case)
                    break
                self._cond.wait(WAKE)
            done = self._results.pop(case.id)
            self._taken.add(case.id)
        if isinstance(done, _Raised):
            raise done.error
        return done

    def run(self, cases: Sequence[Case]) -> tuple[CaseResult, ...]:
        """Every one of ``cases``, in order."""
        return tuple(self.result(c, cases[i + 1 :]) for i, c in enumerate(cases))

    def close(self) -> None:
        """Stop every lane (a case in play ends first); idempotent."""
        with self._cond:
            self._closed = True
            self._planner.want([])
            lanes = list(self._lanes)
            for lane in lanes:
                lane.jobs.put(None)
            self._cond.notify_all()
        for lane in lanes:
            if lane.thread.is_alive() and lane.thread is not threading.current_thread():
                lane.thread.join(self._case_timeout + JOIN_SLACK)
        if self._serial is not None:
            self._serial.close()
            self._serial = None

    def _job(self, case: Case) -> Job:
        return Job(case.id, case.exclusive and not self._virtual)

    # -- one lane: the serial run, on the caller's thread --------------------------------
    def _serial_result(self, case: Case) -> CaseResult:
        if self._serial is None:
            if self._start_error is not None:
                return self._at_once(case)
            runner = self._runner(None)
            try:
                self._serial = runner.start()
            except HarnessError as exc:
                self._start_error = str(exc).splitlines()[0]
                with contextlib.suppress(Exception):  # half started: stop what did start
                    runner.close()
                return self._errored(case, str(exc))
        return self._serial.run(case)

    @property
    def _stopped(self) -> bool:
        """No case starts any more (the lock held): the client did not start, a runner
        became unusable, or the lanes closed."""
        return self._start_error is not None or self._broken is not None or self._closed

    def _errored(self, case: Case, reason: str) -> CaseResult:
        return CaseResult(case, Verdict.ERROR, None, self._timing or "real", reason=reason)

    def _at_once(self, case: Case) -> CaseResult:
        """The result of a case that cannot be played: the client did not start, or a
        runner became unusable (each later case says why, at once)."""
        if self._broken is not None:
            return self._broken.run(case)  # UNSUPPORTED stays so; otherwise ERROR, at once
        if self._start_error is None:
            return self._errored(case, "not run: the lanes were closed before it started")
        return self._errored(
            case, f"the client did not start (see the first ERROR): {self._start_error}"
        )

    # -- lanes: threads --------------------------------------------------------------------
    def _new_lane(self) -> _Lane:
        lane = _Lane(self, len(self._lanes))
        self._lanes.append(lane)
        lane.thread.start()
        return lane

    def _dispatch(self) -> None:
        """Hand every case the planner lets start to an idle lane (with the lock held)."""
        if self._stopped:
            return
        while (job := self._planner.take()) is not None:
            lane = next((x for x in self._lanes if x.alive and x.case is None), None)
            if lane is None:
                lane = self._new_lane()
            lane.case = job.id
            lane.jobs.put(self._cases[job.id])

    def _work(self, lane: _Lane) -> None:
        """A lane's thread: play the cases handed to it, one at a time, until told to stop."""
        try:
            while (case := lane.jobs.get()) is not None:
                done = self._play(lane, case)
                with self._cond:
                    lane.case = None
                    try:
                        if done is None:  # the lane could not start: the case goes back
                            lane.alive = False
                            self._pickled = None  # a worker that failed: no more of them
                            self._planner.give_back(case.id, self._job(case).exclusive)
                        else:
                            self._settle(lane, case, done)
                        self._dispatch()
                    except BaseException as exc:  # a bug in the kit: never a silent hang
                        self._results[case.id] = _Raised(exc)
                        self._planner.finish(case.id, clean=False)
                    finally:
                        self._cond.notify_all()
                if done is None:
                    return
        finally:
            if lane.runner is not None:
                lane.runner.close()

    def _play(self, lane: _Lane, case: Case) -> CaseResult | _Raised | None:
        try:
            if lane.runner is None:
                runner = self._lane_runner(lane)
                try:
                    lane.runner = runner.start()
                    if lane.index == 0 and lane.runner.timing == "virtual":
                        with self._cond:  # (the first case plays alone: none opened yet)
                            self._go_virtual()
                except HarnessError as exc:
                    with contextlib.suppress(Exception):
                        runner.close()
                    if lane.index > 0:
                        return None  # lane 0 plays on: the client did start there
                    with self._cond:
                        self._start_error = str(exc).splitlines()[0]
                    return self._errored(case, str(exc))
            return lane.runner.run(case)
        except WorkerGone:  # a worker that died: the case plays on another lane (as above)
            return None
        except BaseException as exc:  # a bug in the kit: the waiting caller raises it
            return _Raised(exc)

    def _settle(self, lane: _Lane, case: Case, done: CaseResult | _Raised) -> None:
        self._results[case.id] = done
        if isinstance(done, _Raised):
            self._planner.finish(case.id, clean=False)
            return
        if isinstance(lane.runner, ProcessRunner) and lane.runner.unusable is not None:
            lane.alive = False  # a worker whose client broke: this process plays on
            lane.jobs.put(None)
            self._planner.lanes = max(1, self._planner.lanes - 1)
        elif isinstance(lane.runner, SuiteRunner) and lane.runner.unusable is not None:
            self._broken = lane.runner
        clean = done.verdict not in (Verdict.ERROR, Verdict.UNSUPPORTED)
        self._planner.finish(case.id, clean=clean, lag=lag_of(done))
