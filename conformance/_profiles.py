"""Profiles: the policy a client claims to follow, versioned.

A profile never changes meaning within a version. The suite runs it at a test
timing (every duration times ``test_scale``), which keeps every relation between
durations (order, thresholds, ratios) while keeping the suite fast; a client that
cannot be configured is run at the real timing.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from conformance._client_profiles import CLIENT_PROFILE_ROWS
from conformance._json import fields_json
from conformance.reference import (
    BackoffConfig,
    BreakerConfig,
    ClientPolicy,
    PolicyError,
    RetryMatrix,
)
from fake_servers._files import FileRefused, read_text_limited, shown_path

__all__ = [
    "BUILTIN_PROFILES",
    "HTML_EVENTSOURCE",
    "SEED_EVENTSOURCE",
    "SEED_FETCH",
    "SEED_PIPELINE",
    "Profile",
    "ProfileError",
    "Timing",
    "get_profile",
    "load_profile",
    "longest_duration",
    "policy_from_dict",
    "policy_to_dict",
]

# "virtual": the profile's real numbers on a virtual clock (``fake_servers._virtual``),
# for a client that does all its waiting on the kit's event loop.
Timing = Literal["test", "real", "virtual"]
TRANSPORTS = ("get", "post")
# What a profile may claim and still be judged within a case: the suite has to see
# the stall detected, the breaker open and the client give up.
# Every duration of the policy, caps included: a day, room for real libraries' longest
# timeouts (one measured 6000 s), which virtual time plays in moments (VIRTUAL_LIMIT).
MAX_PROFILE_SECONDS = 86400.0
MAX_PROFILE_COUNT = 100  # max_attempts, breaker threshold and min_throughput
MAX_PROFILE_BYTES = 1024 * 1024  # a profile file: a few hundred bytes make a policy
MIN_TEST_SECONDS = 0.001  # test timing's floor: loop timers wake no finer; half the 2 ms POLL
# Durations test timing keeps at the profile's value. A connect to 127.0.0.1 is instant
# or refused, and no case makes one slow (a blackhole accepts, then stays silent): only
# the machine's load can make it late, so a scaled connect timeout (0.2 s at the seeds'
# 10 s) timed the kit's load, never the client. Beside a second suite it fired in a
# 50-client herd, and the correct client's next backoff read as a delay far out of range.
UNSCALED = frozenset({"connect_timeout"})


@dataclass(frozen=True)
class Profile:
    """A named, versioned policy and the timing the suite runs it at."""

    name: str
    version: int
    title: str
    source: str
    policy: ClientPolicy
    transports: frozenset[str] = field(default_factory=lambda: frozenset({"get", "post"}))
    test_scale: float = 0.02

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PolicyError("name", f"expected a non-empty string, got {self.name!r}")
        if not isinstance(self.version, int) or isinstance(self.version, bool) or self.version < 1:
            raise PolicyError("version", f"expected an integer >= 1, got {self.version!r}")
        _check_transports(self.transports)
        scale = self.test_scale
        if not isinstance(scale, int | float) or isinstance(scale, bool) or not 0 < scale <= 1:
            raise PolicyError("test_scale", f"expected a number in (0, 1], got {scale!r}")
        if not isinstance(self.policy, ClientPolicy):
            raise PolicyError("policy", f"expected a ClientPolicy, got {self.policy!r}")
        try:
            _check_judgeable(self.policy)
        except PolicyError as error:
            raise _under(error, "policy") from None
        _check_test_floor(self.policy, scale)

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    def at(self, timing: Timing) -> ClientPolicy:
        if timing != "test":
            return self.policy
        scaled = self.policy.scaled(self.test_scale)
        return replace(scaled, **{name: getattr(self.policy, name) for name in UNSCALED})

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, policy=policy_to_dict(self.policy))


class ProfileError(ValueError):
    """A profile name or file that cannot be used; the message says why."""


def _under(error: PolicyError, parent: str) -> PolicyError:
    """The same error, its field placed under ``parent`` (``policy.backoff.jitter``)."""
    return PolicyError(f"{parent}.{error.field}", error.problem)


def _check_transports(transports: object) -> None:
    if not isinstance(transports, frozenset) or not transports <= set(TRANSPORTS):
        got = sorted(transports) if isinstance(transports, frozenset) else transports
        raise PolicyError("transports", f"expected a subset of {list(TRANSPORTS)}, got {got!r}")
    if not transports:
        raise PolicyError(
            "transports", f"expected at least one of {list(TRANSPORTS)}: no transport to judge"
        )


def _durations(policy: ClientPolicy) -> dict[str, float]:
    """Every duration of the policy by its field, caps included (0: none)."""
    b = policy.backoff
    return {
        "backoff.base": b.base,
        **{f"backoff.caps[{first}]": cap for first, cap in b.caps},
        "breaker.cooldown": policy.breaker.cooldown,
        "breaker.window": policy.breaker.window,
        "retry_after_cap": policy.retry_after_cap,
        "stall_timeout": policy.stall_timeout,
        "stall_check_interval": policy.stall_check_interval,
        "connect_timeout": policy.connect_timeout,
        "first_chunk_timeout": policy.first_chunk_timeout or 0.0,
    }


def longest_duration(policy: ClientPolicy) -> float:
    """The policy's longest finite duration (seconds; 0 when it has none)."""
    return max((s for s in _durations(policy).values() if s < math.inf), default=0.0)


