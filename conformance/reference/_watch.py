"""Stall detection for an open stream: "connection open" is not "data flowing".

The seed article's heartbeat check: every received byte resets the timer, the
timer is looked at every ``interval`` seconds, and a stream silent for longer
than ``timeout`` is abandoned. The caller passes the time in.
"""

from __future__ import annotations

import math
from typing import Literal

__all__ = ["StallStatus", "StallWatch", "next_check"]

StallStatus = Literal["ok", "stalled", "dead"]


class StallWatch:
    """How long a stream has been silent, and what that means.

    Attributes:
        timeout: Silence longer than this is "dead" (the seed: 90 s).
        interval: How often the shell checks (the seed: 10 s); silence of at least
            this long is "stalled", worth telling the user about.
        last_activity: When the stream last showed life (start or the last touch).
    """

    def __init__(self, timeout: float, interval: float, started: float) -> None:
        """Starts watching at ``started``.

        Args:
            timeout: Seconds of silence after which the stream is dead.
            interval: Seconds between checks, and the silence that counts as stalled.
            started: When the stream (or attempt) started, on the caller's clock.
        """
        if timeout <= 0 or interval <= 0:
            raise ValueError("timeout and interval must be positive")
        self.timeout = timeout
        self.interval = interval
        self.last_activity = started

    def touch(self, now: float) -> None:
        """Something arrived at ``now``: the silence starts over."""
        self.last_activity = max(self.last_activity, now)

    def idle(self, now: float) -> float:
        """Seconds of silence at ``now``."""
        return max(0.0, now - self.last_activity)

    def check(self, now: float) -> StallStatus:
        """The stream's health at ``now``.

        Returns:
            "dead" after more than ``timeout`` s of silence, "stalled" after at least
            ``interval`` s, "ok" otherwise.
        """
        idle = self.idle(now)
        if idle > self.timeout:
            return "dead"
        if idle >= self.interval:
            return "stalled"
        return "ok"


def next_check(due: float, interval: float, now: float) -> float:
    """When the check after the one due at ``due`` is due, on the grid ``due + k·interval``.

    A check that ran late does not move the grid (a chain of "``interval`` after the last
    check" adds every lateness up); checks already missed by ``now`` are skipped.
    """
    following = due + interval
    if following > now:
        return following
    return following + interval * (math.floor((now - following) / interval) + 1)
