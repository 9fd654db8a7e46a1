"""The policy a resilient streaming client follows, as frozen data: ``ClientPolicy``
and its parts ``RetryMatrix``, ``BackoffConfig`` and ``BreakerConfig``.

Defaults are the seed article's numbers (``seeds/000``): the retry matrix, the
jittered backoff with caps that widen with the attempt count, the 5-failure /
60-second circuit breaker, and the 90-second silent-stream timeout checked every
10 seconds. Other policies are values of the same type: the kit's profiles build
theirs (the seed article's fetch client, the seed library's pipeline) in
``conformance._profiles``. Nothing here reads a clock or a random source: the core
in ``_policy`` and ``_breaker`` takes both as arguments. Every value is checked when
it is made (``__post_init__``): a ``PolicyError`` names the field and the valid range.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

__all__ = [
    "BackoffConfig",
    "BackoffFamily",
    "BreakerConfig",
    "BreakerKind",
    "ClientPolicy",
    "IdleRule",
    "PolicyError",
    "RetryMatrix",
]

BackoffFamily = Literal["seed", "full", "equal", "decorrelated", "proportional", "none"]
BreakerKind = Literal["consecutive", "ratio", "none"]
IdleRule = Literal["bytes", "data"]  # what resets the stall timer


_MAX_DOUBLINGS = 1024  # the last attempt whose 2.0 ** (attempt - 1) is a finite float


class PolicyError(ValueError):
    """A policy value that makes no sense: ``field`` names it (``jitter``), ``problem``
    says what was expected and what came."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


def _reject(name: str, expected: str, value: object) -> PolicyError:
    return PolicyError(name, f"expected {expected}, got {value!r}")


