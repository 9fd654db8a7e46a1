"""The retry policy as pure functions: Retry-After parsing, backoff, and the per-call decision.

Nothing here sleeps, reads a clock or touches global randomness: the caller passes
the wall-clock epoch (for HTTP-date hints) and a ``random.Random``. The shell acts
on the returned decision.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Literal, TypeAlias

from conformance.reference._config import BackoffConfig, ClientPolicy

__all__ = [
    "Decision",
    "Failure",
    "FailureKind",
    "GiveUp",
    "Retry",
    "RetryState",
    "Surface",
    "backoff_delay",
    "parse_retry_after",
]

FailureKind = Literal[
    "status", "connect", "reset", "timeout_first_chunk", "stall", "truncated", "offline"
]

# Plain decimal seconds only: float() would also take "inf", "nan", "1e3" and "1_0".
_SECONDS = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*")


@dataclass(frozen=True)
class Failure:
    """Why an attempt ended without completing the stream."""

    kind: FailureKind
    status: int | None = None  # kind "status": the HTTP status received
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    committed: bool = False  # the failure happened after a chunk reached the consumer


@dataclass(frozen=True)
class Retry:
    """Try again after ``delay`` seconds; ``resume``: reconnect with Last-Event-ID."""

    delay: float
    reason: str
    resume: bool


@dataclass(frozen=True)
class GiveUp:
    """Stop before the commit: the call fails with ``reason``."""

    reason: str


@dataclass(frozen=True)
class Surface:
    """After the commit: hand the error to the consumer (retrying would repeat chunks)."""

    reason: str


Decision: TypeAlias = Retry | GiveUp | Surface


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup that works for plain dicts as well as httpx.Headers."""
    value = headers.get(name)
    if value is not None:
        return value
    return next((v for k, v in headers.items() if k.lower() == name), None)


def _seconds(text: str | None, scale: float = 1.0) -> float | None:
    if text is None or not _SECONDS.fullmatch(text):
        return None
    value = float(text) * scale
    return value if math.isfinite(value) else None


def _http_date_delay(text: str | None, now_epoch: float) -> float | None:
    if not text:
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime dates carry no zone; HTTP dates are GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now_epoch)


def parse_retry_after(headers: Mapping[str, str], *, now_epoch: float, cap: float) -> float | None:
    """The server's retry hint in seconds, if it sent a usable one.

    ``retry-after-ms`` (milliseconds, may be fractional) is read first, then
    ``Retry-After`` as seconds (integer or decimal), then as an HTTP date.
    Garbage, negative and non-finite values are ignored (a garbage
    ``retry-after-ms`` falls through to ``Retry-After``).

    Args:
        headers: Response headers; names are matched case-insensitively.
        now_epoch: The current wall-clock time (Unix seconds), for HTTP dates.
        cap: Longer hints are clamped to this many seconds.

    Returns:
        The delay in seconds within ``[0, cap]``, or None when there is no usable hint.
    """
    delay = _seconds(_header(headers, "retry-after-ms"), scale=0.001)
    if delay is None:
        text = _header(headers, "retry-after")
        delay = _seconds(text)
        if delay is None:
            delay = _http_date_delay(text, now_epoch)
    return None if delay is None else min(delay, cap)


def backoff_delay(
    config: BackoffConfig, attempt: int, rng: random.Random, previous: float | None
) -> float:
    """The delay before retry number ``attempt``.

    Args:
        config: The backoff family, base, caps and jitter.
        attempt: The 1-based retry number (its cap comes from ``config.cap``).
        rng: The only source of randomness; only ``rng.random()`` is called, once.
        previous: The previous delay of this call (decorrelated jitter), None at first.

    Returns:
        Seconds to wait, within ``config.envelope(attempt)``.
    """
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    exp = config.exponential(attempt)
    family = config.family
    if family == "seed":
        return exp + rng.random() * exp * config.jitter
    if family == "full":
        return rng.random() * exp
    if family == "equal":
        return exp / 2 + rng.random() * exp / 2
    if family == "decorrelated":
        # AWS: sleep = min(cap, U(base, sleep * 3)), starting from sleep = base.
        last = config.base if previous is None else previous
        high = max(config.base, last * 3)
        return min(config.cap(attempt), config.base + rng.random() * (high - config.base))
    if family == "proportional":
        return exp * (1 - config.jitter * rng.random())
    return exp


