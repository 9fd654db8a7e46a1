"""The timing model (``conformance.timing``): the harness's measured lag, a wait as an
interval, and the in / out / unsure decision every timing check makes.

Also the kit tests' own noise builders (``quiet_noise``, ``noisy_noise``, ``quiet``,
``noisy``), imported by the check tests: evidence built with a *quiet measured* noise
exercises the measured path the runner takes, ``Noise()`` the unmeasured one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

import pytest
from _records import request_record

from conformance import Evidence, Outcome, timing
from conformance.timing import (
    AT_ONCE,
    CONGESTED_LAG,
    LAG_FACTOR,
    LOWER_FLOOR,
    OVERLOAD_P99,
    PATH_FLOOR,
    QUEUED_ITERATIONS,
    UNMEASURED_SLACK,
    LagSeries,
    Noise,
    Wait,
    at_once,
    decide,
    seen_from,
    span,
    wait_between,
    wait_from,
)
from fake_servers import Attempt, SentEvent
from fake_servers._noise import PROBE_INTERVAL, Source

SOURCES = ("server", "proxy", "client")  # as the ledger stores them: plain strings
HOSTING = [s for s in Source if s.hosting]  # the loops that host a client's own code
QUEUEING = [s for s in Source if s.queueing]  # the loops where requests queue
QUIET_LAG = 0.0005  # each quiet wake-up's lateness: a machine doing nothing else
REACH = 2 * PROBE_INTERVAL  # how far around a moment a block still counts
BLOCK = 0.2  # a heavy block: a full garbage collection of a big process, a busy core
# A loop busy from 1.28 to 1.5 in iterations of 40 ms holds a request this long at most:
# the stretch (0.22 s) capped at QUEUED_ITERATIONS of them.
HELD = min(0.22, QUEUED_ITERATIONS * 0.04)

Block = tuple[float, float]  # (when the blocked wake-up was due, how late it came)


# -- the kit tests' noise ---------------------------------------------------------------


def _rows(
    start: float, end: float, lag: float, blocks: Sequence[Block]
) -> list[tuple[float, float]]:
    """One probe's (due, woke) records over [start, end], as ``LagProbe`` makes them:
    a wake-up every PROBE_INTERVAL ``lag`` late; a block is one wake-up that came its
    seconds late, the next due half an interval after it woke."""
    pending = sorted(blocks)
    rows: list[tuple[float, float]] = []
    i, due = 0, start
    while due <= end:
        if pending and pending[0][0] <= due:
            at, seconds = pending.pop(0)
            rows.append((at, at + seconds))
            start, i = at + seconds + PROBE_INTERVAL / 2, 0
        else:
            rows.append((due, due + lag))
            i += 1
        due = start + i * PROBE_INTERVAL
    return rows


@functools.cache
def quiet_noise(start: float, end: float, lag: float = QUIET_LAG) -> Noise:
    """Measured and quiet: every loop woke ``lag`` late every 5 ms across [start, end]."""
    return noisy_noise(start, end, (), lag=lag)


def noisy_noise(
    start: float,
    end: float,
    blocks: Iterable[Block],
    source: str = "client",
    lag: float = QUIET_LAG,
) -> Noise:
    """Quiet noise over [start, end], except that the ``source`` loop was blocked for
    each (at, seconds) in ``blocks``."""
    blocked = tuple(blocks)
    return Noise.from_ledger(
        {s: _rows(start, end, lag, blocked if s == source else ()) for s in SOURCES}
    )


def record_times(ev: Evidence) -> list[float]:
    """Every moment the evidence records."""
    times: list[float] = []
    for a in ev.attempts:
        times += [a.arrived_at, *(e.at for e in a.events)]
        times += [t for t in (a.headers_at, a.ended_at) if t is not None]
    for c in ev.connections:
        times += [c.opened_at, *([c.closed_at] if c.closed_at is not None else [])]
    times += [d.at for d in ev.deliveries]
    return times


def _covering(ev: Evidence) -> tuple[float, float]:
    times = record_times(ev) or [0.0]
    return math.floor(min(times)) - 1.0, math.ceil(max(times)) + 1.0


def quiet(ev: Evidence, lag: float = QUIET_LAG) -> Evidence:
    """``ev`` with quiet measured noise across its records (and a second either side)."""
    return replace(ev, noise=quiet_noise(*_covering(ev), lag))


def noisy(ev: Evidence, blocks: Iterable[Block], source: str = "client") -> Evidence:
    """``ev`` with quiet measured noise across its records but for ``blocks``."""
    return replace(ev, noise=noisy_noise(*_covering(ev), blocks, source))


# -- records ----------------------------------------------------------------------------------


def attempt(
    arrived: float,
    *,
    headers: float | None = None,
    events: Sequence[float] = (),
    ended: float | None = None,
) -> Attempt:
    return request_record(
        arrived_at=arrived,
        status=503,
        headers_at=headers,
        events=tuple(SentEvent(i, "data", None, "x", at) for i, at in enumerate(events, 1)),
        ended_at=ended,
        end="completed" if ended is not None else None,
    )


QUIET = quiet_noise(0.0, 10.0)
UNMEASURED = Noise()
# What quiet noise adds: three loops QUIET_LAG late at every moment.
QUIET_MOMENT = 3 * QUIET_LAG
QUIET_UPPER = PATH_FLOOR + LAG_FACTOR * 2 * QUIET_MOMENT  # two moments: failure, next attempt
QUIET_SPAN_UPPER = PATH_FLOOR + LAG_FACTOR * QUIET_MOMENT  # one moment: the end stamp
QUIET_LOWER = LOWER_FLOOR + LAG_FACTOR * QUIET_LAG  # the server loop only


class TestTheNoiseBuilders:
    def test_quiet_noise_is_measured_and_small_everywhere(self) -> None:
        """Every loop sampled every 5 ms, each wake-up QUIET_LAG late."""
        assert QUIET.measured
        assert {s.source for s in QUIET.series} == set(SOURCES)
        assert all(len(s.due) == 2001 for s in QUIET.series)
        assert QUIET.lag(3.0, 3.5) == pytest.approx(QUIET_MOMENT)

    def test_a_block_is_one_late_wake_up_then_none_until_it_ends(self) -> None:
        """A block leaves one late record; the probe resumes after it, as LagProbe does."""
        noise = noisy_noise(0.0, 2.0, [(1.0, BLOCK)])
        client = next(s for s in noise.series if s.source == "client")
        i = client.due.index(1.0)
        assert client.lag[i] == pytest.approx(BLOCK)
        assert client.due[i + 1] == pytest.approx(1.0 + BLOCK + PROBE_INTERVAL / 2)
        assert noise.source_lag("server", 1.1) == pytest.approx(QUIET_LAG)


class TestDecide:
    @pytest.mark.parametrize(
        ("least", "most", "expected"),
        [
            (0.20, 0.25, "in"),  # inside
            (0.15, 0.35, "in"),  # wider than the bounds, within a flaw's size of each
            (0.31, 0.40, "out"),  # wholly above
            (0.10, 0.19, "out"),  # wholly below
            (0.31, 5.00, "out"),  # wholly above however wide: the client broke it
            (0.25, 0.40, "unsure"),  # reaches high + resolution
            (0.25, 0.3999, "in"),  # just short of it
            (0.10, 0.25, "unsure"),  # reaches low - resolution
            (0.1001, 0.25, "in"),  # just short of it
        ],
    )
    def test_the_truth_table(self, least: float, most: float, expected: str) -> None:
        """Against [0.2, 0.3] with a 0.1 s flaw: out only when the whole interval is past a
        bound, unsure when it reaches a flaw's size past one, else in."""
        assert decide(Wait(least, most, (least + most) / 2), 0.2, 0.3, 0.1) == expected

    def test_the_lower_side_counts_only_where_so_short_a_wait_can_exist(self) -> None:
        """A flaw below ``low - resolution < 0`` is no wait at all: nothing to hide."""
        wide = Wait(-1.0, 0.06, 0.03)
        assert decide(wide, 0.05, 0.1, 0.1) == "in"
        assert decide(Wait(0.0, 0.15, 0.1), 0.1, 0.2, 0.1) == "unsure"  # low - resolution == 0
        assert decide(wide, -math.inf, 0.1, 0.1) == "in"

    def test_an_open_upper_bound_is_never_unsure_above(self) -> None:
        """``high = inf`` (waited at least): only the lower side can be unsure."""
        assert decide(Wait(0.6, 100.0, 1.0), 0.5, math.inf, 0.25) == "in"
        assert decide(Wait(0.2, 100.0, 1.0), 0.5, math.inf, 0.25) == "unsure"
        assert decide(Wait(0.1, 0.4, 0.3), 0.5, math.inf, 0.25) == "out"

    @pytest.mark.parametrize(
        ("least", "most", "expected"),
        [(-10.0, 10.0, "in"), (0.25, 0.40, "in"), (0.10, 0.25, "in"), (0.31, 9.0, "out")],
    )
    def test_unmeasured_is_never_unsure(self, least: float, most: float, expected: str) -> None:
        """Without measured noise the stated slacks apply: in or out, never undecidable."""
        assert decide(Wait(least, most, 0.25, known=False), 0.2, 0.3, 0.1) == expected


