"""The kit's timing model: its own measured noise, and the one measurement of a wait.

Every timing check compares an interval of possible true values with a bound. The
interval comes from the ledger's stamps and the lag the harness measured in its own
event loops while the case ran (``fake_servers._noise``): a stamp can be late by as
much as the loop that took it was late, never early. So a wait's interval runs from
what was measured minus the harness's share (``least``) to what the server's stamps
allow at most (``most``), and a check:

- FAILs only when the whole interval lies outside the bound (the client, not the
  kit, broke it);
- PASSes when the interval meets the bound and its noise is within what the check
  can absorb (``resolution``: the smallest flaw the check exists to catch);
- is undecidable otherwise: the runner re-judges the case at a coarser scale, and
  says INCONCLUSIVE if that does not help (docs/timing.md).

Pure: records in, numbers out. The same functions serve the conformance cases and
the app-level verdict.
"""

from __future__ import annotations

import bisect
import functools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fake_servers import Attempt, Connection
from fake_servers._ledger import link_attempts
from fake_servers._noise import PROBE_INTERVAL
from fake_servers._virtual import TICK

__all__ = [
    "AT_ONCE",
    "CLIENT_SOURCE",
    "HOP_SOURCE",
    "HOSTING_SOURCES",
    "LAG_FACTOR",
    "LOWER_FLOOR",
    "OVERLOAD_P99",
    "PAGE_SOURCE",
    "PATH_FLOOR",
    "PROCESS_SOURCE",
    "QUEUEING_SOURCES",
    "SDK_LOOP_SOURCE",
    "THREADS_SOURCE",
    "UNMEASURED_SLACK",
    "Decision",
    "LagSeries",
    "Noise",
    "Wait",
    "at_once",
    "connection_accepts",
    "decide",
    "describe_waits",
    "ms",
    "seen_from",
    "span",
    "wait_between",
    "wait_from",
]

# What a correct client's wait carries on a quiet machine beyond its own delay: the
# answer crossing the proxy, the client reading it, its timer, the next request
# crossing back (measured: median 3-6 ms, p99.9 12 ms with 50 clients in one loop;
# docs/timing.md). Added to every upper bound, with the measured lag on top.
PATH_FLOOR = 0.015
# Lower bounds: a stamp taken after a write returned can trail the bytes the client
# already acted on by the clock's granularity plus the server loop's measured lag.
LOWER_FLOOR = 0.002
# The probes see a block only at their wake-ups, and a loop starved of CPU delays
# work by more than one wake-up's lateness: the measured lag counts half again.
LAG_FACTOR = 1.5
# When nothing was measured (hand-built evidence, an app-level verdict without
# probes): the old constant, stated, and wide enough for a loaded machine.
UNMEASURED_SLACK = 0.5
# A kit loop (server, proxy) whose p99 lag passes this while a case plays was starved:
# its probes no longer bound the harness's share of what the client did (work queued
# at once waits behind many wake-ups, and a deadline runs out on the kit's slowness),
# so no FAIL is sure. Quiet, the p99 is 3-7 ms; under 4 CPU burners 10-60 ms. The
# client's own loop is left out: a client that blocks it must not excuse itself.
OVERLOAD_P99 = 0.1
# A browser page whose own loop gave no sign for this long (one wake-up this late, or no
# answer to the kit as the case ended): beside 2 CPU burners and CI's other track, a
# correct page reopened after a stall delivered nothing for three cases while every kit
# loop's p99 stayed under 8 ms. The kit cannot tell Chromium held still from the page,
# so a failure a deadline decided is not sure (a page that blocks its loop for seconds
# is INCONCLUSIVE, never PASS).
PAGE_STALL = 2.0
# The name the noise's summary gives the per-request network hops (``Noise.hops``).
HOP_SOURCE = "network"
# The loops that host a client's own code, as their adapters record them: an exec
# client's process (the exec protocol's "lag") and a browser page. One such loop runs
# every client of a case (fifty SDK instances in one Node process, fifty users in one
# page), so a stall there holds every timer due during it, and the requests queued
# behind it leave one by one after it ends, beyond any reach around a stamp.
PROCESS_SOURCE = "process"
PAGE_SOURCE = "page"
# The threads a synchronous SDK's adapter runs its streams in, one each (fifty for the
# herd), probed by a thread of the same process (``fake_servers._noise.ThreadLagProbe``).
THREADS_SOURCE = "threads"
# The runner's own loop when the adapter runs a library's client instances on it (the
# async SDK adapters: fifty ``AsyncOpenAI`` for the jitter case); "client" otherwise.
SDK_LOOP_SOURCE = "sdk-loop"
CLIENT_SOURCE = "client"
HOSTING_SOURCES = frozenset({PROCESS_SOURCE, PAGE_SOURCE, THREADS_SOURCE, SDK_LOOP_SOURCE})
# The loops where work queues: each handles many clients' requests (the kit's server and
# proxy, fifty SDK instances in one process), and a request needs several iterations to
# cross one, so a loop that stays busy holds it for as long as it stays busy, more than
# any one wake-up is late. Measured, the matrix beside other work: anthropic-python's
# async client, its loop in 40-50 ms iterations for 220 ms, retries 114 ms past the top
# of their range; openai-python's threads, the server loop busy from 820 to 1,250 ms
# into the case (no wake-up more than 112 ms late), retries up to 370 ms past it. A
# page is left out: its requests leave through the browser's network process, measured
# per request (``Noise.hops``), and its timers' lateness is its probe's. So is the
# runner's own loop (``client``) when it runs the kit's clients: a browser's or an exec
# client's requests never cross it, and the zoo's fixed-delay mutants, on it, must
# stay caught beside xdist workers (docs/timing.md).
QUEUEING_SOURCES = frozenset({"server", "proxy", PROCESS_SOURCE, THREADS_SOURCE, SDK_LOOP_SOURCE})
# A wake-up late by its own interval or more finds its loop busy at least half the time
# (quiet wake-ups are 0.1-1 ms late; a loaded machine's scheduler alone makes a few ms).
CONGESTED_LAG = PROBE_INTERVAL
# A busy stretch holds one request for at most this many of its longest iterations: a
# loop starved of CPU is "busy" for seconds, and its whole stretch would excuse any wait
# (CI beside 2 CPU burners: fetch-event-source's fixed 1 s delays undecidable). The
# two held retries measured above needed 2.3 and 3.3 of theirs.
QUEUED_ITERATIONS = 4
# How far around a moment a block still delays what happens at it.
_REACH = 2 * PROBE_INTERVAL

