"""A client that cannot be configured is judged at its real timing in every BACKOFF case
(issue 9): a fixed 1 s delay with no jitter passes the envelopes its profile declares,
and fails growth, jitter, the herd and Retry-After by its measured delays."""

from __future__ import annotations

import pytest
from plugin_targets.sct_fixed import FixedDelayAdapter, fixed_profile

from conformance import run_suite

pytestmark = pytest.mark.slow

EXPECTED = {
    "SC-BACKOFF-1": "PASS",  # 1 s each time, as it declares
    "SC-BACKOFF-3": "FAIL",  # no growth
    "SC-BACKOFF-5": "PASS",  # the count cannot carry over a constant
    "SC-BACKOFF-7": "FAIL",  # a 3 s Retry-After waited 1 s
    "SC-BACKOFF-9": "FAIL",  # bunched against the seed's 0-50 % jitter
    "SC-BACKOFF-11": "FAIL",  # the herd reconnects in lockstep
}


def test_every_backoff_case_is_judged_for_a_fixed_delay() -> None:
    results = run_suite(FixedDelayAdapter, profile=fixed_profile(), select=list(EXPECTED))
    got = {r.case.id: r.verdict.value for r in results}
    assert got == EXPECTED, {r.case.id: r.outcome and r.outcome.observed for r in results}
    assert all(r.timing == "real" for r in results)


def test_a_profile_that_claims_growth_is_held_to_it() -> None:
    """The same client under a profile that claims the seed's backoff fails its envelopes."""
    from conformance import get_profile

    claimed = fixed_profile(backoff=get_profile("seed-fetch").policy.backoff)
    (result,) = run_suite(FixedDelayAdapter, profile=claimed, select=["SC-BACKOFF-1"])
    assert result.verdict.value == "FAIL", result.outcome
