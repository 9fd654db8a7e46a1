"""Per-attempt looks, their grouping into logical calls, and the judging inputs.

Everything here reads the ledger alone (what the server sent, as it recorded it),
never the script: a test may have loaded another scenario since.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from conformance._profiles import Profile
from conformance.reference import ClientPolicy
from conformance.timing._noise import LAG_FACTOR, Noise
from conformance.timing._waits import Wait, seen_from, wait_between
from fake_servers._ledger import Attempt

__all__ = [
    "CANCEL_LEAD",
    "JOIN_SLACK",
    "LOAD_SHORTFALL",
    "Inputs",
    "Look",
    "RetryWait",
    "cancelled_by_app",
    "group_calls",
    "in_band_error",
    "late_by_load",
    "lifted_by_load",
    "look_at",
]

_State = Literal["ok", "failed", "open", "cancelled"]

# A retry arrives after its predecessor ended; the server may notice the old
# connection's close a few milliseconds after the new request (two sockets), so
# "ended before it arrived" allows this much disorder. It never joins overlapping
# streams: those are concurrent calls, not retries.
JOIN_SLACK = 0.25
CANCEL_LEAD = 0.1  # a close this long before "the app stopped reading" was that stop
# A wait that reaches a lower bound (a Retry-After hint, a profile's envelope) only with
# the lateness the kit measured meanwhile is undecided when, less that lateness, it falls
# short of the bound by more than this share: a client that ignores the bound waits far
# short of it (its own backoff, or none), while one that keeps it sits at the bound, where
# any lateness at all would make a doubt of it (at 0.2, beside 2 CPU burners, a correct
# client's retry 21 ms past a 0.3 s hint was undecided under 103 ms of measured lateness).
LOAD_SHORTFALL = 0.5


# -- what each attempt amounted to ------------------------------------------------------


@dataclass(frozen=True)
class Look:
    """One attempt as the rules see it."""

    a: Attempt
    state: _State
    chunks: int  # data events the server sent
    terminal: bool
    hint: float | None  # seconds the response's Retry-After asked for
    outcome: str

    @property
    def seq(self) -> int:
        return self.a.seq

    @property
    def status(self) -> int | None:
        return self.a.status

    @property
    def committed(self) -> bool:
        return self.chunks > 0

    @property
    def body_complete(self) -> bool:
        """Whether the server got the whole request (else it could not have acted on it)."""
        return self.a.rejected != "client_left"

    def ids_sent(self) -> tuple[str, ...]:
        return tuple(e.id for e in self.a.data_events if e.id is not None)


def look_at(attempt: Attempt, cancelled: bool) -> Look:
    chunks = len(attempt.data_events)
    terminal = any(e.kind == "terminal" for e in attempt.events)
    # Only a plain response's Retry-After is a hint (a streamed answer's never was).
    hint = attempt.retry_after if attempt.ending is None else None
    state, outcome = _judge_attempt(attempt, chunks, terminal)
    if cancelled and state != "ok":
        state, outcome = "cancelled", outcome + " (the app stopped reading)"
    return Look(attempt, state, chunks, terminal, hint, outcome)


def _judge_attempt(a: Attempt, chunks: int, terminal: bool) -> tuple[_State, str]:
    if a.end is None:
        return "open", f"{a.status or 'no status'}, {chunks} chunk(s) so far, still open"
    if a.status is None:
        return "failed", f"no response ({a.end}{': ' + a.note if a.note else ''})"
    if a.status >= 400:
        return "failed", str(a.status)
    streamed = a.ending is not None or bool(a.events)
    if not streamed:
        return ("ok", str(a.status)) if a.end == "completed" else ("failed", f"{a.status} {a.end}")
    if terminal:
        return "ok", f"{a.status}, {chunks} chunk(s), done"
    if in_band_error(a):
        return "failed", f"{a.status}, {chunks} chunk(s), in-band error event"
    how = {
        "completed": "truncated: no terminal event",
        "aborted": "connection broken",
        "client_closed": "closed by the client",
        "server_stopped": "cut: server stopped",
    }[a.end]
    return "failed", f"{a.status}, {chunks} chunk(s), {how}"


def in_band_error(a: Attempt) -> bool:
    """The stream ended with the provider's error event (e.g. Anthropic's ``event: error``)."""
    return a.end == "completed" and a.ending == "error"


def cancelled_by_app(a: Attempt, stopped_reading_at: float | None) -> bool:
    """Closed by the client because the app stopped reading: not a failure to retry.

    The close may come a little before the mark: the ``break`` that drops the stream
    closes it, and the test says so on the next line.
    """
    return (
        stopped_reading_at is not None
        and a.arrived_at <= stopped_reading_at
        and a.end == "client_closed"
        and _ended(a) >= stopped_reading_at - CANCEL_LEAD
    )


# -- logical calls ----------------------------------------------------------------------


@dataclass
class _Group:
    label: str
    looks: list[Look] = field(default_factory=list)
    keys: set[tuple[str, ...]] = field(default_factory=set)  # Idempotency-Keys seen
    bodies: set[tuple[str, ...]] = field(default_factory=set)  # body fingerprints seen

    def add(self, look: Look) -> None:
        key, body = _identity(look.a)
        self.looks.append(look)
        self.bodies.add(body)
        if key is not None:
            self.keys.add(key)

    def same_request(self, look: Look) -> bool:
        key, body = _identity(look.a)
        return body in self.bodies or (key is not None and key in self.keys)


def _ended(a: Attempt) -> float:
    return 0.0 if a.ended_at is None else a.ended_at


def _identity(a: Attempt) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """(Idempotency-Key identity or None, body fingerprint identity) of a request."""
    idem = a.idempotency_key
    key = None if idem is None else (a.method, a.path, idem)
    return key, (a.method, a.path, a.query, a.body_sha256, str(a.body_size))


def _label(a: Attempt) -> str:
    if a.idempotency_key is not None:
        return f"Idempotency-Key {a.idempotency_key}"
    return f"body {a.body_sha256[:12]}, {a.body_size} B" if a.body_size else "no body"


def group_calls(looks: Sequence[Look]) -> list[_Group]:
    """Same request (same body bytes, or the same Idempotency-Key) after a failure: a retry."""
    groups: list[_Group] = []
    for look in looks:
        joinable = [g for g in groups if g.same_request(look) and _continues(g.looks[-1], look)]
        if joinable:
            group = max(joinable, key=lambda g: _ended(g.looks[-1].a))
        else:
            group = _Group(_label(look.a))
            groups.append(group)
        group.add(look)
    return groups


def _continues(last: Look, look: Look) -> bool:
    """Whether ``look`` can be a retry of ``last``: it failed and ended before ``look`` came."""
    ended = last.a.ended_at
    return last.state == "failed" and ended is not None and ended <= look.a.arrived_at + JOIN_SLACK


# -- the judging context ------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    looks: tuple[Look, ...]
    calls: tuple[tuple[int, tuple[Look, ...]], ...]  # (number, looks)
    policy: ClientPolicy
    profile: Profile | None
    app_output: str | None
    error: str | None
    idempotent: bool | None
    stall_timeout: float | None
    stopped_reading_at: float | None
    judged_at: float
    seed: int | None
    scale: float  # the profile's test_scale at test timing, else 1
    noise: Noise  # the harness lag measured meanwhile; unmeasured in app-level tests

    def delays(self, looks: Sequence[Look]) -> list[RetryWait]:
        """How long the client waited before each retry of a call."""
        return [RetryWait(i, looks[i - 1], looks[i], self.noise) for i in range(1, len(looks))]


@dataclass(frozen=True)
class RetryWait:
    """The wait before retry ``n`` (1-based) of a call, bounded from both sides by the
    kit's one measurement of a wait (``conformance.timing.wait_between``): "too soon"
    is judged on ``most``, "too late" on ``least``."""

    n: int
    prev: Look
    nxt: Look
    noise: Noise

    @property
    def _wait(self) -> Wait:
        return wait_between(self.prev.a, self.nxt.a, self.noise)

    @property
    def most(self) -> float:
        return self._wait.most

    @property
    def least(self) -> float:
        return self._wait.least

    @property
    def ceiling(self) -> float:
        """``most`` without its lower-bound slack: the best point for a position."""
        return self._wait.most - self.noise.lower_slack(seen_from(self.prev.a))

    @property
    def late_by_load(self) -> float:
        """How late load could have made the client's wake-up: its own lateness is not
        probed (an application's code), so the harness's lag meanwhile stands for it."""
        return late_by_load(self.noise, self.prev.a.arrived_at, self.nxt.a.arrived_at)

    def load_could_lift_past(self, bound: float) -> bool:
        """``lifted_by_load`` for this wait."""
        return lifted_by_load(self.ceiling, self.late_by_load, bound)


def late_by_load(noise: Noise, start: float, end: float) -> float:
    """How late load could have made an application's wake-up in [start, end]: its own
    lateness is not probed, so the harness's lag meanwhile stands for it (0 unmeasured)."""
    return LAG_FACTOR * noise.lag(start, end) if noise.measured else 0.0


def lifted_by_load(waited: float, late: float, bound: float) -> bool:
    """A wait of ``waited`` kept ``bound``, yet one far short of it (LOAD_SHORTFALL), made
    ``late`` by the load the kit measured, would look the same: undecided, never clean."""
    return late > 0 and waited - late < bound * (1 - LOAD_SHORTFALL)
