"""Circuit breakers as a state machine written down as data.

``_TRANSITIONS`` is the whole lifecycle: CLOSED trips to OPEN, OPEN cools down to
HALF_OPEN, where exactly one caller is admitted as the probe; its success closes
the circuit, its failure re-opens it. Only how failures add up while CLOSED
differs: consecutive failures (the seed article) or a failure ratio over a
sliding window (the seed library). The caller passes the time to every method.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum, auto

from conformance.reference._config import BreakerConfig

__all__ = [
    "Admit",
    "BreakerError",
    "BreakerState",
    "CircuitBreaker",
    "NoBreaker",
    "RatioBreaker",
    "Reject",
    "make_breaker",
]


class BreakerState(Enum):
    CLOSED = auto()
    OPEN = auto()
    HALF_OPEN = auto()


class _Signal(Enum):
    TRIP = auto()  # enough failures while closed
    COOLED_DOWN = auto()  # the cooldown has elapsed
    PROBE_SUCCEEDED = auto()
    PROBE_FAILED = auto()
    RESET = auto()  # the network came back: start over


_TRANSITIONS: dict[BreakerState, dict[_Signal, BreakerState]] = {
    BreakerState.CLOSED: {
        _Signal.TRIP: BreakerState.OPEN,
        _Signal.RESET: BreakerState.CLOSED,
    },
    BreakerState.OPEN: {
        _Signal.COOLED_DOWN: BreakerState.HALF_OPEN,
        _Signal.RESET: BreakerState.CLOSED,
    },
    BreakerState.HALF_OPEN: {
        _Signal.PROBE_SUCCEEDED: BreakerState.CLOSED,
        _Signal.PROBE_FAILED: BreakerState.OPEN,
        _Signal.RESET: BreakerState.CLOSED,
    },
}


class BreakerError(RuntimeError):
    """A signal that the transition table does not allow in the current state (a bug)."""


@dataclass(frozen=True)
class Admit:
    """Go ahead; ``probe=True``: this caller is THE half-open probe and must report back."""

    probe: bool = False


@dataclass(frozen=True)
class Reject:
    """Do not call now; ask again at ``until`` (same clock as the ``now`` passed in)."""

    until: float


class _HalfOpenMachine:
    """The shared lifecycle; subclasses decide when failures while CLOSED trip it.

    Outcomes reported while OPEN (calls admitted before the trip) are ignored; any
    outcome reported while a probe is in flight resolves that probe. A probe that
    reports nothing for a whole cooldown is presumed lost and the next caller
    becomes the probe, so a leaked probe cannot wedge the breaker.
    """

    def __init__(self, config: BreakerConfig) -> None:
        self.config = config
        self._state = BreakerState.CLOSED
        self._open_until = 0.0
        self._probe_since: float | None = None  # when the probe in flight was admitted

    @property
    def probe_in_flight(self) -> bool:
        return self._probe_since is not None

    def state(self, now: float) -> BreakerState:
        """The state at ``now`` (OPEN turns HALF_OPEN once the cooldown has elapsed)."""
        self._cool_down(now)
        return self._state

    def admit(self, now: float) -> Admit | Reject:
        """Asks to make a call at ``now``."""
        state = self.state(now)
        if state is BreakerState.CLOSED:
            return Admit(probe=False)
        if state is BreakerState.OPEN:
            return Reject(self._open_until)
        lease_end = None if self._probe_since is None else self._probe_since + self.config.cooldown
        if lease_end is not None and now < lease_end:
            return Reject(lease_end)
        self._probe_since = now
        return Admit(probe=True)

    def record_success(self, now: float) -> None:
        """An admitted call succeeded."""
        state = self.state(now)
        if state is BreakerState.CLOSED:
            self._closed_success(now)
        elif self._probe_since is not None:
            self._fire(_Signal.PROBE_SUCCEEDED, now)

    def record_failure(self, now: float) -> None:
        """An admitted call failed."""
        state = self.state(now)
        if state is BreakerState.CLOSED:
            if self._closed_failure(now):
                self._fire(_Signal.TRIP, now)
        elif self._probe_since is not None:
            self._fire(_Signal.PROBE_FAILED, now)

    def probe_abandoned(self, now: float) -> None:
        """The probe was cancelled before an outcome: the next caller may probe."""
        self._probe_since = None

    def reset(self) -> None:
        """Closed again with no failure history (the network came back)."""
        self._fire(_Signal.RESET, 0.0)

    def _cool_down(self, now: float) -> None:
        if self._state is BreakerState.OPEN and now >= self._open_until:
            self._fire(_Signal.COOLED_DOWN, now)

    def _fire(self, signal: _Signal, now: float) -> None:
        try:
            self._state = _TRANSITIONS[self._state][signal]
        except KeyError:
            raise BreakerError(f"{signal.name} is not allowed in {self._state.name}") from None
        self._probe_since = None
        if self._state is BreakerState.OPEN:
            self._open_until = now + self.config.cooldown
        elif self._state is BreakerState.CLOSED:
            self._forget()

    def _closed_success(self, now: float) -> None:
        raise NotImplementedError

    def _closed_failure(self, now: float) -> bool:
        """Counts a failure while closed; True when it trips the breaker."""
        raise NotImplementedError

    def _forget(self) -> None:
        """Drops the failure history (on closing)."""
        raise NotImplementedError


class CircuitBreaker(_HalfOpenMachine):
    """Opens after ``config.threshold`` consecutive failures, for ``config.cooldown`` seconds."""

    def __init__(self, config: BreakerConfig) -> None:
        super().__init__(config)
        self.consecutive_failures = 0

    def _closed_success(self, now: float) -> None:
        self.consecutive_failures = 0

    def _closed_failure(self, now: float) -> bool:
        self.consecutive_failures += 1
        return self.consecutive_failures >= self.config.threshold

    def _forget(self) -> None:
        self.consecutive_failures = 0


class RatioBreaker(_HalfOpenMachine):
    """Opens when failures/calls >= ``config.ratio`` over the last ``config.window`` seconds,
    counted only once the window holds at least ``config.min_throughput`` calls."""

    def __init__(self, config: BreakerConfig) -> None:
        super().__init__(config)
        self._calls: deque[tuple[float, bool]] = deque()  # (when, failed), oldest first
        self._failures = 0

    def counts(self, now: float) -> tuple[int, int]:
        """(failures, calls) recorded in the window ending at ``now``."""
        self._expire(now)
        return self._failures, len(self._calls)

    def _closed_success(self, now: float) -> None:
        self._record(now, failed=False)

    def _closed_failure(self, now: float) -> bool:
        self._record(now, failed=True)
        calls = len(self._calls)
        return calls >= self.config.min_throughput and self._failures >= self.config.ratio * calls

    def _record(self, now: float, *, failed: bool) -> None:
        self._expire(now)
        self._calls.append((now, failed))
        self._failures += failed

    def _expire(self, now: float) -> None:
        horizon = now - self.config.window
        calls = self._calls
        while calls and calls[0][0] <= horizon:
            self._failures -= calls.popleft()[1]

    def _forget(self) -> None:
        self._calls.clear()
        self._failures = 0


class NoBreaker:
    """Never opens (``kind="none"``): admits everyone, ignores outcomes."""

    def __init__(self, config: BreakerConfig | None = None) -> None:
        self.config = config or BreakerConfig(kind="none")

    probe_in_flight = False

    def state(self, now: float) -> BreakerState:
        return BreakerState.CLOSED

    def admit(self, now: float) -> Admit | Reject:
        return Admit(probe=False)

    def record_success(self, now: float) -> None:
        pass

    def record_failure(self, now: float) -> None:
        pass

    def probe_abandoned(self, now: float) -> None:
        pass

    def reset(self) -> None:
        pass


def make_breaker(config: BreakerConfig) -> CircuitBreaker | RatioBreaker | NoBreaker:
    """The breaker ``config.kind`` names."""
    if config.kind == "consecutive":
        return CircuitBreaker(config)
    if config.kind == "ratio":
        return RatioBreaker(config)
    return NoBreaker(config)
