"""Pure checks over evidence: each returns an ``Outcome``, never raises, never waits.

These are the kit's judgement. They serve the conformance cases and, where they
need only server-side evidence, the app-level verdict on unchanged code.
"""

from __future__ import annotations

from collections.abc import Iterable

from conformance._case import Outcome
from conformance._evidence import Delivery, Evidence
from fake_servers import Attempt

__all__ = [
    "all_of",
    "answer",
    "delivered_exactly",
    "ended_with_done",
    "ended_with_error",
    "gap_before",
    "http_attempts",
    "retry_gaps",
]

# Scheduling slack for "the client waited at least X": the client's timer starts
# when it sees the failure, which is after the server recorded it, so the server's
# gap is never shorter than the client's wait. 2 ms covers clock granularity only.
LOWER_BOUND_SLACK = 0.002
# Slack for "the client acted within X": timer firing, event-loop scheduling and
# the close reaching the server. Loop delays on a loaded 2-core machine stay in
# the tens of milliseconds; 0.5 s leaves an order of magnitude of margin.
UPPER_BOUND_SLACK = 0.5


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


def gap_before(attempts: tuple[Attempt, ...], i: int) -> float:
    """Seconds between the arrival of attempt ``i-1`` and the arrival of attempt ``i``.

    Measured from the failed request's arrival, not its recorded end: the server
    stamps the end after its last write returns, which under load can come after the
    client already read the answer and started waiting. Nothing the client knows
    precedes the arrival, so "waited at least X" measured this way never fails a
    conformant client; it is looser only by the server's reply time (about 1 ms).
    """
    return attempts[i].arrived_at - attempts[i - 1].arrived_at


def retry_gaps(attempts: tuple[Attempt, ...]) -> list[float]:
    return [gap_before(attempts, i) for i in range(1, len(attempts))]


def all_of(*outcomes: Outcome) -> Outcome:
    """Passes when every outcome passes; reports the first failure."""
    for o in outcomes:
        if not o.ok:
            return o
    return Outcome.passed(
        "; ".join(o.expected for o in outcomes), "; ".join(o.observed for o in outcomes)
    )