def series(*rows: tuple[float, float], source: str = "client") -> LagSeries:
    return LagSeries.from_rows(source, rows)


class TestLagSeries:
    def test_rows_are_ordered_and_an_early_wake_up_is_not_late(self) -> None:
        """Rows in any order; a wake-up before its due time counts as 0 lag."""
        s = series((2.0, 2.001), (1.0, 0.999))
        assert s.due == (1.0, 2.0)
        assert s.lag == pytest.approx((0.0, 0.001))

    def test_a_block_that_started_before_the_window_counts(self) -> None:
        """Pending at any time in the window: due before it, still late inside it."""
        s = series((1.0, 1.0 + BLOCK))
        assert s.worst(1.1, 1.15) == pytest.approx(BLOCK)
        assert s.worst(1.0 + BLOCK + REACH - 0.001, 2.0) == pytest.approx(BLOCK)
        assert s.worst(1.0 + BLOCK + REACH + 0.001, 2.0) == 0.0

    def test_a_block_due_just_after_the_window_counts(self) -> None:
        """A block within REACH after a moment still delays what happened at it."""
        s = series((1.0, 1.0 + BLOCK))
        assert s.worst(0.5, 1.0 - REACH + 0.001) == pytest.approx(BLOCK)
        assert s.worst(0.5, 1.0 - REACH - 0.001) == 0.0
        assert s.worst(1.0 - REACH + 0.001, 1.0 - REACH + 0.001) == pytest.approx(BLOCK)

    def test_the_worst_of_several_and_an_empty_series(self) -> None:
        """The largest lag pending in the window; no records, no lag."""
        s = series((1.0, 1.01), (1.005, 1.035), (3.0, 3.5))
        assert s.worst(0.9, 1.1) == pytest.approx(0.03)
        assert s.worst(0.0, 5.0) == pytest.approx(0.5)
        assert series().worst(0.0, 5.0) == 0.0

    def test_the_summary(self) -> None:
        """Samples, median, p99 and max; an empty series says it has no samples."""
        s = series(*((float(i), i + 0.001) for i in range(99)), (99.0, 99.05))
        assert s.summary() == {"samples": 100, "p50": 0.001, "p99": 0.05, "max": 0.05}
        assert series().summary() == {"samples": 0}


