"""Profiles: the policy a client claims to follow, versioned.

A profile never changes meaning within a version. The suite runs it at a test
timing (every duration times ``test_scale``), which keeps every relation between
durations (order, thresholds, ratios) while keeping the suite fast; a client that
cannot be configured is run at the real timing.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from conformance.reference._config import (
    BackoffConfig,
    BreakerConfig,
    ClientPolicy,
    RetryMatrix,
)

__all__ = [
    "BUILTIN_PROFILES",
    "Profile",
    "ProfileError",
    "Timing",
    "get_profile",
    "load_profile",
    "policy_from_dict",
    "policy_to_dict",
]

Timing = Literal["test", "real"]


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

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    def at(self, timing: Timing) -> ClientPolicy:
        return self.policy.scaled(self.test_scale) if timing == "test" else self.policy

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "title": self.title,
            "source": self.source,
            "transports": sorted(self.transports),
            "test_scale": self.test_scale,
            "policy": policy_to_dict(self.policy),
        }


class ProfileError(ValueError):
    """A profile name or file that cannot be used; the message says why."""


_SEED_ARTICLE = "seeds/000 (the seed article)"
_SEED_LIBRARY = "seeds/002 (the seed library's streaming pipeline)"

BUILTIN_PROFILES: dict[str, Profile] = {
    p.key: p
    for p in (
        Profile(
            name="seed-eventsource",
            version=1,
            title="The seed article's EventSource client (GET text/event-stream)",
            source=_SEED_ARTICLE,
            policy=ClientPolicy.eventsource(),
            transports=frozenset({"get"}),
        ),
        Profile(
            name="seed-fetch",
            version=1,
            title="The seed article's fetch + ReadableStream client (POST with a body)",
            source=_SEED_ARTICLE,
            policy=ClientPolicy.fetch(),
            transports=frozenset({"post"}),
        ),
        Profile(
            name="seed-pipeline",
            version=1,
            title="The seed library's executeStream pipeline",
            source=_SEED_LIBRARY,
            policy=ClientPolicy.pipeline(),
            transports=frozenset({"get", "post"}),
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
    """Read a user's profile file (TOML or JSON; the same tree as ``Profile.to_json``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path}: cannot read profile: {exc}") from exc
    try:
        return _profile_from_dict(raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProfileError(f"{path}: {exc}") from exc


def _profile_from_dict(raw: dict[str, Any]) -> Profile:
    _known(
        raw,
        {"name", "version", "title", "source", "transports", "test_scale", "policy", "base"},
        "profile",
    )
    base = get_profile(raw["base"]).policy if "base" in raw else ClientPolicy()
    policy = policy_from_dict(raw.get("policy", {}), base=base)
    transports = frozenset(raw.get("transports", ["get", "post"]))
    if not transports <= {"get", "post"}:
        raise ValueError(
            f"transports: expected a subset of ['get', 'post'], got {sorted(transports)}"
        )
    scale = float(raw.get("test_scale", 0.02))
    if not 0 < scale <= 1:
        raise ValueError(f"test_scale: expected a number in (0, 1], got {scale}")
    return Profile(
        name=str(raw["name"]),
        version=int(raw.get("version", 1)),
        title=str(raw.get("title", raw["name"])),
        source=str(raw.get("source", "user profile")),
        policy=replace(policy, name=str(raw["name"])),
        transports=transports,
        test_scale=scale,
    )


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
        retry = raw.pop("retry")
        _known(retry, {f.name for f in fields(RetryMatrix)}, "policy.retry")
        matrix: dict[str, Any] = {
            k: frozenset(v) if isinstance(v, list) else v for k, v in retry.items()
        }
        changes["matrix"] = replace(base.matrix, **matrix)
    if "backoff" in raw:
        backoff = dict(raw.pop("backoff"))
        _known(backoff, {f.name for f in fields(BackoffConfig)}, "policy.backoff")
        if "caps" in backoff:
            backoff["caps"] = tuple((int(n), float(c)) for n, c in backoff["caps"])
        changes["backoff"] = replace(base.backoff, **backoff)
    if "breaker" in raw:
        breaker = raw.pop("breaker")
        _known(breaker, {f.name for f in fields(BreakerConfig)}, "policy.breaker")
        changes["breaker"] = replace(base.breaker, **breaker)
    _known(raw, {f.name for f in fields(ClientPolicy)}, "policy")
    return replace(base, **changes, **raw)


def _known(raw: dict[str, Any], valid: set[str], where: str) -> None:
    unknown = sorted(set(raw) - valid)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; valid: {sorted(valid)}")
