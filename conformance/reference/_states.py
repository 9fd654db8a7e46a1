"""What a stream is doing, as UIs see it.

The seed article surfaces the stalled state honestly ("our AI is crafting the
next step") instead of a frozen cursor; these values are what a UI renders.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["State", "StateChange"]


class State(Enum):
    IDLE = "idle"  # created, not iterated yet
    CONNECTING = "connecting"  # an attempt is under way, no data yet
    RETRYING = "retrying"  # waiting ``delay`` seconds before the next attempt
    STALLED = "stalled"  # open but silent for at least the check interval
    BREAKER_OPEN = "breaker_open"  # waiting for the shared circuit breaker
    COMMITTED = "committed"  # data is flowing to the consumer
    DONE = "done"  # the terminal event arrived
    FAILED = "failed"  # the stream raised a StreamError
    OFFLINE = "offline"  # waiting for online()


@dataclass(frozen=True)
class StateChange:
    """One transition; ``at`` is on the client's clock (``time.monotonic`` by default)."""

    state: State
    at: float
    detail: str = ""
    delay: float | None = None  # RETRYING / BREAKER_OPEN: seconds until the next try
