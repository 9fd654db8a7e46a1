"""SC-OFFLINE: the browser's offline and online signals.

The seed article wires the two network events: while offline, do not retry
("there is nothing to connect to") and close what is open; on online, reset the
attempt count and the breaker and reconnect at once, because the failures were
the network's, not the backend's. Each row is registered for GET (the odd id) and
POST (the even id) where it is written.

The kit marks when it signals (a "log" delivery on the ``kit`` stream), so checks
measure from the signal. While the client is told it is offline the network stays
reachable: any attempt it makes anyway reaches the proxy and the server, where
the ledger sees it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from conformance._case import Capability, CaseContext, Outcome
from conformance._checks import (
    REACTION_DEADLINE,
    all_of,
    answer,
    delivered_exactly,
    ended_with_done,
    judged,
    reaction_resolution,
)
from conformance._evidence import Evidence
from conformance.cases._common import PATH, Row, register_row, request_for, retry_budget
from conformance.reference import ClientPolicy
from conformance.timing._noise import Noise
from conformance.timing._waits import at_once
from fake_servers import Attempt, Fault, Respond, Stall, Stream

__all__ = [
    "KIT",
    "closed_after",
    "mark",
    "marked",
    "network_not_back",
    "quiet_between",
    "reconnected_within",
]

SOURCE = "seeds/000 §Network-Aware: What the Browser Tells You for Free"
BREAKER = (
    'seeds/000 §Network-Aware ("reset the counters and reconnect immediately"; "the two '
    'failure modes do not need to share a budget")'
)
EVENTS = 4
KIT = "kit"  # the delivery stream the kit's own marks go to
OFFLINE = "offline() signalled"
OFFLINE_SENT = "offline() delivered"
ONLINE = "online() signalled"
ONLINE_BACK = "online() took effect"  # the adapter's online() returned: the network works
OFFLINE_HOLD = 0.1  # how long the network stays away: ample for a retry to show up
OPEN_DEADLINE = 2.0  # for the client to open the connection the case cuts
BREAKER_GRACE = 0.2  # for the client to hear its last failure before the offline signal
OFFLINE_NEEDS: frozenset[Capability] = frozenset({"offline"})
# The cases about the breaker need that capability too.
OFFLINE_BREAKER_NEEDS: frozenset[Capability] = frozenset({"offline", "breaker"})


# -- marks ----------------------------------------------------------------------


def mark(ctx: CaseContext, what: str) -> None:
    """Stamp a scenario moment into the evidence (a log on the ``kit`` stream)."""
    ctx.deliveries.add(KIT, "log", data=what)


def marked(ev: Evidence, what: str) -> float | None:
    """When the scenario moment ``what`` was stamped, if it was."""
    return next((d.at for d in ev.of(KIT) if d.kind == "log" and d.data == what), None)


# -- pure checks -----------------------------------------------------------------


def quiet_between(ev: Evidence, start: float, end: float) -> Outcome:
    """No new connection reached the proxy, and no request the server, in (start, end)."""
    want = "no connection attempt while offline"
    conns = [c for c in ev.connections if start < c.opened_at < end]
    reqs = [a for a in ev.attempts if start < a.arrived_at < end]
    if not conns and not reqs:
        return Outcome.passed(want, "none")
    return Outcome.failed(
        want,
        f"{len(conns)} new connection(s) and {len(reqs)} request(s) during "
        f"{end - start:.3f}s offline",
        *(f"connection {c.seq} opened {c.opened_at - start:.3f}s after offline()" for c in conns),
    )


def _ended(attempt: Attempt, otherwise: float) -> float:
    return otherwise if attempt.ended_at is None else attempt.ended_at


def closed_after(
    attempts: tuple[Attempt, ...], at: float, noise: Noise, resolution: float
) -> Outcome:
    """Every attempt open at ``at`` was closed by the client at once (``at_once``)."""
    want = (
        f"the open stream is closed by the client at once after offline() (within "
        f"{resolution / 4:.3f}s, plus the measured harness lag)"
    )
    # Open unless it ended before the signal: in virtual time the client closes it at
    # the signal's very moment. (``is None``, not ``or``: a stamp can be exactly 0.0.)
    open_then = [a for a in attempts if a.arrived_at <= at and _ended(a, at + 1) >= at]
    if not open_then:
        return Outcome.failed(want, "no stream was open when offline() was signalled")
    for a in open_then:
        if a.end != "client_closed" or a.ended_at is None:
            return Outcome.failed(want, f"attempt {a.seq} ended: {a.end or 'never'}")
    last = max(open_then, key=lambda a: _ended(a, at))
    end = _ended(last, at)
    seen = f"attempt {last.seq} closed {end - at:.3f}s after it"
    return judged(at_once(at, end, noise, resolution), want, seen, noise)


def reconnect_resolution(policy: ClientPolicy) -> float:
    """The flaw a reconnect check catches: waiting out a backoff instead of going at
    once. The profile's first cap is the shortest backoff a client could wait out."""
    return min(policy.backoff.cap(1), reaction_resolution(policy))