def _check_test_floor(policy: ClientPolicy, scale: float) -> None:
    """Refuse a ``test_scale`` that makes a duration of the policy shorter than the kit
    can time (MIN_TEST_SECONDS): its cases would judge the kit's own granularity."""
    durations = _durations(policy).items()
    nonzero = {n: s for n, s in durations if 0 < s < math.inf and n not in UNSCALED}
    if not nonzero:
        return
    name, shortest = min(nonzero.items(), key=lambda item: item[1])
    if shortest * scale >= MIN_TEST_SECONDS:
        return
    least = _round_up(MIN_TEST_SECONDS / shortest)
    raise PolicyError(
        "test_scale",
        f"{scale!r} scales {name} ({shortest:g} s) to {shortest * scale:.3g} s, below the "
        f"{MIN_TEST_SECONDS * 1000:g} ms the kit can time; "
        + (
            f"the smallest test_scale for this policy is {least:g}"
            if least <= 1
            else f"{name} itself is below it at any scale"
        ),
    )


def _round_up(value: float) -> float:
    """``value`` rounded up to three significant digits (a scale that is enough)."""
    step = 10.0 ** (math.floor(math.log10(value)) - 2)
    return math.ceil(value / step - 1e-9) * step


def _check_judgeable(policy: ClientPolicy) -> None:
    """Refuse a claim the suite cannot check within a case (1e308 s stall timeouts)."""
    durations = _durations(policy)
    for name, seconds in durations.items():
        if seconds > MAX_PROFILE_SECONDS:
            expected = f"seconds in (0, {MAX_PROFILE_SECONDS:g}] for a profile"
            raise PolicyError(name, f"expected {expected}, got {seconds!r}")
    counts = {
        "max_attempts": policy.max_attempts or 0,
        "breaker.threshold": policy.breaker.threshold,
        "breaker.min_throughput": policy.breaker.min_throughput,
    }
    for name, count in counts.items():
        if count > MAX_PROFILE_COUNT:
            raise PolicyError(
                name, f"expected an integer 1..{MAX_PROFILE_COUNT} for a profile, got {count!r}"
            )


_SEED_ARTICLE = "seeds/000 (the seed article)"
_SEED_LIBRARY = "seeds/002 (the seed library's streaming pipeline)"

# The seed article's EventSource (GET) client: the reference client's defaults.
SEED_EVENTSOURCE = ClientPolicy(name="seed-eventsource")
# The seed article's fetch + ReadableStream (POST) client: the last cap is 60 s.
SEED_FETCH = ClientPolicy(
    name="seed-fetch",
    backoff=BackoffConfig(caps=((1, 2.0), (6, 3.0), (11, 60.0))),
)
# The seed library's streaming pipeline: 2 retries of 500 ms exponential with jitter,
# a failure-ratio breaker, a 10 s time-to-first-chunk timeout, 408 retried, and an
# idle timer reset by chunks only.
SEED_PIPELINE = ClientPolicy(
    name="seed-pipeline",
    matrix=RetryMatrix(extra=frozenset({408})),
    backoff=BackoffConfig(family="equal", base=0.5, caps=((1, 30.0),), jitter=0.0),
    breaker=BreakerConfig(kind="ratio", ratio=0.5, min_throughput=10, cooldown=5.0),
    max_attempts=3,
    first_chunk_timeout=10.0,
    idle_rule="data",  # "reset a timer per chunk in your loop"
    resume=False,
)