Decision = Literal["in", "out", "unsure"]


@dataclass(frozen=True)
class LagSeries:
    """One probe's wake-ups: when each was due, how late it came (seconds)."""

    source: str
    due: tuple[float, ...]  # ascending
    lag: tuple[float, ...]

    @classmethod
    def from_rows(cls, source: str, rows: Iterable[tuple[float, float]]) -> LagSeries:
        ordered = sorted(rows)
        return cls(source, tuple(d for d, _ in ordered), tuple(max(0.0, w - d) for d, w in ordered))

    @functools.cached_property
    def longest(self) -> float:
        return max(self.lag, default=0.0)

    def worst(self, start: float, end: float) -> float:
        """The largest lag of a wake-up that was pending at any time in [start, end]."""
        if not self.due:
            return 0.0
        lo = bisect.bisect_left(self.due, start - self.longest - _REACH)
        hi = bisect.bisect_right(self.due, end + _REACH)
        worst = 0.0
        for i in range(lo, hi):
            due, lag = self.due[i], self.lag[i]
            if due - _REACH <= end and due + lag + _REACH >= start:
                worst = max(worst, lag)
        return worst

    def busy_until(self, end: float) -> float:
        """How long the loop had been busy without a break at ``end`` (seconds): back
        from the last wake-up due by then, over wake-ups at least ``CONGESTED_LAG``
        late, to the due time of the first of them; a break is two on-time wake-ups in
        a row (one lets a ready queue drain one step only); at most
        ``QUEUED_ITERATIONS`` times its longest wake-up lateness. 0 when it was free."""
        i = bisect.bisect_right(self.due, end) - 1
        if i < 0 or self.lag[i] < CONGESTED_LAG:
            return 0.0
        first, free, longest = i, 0, self.lag[i]
        for j in range(i - 1, -1, -1):
            if self.lag[j] >= CONGESTED_LAG:
                first, free, longest = j, 0, max(longest, self.lag[j])
            elif (free := free + 1) >= 2:
                break
        return max(0.0, min(end - self.due[first], QUEUED_ITERATIONS * longest))

    def summary(self) -> dict[str, float]:
        return _stats(self.lag)


def _stats(values: Iterable[float]) -> dict[str, float]:
    """Samples, median, p99 and max of lags or hops (seconds)."""
    ordered = sorted(values)
    if not ordered:
        return {"samples": 0}
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {
        "samples": len(ordered),
        "p50": round(statistics.median(ordered), 6),
        "p99": round(p99, 6),
        "max": round(ordered[-1], 6),
    }


