"""Per-process state of a streamcheck run: settings, the lanes that play the cases
(started on first use), and the results this process produced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance._adapter import AdapterInfo
from conformance._case import Case, all_cases, catalog_key
from conformance._lanes import Lanes
from conformance._profiles import Profile, get_profile
from conformance._result import CaseResult
from conformance._runner import DEFAULT_PROFILES, aclose_failed
from pytest_streamcheck._known import KnownFailures, parse_known_failures
from pytest_streamcheck._settings import Settings
from pytest_streamcheck.targets import load_target

__all__ = ["StreamcheckSession"]


class StreamcheckSession:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cases = all_cases()
        catalog = [case.id for case in self.cases]
        self.known: KnownFailures = parse_known_failures(settings.known_failures, catalog)
        self.factory = load_target(
            settings.target, seed=settings.seed, hello_timeout=settings.hello_timeout
        )
        self.results: list[CaseResult] = []
        self.selected: frozenset[str] | None = None  # ids named as streamcheck::ID
        self.keyword: str | None = None  # -k, -m: how the run chose its cases
        self.markexpr: str | None = None
        # Why an adapter's aclose() failed as its lane closed; handed out once (close()).
        self._closing: list[str] = []
        s = settings
        self.lanes = _RunLanes(
            self.factory,
            s.profiles,
            timing=s.timing,
            seed=s.seed,
            case_timeout=s.case_timeout,
            lanes=s.lanes,
            wire_format=s.wire_format,
            close_failures=self._closing,
        )

    def result(self, case: Case, upcoming: Sequence[Case] = ()) -> CaseResult:
        """``case``'s result; free lanes may start the ``upcoming`` cases meanwhile.

        A client that does not start is tried once: that case is an ERROR with its
        message, and each later case one at once, instead of starting (and perhaps
        waiting out) a broken client again.
        """
        return self.lanes.result(case, upcoming)

    @property
    def profiles(self) -> tuple[Profile, ...]:
        """The profiles cases are judged under: those asked for, else (once the client
        has started) the one it declares, else the defaults."""
        if self.settings.profiles is not None:
            return self.settings.profiles
        return self.lanes.profiles or tuple(get_profile(n) for n in DEFAULT_PROFILES)

    def selection(self) -> dict[str, Any]:
        """How the run chose its cases, for the report (none of them: the whole catalog)."""
        ids = sorted(self.selected, key=catalog_key) if self.selected else None
        return {"ids": ids, "keyword": self.keyword, "markexpr": self.markexpr}

    def record(self, result: CaseResult) -> None:
        self.results.append(result)

    def close(self) -> str:
        """Stop the lanes, closing every adapter; idempotent. Returns the ERROR of the
        adapters whose aclose() failed (raised, hung or blocked), once: the caller
        reports it (the plugin, at the teardown of this process's last test); "" if none.
        """
        self.lanes.close()
        failures, self._closing[:] = list(self._closing), []
        return aclose_failed(failures) if failures else ""


class _RunLanes(Lanes):
    """The run's lanes; what the client said of itself outlives ``close``, for the
    reports written after it (the adapters close before the last case's row is made)."""

    _kept_info: AdapterInfo | None = None
    _kept_profiles: tuple[Profile, ...] | None = None

    @property
    def info(self) -> AdapterInfo | None:
        return super().info or self._kept_info

    @property
    def profiles(self) -> tuple[Profile, ...] | None:
        return super().profiles or self._kept_profiles

    def close(self) -> None:
        self._kept_info, self._kept_profiles = self.info, self.profiles
        super().close()