# The browser's native EventSource, as WHATWG HTML §9.2 has it, with Chromium's numbers
# (measured: tests/test_browser_eventsource.py): a network error re-establishes the
# connection after the reconnection time (Chromium's default 3 s; a ``retry:`` field
# sets it), always the same, no jitter, no limit and no breaker; any status but 200,
# or another Content-Type, fails the connection for good, so nothing with a status is
# retried and Retry-After is never read. It resumes with Last-Event-ID on its own
# reconnects. It has no stall timer: the page lacks the stall capability, and the
# policy's number (which must be one) is the longest a profile may claim.
HTML_EVENTSOURCE = ClientPolicy(
    name="html-eventsource",
    matrix=RetryMatrix(never=frozenset(), always=frozenset(), retry_5xx=False),
    backoff=BackoffConfig(family="none", base=3.0, caps=((1, 3.0),), jitter=0.0),
    breaker=BreakerConfig(kind="none"),
    retry_after=False,
    retry_after_cap=0.0,
    stall_timeout=MAX_PROFILE_SECONDS,
    stall_check_interval=MAX_PROFILE_SECONDS,
    resume=True,
)
_HTML_SSE = "WHATWG HTML §9.2 Server-sent events; Chromium's EventSource (3 s reconnection time)"

BUILTIN_PROFILES: dict[str, Profile] = {
    p.key: p
    for p in (
        Profile(
            name="seed-eventsource",
            version=1,
            title="The seed article's EventSource client (GET text/event-stream)",
            source=_SEED_ARTICLE,
            policy=SEED_EVENTSOURCE,
            transports=frozenset({"get"}),
        ),
        Profile(
            name="seed-fetch",
            version=1,
            title="The seed article's fetch + ReadableStream client (POST with a body)",
            source=_SEED_ARTICLE,
            policy=SEED_FETCH,
            transports=frozenset({"post"}),
        ),
        Profile(
            name="seed-pipeline",
            version=1,
            title="The seed library's executeStream pipeline",
            source=_SEED_LIBRARY,
            policy=SEED_PIPELINE,
            transports=frozenset({"get", "post"}),
        ),
        Profile(
            name="html-eventsource",
            version=1,
            title="The browser's native EventSource (the HTML standard, Chromium's numbers)",
            source=_HTML_SSE,
            policy=HTML_EVENTSOURCE,
            transports=frozenset({"get"}),
        ),
        *(
            Profile(
                name=name,
                version=1,
                title=title,
                source=source,
                policy=policy,
                transports=transports,
            )
            for name, (title, source, policy, transports) in CLIENT_PROFILE_ROWS.items()
        ),
    )
}


def get_profile(name: str) -> Profile:
    """A built-in profile by ``name`` or ``name@version``, or a profile file's path."""
    if name.endswith((".toml", ".json")):
        return load_profile(name)
    key = name if "@" in name else _latest(name)
    if key not in BUILTIN_PROFILES:
        valid = ", ".join(sorted(BUILTIN_PROFILES))
        raise ProfileError(
            f"unknown profile {name!r}; valid profiles: {valid}, or a .toml/.json file"
        )
    return BUILTIN_PROFILES[key]


def _latest(name: str) -> str:
    versions = [p.version for p in BUILTIN_PROFILES.values() if p.name == name]
    return f"{name}@{max(versions)}" if versions else name


def load_profile(path: str | Path) -> Profile:
    """Read a user's profile file (TOML or JSON; the same tree as ``Profile.to_json``).

    Every value is checked here, once: a ``ProfileError`` names the file, the field
    and the valid range, before any case runs.
    """
    shown = shown_path(path)
    try:
        text = read_text_limited(path, MAX_PROFILE_BYTES, "bytes per profile file")
    except FileRefused as exc:
        raise ProfileError(f"{shown}: {exc}") from None
    try:
        raw = tomllib.loads(text) if Path(path).suffix == ".toml" else json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProfileError(f"{shown}: cannot read profile: {exc}") from None
    try:
        return _profile_from_dict(raw)
    except (TypeError, ValueError) as exc:  # PolicyError and the shape checks
        raise ProfileError(f"{shown}: {exc}") from exc


