"""Virtual time on every core: a run's cases play in this process and in workers
(``conformance._worker``), with the evidence, stamps included, of a run in one."""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from conformance import Verdict, run_suite
from conformance._adapter import AdapterRequest, StreamSink
from conformance._case import Case
from conformance._evidence import without_ports
from conformance._result import CaseResult
from conformance._runner import SuiteRunner
from conformance._worker import XDIST_WORKER, ProcessRunner, default_processes, usable_cores
from pytest_streamcheck.targets._reference import ReferenceAdapter

# Enough cases that a worker starts and plays some; SC-BREAKER-9's client prints its
# own clock ("circuit open until ..."): it is the same wherever the case plays.
SOME = ["SC-RETRY-*", "SC-BACKOFF-9", "SC-BREAKER-9", "SC-STALL-1", "SC-POST-2"]


@dataclass
class Workers:
    started: list[int] = field(default_factory=list)  # the pid of every worker started
    played: list[str] = field(default_factory=list)  # the cases workers played
    starting: threading.Event = field(default_factory=threading.Event)
    answered: threading.Event = field(default_factory=threading.Event)  # or failed


# Seconds this process's lane waits, once a worker is starting, for the worker's first
# answer: on a loaded machine this process could otherwise play every case before the
# worker is up, and a test of what a worker does would see it do nothing.
FIRST_ANSWER = 60.0


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Workers]:
    """What the run's workers did; at the end, every one has ended and been reaped."""
    seen = Workers()
    start, run, local = ProcessRunner.start, ProcessRunner.run, SuiteRunner.run

    def started(self: ProcessRunner) -> ProcessRunner:
        seen.starting.set()
        try:
            return start(self)
        except BaseException:
            seen.answered.set()
            raise
        finally:
            if self._proc is not None:
                seen.started.append(self._proc.pid)

    def counted(self: ProcessRunner, case: Case) -> CaseResult:
        try:
            result = run(self, case)
        finally:
            seen.answered.set()
        seen.played.append(result.case.id)
        return result

    def gated(self: SuiteRunner, case: Case) -> CaseResult:  # this process's lanes only
        if seen.starting.is_set():
            seen.answered.wait(FIRST_ANSWER)
        return local(self, case)

    monkeypatch.setattr(ProcessRunner, "start", started)
    monkeypatch.setattr(ProcessRunner, "run", counted)
    monkeypatch.setattr(SuiteRunner, "run", gated)
    yield seen
    for pid in seen.started:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# Their Retry-After is an HTTP date: the calendar's, which moves from run to run.
DATED = ("SC-RETRY-31", "SC-RETRY-32")


def _evidence(results: tuple[CaseResult, ...]) -> dict[str, str]:
    return {
        r.case.id: without_ports(json.dumps(r.evidence.to_json(), sort_keys=True))
        for r in results
        if r.evidence is not None and r.case.id not in DATED
    }


def test_a_worker_plays_cases_with_the_evidence_one_process_gives(workers: Workers) -> None:
    factory = functools.partial(ReferenceAdapter, seed=7)
    spread = run_suite(factory, select=SOME, seed=7, lanes=2, processes=2)
    assert len(workers.started) == 1
    assert workers.played, "no case played in the worker"
    assert {r.case.id for r in spread} > set(workers.played)  # this process played too
    alone = run_suite(factory, select=SOME, seed=7, lanes=1)
    assert [r.verdict for r in spread] == [r.verdict for r in alone]
    assert _evidence(spread) == _evidence(alone)
    assert {r.verdict for r in spread} <= {Verdict.PASS, Verdict.UNSUPPORTED}


def test_a_factory_that_does_not_pickle_plays_in_this_process(workers: Workers) -> None:
    results = run_suite(lambda: ReferenceAdapter(seed=1), select=SOME, lanes=2, processes=2)
    assert workers.started == []
    assert {r.verdict for r in results} <= {Verdict.PASS, Verdict.UNSUPPORTED}


class _DiesInAWorker(ReferenceAdapter):
    """Exits its process as its first stream starts, in a worker only."""

    def __init__(self, parent: int) -> None:
        super().__init__()
        self.parent = parent

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        if os.getpid() != self.parent:
            os._exit(3)
        await super().stream(request, sink)


class _PrintsInAWorker(ReferenceAdapter):
    """Writes to its stdout, where a worker's answers would go were they not moved."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        print("a client that talks\n\x80\x03 and writes bytes", flush=True)
        sys.stdout.buffer.write(b"\x80\x04\x95garbage")
        sys.stdout.flush()
        await super().stream(request, sink)


def test_a_worker_that_dies_leaves_its_case_to_this_process(workers: Workers) -> None:
    factory = functools.partial(_DiesInAWorker, os.getpid())
    results = run_suite(factory, select=SOME, lanes=2, processes=2)
    verdicts = Counter(r.verdict for r in results)
    assert set(verdicts) <= {Verdict.PASS, Verdict.UNSUPPORTED}, verdicts
    assert len(workers.started) == 1  # no second one: the run plays on here
    assert workers.played == []  # it died on its first case, which played here instead


def test_what_a_client_prints_in_a_worker_leaves_its_answers_whole(workers: Workers) -> None:
    results = run_suite(_PrintsInAWorker, select=SOME, lanes=2, processes=2)
    assert workers.played
    assert {r.verdict for r in results} <= {Verdict.PASS, Verdict.UNSUPPORTED}


def test_an_xdist_worker_plays_its_share_in_its_own_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a process xdist started (and a run nested in one), the cores are shared already."""
    monkeypatch.setenv(XDIST_WORKER, "gw0")
    assert default_processes() == 1
    monkeypatch.delenv(XDIST_WORKER)
    assert default_processes() == usable_cores()


def test_the_cores_are_this_process_s_share() -> None:
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)
