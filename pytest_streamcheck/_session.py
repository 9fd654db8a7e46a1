"""Per-process state of a streamcheck run: settings, the runner (started on first
use), and the results this process produced."""

from __future__ import annotations

import contextlib

from conformance._case import all_cases
from conformance._runner import CaseResult, HarnessError, SuiteRunner
from pytest_streamcheck._known import KnownFailures, parse_known_failures
from pytest_streamcheck._settings import Settings
from pytest_streamcheck._targets import load_target

__all__ = ["StreamcheckSession"]


class StreamcheckSession:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cases = all_cases()
        catalog = [case.id for case in self.cases]
        self.known: KnownFailures = parse_known_failures(settings.known_failures, catalog)
        self.factory = load_target(settings.target, seed=settings.seed)
        self.results: list[CaseResult] = []
        self.selected: frozenset[str] | None = None  # ids named as streamcheck::ID
        self._runner: SuiteRunner | None = None
        self._start_error: str | None = None

    def runner(self) -> SuiteRunner:
        """The started runner; HarnessError when the client cannot be started.

        A failed start is tried once: each later case fails at once with its message,
        instead of starting (and perhaps waiting out) a broken client again.
        """
        if self._start_error is not None:
            raise HarnessError(
                f"the client did not start (see the first ERROR): {self._start_error}"
            )
        if self._runner is None:
            s = self.settings
            runner = SuiteRunner(
                self.factory, s.profiles, timing=s.timing, seed=s.seed, case_timeout=s.case_timeout
            )
            try:
                self._runner = runner.start()
            except HarnessError as exc:
                self._start_error = str(exc).splitlines()[0]
                with contextlib.suppress(Exception):  # half started: stop what did start
                    runner.close()
                raise
        return self._runner

    def record(self, result: CaseResult) -> None:
        self.results.append(result)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
