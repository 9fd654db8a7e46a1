"""The floor under ``test_scale`` (issue 27): a profile whose test timing would shrink a
duration below what the kit can time is refused where it is made, naming the field,
the duration it would produce and the floor; nothing overflows."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from conformance._profiles import (
    BUILTIN_PROFILES,
    MIN_TEST_SECONDS,
    SEED_EVENTSOURCE,
    Profile,
    ProfileError,
    load_profile,
)
from conformance.reference import BackoffConfig, PolicyError
from conformance.reference._policy import backoff_delay
from conformance.timing import LOWER_FLOOR, PATH_FLOOR


def profile(scale: float, policy: object = SEED_EVENTSOURCE) -> Profile:
    return Profile("claim", 1, "t", "s", policy, test_scale=scale)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("scale", "produced"),
    [(1e-6, "2e-07 s"), (1e-4, "2e-05 s"), (1e-12, "2e-13 s"), (0.004, "0.0008 s")],
)
def test_a_scale_below_the_floor_is_refused_naming_field_duration_and_floor(
    scale: float, produced: str
) -> None:
    """The seed's shortest duration is its 0.2 s base: any scale that takes it under
    1 ms is a PolicyError on ``test_scale`` that says what it would make, the floor, and
    the smallest scale that is enough."""
    with pytest.raises(PolicyError) as caught:
        profile(scale)
    assert caught.value.field == "test_scale"
    message = str(caught.value)
    assert f"scales backoff.base (0.2 s) to {produced}" in message
    assert "below the 1 ms the kit can time" in message
    assert message.endswith("the smallest test_scale for this policy is 0.005")
    profile(0.005)  # ...which is accepted


@pytest.mark.parametrize("scale", [0, -0.5, math.nan, math.inf, 2.0])
def test_a_scale_outside_zero_to_one_is_refused(scale: float) -> None:
    """0, nan and inf never reach the floor: the range check names them."""
    with pytest.raises(PolicyError, match=r"^test_scale: expected a number in \(0, 1\], got "):
        profile(scale)


def test_every_builtin_profile_keeps_its_own_scale() -> None:
    """The built-in profiles, at their own ``test_scale``, are all above the floor (the
    closest: httpx-sse's 0.1 s stall check interval, 2 ms at x0.02)."""
    assert BUILTIN_PROFILES
    for key, p in BUILTIN_PROFILES.items():
        assert profile(p.test_scale, p.policy).test_scale == p.test_scale, key


def test_the_floor_is_what_the_kit_can_time() -> None:
    """One millisecond: half the kit's clock floor, far under its quiet path floor."""
    assert MIN_TEST_SECONDS == 0.001
    assert MIN_TEST_SECONDS <= LOWER_FLOOR < PATH_FLOOR


def test_the_shortest_duration_is_found_wherever_it_is() -> None:
    """The check reads every duration: a short breaker window is named, not the base."""
    short = replace(SEED_EVENTSOURCE, breaker=replace(SEED_EVENTSOURCE.breaker, window=0.01))
    with pytest.raises(PolicyError, match=r"scales breaker\.window \(0\.01 s\) to 0\.0002 s"):
        profile(0.02, short)


def test_a_duration_under_the_floor_at_any_scale_is_said_so() -> None:
    """A policy whose own base is under a millisecond cannot be scaled up to it."""
    tiny = replace(SEED_EVENTSOURCE, backoff=BackoffConfig(base=0.0001, caps=((1, 2.0),)))
    with pytest.raises(PolicyError, match=r"backoff\.base itself is below it at any scale$"):
        profile(1.0, tiny)


def test_a_profile_file_below_the_floor_is_a_usage_error(tmp_path: Path) -> None:
    """Loaded from a file, the refusal is a ProfileError naming the file and the field."""
    path = tmp_path / "claim.toml"
    path.write_text('name = "claim"\ntest_scale = 1e-4\n')
    with pytest.raises(ProfileError, match=r"claim\.toml: test_scale: 0\.0001 scales"):
        load_profile(path)


def test_a_long_run_of_retries_never_overflows() -> None:
    """Retry 2000 of an uncapped exponential used to raise OverflowError (2.0 ** 1999):
    past any finite base's cap, the cap holds."""
    seed = BackoffConfig()
    assert seed.exponential(2000) == seed.cap(2000)
    assert seed.exponential(1024) == seed.cap(1024)
    delay = backoff_delay(seed, 5000, random.Random(1), None)
    assert seed.envelope(5000)[0] <= delay <= seed.envelope(5000)[1]
    assert BackoffConfig(caps=((1, math.inf),)).exponential(5000) == math.inf


def test_test_timing_keeps_the_connect_timeout() -> None:
    """Test timing scales every duration but the connect timeout: a connect to 127.0.0.1
    is instant, so a scaled one (0.2 s) only ever fired under load, for the kit's sake."""
    p = profile(0.02)
    timed = p.at("test")
    assert timed.connect_timeout == SEED_EVENTSOURCE.connect_timeout == 10.0
    assert timed.backoff.base == pytest.approx(SEED_EVENTSOURCE.backoff.base * 0.02)
    assert timed.stall_timeout == pytest.approx(SEED_EVENTSOURCE.stall_timeout * 0.02)
    assert p.at("real") is p.at("virtual") is SEED_EVENTSOURCE


def test_a_short_connect_timeout_is_not_under_the_floor() -> None:
    """The floor judges what test timing scales: an unscaled connect timeout is not."""
    quick = replace(SEED_EVENTSOURCE, connect_timeout=0.01)
    assert profile(0.02, quick).at("test").connect_timeout == 0.01