def noise(**lags: Sequence[tuple[float, float]]) -> Noise:
    return Noise.from_ledger(lags)


class TestNoise:
    def test_unmeasured_noise_states_its_slacks(self) -> None:
        """``Noise()``: the stated unmeasured slacks, no lag, a headline saying so."""
        assert not UNMEASURED.measured
        assert not noise(server=[]).measured
        assert UNMEASURED.upper_slack((1.0, 1.0)) == UNMEASURED_SLACK
        assert UNMEASURED.worst_slack() == UNMEASURED_SLACK
        assert UNMEASURED.lower_slack(1.0) == LOWER_FLOOR
        assert UNMEASURED.lag(0.0, 100.0) == 0.0
        assert UNMEASURED.headline() == "harness lag not measured"

    def test_the_lag_of_a_moment_sums_the_loops(self) -> None:
        """One path crosses the server, proxy and client loops in turn: their lags add."""
        n = noise(server=[(1.0, 1.01)], proxy=[(1.0, 1.02)], client=[(1.0, 1.04)])
        assert n.lag(1.0) == pytest.approx(0.07)
        assert n.source_lag("proxy", 1.0) == pytest.approx(0.02)
        assert n.source_lag("nowhere", 1.0) == 0.0

    def test_the_upper_slack_is_the_floor_plus_the_lag_of_each_moment(self) -> None:
        """PATH_FLOOR, plus LAG_FACTOR times the lag at every moment the path crossed."""
        n = noise(server=[(1.0, 1.01), (2.0, 2.0)], client=[(1.0, 1.0), (2.0, 2.04)])
        assert n.upper_slack((1.0, 1.0)) == pytest.approx(PATH_FLOOR + LAG_FACTOR * 0.01)
        both = n.upper_slack((1.0, 1.0), (2.0, 2.0))
        assert both == pytest.approx(PATH_FLOOR + LAG_FACTOR * 0.05)
        assert n.worst_slack() == pytest.approx(PATH_FLOOR + LAG_FACTOR * (0.01 + 0.04))

    def test_the_lower_slack_counts_the_server_loop_only(self) -> None:
        """The lower bound's stamps are the server's: a blocked client loop leaves it alone."""
        client_block = noisy_noise(0.0, 2.0, [(1.0, BLOCK)], "client")
        server_block = noisy_noise(0.0, 2.0, [(1.0, BLOCK)], "server")
        assert client_block.lower_slack(1.1) == pytest.approx(QUIET_LOWER)
        assert server_block.lower_slack(1.1) == pytest.approx(LOWER_FLOOR + LAG_FACTOR * BLOCK)

    def test_an_unprobed_client_keeps_the_unmeasured_upper_floor(self) -> None:
        """An app's own code is not probed: the server's lag widens the lower bound, and the
        upper slacks never drop below the unmeasured allowance (its lateness is unknown)."""
        rows = {"server": [(1.0, 1.0 + BLOCK)], "proxy": [(1.0, 1.0)]}
        app = Noise.from_ledger(rows, client_probed=False)
        assert app.lower_slack(1.0) == pytest.approx(LOWER_FLOOR + LAG_FACTOR * BLOCK)
        assert app.upper_slack((1.0, 1.0)) == UNMEASURED_SLACK
        assert app.worst_slack() == UNMEASURED_SLACK
        assert Noise.from_ledger(rows).upper_slack((1.0, 1.0)) < UNMEASURED_SLACK

    def test_the_headline_and_json_show_each_loop(self) -> None:
        """Each loop's p99 and max in the headline; only wake-ups 2 ms late in the JSON."""
        n = noisy_noise(0.0, 1.0, [(0.5, 0.03)])
        assert "client loop p99 " in n.headline()
        assert "max 30.0 ms" in n.headline()
        late = n.to_json()["late_wakeups"]
        assert late["client"] == [[0.5, 0.03]]
        assert late["server"] == late["proxy"] == []
        assert set(n.to_json()["summary"]) == set(SOURCES)

    def test_a_source_is_named_by_its_plain_string_in_every_report(self) -> None:
        """The probes write ``Source`` members; the ledger, the JSON and the headline
        keep the strings they always had, as plain ``str``."""
        assert [s.value for s in Source] == [
            "server",
            "proxy",
            "client",
            "sdk-loop",
            "threads",
            "process",
            "page",
            "network",
        ]
        rows = [(1.0, 1.001), (1.005, 1.006)]
        n = Noise.from_ledger({Source.SDK_LOOP: rows, "server": rows}, hops={1: (0.01, 0.0)})
        assert [s.source for s in n.series] == [Source.SDK_LOOP, Source.SERVER]
        for part in (n.summary(), n.report(), n.to_json()["late_wakeups"]):
            assert all(type(key) is str for key in part)
        assert list(n.report()) == ["sdk-loop", "server", "network"]
        assert n.headline().startswith("harness lag: sdk-loop loop p99 ")
        assert "network hop p99 10.0 ms" in n.headline()


