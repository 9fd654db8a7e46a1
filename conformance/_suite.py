"""Run conformance cases against a client from a plain script or any test runner; no pytest.

``run_suite`` runs the catalog (or a selection) against an adapter factory, as
``trio.testing.check_one_way_stream`` runs against a stream factory; the pytest plugin
is a shell over the same lanes (``conformance._lanes``), one item per case. It sits above
the lanes, which sit above the runner (``conformance._runner``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from conformance._adapter import ClientAdapter
from conformance._case import Case, all_cases
from conformance._lanes import DEFAULT_LANES, Lanes
from conformance._profiles import Profile, Timing, get_profile
from conformance._result import CaseResult
from conformance._runner import CASE_TIMEOUT, aclose_failed

__all__ = ["run_suite", "select_cases"]


def run_suite(
    adapter_factory: Callable[[], ClientAdapter],
    *,
    profile: str | Profile | Sequence[str | Profile] | None = None,
    select: Iterable[str] | None = None,
    timing: Timing | None = None,
    seed: int = 0,
    case_timeout: float = CASE_TIMEOUT,
    lanes: int | None = None,
    wire_format: str | None = None,
    processes: int | None = None,
) -> tuple[CaseResult, ...]:
    """Run conformance cases against a client, without pytest.

    Args:
        adapter_factory: Makes the adapter (called again after an adapter breaks).
        profile: The profile(s) the client claims, by name (``name@version``) or value;
            None: the one its adapter declares (``AdapterInfo.profile``), else
            ``DEFAULT_PROFILES``.
        select: Case ids or globs (``"SC-RETRY-*"``); None runs the whole catalog.
        timing: ``"test"`` or ``"real"``; None: test timing for configurable clients.
        seed: Reproduces a run.
        case_timeout: Hard time limit per case, in seconds.
        lanes: Cases played at once, each lane with its own server, proxy and client
            (``conformance._lanes``: exclusive cases and re-judging play alone); 1 plays
            one case at a time; None: ``DEFAULT_LANES``. In virtual time a lane is a
            process, one a core at most, when ``adapter_factory`` pickles (a module's
            function, a ``functools.partial`` of one; not a lambda).
        wire_format: The format the cases' plain endpoints speak (``"openai"``,
            ``"responses"``, ``"anthropic"``, ``"gemini"``); None: the one the adapter
            declares (``AdapterInfo.wire_format``), else by the request's path.
        processes: The processes a run in virtual time may play in, at most; None: one
            per core this process may use, and one in a pytest-xdist worker.

    Returns:
        One result per case, in catalog order; ``result.verdict`` is PASS, FAIL,
        NON-STRICT, UNSUPPORTED, ERROR or INCONCLUSIVE, as in the plugin. An adapter
        whose ``aclose()`` failed as the run ended (raised, hung or blocked) is named in
        the last result's ``teardown``, as the plugin reports it at that case's teardown.

    Raises:
        ValueError: An id or glob matches no case.
        HarnessError: The client could not be started.
    """
    profiles = None if profile is None else _profiles(profile)
    cases = select_cases(select)
    closing: list[str] = []
    runner = Lanes(
        adapter_factory,
        profiles,
        timing=timing,
        seed=seed,
        case_timeout=case_timeout,
        lanes=DEFAULT_LANES if lanes is None else lanes,
        processes=processes,
        wire_format=wire_format,
        close_failures=closing,
    ).start()
    try:
        results = runner.run(cases)
    finally:
        runner.close()
    if not closing or not results:
        return results
    return (*results[:-1], replace(results[-1], teardown=aclose_failed(closing)))


def _profiles(profile: str | Profile | Sequence[str | Profile]) -> list[Profile]:
    names = [profile] if isinstance(profile, str | Profile) else list(profile)
    if not names:  # every case would be UNSUPPORTED: a run that judged nothing
        raise ValueError("profile: an empty list; None takes the client's declared profile")
    return [p if isinstance(p, Profile) else get_profile(p) for p in names]


def select_cases(select: Iterable[str] | None = None) -> tuple[Case, ...]:
    """The catalog's cases whose id matches one of ``select`` (ids or globs), in order."""
    cases = all_cases()
    if select is None:
        return cases
    patterns = [select] if isinstance(select, str) else list(select)
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(c.id, p) for c in cases)]
    if unmatched:
        raise ValueError(f"no case in the catalog matches {', '.join(map(repr, unmatched))}")
    return tuple(c for c in cases if any(fnmatch.fnmatchcase(c.id, p) for p in patterns))