def reconnected_within(
    ev: Evidence, at: float, resolution: float, count: int = 1, since: str = "online()"
) -> Outcome:
    """At least ``count`` requests reached the server at once after ``at`` (``at_once``).

    Each request is timed from when it left the client's code: its arrival less its
    measured way out (``Noise.hop_out``, never overstated; a browser's network process
    held one 89 ms in CI, after the page had reconnected at once)."""
    want = (
        f"{count} new request(s) at once after {since} (within {resolution / 4:.3f}s, plus "
        "the measured harness lag)"
    )
    later = sorted((a for a in ev.attempts if a.arrived_at >= at), key=lambda a: a.arrived_at)
    seen = ", ".join(f"{a.arrived_at - at:.3f}s" for a in later) or "none"
    if len(later) < count:
        return Outcome.failed(want, f"{len(later)} request(s) after {since}, at: {seen}")
    left = sorted(a.arrived_at - ev.noise.hop_out(a) for a in later)[count - 1]
    nth = "the first" if count == 1 else f"request {count}"
    text = f"{nth} arrived {later[count - 1].arrived_at - at:.3f}s after it (all: {seen})"
    if left < later[count - 1].arrived_at:
        text += f"; left the client's code {left - at:.3f}s after it"
    return judged(at_once(at, max(at, left), ev.noise, resolution), want, text, ev.noise)


def _marks(ev: Evidence, *names: str) -> list[float] | Outcome:
    found = [marked(ev, n) for n in names]
    if any(t is None for t in found):
        missing = [n for n, t in zip(names, found, strict=True) if t is None]
        return Outcome.failed("the scenario's marks", f"missing: {', '.join(missing)}")
    return [t for t in found if t is not None]


def _exactly_once(ev: Evidence, stream: str = "s1") -> Outcome:
    ans = answer(ev)
    return all_of(
        ended_with_done(ev, stream), delivered_exactly(ev, [ans[i] for i in sorted(ans)], stream)
    )


def _check_offline(ev: Evidence, policy: ClientPolicy) -> Outcome:
    marks = _marks(ev, OFFLINE, OFFLINE_SENT, ONLINE)
    if isinstance(marks, Outcome):
        return marks
    off, sent, on = marks
    closed = closed_after(ev.attempts, off, ev.noise, reaction_resolution(policy))
    return all_of(closed, quiet_between(ev, sent, on))


def network_not_back(ev: Evidence, outcome: Outcome) -> Outcome:
    """``outcome``, or undecidable when it failed and a stream's attempt that began after
    the online signal, before the adapter said the network worked again
    (``ONLINE_BACK``), failed without reaching the server: the kit's network was still
    away. In-process adapters go online at once; a browser's context tells the page (its
    ``online`` event) and its network process on separate channels, so a request the
    page makes on hearing the event can meet a network process still offline (CI: the
    five requests of a blink failed 4-10 ms after the event, none reached the server,
    and the page's breaker, rightly counting them, opened)."""
    on, back = marked(ev, ONLINE), marked(ev, ONLINE_BACK)
    if outcome.ok or outcome.undecidable or on is None or back is None:
        return outcome
    lost = _failed_unsent(ev, on, back)
    if not lost:
        return outcome
    return Outcome.unsure(
        outcome.expected,
        f"{outcome.observed}; premise not met: {', '.join(lost)} began an attempt before the "
        f"network was back ({(back - on) * 1000:.1f} ms after online()), which failed "
        "without reaching the server",
        *outcome.details,
    )


def _failed_unsent(ev: Evidence, on: float, back: float) -> list[str]:
    """Streams with an attempt begun in [on, back] that failed before any request
    reached the server after its beginning."""
    lost = []
    for stream in dict.fromkeys(d.stream for d in ev.deliveries if d.stream != KIT):
        states = [d for d in ev.of(stream) if d.kind == "state"]
        for began, then in itertools.pairwise(states):
            if began.state != "connecting" or not on <= began.at <= back:
                continue
            reached = any(began.at <= a.arrived_at <= then.at for a in ev.attempts)
            if then.state in ("retrying", "breaker_open") and not reached:
                lost.append(stream)
                break
    return lost