class TestSeenFrom:
    def test_the_last_record_before_the_final_write(self) -> None:
        """The latest of the arrival, the headers and the last event."""
        assert seen_from(attempt(1.0)) == 1.0
        assert seen_from(attempt(1.0, headers=1.01)) == 1.01
        assert seen_from(attempt(1.0, headers=1.01, events=(1.02, 1.2))) == 1.2


class TestWaitBetween:
    failed = attempt(1.0, headers=1.001, ended=1.05)
    nxt = attempt(1.5)

    def test_quiet_noise(self) -> None:
        """Measured from the failure's end; least takes the quiet path floor and lag off;
        most counts from the earliest the client could have seen it, plus the lower slack."""
        wait = wait_between(self.failed, self.nxt, QUIET)
        assert wait.known
        assert wait.measured == pytest.approx(0.45)
        assert wait.least == pytest.approx(0.45 - QUIET_UPPER)
        assert wait.most == pytest.approx(0.499 + QUIET_LOWER)
        assert wait.noise == pytest.approx(QUIET_UPPER)

    def test_a_scripted_hold_is_not_waiting(self) -> None:
        """Seconds the script held the answer back count from the arrival on, not as waiting."""
        wait = wait_between(self.failed, self.nxt, QUIET, held=0.03)
        assert wait.most == pytest.approx(0.47 + QUIET_LOWER)
        assert wait.measured == pytest.approx(0.45)

    def test_a_failure_never_ended_counts_from_when_it_could_be_seen(self) -> None:
        """No end stamp: the wait is measured from the earliest moment instead."""
        wait = wait_between(attempt(1.0, headers=1.001), self.nxt, QUIET)
        assert wait.measured == pytest.approx(0.499)

    def test_least_never_exceeds_most(self) -> None:
        """A hold longer than the recorded answer cannot make the interval empty."""
        wait = wait_between(attempt(1.0, ended=1.001), attempt(1.5), QUIET, held=0.3)
        assert wait.least == wait.most == pytest.approx(0.2 + QUIET_LOWER)

    def test_unmeasured(self) -> None:
        """Without measured noise: the stated 0.5 s slack, and the interval is not known."""
        wait = wait_between(self.failed, self.nxt, UNMEASURED)
        assert not wait.known
        assert wait.least == pytest.approx(0.45 - UNMEASURED_SLACK)
        assert wait.most == pytest.approx(0.499 + LOWER_FLOOR)

    def test_a_block_where_the_failure_ended_lowers_least_only(self) -> None:
        """The client loop blocked as the failure ended: the client may have waited that
        much less than measured; the server's stamps still bound it from above."""
        blocked = noisy_noise(0.0, 3.0, [(1.04, BLOCK)])
        wait = wait_between(self.failed, self.nxt, blocked)
        assert wait.least == pytest.approx(0.45 - QUIET_UPPER - LAG_FACTOR * (BLOCK - QUIET_LAG))
        assert wait.most == pytest.approx(0.499 + QUIET_LOWER)

    def test_a_server_block_at_the_failure_raises_most(self) -> None:
        """A late server stamp of the failure: the client may have seen it earlier."""
        blocked = noisy_noise(0.0, 3.0, [(1.0, BLOCK)], "server")
        wait = wait_between(self.failed, self.nxt, blocked)
        assert wait.most == pytest.approx(0.499 + LOWER_FLOOR + LAG_FACTOR * BLOCK)

    def test_a_block_while_the_client_waited_is_not_counted(self) -> None:
        """Lag far from both moments delayed neither: the interval stays quiet."""
        blocked = noisy_noise(0.0, 3.0, [(1.2, 0.1)])
        assert wait_between(self.failed, self.nxt, blocked) == wait_between(
            self.failed, self.nxt, QUIET
        )

    def test_a_hosting_loops_block_anywhere_in_the_wait_is_counted(self) -> None:
        """CI: fifty SDK instances in one Node process, its loop blocked 224 ms mid-wait,
        and the retries queued behind it arrived one by one up to 80 ms after it ended:
        the process's (or a page's) worst lag over the whole wait counts; the kit's own
        loops still count near the ends only."""
        quiet = wait_between(self.failed, self.nxt, QUIET)
        for source in HOSTING:
            rows = {s: [(t / 200, t / 200 + QUIET_LAG) for t in range(600)] for s in SOURCES}
            rows[source] = [(1.2, 1.2 + BLOCK)]  # ended 100 ms before the next attempt
            wait = wait_between(self.failed, self.nxt, Noise.from_ledger(rows))
            assert wait.least < quiet.least - LAG_FACTOR * (BLOCK - QUIET_LAG), source
            assert wait.most == quiet.most
        kit = noisy_noise(0.0, 3.0, [(1.2, BLOCK)], "client")
        assert wait_between(self.failed, self.nxt, kit) == quiet

    def test_a_queueing_loop_busy_at_the_next_attempt_counts_how_long(self) -> None:
        """Matrix, beside other work: fifty async anthropic-python clients in the runner's
        loop, its iterations 40-50 ms long for 220 ms, each wake-up at most 50 ms late,
        and retries that needed several iterations to leave arrived 114 ms past the top
        of their range (SC-BACKOFF-10 FAILed); openai-python's the same with the server
        loop busy. A loop where requests queue counts how long it was busy at the next
        attempt; a page, whose requests leave through the browser, does not."""
        busy = [(t, t + 0.04) for t in (1.28, 1.325, 1.37, 1.415, 1.46)]  # 1.28 to 1.5
        quiet = wait_between(self.failed, self.nxt, QUIET)
        for source in (*QUEUEING, Source.PAGE, Source.CLIENT):
            rows = {s: [(t / 200, t / 200 + QUIET_LAG) for t in range(600)] for s in SOURCES}
            rows[source] = [r for r in rows.get(source, []) if not 1.27 < r[0] < 1.51] + busy
            wait = wait_between(self.failed, self.nxt, Noise.from_ledger(rows))
            if source.queueing:
                assert wait.least == pytest.approx(0.45 - PATH_FLOOR - HELD, abs=0.01), source
            else:
                assert wait.least > 0.45 - PATH_FLOOR - 0.1, source
            assert wait.most == quiet.most or source == Source.SERVER, source

    def test_loops_busy_together_hold_a_request_for_the_longest_stretch_only(self) -> None:
        """A request crosses the loops in turn, within the same busy time: the server
        and the proxy busy over one stretch count it once, not twice."""
        busy = [(t, t + 0.04) for t in (1.28, 1.325, 1.37, 1.415, 1.46)]  # 1.28 to 1.5
        rows = {s: [(t / 200, t / 200 + QUIET_LAG) for t in range(600)] for s in SOURCES}
        for source in ("server", "proxy"):
            rows[source] = [r for r in rows[source] if not 1.27 < r[0] < 1.51] + busy
        wait = wait_between(self.failed, self.nxt, Noise.from_ledger(rows))
        assert wait.least == pytest.approx(0.45 - PATH_FLOOR - HELD, abs=0.01)

    def test_a_loop_late_by_a_few_ms_at_every_wake_up_is_not_busy(self) -> None:
        """A loaded machine's scheduler alone makes every wake-up a few ms late: the
        loop is idle, nothing queues, and only the lag near the ends counts."""
        slow = {s: [(t / 200, t / 200 + 0.004) for t in range(600)] for s in SOURCES}
        # the capped stretch would hide inside the lags' slack: ask the series itself
        assert LagSeries.from_rows("server", slow["server"]).busy_until(1.5) == 0.0
        wait = wait_between(self.failed, self.nxt, Noise.from_ledger(slow))
        assert wait.least > 0.45 - PATH_FLOOR - LAG_FACTOR * 3 * 2 * 0.004 - 0.001

    def test_a_block_that_ended_as_the_next_attempt_arrived_is_counted(self) -> None:
        """A timer that fired late, at the end of a block, sends the next attempt late."""
        blocked = noisy_noise(0.0, 3.0, [(1.3, BLOCK - 0.005)])
        wait = wait_between(self.failed, self.nxt, blocked)
        assert wait.least < 0.45 - QUIET_UPPER - BLOCK