def _number(value: object) -> float | None:
    """``value`` as a float if it is a number (not a bool, not NaN), else None."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return math.inf
    return None if math.isnan(number) else number


def _check_seconds(name: str, value: object, *, zero: bool = False, inf: bool = False) -> None:
    """A duration: a number > 0 (>= 0 with ``zero``), finite unless ``inf`` (no limit)."""
    expected = f"seconds {'>=' if zero else '>'} 0" + ("" if inf else " (a finite number)")
    seconds = _number(value)
    if seconds is None or (math.isinf(seconds) and not inf):
        raise _reject(name, expected, value)
    if seconds < 0 or (seconds == 0 and not zero):
        raise _reject(name, expected, value)


def _check_count(name: str, value: object, low: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise _reject(name, f"an integer >= {low}", value)


def _check_fraction(name: str, value: object, *, zero: bool) -> None:
    number = _number(value)
    if number is None or not (0 <= number <= 1 if zero else 0 < number <= 1):
        raise _reject(name, f"a number in {'[' if zero else '('}0, 1]", value)


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise _reject(name, "one of " + ", ".join(repr(c) for c in choices), value)


def _check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise _reject(name, "true or false", value)


def _check_statuses(name: str, value: object) -> None:
    if not isinstance(value, frozenset):
        raise _reject(name, "a set of HTTP statuses", value)
    for status in sorted(value, key=repr):
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            raise _reject(name, "HTTP statuses 100..599", status)


@dataclass(frozen=True)
class RetryMatrix:
    """Which failures are retried (seed article, "The Retryable-Error Matrix")."""

    never: frozenset[int] = frozenset({400, 401, 403, 404, 422})
    always: frozenset[int] = frozenset({429, 503})
    retry_5xx: bool = True
    extra: frozenset[int] = frozenset()  # other statuses to retry, e.g. {408}
    retry_network: bool = True  # failures with no status at all

    def __post_init__(self) -> None:
        for name in ("never", "always", "extra"):
            _check_statuses(name, getattr(self, name))
        _check_flag("retry_5xx", self.retry_5xx)
        _check_flag("retry_network", self.retry_network)

    def is_retryable(self, status: int | None) -> bool:
        """``status=None`` means a network-layer failure (no response)."""
        if status is None:
            return self.retry_network
        if status in self.never:
            return False
        if status in self.always or status in self.extra:
            return True
        return self.retry_5xx and 500 <= status <= 599


@dataclass(frozen=True)
class BackoffConfig:
    """Exponential backoff with jitter.

    ``seed`` is the article's form: ``min(base * 2**(attempt-1), cap(attempt))``
    plus a uniform extra of 0..``jitter`` of that value. ``caps`` lists
    ``(first_attempt, cap)`` pairs: the cap in force for an attempt is the last
    pair whose first_attempt is <= the attempt (1-based). The alternatives are
    AWS's full, equal and decorrelated jitter over the same exponential and caps, and
    ``proportional``, the official SDKs' shape: the exponential times U(1 - jitter, 1]
    (openai-python and anthropic-sdk-python: ``min(0.5 * 2**n, 8) * (1 - 0.25 * random())``).
    """

    family: BackoffFamily = "seed"
    base: float = 0.2  # the article's "200ms, then 400ms, then 800ms"
    caps: tuple[tuple[int, float], ...] = ((1, 2.0), (6, 3.0), (11, 5.0))
    jitter: float = 0.5  # seed family: up to +50 %

    def __post_init__(self) -> None:
        _check_choice("family", self.family, get_args(BackoffFamily))
        _check_seconds("base", self.base)
        _check_caps(self.caps)
        _check_fraction("jitter", self.jitter, zero=True)

    def cap(self, attempt: int) -> float:
        cap = self.caps[0][1]
        for first, value in self.caps:
            if attempt >= first:
                cap = value
        return cap

    def exponential(self, attempt: int) -> float:
        """The un-jittered delay before retry number ``attempt`` (1-based)."""
        # 2.0 ** 1024 overflows (OverflowError); by then any finite base is past its cap.
        growth = 2.0 ** (attempt - 1) if attempt <= _MAX_DOUBLINGS else math.inf
        return min(self.base * growth, self.cap(attempt))

    def envelope(self, attempt: int) -> tuple[float, float]:
        """The closed interval every delay for ``attempt`` must fall in."""
        exp = self.exponential(attempt)
        if self.family == "seed":
            return exp, exp * (1 + self.jitter)
        if self.family == "full":
            return 0.0, exp
        if self.family == "equal":
            return exp / 2, exp
        if self.family == "decorrelated":
            return self.base, self.cap(attempt)
        if self.family == "proportional":
            return exp * (1 - self.jitter), exp
        return exp, exp


def _check_caps(caps: object) -> None:
    """``((first_attempt, cap), ...)``: at least one, attempts rising from 1; a cap may be inf."""
    shape = "[[first_attempt, seconds], ...] with first attempts rising from 1"
    if not isinstance(caps, tuple) or not caps:
        raise _reject("caps", shape, caps)
    previous = 0
    for pair in caps:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise _reject("caps", shape, caps)
        first, cap = pair
        _check_count("caps", first, previous + 1)
        _check_seconds("caps", cap, inf=True)
        previous = first


@dataclass(frozen=True)
class BreakerConfig:
    """A consecutive-failure breaker (seed article) or a failure-ratio one (seed library)."""

    kind: BreakerKind = "consecutive"
    threshold: int = 5  # consecutive failures that open it
    cooldown: float = 60.0  # seconds open before the single half-open probe
    ratio: float = 0.5  # ratio breaker: failure ratio in the window that opens it
    min_throughput: int = 10  # ratio breaker: calls in the window before the ratio counts
    window: float = 30.0  # ratio breaker: sampling window in seconds

    def __post_init__(self) -> None:
        _check_choice("kind", self.kind, get_args(BreakerKind))
        _check_count("threshold", self.threshold)
        _check_seconds("cooldown", self.cooldown)
        _check_fraction("ratio", self.ratio, zero=False)
        _check_count("min_throughput", self.min_throughput)
        _check_seconds("window", self.window)


@dataclass(frozen=True)
class ClientPolicy:
    """Everything the reference client's behaviour depends on; durations in seconds.

    ``ClientPolicy()`` is the seed article's EventSource client; change what you need
    with keywords or ``dataclasses.replace``. ``name`` only labels the policy (the
    kit's reports show it).
    """

    name: str = "seed-eventsource"
    matrix: RetryMatrix = field(default_factory=RetryMatrix)
    backoff: BackoffConfig = field(default_factory=BackoffConfig)
    breaker: BreakerConfig = field(default_factory=BreakerConfig)
    max_attempts: int | None = None  # None: until success, the breaker or the caller stops it
    retry_after: bool = True  # honour Retry-After / retry-after-ms
    retry_after_cap: float = 60.0  # longer server hints are clamped to this
    stall_timeout: float = 90.0  # no byte (or no data, see idle_rule) for this long: stalled
    stall_check_interval: float = 10.0
    idle_rule: IdleRule = "bytes"  # the article: every byte is a heartbeat
    first_chunk_timeout: float | None = None  # per attempt, headers sent until first chunk
    connect_timeout: float = 10.0
    resume: bool = True  # reconnect with Last-Event-ID when the stream carries ids

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise _reject("name", "a non-empty string", self.name)
        for name, kind in (("matrix", RetryMatrix), ("backoff", BackoffConfig)):
            if not isinstance(getattr(self, name), kind):
                raise _reject(name, f"a {kind.__name__}", getattr(self, name))
        if not isinstance(self.breaker, BreakerConfig):
            raise _reject("breaker", "a BreakerConfig", self.breaker)
        if self.max_attempts is not None:
            _check_count("max_attempts", self.max_attempts)
        _check_flag("retry_after", self.retry_after)
        _check_seconds("retry_after_cap", self.retry_after_cap, zero=True)
        for name in ("stall_timeout", "stall_check_interval", "connect_timeout"):
            _check_seconds(name, getattr(self, name))
        _check_choice("idle_rule", self.idle_rule, get_args(IdleRule))
        if self.first_chunk_timeout is not None:
            _check_seconds("first_chunk_timeout", self.first_chunk_timeout)
        _check_flag("resume", self.resume)

    # The seed presets lived here until 859c847 moved them to the profiles without a
    # word; adapters of the previous release call them, so they stay for one release
    # with a DeprecationWarning (CHANGELOG.md).
    @classmethod
    def eventsource(cls) -> ClientPolicy:
        """Deprecated: ``conformance.get_profile("seed-eventsource").policy``."""
        return _preset("eventsource", "seed-eventsource")

    @classmethod
    def fetch(cls) -> ClientPolicy:
        """Deprecated: ``conformance.get_profile("seed-fetch").policy``."""
        return _preset("fetch", "seed-fetch")

    @classmethod
    def pipeline(cls) -> ClientPolicy:
        """Deprecated: ``conformance.get_profile("seed-pipeline").policy``."""
        return _preset("pipeline", "seed-pipeline")

    def scaled(self, factor: float) -> ClientPolicy:
        """The same policy with every duration multiplied by ``factor``: every relation
        between durations holds, so ``scaled(0.01)`` behaves alike, a hundred times
        faster (the kit's test timing; an application's own tests)."""
        b = self.backoff
        return replace(
            self,
            backoff=replace(
                b, base=b.base * factor, caps=tuple((n, c * factor) for n, c in b.caps)
            ),
            breaker=replace(
                self.breaker,
                cooldown=self.breaker.cooldown * factor,
                window=self.breaker.window * factor,
            ),
            retry_after_cap=self.retry_after_cap * factor,
            stall_timeout=self.stall_timeout * factor,
            stall_check_interval=self.stall_check_interval * factor,
            first_chunk_timeout=None
            if self.first_chunk_timeout is None
            else self.first_chunk_timeout * factor,
            connect_timeout=self.connect_timeout * factor,
        )


def _preset(method: str, profile: str) -> ClientPolicy:
    """A seed profile's policy, for a caller of the preset it used to be."""
    warnings.warn(
        f"ClientPolicy.{method}() is deprecated and will be removed in the next release: "
        f'use conformance.get_profile("{profile}").policy',
        DeprecationWarning,
        stacklevel=3,
    )
    from conformance._profiles import get_profile  # the profiles import this module

    return get_profile(profile).policy