def _check_online(ev: Evidence, policy: ClientPolicy) -> Outcome:
    marks = _marks(ev, ONLINE)
    if isinstance(marks, Outcome):
        return marks
    outcome = all_of(
        reconnected_within(ev, marks[0], reconnect_resolution(policy)), _exactly_once(ev)
    )
    return network_not_back(ev, outcome)


def _check_breaker_reset(ev: Evidence, policy: ClientPolicy) -> Outcome:
    marks = _marks(ev, OFFLINE, OFFLINE_SENT, ONLINE)
    if isinstance(marks, Outcome):
        return marks
    off, sent, on = marks
    failed = [c for c in ev.connections if c.opened_at < off and c.fault]
    need = policy.breaker.threshold
    tripped = (
        Outcome.passed(f"{need} failed connections before offline()", f"{len(failed)}")
        if len(failed) >= need
        else Outcome.failed(
            f"{need} failed connections before offline() (the client retries network errors)",
            f"{len(failed)}",
        )
    )
    outcome = all_of(
        tripped,
        quiet_between(ev, sent, on),
        reconnected_within(ev, on, reconnect_resolution(policy)),
        _exactly_once(ev),
    )
    return network_not_back(ev, outcome)


def _check_blip(ev: Evidence, policy: ClientPolicy) -> Outcome:
    marks = _marks(ev, ONLINE)
    if isinstance(marks, Outcome):
        return marks
    n = _blip_streams(policy)
    streams = [f"s{i}" for i in range(1, n + 1)]
    failures = [(s, o) for s in streams if not (o := _exactly_once(ev, s)).ok]
    delivered = (
        Outcome.passed(f"each of the {n} streams completes exactly once", "they do")
        if not failures
        else Outcome.failed(
            f"each of the {n} streams completes exactly once",
            f"{failures[0][0]}: {failures[0][1].observed}",
            *(f"{s}: {o.observed}" for s, o in failures[1:]),
        )
    )
    outcome = all_of(
        reconnected_within(ev, marks[0], reconnect_resolution(policy), count=n, since="the blink"),
        delivered,
    )
    return network_not_back(ev, outcome)


# -- plays -------------------------------------------------------------------------


async def _go_online(ctx: CaseContext) -> None:
    """Online, marked as signalled and again once the adapter says it took effect."""
    mark(ctx, ONLINE)
    await ctx.online()
    mark(ctx, ONLINE_BACK)


def _headers_sent(ctx: CaseContext, count: int) -> Callable[[], bool]:
    """``count`` attempts got their headers: that many connections are open and silent."""
    return lambda: sum(a.status is not None for a in ctx.ledger.attempts()) >= count


def _all_finished(ctx: CaseContext) -> bool:
    return all(a.finished for a in ctx.ledger.attempts())


async def _play_offline_online(ctx: CaseContext) -> None:
    # A failure first (so a budget that online() must reset is in use), then an
    # open, silent connection that offline() must close.
    silent = Stream(events=EVENTS, stall=Stall(after=0, seconds=None))
    ctx.server.script(PATH, Respond(status=503), silent, Respond(status=503), Stream(events=EVENTS))
    ctx.start(request_for(ctx.transport))
    await ctx.wait_until(_headers_sent(ctx, 2), OPEN_DEADLINE)
    mark(ctx, OFFLINE)
    await ctx.offline()
    mark(ctx, OFFLINE_SENT)
    await ctx.wait_until(lambda: _all_finished(ctx), 2 * REACTION_DEADLINE)
    await ctx.hold(OFFLINE_HOLD)
    await _go_online(ctx)
    await ctx.wait_ended("s1", retry_budget(ctx.policy, 2))


async def _play_breaker(ctx: CaseContext) -> None:
    threshold = ctx.policy.breaker.threshold
    ctx.server.script(PATH, Stream(events=EVENTS))
    # The network fails first: every connection is reset before the request gets
    # through, until the breaker opens. Then the browser says offline, the network
    # comes back, and the browser says online.
    ctx.proxy.set_fault(Fault.reset(0, "upstream"))
    ctx.start(request_for(ctx.transport))
    await ctx.wait_until(
        lambda: _closed_connections(ctx) >= threshold, retry_budget(ctx.policy, threshold)
    )
    await ctx.wait_until(lambda: _state_seen(ctx, "breaker_open"), BREAKER_GRACE)
    mark(ctx, OFFLINE)
    await ctx.offline()
    mark(ctx, OFFLINE_SENT)
    ctx.proxy.set_fault(Fault.passthrough())
    await ctx.hold(OFFLINE_HOLD)
    await _go_online(ctx)
    await ctx.wait_ended("s1", retry_budget(ctx.policy, 1))