class TestBusyUntil:
    """How long a loop had been busy without a break (``LagSeries.busy_until``)."""

    @staticmethod
    def series(lags: Sequence[float]) -> LagSeries:
        rows = [(i * 0.01, i * 0.01 + g) for i, g in enumerate(lags)]
        return LagSeries.from_rows(Source.SDK_LOOP, rows)

    def test_late_wake_ups_in_a_row_are_busy_from_the_first(self) -> None:
        late = 2 * CONGESTED_LAG
        series = self.series([0.0, 0.0, 0.0, late, late, late])
        assert series.busy_until(0.055) == pytest.approx(0.055 - 0.03)

    def test_one_on_time_wake_up_is_no_break_and_two_are(self) -> None:
        late = 2 * CONGESTED_LAG
        assert self.series([0.0, late, 0.0, late, late]).busy_until(0.045) == pytest.approx(
            0.045 - 0.01
        )
        assert self.series([late, 0.0, 0.0, late, late]).busy_until(0.045) == pytest.approx(
            0.045 - 0.03
        )

    def test_a_starved_loops_long_stretch_holds_a_request_a_few_iterations_only(self) -> None:
        """Beside CPU burners a loop is late at every wake-up for seconds: one request
        is held at most QUEUED_ITERATIONS of its longest iterations, not the stretch."""
        late = 2 * CONGESTED_LAG
        series = self.series([late] * 100)  # a second of it
        assert series.busy_until(0.995) == pytest.approx(QUEUED_ITERATIONS * late)

    def test_a_loop_on_time_at_the_end_was_free(self) -> None:
        late = 2 * CONGESTED_LAG
        assert self.series([late, late, late, 0.0]).busy_until(0.035) == 0.0
        assert self.series([]).busy_until(1.0) == 0.0
        assert self.series([late]).busy_until(-1.0) == 0.0

    def test_requests_queue_in_every_loop_but_a_page_and_the_kits_clients(self) -> None:
        loops = set(Source) - {Source.NETWORK}
        assert {s for s in loops if not s.queueing} == {Source.PAGE, Source.CLIENT}