@dataclass(frozen=True)
class Noise:
    """The lag the harness measured in its own loops while a case ran.

    ``client_probed``: False when the client ran where no probe was (an application's
    own code under ``llm_server``): the server's lag still widens the lower bounds, and
    the upper bounds keep the unmeasured allowance as their floor, since the client's
    own lateness is unknown.

    ``hops``: by attempt ``seq``, the seconds its request took from the client's code to
    the server and its response back (``Ledger.record_hop``: a browser's network
    process, which no loop probe sees). Measured per request, a hop counts for the
    waits next to its own attempt only (``wait_between``), never as a loop's lag near
    a moment: fifty requests of one page queue there at once, and the worst of them
    would widen every client's wait.
    """

    series: tuple[LagSeries, ...] = ()
    client_probed: bool = True
    # Virtual time (``fake_servers._virtual``): the stamps are the client's own moments,
    # on one clock, with nothing between them and the client: every allowance is the
    # clock's tick (1 microsecond), the rounding of a stamp.
    exact: bool = False
    hops: Mapping[int, tuple[float, float]] = field(default_factory=dict)
    # by attempt ``seq``: when its response head reached the client's code at the latest
    heads: Mapping[int, float] = field(default_factory=dict)
    # by attempt ``seq``: when the proxy accepted the new connection the attempt came on
    # (``connection_accepts``; absent: a kept-alive connection, or not known)
    opened: Mapping[int, float] = field(default_factory=dict)

    @classmethod
    def from_ledger(
        cls,
        lags: Mapping[str, Iterable[tuple[float, float]]],
        *,
        client_probed: bool = True,
        hops: Mapping[int, tuple[float, float]] | None = None,
        heads: Mapping[int, float] | None = None,
        opened: Mapping[int, float] | None = None,
    ) -> Noise:
        series = tuple(LagSeries.from_rows(s, rows) for s, rows in sorted(lags.items()))
        return cls(
            series,
            client_probed,
            hops=dict(hops or {}),
            heads=dict(heads or {}),
            opened=dict(opened or {}),
        )

    def linked(self, attempts: Sequence[Attempt], connections: Sequence[Connection]) -> Noise:
        """This noise with the accept of each attempt's new connection, as the ledger links
        them (``connection_accepts``): the waits then end where the client acted."""
        accepts = connection_accepts(attempts, connections)
        return replace(self, opened=accepts) if accepts else self

    def opened_at(self, attempt: Attempt) -> float | None:
        """When the proxy accepted the new connection ``attempt`` came on, if it came on
        one (``connection_accepts``)."""
        return self.opened.get(attempt.seq)

    def hop_out(self, attempt: Attempt) -> float:
        """Seconds ``attempt``'s request spent on its way out of the client (0: unknown)."""
        return self.hops.get(attempt.seq, (0.0, 0.0))[0]

    def head_seen(self, attempt: Attempt) -> float | None:
        """When ``attempt``'s response head reached the client's code at the latest, if
        measured (a browser page: the kit notes when its ``fetch`` resolved)."""
        return self.heads.get(attempt.seq)

    def hop_back(self, attempt: Attempt) -> float:
        """Seconds ``attempt``'s response spent on its way back to the client's code."""
        return self.hops.get(attempt.seq, (0.0, 0.0))[1]

    @property
    def measured(self) -> bool:
        return any(s.due for s in self.series)

    def lag(self, start: float, end: float | None = None) -> float:
        """The harness's possible delay of anything that crossed its loops in [start, end]:
        the worst lag of each loop there, summed (one path crosses them in turn)."""
        end = start if end is None else end
        return sum(s.worst(start, end) for s in self.series)

    def source_lag(self, source: str, start: float, end: float | None = None) -> float:
        end = start if end is None else end
        return sum(s.worst(start, end) for s in self.series if s.source == source)

    def upper_slack(self, *moments: tuple[float, float]) -> float:
        """Allowance above an upper bound for a path that crossed the loops at ``moments``
        (each a (start, end) window): the quiet floor plus the measured lag."""
        if self.exact:
            return TICK
        if not self.measured:
            return UNMEASURED_SLACK
        return self._floored(PATH_FLOOR + LAG_FACTOR * sum(self.lag(a, b) for a, b in moments))

    def wait_slack(self, start: float, end: float) -> float:
        """Allowance above a wait's measured length from ``start`` (what the client
        reacted to) to ``end`` (its next request): each loop's lag near both ends, and a
        hosting loop's (``HOSTING_SOURCES``) worst over the whole wait when that is more.
        Measured: fifty SDK instances in one Node process beside a browser run, its loop
        stalled 224 ms mid-wait, and the retries due during it reached the server 310 to
        380 ms late, one after another, most of them past the reach of the stall. A
        queueing loop (``QUEUEING_SOURCES``) also counts how long it had been busy
        without a break at ``end`` (``LagSeries.busy_until``), up to the wait's length."""
        if self.exact:
            return TICK
        if not self.measured:
            return UNMEASURED_SLACK
        lags = at_start = busy = 0.0
        for s in self.series:
            first = s.worst(start - _REACH, start + _REACH)
            whole = s.worst(start, end) if s.source in HOSTING_SOURCES else 0.0
            lags += LAG_FACTOR * max(first + s.worst(end - _REACH, end), whole)
            at_start += LAG_FACTOR * first
            if s.source in QUEUEING_SOURCES:
                busy = max(busy, s.busy_until(end))
        # Busy stretches all end at ``end`` and overlap: a request queued through each
        # loop in turn waited at most the longest (a duration: no factor), after
        # whatever held the failure's report at the start.
        queued = at_start + min(busy, end - start)
        return self._floored(PATH_FLOOR + max(lags, queued))

    def worst_slack(self) -> float:
        """``upper_slack`` for a moment not known: the worst lag of the whole case."""
        if self.exact:
            return TICK
        if not self.measured:
            return UNMEASURED_SLACK
        return self._floored(PATH_FLOOR + LAG_FACTOR * sum(s.longest for s in self.series))

    def _floored(self, slack: float) -> float:
        return slack if self.client_probed else max(slack, UNMEASURED_SLACK)

    def lower_slack(self, stamp: float) -> float:
        """Allowance below a lower bound measured from a server stamp taken at ``stamp``."""
        if self.exact:
            return TICK
        return LOWER_FLOOR + LAG_FACTOR * self.source_lag("server", stamp)

    def summary(self) -> dict[str, dict[str, float]]:
        """Each loop's lag statistics (what decides overload, lanes and noisy herds)."""
        return {s.source: s.summary() for s in self.series}

    def report(self) -> dict[str, dict[str, float]]:
        """``summary`` and, when measured, the hops' statistics (``HOP_SOURCE``): what
        failure texts and reports show."""
        ways = [way for pair in self.hops.values() for way in pair if way > 0]
        if not ways:
            return self.summary()
        return self.summary() | {HOP_SOURCE: _stats(ways)}

    def worst_p99(self, sources: Iterable[str] | None = None) -> float:
        """The largest p99 lag of any loop (of ``sources``; 0 when nothing was measured)."""
        wanted = None if sources is None else set(sources)
        return max(
            (
                s.summary().get("p99", 0.0)
                for s in self.series
                if wanted is None or s.source in wanted
            ),
            default=0.0,
        )

    def overloaded(self) -> str | None:
        """Why the kit's own loops were too starved for a sure FAIL, or None."""
        worst = self.worst_p99(("server", "proxy"))
        if worst <= OVERLOAD_P99:
            return None
        return (
            f"the kit's own loops were starved (p99 lag {ms(worst)}, above "
            f"{ms(OVERLOAD_P99)}): no failure is sure"
        )

    def page_stalled(self) -> str | None:
        """Why a browser page's loop may have stood still past PAGE_STALL, or None."""
        worst = max((s.longest for s in self.series if s.source == PAGE_SOURCE), default=0.0)
        if worst < PAGE_STALL:
            return None
        return (
            f"the page's loop gave no sign for {ms(worst)} (at least {ms(PAGE_STALL)}: the "
            "page or the browser stood still): no failure a deadline decided is sure"
        )

    def held_in_transit(self) -> str | None:
        """Why a request or response was held outside every loop for longer than a
        starved kit loop's p99 (``OVERLOAD_P99``), or None: a browser's network process
        held one 2.1 s on a loaded machine, and the client's own silence timer rightly
        gave up on it (``Noise.hops``)."""
        worst = max((max(pair) for pair in self.hops.values()), default=0.0)
        if worst <= OVERLOAD_P99:
            return None
        return (
            f"a request or response was held {ms(worst)} on its way (the network hop, "
            f"above {ms(OVERLOAD_P99)}): no failure that timer decided is sure"
        )

    def headline(self) -> str:
        """One line for failure texts: each loop's p99 and worst lag."""
        if self.exact:
            return "virtual time: every stamp exact"
        if not self.measured:
            return "harness lag not measured"
        parts = []
        for source, stats in self.report().items():
            if stats.get("samples"):
                p99, worst = stats["p99"] * 1000, stats["max"] * 1000
                kind = "hop" if source == HOP_SOURCE else "loop"
                parts.append(f"{source} {kind} p99 {p99:.1f} ms, max {worst:.1f} ms")
        return "harness lag: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        late = {
            s.source: [
                [round(d, 6), round(g, 6)] for d, g in zip(s.due, s.lag, strict=True) if g >= 0.002
            ]
            for s in self.series
        }
        hops = {str(seq): [round(o, 6), round(b, 6)] for seq, (o, b) in sorted(self.hops.items())}
        heads = {str(seq): round(at, 6) for seq, at in sorted(self.heads.items())}
        return {"summary": self.report(), "late_wakeups": late, "hops": hops, "heads": heads}


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
) -> Wait:
    """The wait between a failure and the next attempt, from any pair of stamps.

    The wait ends where the client acted: at the earliest sign of the next attempt on
    the path. That is its arrival at the server (less its measured way out), or, when
    it came on a new connection (``opened``), the proxy's accept of that connection:
    the rest of the connection's set-up (the proxy connecting upstream, the server
    taking the connection in, the request crossing both) is path, not the client's
    delay. Load only ever makes a stamp later, so the earliest sign is the one to end at.

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
            counts); so does the most, when the connection was accepted after the
            failure could be seen: a connection opened for the retry is the retry (one
            opened before, say by a pool warming up, marks no decision to retry).
    """
    measured = next_at - reacted_after
    acted_least = acted_most = next_at - out
    if opened is not None:
        acted_least = min(acted_least, opened)
        if opened >= reacted_at_most_after:
            acted_most = min(acted_most, opened)
    # Tolerance: the wait's slack at the moment it ends (PATH_FLOOR plus the lag measured
    # near it): at an accept, the loopback handshake and the proxy loop's lateness; at
    # an arrival, the whole path. ``most`` needs none past ``lower_slack``: an accept
    # and an arrival both come after the client acted.
    slack = noise.wait_slack(reacted_after, acted_least)
    least = acted_least - reacted_after - slack - back
    most = acted_most - reacted_at_most_after + noise.lower_slack(reacted_at_most_after)
    return Wait(min(least, most), most, measured, noise.measured)