def _profile_from_dict(raw: object) -> Profile:
    raw = _table(raw, "profile")
    _known(
        raw,
        {"name", "version", "title", "source", "transports", "test_scale", "policy", "base"},
        "profile",
    )
    if "name" not in raw:
        raise ValueError("name: required (the profile's name)")
    name = raw["name"]
    base = _base(raw["base"]).policy if "base" in raw else ClientPolicy()
    try:
        policy = policy_from_dict(_table(raw.get("policy", {}), "policy"), base=base)
        policy = replace(policy, name=name)
    except PolicyError as error:
        raise _under(error, "policy") from None
    transports = raw.get("transports", list(TRANSPORTS))
    return Profile(
        name=name,
        version=raw.get("version", 1),
        title=str(raw.get("title", name)),
        source=str(raw.get("source", "user profile")),
        policy=policy,
        transports=frozenset(transports) if isinstance(transports, list) else transports,
        test_scale=raw.get("test_scale", 0.02),
    )


def _base(name: object) -> Profile:
    """A built-in profile to start from: a file would be read relative to the working
    folder, not the profile's, and could name itself (an endless chain)."""
    key = (name if "@" in name else _latest(name)) if isinstance(name, str) else None
    if key not in BUILTIN_PROFILES:
        valid = ", ".join(sorted(BUILTIN_PROFILES))
        raise ValueError(f"base: expected a built-in profile, got {name!r}; valid: {valid}")
    return BUILTIN_PROFILES[key]


def _table(raw: object, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a table, got {raw!r}")
    return raw


def policy_to_dict(policy: ClientPolicy) -> dict[str, Any]:
    """The policy as JSON-ready data (the exec protocol's ``configure`` payload)."""
    data = asdict(policy)
    m = data.pop("matrix")
    data["retry"] = {k: sorted(v) if isinstance(v, frozenset) else v for k, v in m.items()}
    data["backoff"]["caps"] = [list(pair) for pair in policy.backoff.caps]
    return data


def policy_from_dict(raw: dict[str, Any], *, base: ClientPolicy | None = None) -> ClientPolicy:
    """Inverse of ``policy_to_dict``; missing fields keep ``base``'s values."""
    base = base or ClientPolicy()
    raw = dict(raw)
    changes: dict[str, Any] = {}
    if "retry" in raw:
        retry = _section(raw.pop("retry"), RetryMatrix, "retry")
        matrix = {k: _status_set(k, v) if isinstance(v, list) else v for k, v in retry.items()}
        changes["matrix"] = _replaced(base.matrix, matrix, "retry")
    if "backoff" in raw:
        backoff = _section(raw.pop("backoff"), BackoffConfig, "backoff")
        if isinstance(backoff.get("caps"), list):
            backoff["caps"] = tuple(tuple(p) if isinstance(p, list) else p for p in backoff["caps"])
        changes["backoff"] = _replaced(base.backoff, backoff, "backoff")
    if "breaker" in raw:
        breaker = _section(raw.pop("breaker"), BreakerConfig, "breaker")
        changes["breaker"] = _replaced(base.breaker, breaker, "breaker")
    _known(raw, {f.name for f in fields(ClientPolicy)}, "policy")
    return replace(base, **changes, **raw)


def _section(raw: object, kind: type, name: str) -> dict[str, Any]:
    table = _table(raw, f"policy.{name}")
    _known(table, {f.name for f in fields(kind)}, f"policy.{name}")
    return dict(table)


_Part = TypeVar("_Part", RetryMatrix, BackoffConfig, BreakerConfig)


def _replaced(base: _Part, changes: dict[str, Any], name: str) -> _Part:
    try:
        return replace(base, **changes)
    except PolicyError as error:
        raise _under(error, name) from None


def _status_set(name: str, values: list[Any]) -> frozenset[Any]:
    try:
        return frozenset(values)
    except TypeError:  # an unhashable item: RetryMatrix names what it expects
        expected = f"expected HTTP statuses 100..599, got {values!r}"
        raise PolicyError(f"retry.{name}", expected) from None


def _known(raw: dict[str, Any], valid: set[str], where: str) -> None:
    unknown = sorted(set(raw) - valid)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; valid: {sorted(valid)}")
