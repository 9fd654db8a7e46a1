"""A retry's new connection is path, not the client's delay (issue 27).

The proxy stamps each connection's accept; the server stamps each request's arrival.
``conformance._timing.connection_windows`` ties attempts to the connections they came
on where the records force it, and a wait then ends at the earliest sign of the retry
on the path: its connection's accept. Hand-built records show both sides of the
issue: a correct client whose every retry opened a connection that took 43-183 ms to
set up FAILed ("surely outside") and now PASSes; a fixed delay whose arrivals load
spread upward PASSed the herd and now FAILs, since load only ever makes a stamp later
and the accepts of a lockstep herd stay bunched.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest
from _records import request_record
from test_checks_backoff import CUT, REACTION, attempt, check, tuned
from test_timing import quiet_noise

from conformance import Outcome
from conformance._timing import (
    Noise,
    _can_carry,
    connection_windows,
    wait_between,
    wait_from,
)
from conformance.cases import backoff as bk
from conformance.cases.backoff import first_delay_range
from fake_servers import Attempt, Connection

QUIET = quiet_noise(-1.0, 10.0)
PRE = 0.0005  # from the client's connect to the proxy's accept, on loopback
UP, DOWN = 200, 300  # bytes of a request, of an answer


def conn(opened: float, closed: float | None = None, *, down: int = DOWN) -> Connection:
    return Connection(0, opened, ("127.0.0.1", 1), "", UP, down, closed, "client")


def numbered(
    attempts: Sequence[Attempt], connections: Sequence[Connection]
) -> tuple[list[Attempt], list[Connection]]:
    """The records as the ledger numbers them: in arrival and in accept order."""
    atts = sorted(attempts, key=lambda a: a.arrived_at)
    conns = sorted(connections, key=lambda c: c.opened_at)
    return (
        [replace(a, seq=k) for k, a in enumerate(atts, start=1)],
        [replace(c, seq=k) for k, c in enumerate(conns, start=1)],
    )


def verdict(outcome: Outcome) -> str:
    return "PASS" if outcome.ok else "UNDECIDABLE" if outcome.undecidable else "FAIL"


# -- the tie ---------------------------------------------------------------------------


class TestConnectionWindows:
    def test_one_connection_per_attempt_in_turn_is_tied_exactly(self):
        """Attempts that each arrive before the next connection opens: each window is
        its own connection's accept."""
        atts = [request_record(k, arrived_at=k + 0.01) for k in (1, 2, 3)]
        conns = [conn(k, k + 0.5) for k in (1, 2, 3)]
        assert connection_windows(atts, conns) == {1: (1, 1), 2: (2, 2), 3: (3, 3)}

    def test_a_reused_connection_ties_nothing(self):
        """Keep-alive: two attempts, one connection. Nothing is tied, and the wait ends at
        the arrival as before."""
        atts = [request_record(1, arrived_at=1.0), request_record(2, arrived_at=2.0)]
        assert connection_windows(atts, [conn(0.9)]) == {}
        noise = QUIET.linked(atts, [conn(0.9)])
        assert noise is QUIET

    def test_a_connection_that_carried_nothing_ties_nothing(self):
        """As many connections as attempts, but one sent no byte: one attempt shared a
        connection, and which is unknown."""
        atts = [request_record(1, arrived_at=1.0), request_record(2, arrived_at=2.0)]
        idle = replace(conn(1.5), bytes_up=0)
        assert connection_windows(atts, [conn(0.9), idle]) == {}

    def test_no_matching_ties_nothing(self):
        """An attempt that arrived before any connection could carry it: the premise (a
        connection of its own) is false."""
        atts = [request_record(1, arrived_at=1.0), request_record(2, arrived_at=2.0)]
        assert connection_windows(atts, [conn(1.5), conn(1.6)]) == {}

    def test_overlapping_set_ups_widen_the_window_and_a_close_narrows_it(self):
        """Both connections opened before either request arrived: either can be either's.
        The first closed after answering, before the second arrived: tied."""
        atts = [request_record(1, arrived_at=1.1), request_record(2, arrived_at=1.3)]
        loose = [conn(1.0), conn(1.05)]
        assert connection_windows(atts, loose) == {1: (1.0, 1.05), 2: (1.0, 1.05)}
        answered = [conn(1.0, 1.2), conn(1.05, 1.4)]
        assert connection_windows(atts, answered) == {1: (1.0, 1.0), 2: (1.05, 1.05)}
        # A connection that forwarded nothing down says nothing by its close.
        silent = [conn(1.0, 1.2, down=0), conn(1.05, 1.4)]
        assert connection_windows(atts, silent) == {1: (1.0, 1.05), 2: (1.0, 1.05)}

    def test_the_windows_are_exactly_the_possible_connections(self):
        """Against every matching of small random records: each attempt's window spans
        the accepts of exactly the connections some matching gives it, and holds the
        one it really came on."""
        for trial in range(1500):
            rng = random.Random(trial)
            n = rng.randint(1, 6)
            atts, conns = [], []
            for i in range(n):
                opened = rng.random()
                arrived = opened + rng.random() * 0.5
                answered = rng.random() < 0.7
                closed = arrived + rng.random() * 0.1 if rng.random() < 0.8 else None
                atts.append(request_record(i + 1, arrived_at=arrived))
                conns.append(conn(opened, closed, down=DOWN if answered else 0))
            possible: dict[int, set[float]] = {a.seq: set() for a in atts}
            for perm in itertools.permutations(range(n)):
                pairs = [(atts[i], conns[perm[i]]) for i in range(n)]
                if all(c.opened_at <= a.arrived_at and _can_carry(c, a) for a, c in pairs):
                    for a, c in pairs:
                        possible[a.seq].add(c.opened_at)
            windows = connection_windows(atts, conns)
            assert windows == {s: (min(p), max(p)) for s, p in possible.items()}, trial
            for a, c in zip(atts, conns, strict=True):  # the truth: i came on i
                low, high = windows[a.seq]
                assert low <= c.opened_at <= high


