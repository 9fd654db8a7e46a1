"""The kit's own measured noise: how late its loops ran while a case played, and the
allowances that lateness grants a stamp.

The probes (``fake_servers._noise``) record, by ``Source``, when each wake-up of a loop
was due and how late it came. A stamp taken on a loop can be late by as much as that
loop was late near it, never early, so the noise bounds the harness's share of any
duration the kit measures: ``Noise`` sums it into the slack below a lower bound
(``lower_slack``) and above an upper one (``upper_slack``, ``wait_slack``), and says when
the kit's own loops were too starved for a failure to be sure (``overloaded``,
``page_stalled``, ``held_in_transit``). The wait measured with these allowances is
``conformance.timing._waits``.

Each constant below carries one line of why; the runs that set its value are in
docs/timing.md, "Calibration history". Pure: records in, numbers out.
"""

from __future__ import annotations

import bisect
import functools
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fake_servers import Attempt, Connection
from fake_servers._ledger import link_attempts
from fake_servers._noise import PROBE_INTERVAL, Source
from fake_servers._virtual import TICK

__all__ = [
    "CONGESTED_LAG",
    "LAG_FACTOR",
    "LOWER_FLOOR",
    "OVERLOAD_P99",
    "PAGE_STALL",
    "PATH_FLOOR",
    "QUEUED_ITERATIONS",
    "REACH",
    "UNMEASURED_SLACK",
    "LagSeries",
    "Noise",
    "connection_accepts",
    "ms",
]

# A correct client's wait on a quiet machine beyond its own delay: the answer crossing the
# proxy, the client reading it, the next request crossing back. Under every upper bound.
PATH_FLOOR = 0.015
# Below every lower bound: a stamp taken after a write returned can trail the bytes the
# client already acted on by the clock's granularity (plus the server loop's lag).
LOWER_FLOOR = 0.002
# The probes see a block only at their wake-ups, and a loop starved of CPU delays work by
# more than one wake-up's lateness: the measured lag counts half again.
LAG_FACTOR = 1.5
# The allowance when nothing was measured (hand-built evidence, an app-level verdict):
# wide enough for a loaded machine.
UNMEASURED_SLACK = 0.5
# A kit loop (server, proxy) whose p99 lag passes this was starved: its probes no longer
# bound the kit's share of a deadline that ran out. The client's own loop does not count.
OVERLOAD_P99 = 0.1
# A browser page whose loop gave no sign this long may have stood still, and the kit
# cannot tell the browser from the page: a deadline that ran out then decides nothing.
PAGE_STALL = 2.0
# A wake-up late by its own interval or more finds its loop busy at least half the time.
CONGESTED_LAG = PROBE_INTERVAL
# A busy stretch holds one request for at most this many of its longest iterations: a
# loop starved of CPU is "busy" for seconds, and its whole stretch would excuse any wait.
QUEUED_ITERATIONS = 4
# How far around a moment a block still delays what happens at it.
REACH = 2 * PROBE_INTERVAL


@dataclass(frozen=True)
class LagSeries:
    """One probe's wake-ups: when each was due, how late it came (seconds)."""

    source: Source
    due: tuple[float, ...]  # ascending
    lag: tuple[float, ...]

    @classmethod
    def from_rows(cls, source: str, rows: Iterable[tuple[float, float]]) -> LagSeries:
        ordered = sorted(rows)
        return cls(
            Source(source),
            tuple(d for d, _ in ordered),
            tuple(max(0.0, w - d) for d, w in ordered),
        )

    @functools.cached_property
    def longest(self) -> float:
        return max(self.lag, default=0.0)

    def worst(self, start: float, end: float) -> float:
        """The largest lag of a wake-up that was pending at any time in [start, end]."""
        if not self.due:
            return 0.0
        lo = bisect.bisect_left(self.due, start - self.longest - REACH)
        hi = bisect.bisect_right(self.due, end + REACH)
        worst = 0.0
        for i in range(lo, hi):
            due, lag = self.due[i], self.lag[i]
            if due - REACH <= end and due + lag + REACH >= start:
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
        first, longest = self._runs[i]
        return max(0.0, min(end - self.due[first], QUEUED_ITERATIONS * longest))

    @functools.cached_property
    def _runs(self) -> tuple[tuple[int, float], ...]:
        """For each wake-up, the first wake-up of the congested run it ends and the run's
        longest lateness so far (one pass: a wait's judgement asks this many times, and
        a loaded run's series is one long run)."""
        runs: list[tuple[int, float]] = []
        first, longest, free = 0, 0.0, 2
        for k, lag in enumerate(self.lag):
            if lag >= CONGESTED_LAG:
                first, longest = (k, lag) if free >= 2 else (first, max(longest, lag))
                free = 0
            else:
                free += 1
            runs.append((first, longest))
        return tuple(runs)

    def summary(self) -> dict[str, float]:
        return _percentiles(self.lag)