def connection_accepts(
    attempts: Sequence[Attempt], connections: Sequence[Connection]
) -> dict[int, float]:
    """For each attempt (by ``seq``) that came on a new connection, when the proxy
    accepted that connection. The ledger links each attempt to the connection it came
    on (``fake_servers._ledger.link_attempts``: the server's peer port is the proxy's
    upstream port); an attempt is on a new connection when it is the first on it (the
    client opened the connection for it). A later attempt on a kept-alive connection,
    and one not through the proxy, has no accept: its wait ends at its arrival."""
    accepted = {c.seq: c.opened_at for c in connections}
    return {
        seq: accepted[link.connection]
        for seq, link in link_attempts(attempts, connections).items()
        if link.first
    }


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
    )


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


# A prompt reaction ("at once") may take a quarter of the flaw the check catches.
AT_ONCE = 0.25


def at_once(start: float, end: float, noise: Noise, resolution: float) -> Decision:
    """A reaction from ``start`` to a server stamp ``end`` was prompt: within AT_ONCE of
    ``resolution`` (the smallest lateness that is the flaw, e.g. a backoff waited out).

    The harness's share is the worst lag of each loop over the whole reaction, not only
    near its end: a loop stalled after the signal holds the reaction back, and the work
    queued behind the stall (five reconnects) can take longer than the reach around the
    end stamp. Measured: a 250 ms stall starting 5 ms after the blink, the fifth
    reconnect 27 ms after it ended; judged near the end only, that was a FAIL.
    """
    # Undecidable from the flaw itself on: a reaction that could be ``resolution`` late.
    limit = AT_ONCE * resolution
    wait = span(start, end, noise)
    least = wait.measured - noise.upper_slack((start - _REACH, end))
    whole = Wait(min(wait.least, least), wait.most, wait.measured, wait.known)
    return decide(whole, -math.inf, limit, resolution - limit)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def describe_waits(waits: Sequence[Wait]) -> str:
    return ", ".join(f"{w.measured * 1000:.0f}" for w in waits)


def span(start: float, end: float, noise: Noise) -> Wait:
    """A duration between two server-side stamps, as an interval.

    The end stamp can trail what ended by the lag around it (``least`` takes the quiet
    path floor and that lag off); the start stamp can trail what started by the
    server's lag (``most`` adds the lower-bound slack).
    """
    measured = end - start
    least = measured - noise.upper_slack((end - _REACH, end))
    return Wait(least, measured + noise.lower_slack(start), measured, noise.measured)