# -- the wait ------------------------------------------------------------------------------


class TestWaitEndsAtTheAccept:
    def test_the_least_wait_ends_at_the_earliest_accept_the_most_at_the_latest(self):
        """The client acted by its connection's accept: the set-up after it (0.1 s here)
        comes off both ends."""
        failed = attempt(1.0)
        retry = attempt(1.5, 200, number=2)
        plain = wait_between(failed, retry, QUIET)
        tied = wait_from(1.001, 1.0, 1.5, QUIET, opened=(1.39, 1.4))
        assert tied.measured == pytest.approx(plain.measured)
        assert tied.most == pytest.approx(plain.most - 0.1)
        assert tied.least <= plain.least - 0.11
        assert tied.least == pytest.approx(1.39 - 1.001 - QUIET.wait_slack(1.001, 1.39), abs=1e-9)

    def test_a_connection_that_may_predate_the_failure_keeps_the_arrival_for_most(self):
        """A window that starts before the failure could be seen may hold a connection
        that was not the retry's: the most wait keeps the arrival."""
        tied = wait_from(1.001, 1.0, 1.5, QUIET, opened=(0.95, 1.4))
        assert tied.most == pytest.approx(1.5 - 1.0 + QUIET.lower_slack(1.0))
        assert tied.least < 0

    def test_wait_between_reads_the_tie_from_the_noise(self):
        """``Noise.linked`` carries the windows; ``wait_between`` uses them."""
        failed = replace(attempt(1.0), seq=1)
        retry = replace(attempt(1.5, 200, number=2), seq=2)
        conns = [conn(0.99, 1.01), conn(1.4, 1.6)]
        noise = QUIET.linked([failed, retry], conns)
        assert noise.opened_window(retry) == (1.4, 1.4)
        assert wait_between(failed, retry, noise).most == pytest.approx(
            wait_from(1.001, 1.0, 1.5, QUIET, opened=(1.4, 1.4)).most
        )

    def test_a_measured_hop_out_still_counts(self):
        """A browser's request hop (``out``) and the accept: the earlier sign wins."""
        hop = wait_from(1.001, 1.0, 1.5, QUIET, out=0.2, opened=(1.39, 1.4))
        assert hop.most == pytest.approx(1.3 - 1.0 + QUIET.lower_slack(1.0))