def _closed_connections(ctx: CaseContext) -> int:
    return sum(c.closed_at is not None for c in ctx.ledger.connections())


def _state_seen(ctx: CaseContext, state: str) -> bool:
    return any(d.kind == "state" and d.state == state for d in ctx.deliveries.all())


async def _play_blip(ctx: CaseContext) -> None:
    n = _blip_streams(ctx.policy)
    silent = Stream(events=EVENTS, stall=Stall(after=0, seconds=None))
    ctx.server.script(PATH, *([silent] * n), Stream(events=EVENTS))
    for i in range(1, n + 1):
        ctx.start(request_for(ctx.transport, stream=f"s{i}"))
    await ctx.wait_until(_headers_sent(ctx, n), OPEN_DEADLINE)
    # A wifi blink: offline and online back to back, while every stream waits open.
    mark(ctx, OFFLINE)
    await ctx.offline()
    await _go_online(ctx)
    await ctx.wait_until(lambda: _all_ended(ctx, n), retry_budget(ctx.policy, 1))


def _all_ended(ctx: CaseContext, n: int) -> bool:
    return all(ctx.deliveries.ended(f"s{i}") for i in range(1, n + 1))


def _blip_streams(policy: ClientPolicy) -> int:
    """Streams cut at once: enough that counting their cuts would open the breaker."""
    b = policy.breaker
    return b.threshold if b.kind == "consecutive" else b.min_throughput


# -- rows -------------------------------------------------------------------------


def _breaker_applies(policy: ClientPolicy, transport: str) -> str | None:
    b = policy.breaker
    if b.kind != "consecutive":
        return "a single stream cannot open its breaker (not a consecutive-failure breaker)"
    if policy.max_attempts is not None and policy.max_attempts <= b.threshold:
        return f"its {policy.max_attempts} attempts cannot reach the breaker's threshold"
    return None


def _blip_applies(policy: ClientPolicy, transport: str) -> str | None:
    if policy.breaker.kind != "consecutive":
        return "its breaker's cooldown is too short to observe a wrongly opened breaker"
    if policy.first_chunk_timeout is not None:
        return "its first-chunk timeout would cut the waiting streams before the blip"
    return None


register_row(
    Row(
        title="While offline, open streams are closed and nothing connects",
        requirement="When told the network is offline, a client MUST close its open "
        "connections at once and MUST NOT attempt any connection until it is told the "
        "network is back.",
        source=SOURCE,
        play=_play_offline_online,
        check=_check_offline,
        needs=OFFLINE_NEEDS,
    ),
    get_id="SC-OFFLINE-1",
    post_id="SC-OFFLINE-2",
)
register_row(
    Row(
        title="On online, a waiting stream reconnects at once with a fresh budget",
        requirement="When told the network is back, a client MUST reconnect a waiting stream "
        "at once, with its attempt count reset, and deliver the answer exactly once.",
        source=SOURCE,
        play=_play_offline_online,
        check=_check_online,
        needs=OFFLINE_NEEDS,
    ),
    get_id="SC-OFFLINE-3",
    post_id="SC-OFFLINE-4",
)
register_row(
    Row(
        title="On online, a breaker opened by network failures is reset",
        requirement="When told the network is back, a client MUST reset its circuit breaker "
        "and reconnect at once, even if network failures had opened it.",
        source=BREAKER,
        play=_play_breaker,
        check=_check_breaker_reset,
        needs=OFFLINE_BREAKER_NEEDS,
        applies=_breaker_applies,
    ),
    get_id="SC-OFFLINE-5",
    post_id="SC-OFFLINE-6",
)
register_row(
    Row(
        title="Connections cut by going offline do not count against the breaker",
        requirement="A client MUST NOT count connections it closed because the network went "
        "offline as failures of its circuit breaker: after a blink offline and online, every "
        "waiting stream reconnects at once.",
        source=BREAKER,
        play=_play_blip,
        check=_check_blip,
        needs=OFFLINE_BREAKER_NEEDS,
        applies=_blip_applies,
        alone=True,  # the last of the streams' reconnects, timed at once
    ),
    get_id="SC-OFFLINE-7",
    post_id="SC-OFFLINE-8",
)