class TestWaitFrom:
    def test_the_herds_cut(self) -> None:
        """From the latest cut (least) and the earliest (most) to the reconnect."""
        wait = wait_from(1.002, 1.0, 2.0, QUIET)
        assert wait.measured == pytest.approx(0.998)
        assert wait.least == pytest.approx(0.998 - QUIET_UPPER)
        assert wait.most == pytest.approx(1.0 + QUIET_LOWER)


class TestSpan:
    def test_quiet(self) -> None:
        """Between two server stamps: the end can trail by the path floor and lag, the
        start by the server's lag."""
        wait = span(1.0, 1.3, QUIET)
        assert wait.measured == pytest.approx(0.3)
        assert wait.least == pytest.approx(0.3 - QUIET_SPAN_UPPER)
        assert wait.most == pytest.approx(0.3 + QUIET_LOWER)

    def test_only_the_lag_at_the_end_lowers_least(self) -> None:
        """A block at the end widens the interval down; one at the start does not."""
        at_end = span(1.0, 1.3, noisy_noise(0.0, 3.0, [(1.25, BLOCK)]))
        at_start = span(1.0, 1.3, noisy_noise(0.0, 3.0, [(0.95, 0.06)]))
        assert at_end.least == pytest.approx(
            0.3 - QUIET_SPAN_UPPER - LAG_FACTOR * (BLOCK - QUIET_LAG)
        )
        assert at_start == span(1.0, 1.3, QUIET)

    def test_unmeasured(self) -> None:
        """The stated slacks, not known."""
        wait = span(1.0, 1.3, UNMEASURED)
        assert (wait.least, wait.most, wait.known) == pytest.approx(
            (0.3 - UNMEASURED_SLACK, 0.3 + LOWER_FLOOR, False)
        )