# -- the issue's records --------------------------------------------------------------------


def jitter_records(
    delays: Sequence[float],
    set_up: Callable[[int], float],
    held: Callable[[int], float] = lambda i: 0.0,
) -> tuple[list[Attempt], list[Connection]]:
    """The jitter case's fifty clients, each on a new connection per attempt: client
    ``i`` starts ``i * JITTER_STAGGER`` in, fails, and ``delays[i]`` after it saw the
    failure connects again; the proxy accepts PRE later, the request arrives
    ``set_up(i)`` after the accept, and ``held(i)`` more if load held it. Every
    connection closes as its answer ends."""
    atts: list[Attempt] = []
    conns: list[Connection] = []
    for i, delay in enumerate(delays):
        path = bk._jitter_path(i)
        opened = i * bk.JITTER_STAGGER
        failure = attempt(opened + PRE, path=path)
        assert failure.ended_at is not None
        conns.append(conn(opened, failure.ended_at + 0.001))
        reopened = failure.ended_at + REACTION + delay + PRE
        retry = attempt(reopened + set_up(i) + held(i), 200, path=path, number=2)
        assert retry.ended_at is not None
        conns.append(conn(reopened, retry.ended_at + 0.001))
        atts += [failure, retry]
    return numbered(atts, conns)


def herd_records(
    delays: Sequence[float], arrive: Callable[[int], float]
) -> tuple[list[Attempt], list[Connection]]:
    """The herd's fifty clients: streams open from 0.1, all cut at CUT; client ``i``
    connects again ``delays[i]`` after the cut, the proxy accepts it PRE later, and its
    request arrives ``arrive(i)`` after the accept. Each reconnect's answer is held 50 ms
    (``HERD_HOLD``) and its connection closes as it ends."""
    atts: list[Attempt] = []
    conns: list[Connection] = []
    for i, delay in enumerate(delays):
        path = bk._herd_path(i)
        start = 0.1 + i * 0.001
        atts.append(attempt(start + PRE, 200, path=path, lasted=CUT - start - PRE))
        cut = replace(conn(start, CUT + 0.00002 * i), closed_by="offline")
        conns.append(cut)
        reopened = CUT + 0.005 + delay + PRE
        retry = attempt(reopened + arrive(i), 200, path=path, number=2, lasted=bk.HERD_HOLD)
        assert retry.ended_at is not None
        atts.append(retry)
        conns.append(conn(reopened, retry.ended_at + 0.001))
    return numbered(atts, conns)


def without_new_connections(conns: Sequence[Connection]) -> list[Connection]:
    """The records as the old model read them: no tie (the herd keeps its cut)."""
    return [c for c in conns if c.closed_by == "offline"]


