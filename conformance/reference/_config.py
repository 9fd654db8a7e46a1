"""The policy a resilient streaming client follows, as frozen data.

Defaults are the seed article's numbers (``seeds/000``): the retry matrix, the
jittered backoff with caps that widen with the attempt count, the 5-failure /
60-second circuit breaker, and the 90-second silent-stream timeout checked every
10 seconds. The pipeline policy follows the seed library (``seeds/002``).
Nothing here reads a clock or a random source: the core in ``_policy`` and
``_breaker`` takes both as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

__all__ = [
    "BackoffConfig",
    "BackoffFamily",
    "BreakerConfig",
    "BreakerKind",
    "ClientPolicy",
    "IdleRule",
    "RetryMatrix",
]

BackoffFamily = Literal["seed", "full", "equal", "decorrelated", "none"]
BreakerKind = Literal["consecutive", "ratio", "none"]
IdleRule = Literal["bytes", "data"]  # what resets the stall timer


@dataclass(frozen=True)
class RetryMatrix:
    """Which failures are retried (seed article, "The Retryable-Error Matrix")."""

    never: frozenset[int] = frozenset({400, 401, 403, 404, 422})
    always: frozenset[int] = frozenset({429, 503})
    retry_5xx: bool = True
    extra: frozenset[int] = frozenset()  # other statuses to retry, e.g. {408}
    retry_network: bool = True  # failures with no status at all

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
    AWS's full, equal and decorrelated jitter over the same exponential and caps.
    """

    family: BackoffFamily = "seed"
    base: float = 0.2  # the article's "200ms, then 400ms, then 800ms"
    caps: tuple[tuple[int, float], ...] = ((1, 2.0), (6, 3.0), (11, 5.0))
    jitter: float = 0.5  # seed family: up to +50 %

    def cap(self, attempt: int) -> float:
        cap = self.caps[0][1]
        for first, value in self.caps:
            if attempt >= first:
                cap = value
        return cap

    def exponential(self, attempt: int) -> float:
        """The un-jittered delay before retry number ``attempt`` (1-based)."""
        return min(self.base * 2.0 ** (attempt - 1), self.cap(attempt))

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
        return exp, exp


@dataclass(frozen=True)
class BreakerConfig:
    """A consecutive-failure breaker (seed article) or a failure-ratio one (seed library)."""

    kind: BreakerKind = "consecutive"
    threshold: int = 5  # consecutive failures that open it
    cooldown: float = 60.0  # seconds open before the single half-open probe
    ratio: float = 0.5  # ratio breaker: failure ratio in the window that opens it
    min_throughput: int = 10  # ratio breaker: calls in the window before the ratio counts
    window: float = 30.0  # ratio breaker: sampling window in seconds


@dataclass(frozen=True)
class ClientPolicy:
    """Everything the reference client's behaviour depends on."""

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

    @classmethod
    def eventsource(cls) -> ClientPolicy:
        """The seed article's EventSource (GET) client."""
        return cls()

    @classmethod
    def fetch(cls) -> ClientPolicy:
        """The seed article's fetch + ReadableStream (POST) client: the last cap is 60 s."""
        return cls(
            name="seed-fetch",
            backoff=BackoffConfig(caps=((1, 2.0), (6, 3.0), (11, 60.0))),
        )

    @classmethod
    def pipeline(cls) -> ClientPolicy:
        """The seed library's streaming pipeline: 2 retries of 500 ms exponential with
        jitter, a failure-ratio breaker, a 10 s time-to-first-chunk timeout, 408 retried,
        and an idle timer reset by chunks only."""
        return cls(
            name="seed-pipeline",
            matrix=RetryMatrix(extra=frozenset({408})),
            backoff=BackoffConfig(family="equal", base=0.5, caps=((1, 30.0),), jitter=0.0),
            breaker=BreakerConfig(kind="ratio", ratio=0.5, min_throughput=10, cooldown=5.0),
            max_attempts=3,
            first_chunk_timeout=10.0,
            idle_rule="data",  # "reset a timer per chunk in your loop"
            resume=False,
        )

    def scaled(self, factor: float) -> ClientPolicy:
        """The same policy with every duration multiplied by ``factor`` (test timing)."""
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