class TestAtOnce:
    resolution = 0.2  # at once: within AT_ONCE of it, 50 ms

    def test_a_prompt_reaction_is_in(self) -> None:
        """Within AT_ONCE of the resolution, plus the quiet path floor."""
        assert at_once(1.0, 1.01, QUIET, self.resolution) == "in"
        late = AT_ONCE * self.resolution + QUIET_SPAN_UPPER - 0.001
        assert at_once(1.0, 1.0 + late, QUIET, self.resolution) == "in"

    def test_a_late_reaction_is_out(self) -> None:
        """Later than that on a quiet machine: out, however early the flaw would be."""
        late = AT_ONCE * self.resolution + QUIET_SPAN_UPPER + 0.001
        assert at_once(1.0, 1.0 + late, QUIET, self.resolution) == "out"

    def test_a_reaction_delayed_by_a_block_is_unsure(self) -> None:
        """A block at its end: as late as a flaw, but the harness may have made it so."""
        blocked = noisy_noise(0.0, 3.0, [(1.0, 0.3)])
        assert at_once(1.0, 1.3, blocked, self.resolution) == "unsure"

    def test_a_stall_after_the_signal_counts_though_it_ended_before_the_reaction(
        self,
    ) -> None:
        """SC-OFFLINE-8 under load: the loops stalled 250 ms from 5 ms after the blink,
        and the fifth reconnect came 27 ms after the stall ended (the work queued behind
        it). Judged by the lag near the end stamp alone, that was out: a false FAIL."""
        stalled = Noise.from_ledger(
            {s: _rows(0.0, 3.0, QUIET_LAG, [(1.005, 0.25)]) for s in SOURCES}
        )
        assert at_once(1.0, 1.282, stalled, 0.04) == "unsure"
        assert at_once(1.0, 1.282, QUIET, 0.04) == "out"  # the same lateness, quiet

    def test_unmeasured_allows_the_stated_slack(self) -> None:
        """Without measured noise: in up to UNMEASURED_SLACK late, then out; never unsure."""
        high = AT_ONCE * self.resolution
        assert at_once(1.0, 1.0 + high + UNMEASURED_SLACK - 0.01, UNMEASURED, 0.2) == "in"
        assert at_once(1.0, 1.0 + high + UNMEASURED_SLACK + 0.01, UNMEASURED, 0.2) == "out"