def _percentiles(values: Iterable[float]) -> dict[str, float]:
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
    # by attempt ``seq``, for the same attempts: when the proxy read the new
    # connection's first byte (``Connection.first_up_at``; absent: not known)
    sent: Mapping[int, float] = field(default_factory=dict)

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
        new = new_connections(attempts, connections)
        if not new:
            return self
        accepts = {seq: c.opened_at for seq, c in new.items()}
        sent = {seq: c.first_up_at for seq, c in new.items() if c.first_up_at is not None}
        return replace(self, opened=accepts, sent=sent)

    def opened_at(self, attempt: Attempt) -> float | None:
        """When the proxy accepted the new connection ``attempt`` came on, if it came on
        one (``connection_accepts``)."""
        return self.opened.get(attempt.seq)

    def sent_at(self, attempt: Attempt) -> float | None:
        """When the proxy read the first byte of the new connection ``attempt`` came on:
        its request's first byte (``Connection.first_up_at``)."""
        return self.sent.get(attempt.seq)

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

    def source_lag(self, source: Source, start: float, end: float | None = None) -> float:
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
        hosting loop's (``Source.hosting``) worst over the whole wait when that is more:
        a stall there holds every retry due during it, and they leave one after another
        once it ends, past the reach of the stall. A queueing loop (``Source.queueing``)
        also counts how long it had been busy without a break at ``end``
        (``LagSeries.busy_until``), up to the wait's length."""
        if self.exact:
            return TICK
        if not self.measured:
            return UNMEASURED_SLACK
        lags = at_start = busy = 0.0
        for s in self.series:
            first = s.worst(start - REACH, start + REACH)
            whole = s.worst(start, end) if s.source.hosting else 0.0
            lags += LAG_FACTOR * max(first + s.worst(end - REACH, end), whole)
            at_start += LAG_FACTOR * first
            if s.source.queueing:
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
        return LOWER_FLOOR + LAG_FACTOR * self.source_lag(Source.SERVER, stamp)

    def summary(self) -> dict[str, dict[str, float]]:
        """Each loop's lag statistics (what decides overload, lanes and noisy herds)."""
        return {s.source.value: s.summary() for s in self.series}

    def report(self) -> dict[str, dict[str, float]]:
        """``summary`` and, when measured, the hops' statistics (``Source.NETWORK``):
        what failure texts and reports show."""
        ways = [way for pair in self.hops.values() for way in pair if way > 0]
        if not ways:
            return self.summary()
        return self.summary() | {Source.NETWORK.value: _percentiles(ways)}

    def worst_p99(self, sources: Iterable[Source] | None = None) -> float:
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
        worst = self.worst_p99((Source.SERVER, Source.PROXY))
        if worst <= OVERLOAD_P99:
            return None
        return (
            f"the kit's own loops were starved (p99 lag {ms(worst)}, above "
            f"{ms(OVERLOAD_P99)}): no failure is sure"
        )

    def page_stalled(self) -> str | None:
        """Why a browser page's loop may have stood still past PAGE_STALL, or None."""
        worst = max((s.longest for s in self.series if s.source == Source.PAGE), default=0.0)
        if worst < PAGE_STALL:
            return None
        return (
            f"the page's loop gave no sign for {ms(worst)} (at least {ms(PAGE_STALL)}: the "
            "page or the browser stood still): no failure a deadline decided is sure"
        )

    def held_in_transit(self) -> str | None:
        """Why a request or response was held outside every loop for longer than a
        starved kit loop's p99 (``OVERLOAD_P99``), or None: the client's own silence
        timer may rightly have given up on it (``Noise.hops``)."""
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
                kind = "hop" if source == Source.NETWORK else "loop"
                parts.append(f"{source} {kind} p99 {p99:.1f} ms, max {worst:.1f} ms")
        return "harness lag: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        late = {
            s.source.value: [
                [round(d, 6), round(g, 6)] for d, g in zip(s.due, s.lag, strict=True) if g >= 0.002
            ]
            for s in self.series
        }
        hops = {str(seq): [round(o, 6), round(b, 6)] for seq, (o, b) in sorted(self.hops.items())}
        heads = {str(seq): round(at, 6) for seq, at in sorted(self.heads.items())}
        return {"summary": self.report(), "late_wakeups": late, "hops": hops, "heads": heads}


def connection_accepts(
    attempts: Sequence[Attempt], connections: Sequence[Connection]
) -> dict[int, float]:
    """For each attempt (by ``seq``) that came on a new connection, when the proxy
    accepted that connection. The ledger links each attempt to the connection it came
    on (``fake_servers._ledger.link_attempts``: the server's peer port is the proxy's
    upstream port); an attempt is on a new connection when it is the first on it (the
    client opened the connection for it). A later attempt on a kept-alive connection,
    and one not through the proxy, has no accept: its wait ends at its arrival."""
    return {seq: c.opened_at for seq, c in new_connections(attempts, connections).items()}


def new_connections(
    attempts: Sequence[Attempt], connections: Sequence[Connection]
) -> dict[int, Connection]:
    """For each attempt (by ``seq``) that was the first on its connection, that
    connection, as the ledger links them (``fake_servers._ledger.link_attempts``)."""
    by_seq = {c.seq: c for c in connections}
    return {
        seq: by_seq[link.connection]
        for seq, link in link_attempts(attempts, connections).items()
        if link.first
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"
