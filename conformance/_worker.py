"""Lanes in processes of their own, for virtual time: the worker's loop, and the handle a
lane plays through (``ProcessRunner``).

Virtual time is all CPU, and one process's threads share one GIL, so on a machine with
more cores a run's virtual cases play in more processes: ``conformance._lanes`` plays
the first lane in its own process and each further one in a worker. A worker runs
``conformance._worker.main``; it reads pickled messages on its stdin and writes
pickled answers to a copy of its stdout, whose descriptor then points at stderr, so
that a client that prints cannot corrupt them. The parent sends ``Start`` once, then a
case id per case, then None; the worker answers ``Ready``, a ``Played`` per case, and
``Closed``. A worker whose parent went away reads the end of its stdin and exits.

Cases travel by id and results without their case (a case holds closures, which do not
pickle); the evidence, the outcome and the rest pickle as they are.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import IO, Any, Unpack

from conformance._adapter import ClientAdapter
from conformance._case import Case, all_cases
from conformance._profiles import Profile, Timing
from conformance._result import CaseResult, HarnessError, RunSettings
from conformance._runner import SuiteRunner

__all__ = [
    "ProcessRunner",
    "WorkerGone",
    "default_processes",
    "factory_bytes",
    "main",
    "usable_cores",
]

# Seconds a worker has to start (import the kit, start its client and servers) and to
# close; a worker slower than that is killed, and its parent plays every case itself.
START_LIMIT = 60.0
STDERR_TAIL = 2000  # characters of a dead worker's stderr in its message


class WorkerGone(HarnessError):
    """The worker cannot play (it did not start, or died): another lane plays the case."""


@dataclass(frozen=True)
class Start:
    path: list[str]  # the parent's sys.path: the factory's module imports as it did there
    factory: bytes  # the pickled adapter factory
    profiles: tuple[Profile, ...] | None
    settings: dict[str, Any]  # RunSettings, without close_failures


@dataclass(frozen=True)
class Ready:
    error: str = ""  # why the worker cannot play ("": it can)


@dataclass(frozen=True)
class Played:
    case: str
    fields: dict[str, Any] | None  # the result's fields but its case; None: not played here
    unusable: str | None = None  # why the worker's runner can play no further case


@dataclass(frozen=True)
class Closed:
    failures: list[str]  # why the adapter's aclose() failed, as close_failures says


def default_processes() -> int:
    """The processes a run in virtual time plays in by default: one a core this process
    may use, and one in a pytest-xdist worker (or a run nested in one, as pytester's
    are), whose siblings already share the cores."""
    return 1 if os.environ.get(XDIST_WORKER) else usable_cores()


XDIST_WORKER = "PYTEST_XDIST_WORKER"  # set in every process pytest-xdist starts


def usable_cores() -> int:
    """The cores this process may run on: its affinity (a CI runner's share), not the
    machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def factory_bytes(factory: Callable[[], ClientAdapter]) -> bytes | None:
    """The factory, pickled for a worker; None if it does not pickle (a lambda, a
    closure): the run then plays in one process."""
    try:
        return pickle.dumps(factory)
    except Exception:  # pickling raises whatever the object's reducer raises
        return None


class ProcessRunner:
    """A ``SuiteRunner`` in a worker process, as a lane plays through it (``start``,
    ``run``, ``unusable``, ``close``). ``WorkerGone`` from ``start`` or ``run``: the
    worker cannot play, and the case goes to another lane."""

    timing: Timing = "virtual"

    def __init__(
        self,
        factory: bytes,
        profiles: Sequence[Profile] | None,
        **settings: Unpack[RunSettings],
    ) -> None:
        self._start = Start(
            list(sys.path),
            factory,
            None if profiles is None else tuple(profiles),
            {k: v for k, v in settings.items() if k != "close_failures"},
        )
        self.close_failures = settings.get("close_failures", [])
        self.unusable: str | None = None
        self._stderr: IO[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ProcessRunner:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by kill()
        self._proc = subprocess.Popen(
            # main by its module's name: what it pickles is then conformance._worker's
            [sys.executable, "-c", "from conformance._worker import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        # A worker that hangs as it starts is killed: its read then ends, and raises.
        timer = threading.Timer(START_LIMIT, self._proc.kill)
        timer.start()
        try:
            self._send(self._start)
            answer = self._receive()
            if not isinstance(answer, Ready) or answer.error:
                why = answer.error if isinstance(answer, Ready) else repr(answer)
                raise WorkerGone(f"the worker did not start: {why}")
        except BaseException:
            self.kill()
            raise
        finally:
            timer.cancel()
        return self

    def run(self, case: Case) -> CaseResult:
        """The case's result, played in the worker."""
        self._send(case.id)
        answer = self._receive()
        if not isinstance(answer, Played) or answer.case != case.id or answer.fields is None:
            raise WorkerGone(f"the worker did not play {case.id}: {answer!r}")
        self.unusable = answer.unusable
        return CaseResult(case=case, **answer.fields)

    def close(self) -> None:
        """Close the worker's client (why its aclose() failed goes to close_failures)."""
        if self._proc is None:
            return
        try:
            self._send(None)
            answer = self._receive()
            self._proc.wait(START_LIMIT)
            if isinstance(answer, Closed):
                self.close_failures.extend(answer.failures)
        except (WorkerGone, subprocess.TimeoutExpired):
            pass
        finally:
            self.kill()

    def kill(self) -> None:
        """Stop the worker at once; idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):  # a flush into a dead worker's pipe
                        pipe.close()
        if self._stderr is not None:
            self._stderr.close()

    def _send(self, message: object) -> None:
        pipe = self._proc.stdin if self._proc is not None else None
        try:
            assert pipe is not None, "the worker was not started"
            pickle.dump(message, pipe)
            pipe.flush()
        except (OSError, ValueError) as exc:  # a dead worker, or one killed meanwhile
            raise WorkerGone(f"the worker stopped reading: {exc}") from None

    def _receive(self) -> object:
        pipe = self._proc.stdout if self._proc is not None else None
        try:
            assert pipe is not None, "the worker was not started"
            return pickle.load(pipe)
        except Exception as exc:  # the end of the pipe, or what unpickling raised
            raise WorkerGone(f"the worker ended: {exc!r}{self._tail()}") from None

    def _tail(self) -> str:
        try:
            assert self._stderr is not None
            self._stderr.seek(0)
            text = self._stderr.read().decode(errors="replace")[-STDERR_TAIL:]
        except (AssertionError, OSError, ValueError):
            return ""
        return f"; its stderr: {text}" if text.strip() else ""


# -- the child -----------------------------------------------------------------------------
def main() -> None:
    """The worker: play the cases the parent names, one at a time, until told to stop."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the client prints goes to stderr, never into the answers
    requests = sys.stdin.buffer
    start = pickle.load(requests)
    runner = _start(start, answers)
    if runner is None:
        return
    catalog = {case.id: case for case in all_cases()}
    try:
        while (asked := pickle.load(requests)) is not None:
            _answer(answers, _play(runner, catalog.get(asked), asked))
    except (EOFError, OSError):  # the parent went away: no one to answer
        runner.close()
        return
    runner.close()
    _answer(answers, Closed(list(runner.close_failures)))


def _start(start: Start, answers: IO[bytes]) -> SuiteRunner | None:
    sys.path[:] = start.path
    try:
        factory = pickle.loads(start.factory)
        runner = SuiteRunner(factory, start.profiles, **start.settings).start()
    except Exception as exc:
        _answer(answers, Ready(f"{type(exc).__name__}: {exc}"))
        return None
    _answer(answers, Ready())
    return runner


def _play(runner: SuiteRunner, case: Case | None, asked: str) -> Played:
    if case is None:  # a case this process's catalog lacks: the parent plays it
        return Played(asked, None)
    try:
        result = runner.run(case)
    except Exception:  # a bug in the kit: the parent plays the case, and raises it there
        return Played(asked, None)
    kept = {f.name: getattr(result, f.name) for f in fields(result) if f.name != "case"}
    return Played(asked, kept, runner.unusable)


def _answer(answers: IO[bytes], message: object) -> None:
    pickle.dump(message, answers)
    answers.flush()
