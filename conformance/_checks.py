"""Pure checks over evidence: each returns an ``Outcome``, never raises, never waits.

These are the kit's judgement. They serve the conformance cases and, where they
need only server-side evidence, the app-level verdict on unchanged code.
"""

from __future__ import annotations

from collections.abc import Iterable

from conformance._case import Outcome
from conformance._evidence import Delivery, Evidence
from conformance._timing import Decision, Noise
from conformance.reference._config import ClientPolicy
from fake_servers import Attempt

__all__ = [
    "REACTION_DEADLINE",
    "all_of",
    "answer",
    "delivered_exactly",
    "ended_with_done",
    "ended_with_error",
    "http_attempts",
    "judged",
    "reaction_resolution",
]

# How long a case's play waits for a reaction it needs before going on. A deadline,
# not a verdict: the checks judge what happened from the records.
REACTION_DEADLINE = 0.5


def reaction_resolution(policy: ClientPolicy) -> float:
    """The lateness that makes a reaction (a close, a reconnect) a flaw rather than
    noise: the profile's own check interval (10 s at the seeds' numbers, 0.2 s at
    test timing), which scales with the timing like every other duration."""
    return policy.stall_check_interval


def judged(decision: Decision, want: str, seen: str, noise: Noise) -> Outcome:
    """The outcome of a timing decision: the noise headline joins every non-pass."""
    if decision == "in":
        return Outcome.passed(want, seen)
    if decision == "out":
        return Outcome.failed(want, seen, noise.headline())
    return Outcome.unsure(
        want, f"{seen} (undecidable: the measured noise is too large)", noise.headline()
    )


def http_attempts(ev: Evidence, path: str | None = None) -> tuple[Attempt, ...]:
    """Attempts that reached the script (not rejected before it), in arrival order."""
    return tuple(a for a in ev.attempts if (path is None or a.path == path))


def answer(ev: Evidence) -> dict[int, str]:
    """The server's answer by event index, as sent across all attempts."""
    out: dict[int, str] = {}
    for a in ev.attempts:
        for e in a.data_events:
            out.setdefault(e.index, e.data)
    return out


def delivered_exactly(ev: Evidence, expected: list[str], stream: str = "s1") -> Outcome:
    """The consumer got exactly ``expected``, in order: no duplicate, no gap, no splice."""
    got = [d.data for d in ev.chunks(stream)]
    want = f"exactly {len(expected)} chunk(s), the server's sequence, each once"
    if got == expected:
        return Outcome.passed(want, f"{len(got)} chunk(s), in order")
    return Outcome.failed(want, _describe_mismatch(got, expected))


def _describe_mismatch(got: list[str], expected: list[str]) -> str:
    for i, (g, e) in enumerate(zip(got, expected, strict=False)):
        if g != e:
            dup = " (a duplicate of an earlier chunk)" if g in got[:i] else ""
            return f"{len(got)} chunk(s); chunk {i + 1} was {g!r}{dup}, expected {e!r}"
    if len(got) > len(expected):
        return f"{len(got)} chunk(s): {len(got) - len(expected)} more than the server's sequence"
    return f"{len(got)} chunk(s): the last {len(expected) - len(got)} missing"


def ended_with_done(ev: Evidence, stream: str = "s1") -> Outcome:
    outcome = ev.outcome(stream)
    want = "the stream completes (done)"
    if outcome is not None and outcome.kind == "done":
        return Outcome.passed(want)
    return Outcome.failed(want, _describe_outcome(outcome))


def ended_with_error(
    ev: Evidence, kinds: Iterable[str] | None = None, stream: str = "s1", status: int | None = None
) -> Outcome:
    """The stream ended with an error surfaced to the consumer (of one of ``kinds``)."""
    allowed = tuple(kinds) if kinds is not None else None
    want = "an error surfaced to the consumer" + (f" ({' or '.join(allowed)})" if allowed else "")
    if status is not None:
        want += f" carrying status {status}"
    outcome = ev.outcome(stream)
    if outcome is None or outcome.kind != "error":
        return Outcome.failed(want, _describe_outcome(outcome))
    if allowed is not None and outcome.error not in allowed:
        return Outcome.failed(want, f"error of kind {outcome.error}: {outcome.detail}")
    if status is not None and outcome.status != status:
        return Outcome.failed(want, f"error {outcome.error} with status {outcome.status}")
    return Outcome.passed(want, f"error {outcome.error}")


def _describe_outcome(outcome: Delivery | None) -> str:
    if outcome is None:
        return "neither done nor an error reached the consumer before the deadline"
    return outcome.describe()


def all_of(*outcomes: Outcome) -> Outcome:
    """Passes when every outcome passes; reports the first failure."""
    for o in outcomes:
        if not o.ok:
            return o
    return Outcome.passed(
        "; ".join(o.expected for o in outcomes), "; ".join(o.observed for o in outcomes)
    )