class TestTheIssue:
    jitter = tuned("SC-BACKOFF-9")
    herd = tuned("SC-BACKOFF-11")

    @pytest.mark.parametrize("median", [0.043, 0.1, 0.183])
    def test_a_correct_client_on_new_connections_passes(self, median):
        """Every delay drawn inside the range, every retry on a new connection whose set-up
        took ``median`` (half again either way): PASS, run after run. Read the old way,
        with the set-up counted as the client's delay, the same records FAIL ("surely
        outside"): the issue's false failure."""
        low, high = first_delay_range(self.jitter.backoff)
        for seed in range(10):
            rng = random.Random(seed)
            delays = [low + rng.random() * (high - low) for _ in range(bk.JITTER_CLIENTS)]
            set_ups = [median * (0.5 + rng.random()) for _ in delays]
            atts, conns = jitter_records(delays, set_ups.__getitem__)
            outcome = check("SC-BACKOFF-9", atts, connections=conns, policy=self.jitter)
            assert verdict(outcome) == "PASS", (seed, outcome.observed)
            old = check("SC-BACKOFF-9", atts, policy=self.jitter)
            assert verdict(old) == "FAIL", (seed, old.observed)
            assert "outside the declared jitter range" in old.observed

    @pytest.mark.parametrize("spread", [0.03, 0.4, 1.1])
    def test_a_fixed_delay_spread_by_load_fails_the_herd(self, spread):
        """Fifty clients at one fixed delay; the kit takes their connections in at once
        (the accepts within 10 ms) and load spreads the arrivals over ``spread`` (the
        issue: 2.0 to 3.1 s for a 2 s delay). FAIL: bunched. Read the old way (from the
        arrivals) the same records PASS once the spread passes the rule's 60 %."""
        low, high = first_delay_range(self.herd.backoff)
        fixed = [(low + high) / 2 + 0.0002 * i for i in range(bk.HERD_CLIENTS)]
        atts, conns = herd_records(fixed, lambda i: 0.002 + spread * i / 49)
        outcome = check("SC-BACKOFF-11", atts, connections=conns, policy=self.herd)
        assert verdict(outcome) == "FAIL", outcome.observed
        assert outcome.observed.startswith("bunched")
        old = check(
            "SC-BACKOFF-11", atts, connections=without_new_connections(conns), policy=self.herd
        )
        if spread > bk.HERD_SPAN * 0.6:
            assert verdict(old) == "PASS", old.observed

    @pytest.mark.parametrize("spread", [0.03, 0.4, 1.1])
    def test_a_fixed_delay_spread_by_load_fails_the_jitter_case(self, spread):
        """The same for the jitter case: every client the middle of the range, each
        retry held in turn by load, up to ``spread`` late. FAIL: bunched."""
        low, high = first_delay_range(self.jitter.backoff)
        n = bk.JITTER_CLIENTS
        atts, conns = jitter_records(
            [(low + high) / 2] * n, lambda i: 0.002, lambda i: spread * i / (n - 1)
        )
        outcome = check("SC-BACKOFF-9", atts, connections=conns, policy=self.jitter)
        assert verdict(outcome) == "FAIL", outcome.observed
        assert "bunched" in outcome.observed

    def test_a_correct_herd_on_slow_connections_passes(self):
        """A correct herd whose reconnects each took 43-183 ms from accept to arrival."""
        low, high = first_delay_range(self.herd.backoff)
        for seed in range(5):
            rng = random.Random(seed)
            delays = [low + rng.random() * (high - low) for _ in range(bk.HERD_CLIENTS)]
            set_ups = [0.043 + rng.random() * 0.14 for _ in delays]
            atts, conns = herd_records(delays, set_ups.__getitem__)
            outcome = check("SC-BACKOFF-11", atts, connections=conns, policy=self.herd)
            assert verdict(outcome) == "PASS", (seed, outcome.observed)

    def test_the_envelope_case_ends_each_wait_at_the_accept(self):
        """SC-BACKOFF-1: each retry on a new connection that took 60 ms to set up. The
        old reading puts retry 1 surely past its envelope; tied, it passes."""
        policy = tuned("SC-BACKOFF-1")
        b = policy.backoff
        retries = bk._envelope_retries(policy)
        atts: list[Attempt] = []
        conns: list[Connection] = []
        at = 0.0
        for n in range(1, retries + 2):
            status = 200 if n == retries + 1 else 503
            a = attempt(at + 0.06, status, number=n)
            assert a.ended_at is not None
            atts.append(a)
            conns.append(conn(at, a.ended_at + 0.001))
            low, high = b.envelope(n)
            at = a.ended_at + REACTION + (low + high) / 2 + PRE
        atts, conns = numbered(atts, conns)
        assert verdict(check("SC-BACKOFF-1", atts, connections=conns, policy=policy)) == "PASS"
        old = check("SC-BACKOFF-1", atts, policy=policy)
        assert verdict(old) == "FAIL", old.observed


def test_unmeasured_noise_ties_too():
    """Hand-built evidence with no probes (``Noise()``) is tied the same way."""
    atts = [request_record(1, arrived_at=1.1), request_record(2, arrived_at=2.1)]
    noise = Noise().linked(atts, [conn(1.0, 1.2), conn(2.0, 2.2)])
    assert noise.opened == {1: (1.0, 1.0), 2: (2.0, 2.0)}
