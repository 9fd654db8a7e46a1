"""A client that cannot be configured: a fixed delay, no jitter and no growth, Retry-After
ignored, every status but 2xx retried (409 too), no breaker; like
@microsoft/fetch-event-source with its default callbacks. Built on the reference client
with that one policy; the suite must judge it at real timing (issue 9)."""

from __future__ import annotations

from dataclasses import replace

from conformance import Profile
from conformance._client_profiles import CLIENT_POLICIES
from conformance.reference import BackoffConfig
from pytest_streamcheck.targets._reference import ReferenceAdapter

__all__ = ["FIXED", "FixedDelayAdapter", "fixed_profile"]

DELAY = 1.0
FIXED = replace(
    CLIENT_POLICIES["fetch-event-source"],
    name="fixed-1s",
    backoff=BackoffConfig(family="none", base=DELAY, caps=((1, DELAY),), jitter=0.0),
)


def fixed_profile(**changes: object) -> Profile:
    """The client's own profile (what it truly does), or one with ``changes``."""
    policy = replace(FIXED, **changes)  # type: ignore[arg-type]
    return Profile(
        name="fixed-1s",
        version=1,
        title="a fixed 1 s retry, no jitter, Retry-After ignored",
        source="tests/plugin_targets/sct_fixed.py",
        policy=policy,
    )


class FixedDelayAdapter(ReferenceAdapter):
    info = replace(
        ReferenceAdapter.info,
        name="fixed-1s",
        capabilities=ReferenceAdapter.info.capabilities - {"configurable"},
    )

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self._policy = FIXED
