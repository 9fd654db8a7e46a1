"""Per-process state of a streamcheck run: settings, the runner (started on first
use), and the results this process produced."""

from __future__ import annotations

from pytest_streamcheck._known import KnownFailures, parse_known_failures
from pytest_streamcheck._runner import CaseResult, SuiteRunner
from pytest_streamcheck._settings import Settings
from pytest_streamcheck._targets import load_target

__all__ = ["StreamcheckSession"]


class StreamcheckSession:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.known: KnownFailures = parse_known_failures(settings.known_failures)
        self.factory = load_target(settings.target, seed=settings.seed)
        self.results: list[CaseResult] = []
        self._runner: SuiteRunner | None = None

    def runner(self) -> SuiteRunner:
        if self._runner is None:
            s = self.settings
            self._runner = SuiteRunner(
                self.factory, s.profiles, timing=s.timing, seed=s.seed, case_timeout=s.case_timeout
            ).start()
        return self._runner

    def record(self, result: CaseResult) -> None:
        self.results.append(result)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
