"""The one measurement of a wait, and the in / out / unsure decision every timing check
makes with it.

Every timing check compares an interval of possible true values with a bound. The
interval comes from the ledger's stamps and the lag the harness measured in its own
loops while the case ran (``conformance.timing._noise``): a stamp can be late by as
much as the loop that took it was late, never early. So a wait's interval runs from
what was measured minus the harness's share (``least``) to what the server's stamps
allow at most (``most``), and a check (``decide``):

- FAILs only when the whole interval lies outside the bound (the client, not the
  kit, broke it);
- PASSes when the interval meets the bound and its noise is within what the check
  can absorb (``resolution``: the smallest flaw the check exists to catch);
- is undecidable otherwise: the runner re-judges the case at a coarser scale, and
  says INCONCLUSIVE if that does not help (``conformance.timing._rejudge``).

Pure: records in, numbers out. The same functions serve the conformance cases and
the app-level verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from conformance.timing._noise import REACH, Noise
from fake_servers import Attempt

__all__ = [
    "AT_ONCE",
    "Decision",
    "Wait",
    "at_once",
    "decide",
    "describe_waits",
    "seen_from",
    "span",
    "wait_between",
    "wait_from",
]

# A prompt reaction ("at once") may take a quarter of the flaw the check catches.
AT_ONCE = 0.25

Decision = Literal["in", "out", "unsure"]


@dataclass(frozen=True)
class Wait:
    """How long a client itself waited, as an interval the true value lies in.

    ``least``: measured from the end of what it reacted to, less the harness's share
    (quiet path floor plus measured lag). ``most``: measured from the server's stamp of
    the earliest moment the client could have reacted, plus the lower-bound slack.
    ``measured``: the raw gap, for the report. ``known``: the noise was measured; when
    it was not (hand-built evidence, app-level tests) the stated unmeasured slacks
    apply and nothing is undecidable.
    """

    least: float
    most: float
    measured: float
    known: bool = True

    @property
    def noise(self) -> float:
        return max(0.0, self.measured - self.least)


def wait_from(
    reacted_after: float,
    reacted_at_most_after: float,
    next_at: float,
    noise: Noise,
    back: float = 0.0,
    out: float = 0.0,
    opened: float | None = None,
    sent: float | None = None,
) -> Wait:
    """The wait between a failure and the next attempt, from any pair of stamps.

    The wait ends where the client acted: at the earliest sign of the next attempt on
    the path. That is its arrival at the server (less its measured way out), or, when
    it came on a new connection, that connection's first byte at the proxy (``sent``)
    for the most it can be, and its accept (``opened``) for the least: the rest of the
    connection's set-up (the proxy connecting upstream, the server taking the
    connection in, the request crossing both) is path, not the client's delay. Load
    only ever makes a stamp later, so the earliest sign is the one to end at.

    Args:
        reacted_after: The latest stamp the failure can be said to be complete at (the
            end of the failed attempt, a cut connection's close).
        reacted_at_most_after: The earliest moment the client could have seen the
            failure (the failed request's arrival plus any scripted hold).
        next_at: The next attempt's arrival.
        noise: What the harness measured meanwhile.
        back: The measured hop of the failure's way back to the client's code, after
            ``reacted_after`` (``Noise.hops``; a lower bound, so taking it off the
            least wait never passes a late client for the kit's sake).
        out: The measured hop of the next request's way out, before ``next_at``: the
            client's delay ended that much earlier, so it comes off both ends.
        opened: When the proxy accepted the new connection the next attempt came on
            (``Noise.opened_at``). The least wait ends there (the accept can trail the
            client's connect by the path's floor and the lag there, which the slack
            counts), unless the connection then sat idle longer than that slack
            explains before its first byte: then at the first byte.
        sent: When the proxy read that connection's first byte (``Noise.sent_at``).
            The most wait ends there, when it came after the failure could be seen:
            the client had sent its retry by then. Not at the accept: a pool may open
            a connection before it has a request for it (openai-node and
            anthropic-node did, 0-6 ms after a 5xx, then sent their retry 0.8 s later
            on it: counted from the accept, the kit FAILed their correct backoff).
    """
    measured = next_at - reacted_after
    acted_least = acted_most = next_at - out
    if opened is not None:
        acted_least = min(acted_least, opened)
        if sent is not None and sent - opened > noise.wait_slack(opened, sent):
            # The connection sat idle longer than the harness's measured share can
            # explain: it waited for its request (a pool's spare), so the client acted
            # nearer its first byte than its accept.
            acted_least = min(next_at - out, sent)
    if sent is not None and sent >= reacted_at_most_after:
        acted_most = min(acted_most, sent)
    # Tolerance: the wait's slack at the moment it ends (PATH_FLOOR plus the lag measured
    # near it): at an accept, the loopback handshake and the proxy loop's lateness; at
    # an arrival, the whole path. ``most`` needs none past ``lower_slack``: an accept
    # and an arrival both come after the client acted.
    slack = noise.wait_slack(reacted_after, acted_least)
    least = acted_least - reacted_after - slack - back
    most = acted_most - reacted_at_most_after + noise.lower_slack(reacted_at_most_after)
    return Wait(min(least, most), most, measured, noise.measured)


def seen_from(a: Attempt) -> float:
    """The earliest a client can have seen how ``a`` ended: the server's last record
    before its final write (a plain response's headers, a stream's last event)."""
    times = [a.arrived_at]
    if a.headers_at is not None:
        times.append(a.headers_at)
    if a.events:
        times.append(a.events[-1].at)
    return max(times)


def wait_between(prev: Attempt, nxt: Attempt, noise: Noise, held: float = 0.0) -> Wait:
    """How long the client waited between the failed attempt ``prev`` and ``nxt``.

    The one measurement of a wait: the backoff cases, the retry cases and the
    app-level verdict all call it. When ``nxt`` came on a new connection (``Noise.opened``,
    from the ledger's link), the wait ends at that connection's accept.

    Args:
        prev: The failed attempt.
        nxt: The attempt after it.
        noise: The harness's lag measured meanwhile.
        held: Seconds the script held ``prev``'s answer back (``Respond.delay``).
    """
    earliest = max(prev.arrived_at + held, seen_from(prev))
    end = prev.ended_at if prev.ended_at is not None else earliest
    return wait_from(
        end,
        earliest,
        nxt.arrived_at,
        noise,
        noise.hop_back(prev),
        noise.hop_out(nxt),
        noise.opened_at(nxt),
        noise.sent_at(nxt),
    )


def span(start: float, end: float, noise: Noise) -> Wait:
    """A duration between two server-side stamps, as an interval.

    The end stamp can trail what ended by the lag around it (``least`` takes the quiet
    path floor and that lag off); the start stamp can trail what started by the
    server's lag (``most`` adds the lower-bound slack).
    """
    measured = end - start
    least = measured - noise.upper_slack((end - REACH, end))
    return Wait(least, measured + noise.lower_slack(start), measured, noise.measured)


def decide(wait: Wait, low: float, high: float, resolution: float) -> Decision:
    """Where a wait lies against [low, high], for a check whose flaw is ``resolution``.

    ``out`` when the whole interval lies outside: the client broke the bound whatever
    the harness did. ``unsure`` when the interval also reaches a flaw's size past a
    bound (``high + resolution``, or ``low - resolution`` where a wait that short can
    exist): the measured noise could hide the flaw. ``in`` otherwise: the client may be
    off by less than the check's flaw size, which the check does not judge.
    """
    if wait.least > high or wait.most < low:
        return "out"
    if not wait.known:
        return "in"
    if wait.most >= high + resolution:
        return "unsure"
    if low - resolution >= 0 and wait.least <= low - resolution:
        return "unsure"
    return "in"


def at_once(start: float, end: float, noise: Noise, resolution: float) -> Decision:
    """A reaction from ``start`` to a server stamp ``end`` was prompt: within AT_ONCE of
    ``resolution`` (the smallest lateness that is the flaw, e.g. a backoff waited out).

    The harness's share is the worst lag of each loop over the whole reaction, not only
    near its end: a loop stalled after the signal holds the reaction back, and the work
    queued behind the stall (five reconnects) can take longer than the reach around the
    end stamp.
    """
    # Undecidable from the flaw itself on: a reaction that could be ``resolution`` late.
    limit = AT_ONCE * resolution
    wait = span(start, end, noise)
    least = wait.measured - noise.upper_slack((start - REACH, end))
    whole = Wait(min(wait.least, least), wait.most, wait.measured, wait.known)
    return decide(whole, -math.inf, limit, resolution - limit)


def describe_waits(waits: Sequence[Wait]) -> str:
    return ", ".join(f"{w.measured * 1000:.0f}" for w in waits)