def test_the_reach_is_two_probe_intervals() -> None:
    """The tests' REACH is the model's."""
    assert timing.REACH == REACH


class TestOverload:
    """A starved kit loop makes a FAIL undecidable; the client's own loop never does."""

    def test_the_kit_loops_p99_decides(self) -> None:
        assert quiet_noise(0.0, 2.0).overloaded() is None
        assert quiet_noise(0.0, 2.0, lag=OVERLOAD_P99 * 0.9).overloaded() is None
        why = quiet_noise(0.0, 2.0, lag=OVERLOAD_P99 * 1.5).overloaded()
        assert why is not None
        assert "starved" in why

    def test_a_client_that_blocks_its_own_loop_is_not_excused(self) -> None:
        rows = [(t / 100, t / 100 + 0.5) for t in range(200)]  # every wake-up 0.5 s late
        client_only = Noise((LagSeries.from_rows("client", rows),))
        assert client_only.overloaded() is None

    @staticmethod
    def _sure(
        outcome: Outcome, noise: Noise, ran_out: bool = True, deliveries: tuple = ()
    ) -> Outcome:
        from conformance.timing import sure

        return sure(outcome, Evidence((), (), deliveries, noise=noise), ran_out)

    def test_the_clients_own_timer_firing_while_starved_is_undecidable(self) -> None:
        """No wait of the case ran out, but the client gave up on a silence the script
        never played: its timer may have fired on the kit's slowness."""
        from conformance import Delivery

        stalled = (Delivery("s1", "state", 1.0, state="stalled"),)
        starved = quiet_noise(0.0, 2.0, lag=0.3)
        fail = Outcome.failed("at most 21 requests", "36 requests")
        assert self._sure(fail, starved, ran_out=False, deliveries=stalled).undecidable
        assert not self._sure(fail, quiet_noise(0.0, 2.0), False, stalled).undecidable

    def test_a_wait_that_ran_out_while_starved_is_undecidable(self) -> None:
        failed = self._sure(Outcome.failed("x", "no retry"), quiet_noise(0.0, 2.0, lag=0.3))
        assert failed.undecidable
        assert not failed.ok
        assert failed.observed.startswith("no retry; the kit's own loops were starved")

    def test_a_failure_no_deadline_decided_stands_while_starved(self) -> None:
        """A 5 MiB event starves the kit's loops by itself; delivered cut, it still FAILs."""
        cut = Outcome.failed("the event whole", "1 MiB of 5")
        assert not self._sure(cut, quiet_noise(0.0, 2.0, lag=0.3), ran_out=False).undecidable

    def test_a_pass_is_left_alone(self) -> None:
        passed = Outcome(True, "x", "fine")
        assert self._sure(passed, quiet_noise(0.0, 2.0, lag=0.3)) is passed

    def test_a_page_that_stood_still_leaves_a_timed_failure_undecidable(self) -> None:
        """A browser page's loop that gave no sign for PAGE_STALL (the kit's row when the
        page did not answer as the case ended) leaves a FAIL a deadline decided
        undecidable, with the kit's loops quiet; a shorter stall, another source's, or
        a failure no deadline decided stands."""
        from conformance.timing import PAGE_STALL

        def with_row(source: Source, lag: float) -> Noise:
            quiet = quiet_noise(0.0, 4.0)
            return Noise((*quiet.series, LagSeries.from_rows(source, [(1.0, 1.0 + lag)])))

        fail = Outcome.failed("5 events", "0 events")
        stalled = with_row(Source.PAGE, PAGE_STALL)
        why = stalled.page_stalled()
        assert why is not None
        assert "the page or the browser stood still" in why
        assert self._sure(fail, stalled).undecidable
        assert not self._sure(fail, stalled, ran_out=False).undecidable
        assert with_row(Source.PAGE, PAGE_STALL * 0.9).page_stalled() is None
        assert not self._sure(fail, with_row(Source.PROCESS, PAGE_STALL * 2)).undecidable