def _label(failure: Failure) -> str:
    return f"status {failure.status}" if failure.kind == "status" else failure.kind


class RetryState:
    """The retry bookkeeping of one logical call (one ``stream()`` call).

    Attributes:
        attempts: Attempts started so far (since the last success or reset).
        committed: A chunk has reached the consumer; from then on errors are surfaced
            unless the stream can be resumed.
        previous_delay: The last delay decided, None before the first retry.
    """

    def __init__(self, policy: ClientPolicy, rng: random.Random) -> None:
        self.policy = policy
        self._rng = rng
        self.attempts = 0
        self.committed = False
        self.previous_delay: float | None = None

    def on_attempt(self) -> None:
        """An attempt (a request) is starting."""
        self.attempts += 1

    def on_chunk(self) -> None:
        """A chunk reached the consumer; the first call commits the call."""
        self.committed = True

    def on_success(self) -> None:
        """The stream completed normally: the retry count starts over."""
        self.attempts = 0
        self.previous_delay = None

    def reset(self) -> None:
        """The network is back (online): the earlier failures do not count."""
        self.attempts = 0
        self.previous_delay = None

    def decide(
        self,
        failure: Failure,
        *,
        now_epoch: float,
        resumable: bool,
        idempotent: bool,
        request_sent: bool,
    ) -> Retry | GiveUp | Surface:
        """What to do about a failed attempt.

        In order: a status or failure the matrix does not retry gives up
        ("non_retryable"); after the commit the error is surfaced unless the call is
        ``resumable`` (ids seen, resume on, idempotent), which retries with
        ``resume=True``; before it, a non-idempotent request whose bytes were sent is
        never re-sent ("not_idempotent"); ``policy.max_attempts`` spent gives up
        ("exhausted"); otherwise the server's Retry-After wins over the computed
        backoff. An "offline" failure skips the matrix and the budget and retries with
        no delay (the commit and idempotency rules still apply): the shell waits for
        the network, then calls ``reset()``.

        Args:
            failure: How the attempt failed.
            now_epoch: Wall-clock Unix time, for HTTP-date Retry-After hints.
            resumable: The stream can be resumed with Last-Event-ID.
            idempotent: The request may safely run twice.
            request_sent: Request bytes were written, so the server may have seen them.

        Returns:
            Retry, GiveUp or Surface.
        """
        offline = failure.kind == "offline"
        status = failure.status if failure.kind == "status" else None
        if not offline and not self.policy.matrix.is_retryable(status):
            return GiveUp("non_retryable")
        label = _label(failure)
        resume = False
        if self.committed or failure.committed:
            if not (resumable and idempotent):
                return Surface(label)
            resume = True
        elif request_sent and not idempotent:
            return GiveUp("not_idempotent")
        if offline:
            return Retry(0.0, label, resume)
        limit = self.policy.max_attempts
        if limit is not None and self.attempts >= limit:
            return GiveUp("exhausted")
        return Retry(self._delay(failure, now_epoch), label, resume)

    def _delay(self, failure: Failure, now_epoch: float) -> float:
        policy = self.policy
        hint = None
        if policy.retry_after and failure.headers:
            hint = parse_retry_after(
                failure.headers, now_epoch=now_epoch, cap=policy.retry_after_cap
            )
        if hint is None:
            retry_number = max(1, self.attempts)
            hint = backoff_delay(policy.backoff, retry_number, self._rng, self.previous_delay)
        self.previous_delay = hint
        return hint
