"""SC-BREAKER: the circuit breaker.

The seed article's breaker (the seed profiles) opens after ``threshold``
consecutive failures, stays open for ``cooldown``, then lets exactly one probe
through: its success closes the circuit, its failure re-opens it. The seed
library's breaker (the pipeline profile) opens on a failure ratio over a sliding
window once a minimum number of calls was seen. Both count only failures before
the first chunk. Each case applies to the breaker kind it is about.

Whether the breaker is open is seen two ways: on the ledger (no request reaches
the server: a strict lower bound on a gap) and through a canary, a new stream on
another path of the same client that must fail fast (``circuit_open``, no
request) or reach the server. A canary starts only once the client provably
booked the failures before it: the stream that failed made its next request, or
ended. Each row is registered for GET (the odd id) and POST (the even id) in the
catalog at the end. The timing of every check is explained in docs/timing-breaker.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from conformance._case import Capability, CaseContext, Check, Outcome, Play, StreamRequest
from conformance._checks import (
    REACTION_DEADLINE,
    all_of,
    answer,
    delivered_exactly,
    ended_with_done,
    ended_with_error,
    http_attempts,
    judged,
    unread_at_the_break,
)
from conformance._evidence import Evidence
from conformance.cases._common import (
    BASE_SLACK,
    PATH,
    PER_ATTEMPT_SLACK,
    Row,
    broken,
    one_stream,
    register_row,
    request_for,
    retry_budget,
)
from conformance.reference import ClientPolicy
from conformance.timing._noise import Noise
from conformance.timing._waits import AT_ONCE, Decision, decide, span
from fake_servers import Attempt, Respond, Stall, Step, Stream, now
from fake_servers._ledger import link_attempts

__all__: list[str] = []

SEED = "seeds/000 §Circuit Breakers, Not Just Retries"
LIBRARY = "seeds/002 §Streaming responses (circuit breaker: failureRatio, minimumThroughput)"
MIDSTREAM = 'seeds/002 §Streaming responses ("Mid-stream errors are not counted")'
EVENTS = 3
OTHER = PATH + "/other"  # a second stream of the same client (same breaker)
CANARY = PATH + "/canary"
FAST_COOLDOWN = 0.25  # the tuned cooldown of the cases that must wait one out
WAITERS = 10  # streams waiting on one breaker for its half-open probe
WAVE_DELAY = 0.1  # the waiters' answers are this late: all of them are in flight first
STEADY_COOLDOWN = 1.0  # a canary surely starts within it
STEADY_WINDOW = 30.0  # the seed library's real window: a whole scenario fits in one
PAST_COOLDOWN = 1.5  # new callers start this many cooldowns after the trip was seen
FAST_CALLERS = 3  # new streams started while the breaker is open
NEW_CALLERS = 4  # new streams started together once it has cooled down
BREAKER: frozenset[Capability] = frozenset({"breaker"})


# -- scripts and requests ----------------------------------------------------------------


def _fail() -> Respond:
    return Respond(status=503)


def _ok() -> Stream:
    return Stream(events=EVENTS)


def _hang() -> Stream:
    """Headers, then silence until the client leaves: an attempt with no outcome yet."""
    return Stream(events=EVENTS, stall=Stall(after=0, seconds=None))


def _request(ctx: CaseContext, stream: str, path: str) -> StreamRequest:
    return replace(request_for(ctx.transport, stream=stream), path=path)


# -- policy variants and applicability ---------------------------------------------------


def _fast(policy: ClientPolicy) -> ClientPolicy:
    """A breaker cooldown of a fraction of a second, the backoff scaled with it. The
    cooldown is FAST_COOLDOWN and the backoff scaled by the same factor: every ratio
    between the cooldown and the backoff delays stays the profile's."""
    factor = min(1.0, FAST_COOLDOWN / policy.breaker.cooldown)
    b = policy.backoff
    return replace(
        policy,
        breaker=replace(policy.breaker, cooldown=policy.breaker.cooldown * factor),
        backoff=replace(b, base=b.base * factor, caps=tuple((n, c * factor) for n, c in b.caps)),
    )


def _fast_single(policy: ClientPolicy) -> ClientPolicy:
    """A breaker that opens on the first failure, with a cooldown of a fraction of a
    second. ``_fast`` with a threshold of 1: every retry provably follows the trip (the
    single-probe rule does not depend on K)."""
    fast = _fast(policy)
    return replace(fast, breaker=replace(fast.breaker, threshold=1))


def _steady_cooldown(policy: ClientPolicy) -> ClientPolicy:
    """A breaker cooldown of at least a second. STEADY_COOLDOWN, so a canary surely
    meets an open breaker."""
    cooldown = max(policy.breaker.cooldown, STEADY_COOLDOWN)
    return replace(policy, breaker=replace(policy.breaker, cooldown=cooldown))


def _steady(policy: ClientPolicy) -> ClientPolicy:
    """A breaker cooldown and failure window of seconds, whatever the profile's. That is
    ``_steady_cooldown`` and a window of at least STEADY_WINDOW (the seed library's real
    30 s), so every call of the scenario counts however slow the machine is."""
    steady = _steady_cooldown(policy)
    window = max(policy.breaker.window, STEADY_WINDOW)
    return replace(steady, breaker=replace(steady.breaker, window=window))


def _consecutive(policy: ClientPolicy, transport: str) -> str | None:
    kind = policy.breaker.kind
    return None if kind == "consecutive" else f"the profile's breaker is {kind!r}, not consecutive"


def _consecutive_slow(policy: ClientPolicy, transport: str) -> str | None:
    """Consecutive, with a cooldown long enough to tell waiting from failing fast."""
    reason = _consecutive(policy, transport)
    if reason is None and policy.breaker.cooldown < STEADY_COOLDOWN:
        return f"the cooldown ({policy.breaker.cooldown:.3f}s) is under {STEADY_COOLDOWN}s"
    return reason


def _ratio(policy: ClientPolicy, transport: str) -> str | None:
    b = policy.breaker
    if b.kind != "ratio":
        return f"the profile's breaker is {b.kind!r}, not a failure ratio"
    limit = policy.max_attempts
    if limit is None or limit >= b.min_throughput:
        return "the scenarios need streams that give up before the minimum throughput"
    failures = _failures_to_open(policy)
    if failures < limit or (failures % limit and failures == b.min_throughput):
        return "the ratio and the attempt limit leave no scenario that opens at the boundary"
    return None


# -- shared check pieces -----------------------------------------------------------------


def _count(ev: Evidence, path: str, n: int, why: str, stream: str | None = None) -> Outcome:
    """Exactly ``n`` requests on ``path``; a mismatch also tells how ``stream`` ended."""
    got = len(http_attempts(ev, path))
    want = f"exactly {n} request(s) on {path} ({why})"
    if got == n:
        return Outcome.passed(want, f"{got}")
    ended = ev.outcome(stream) if stream is not None else None
    tail = f"; {stream} ended with {ended.describe()}" if ended is not None else ""
    return Outcome.failed(want, f"{got} request(s){tail}")


def _quiet_before(
    atts: Sequence[Attempt], i: int, cooldown: float, why: str, noise: Noise
) -> Outcome:
    """Request ``i`` (0-based) came at least a cooldown after request ``i-1`` arrived: the
    client cannot know how a request went before the server received it. The flaw is
    no cooldown at all: half of one early is surely it."""
    want = f"no request for the {cooldown:.3f}s cooldown after request {i} failed ({why})"
    if len(atts) <= i:
        return Outcome.failed(want, f"{len(atts)} request(s): no probe after the cooldown")
    gap = span(atts[i - 1].arrived_at, atts[i].arrived_at, noise)
    seen = f"request {i + 1} came {gap.measured:.3f}s after request {i}"
    return judged(decide(gap, cooldown, math.inf, cooldown / 2), want, seen, noise)


def _answered_once(ev: Evidence, path: str, stream: str = "s1") -> Outcome:
    sent = answer(replace(ev, attempts=http_attempts(ev, path)))
    return all_of(
        ended_with_done(ev, stream),
        delivered_exactly(ev, [sent[i] for i in sorted(sent)], stream),
    )


def _admitted(ev: Evidence, stream: str, path: str) -> Outcome:
    """A new stream met a closed breaker: it reached the server and completed."""
    return all_of(
        _count(ev, path, 1, f"{stream} meets a closed breaker", stream),
        ended_with_done(ev, stream),
    )


def _refused(ev: Evidence, stream: str, path: str) -> Outcome:
    """A new stream met an open breaker: circuit_open at once, no request."""
    return all_of(
        _count(ev, path, 0, f"{stream} meets an open breaker", stream),
        ended_with_error(ev, ["circuit_open"], stream=stream),
    )


# -- BREAKER-1/2 and 7/8: opening, and re-opening after a failed probe -------------------


def _check_opens(ev: Evidence, policy: ClientPolicy) -> Outcome:
    k, cooldown = policy.breaker.threshold, policy.breaker.cooldown
    atts = http_attempts(ev, PATH)
    return all_of(
        _quiet_before(atts, k, cooldown, f"open after {k} consecutive failures", ev.noise),
        _count(ev, PATH, k + 1, f"{k} failures, then one probe that succeeds"),
        _answered_once(ev, PATH),
    )


def _check_reopens(ev: Evidence, policy: ClientPolicy) -> Outcome:
    k, cooldown = policy.breaker.threshold, policy.breaker.cooldown
    atts = http_attempts(ev, PATH)
    return all_of(
        _quiet_before(atts, k, cooldown, f"open after {k} consecutive failures", ev.noise),
        _quiet_before(atts, k + 1, cooldown, "the failed probe re-opened it", ev.noise),
        _count(ev, PATH, k + 2, f"{k} failures, a failed probe, a probe that succeeds"),
        _answered_once(ev, PATH),
    )


def _play_failures(extra: int) -> Play:
    """One stream: threshold + ``extra`` failures, then the answer."""

    def steps(p: ClientPolicy) -> list[Step]:
        return [*[_fail()] * (p.breaker.threshold + extra), _ok()]

    def cooldowns(p: ClientPolicy) -> float:
        return p.breaker.cooldown * (1 + extra)

    async def play(ctx: CaseContext) -> None:
        retries = ctx.policy.breaker.threshold + extra
        await one_stream(steps, retries=retries, waits=cooldowns)(ctx)

    return play


# -- BREAKER-3/4: one probe among many waiting callers -----------------------------------


def _waiter_path(i: int) -> str:
    return f"{PATH}/w{i}"


async def _play_waiters(ctx: CaseContext) -> None:
    for i in range(WAITERS):  # a path per stream: number 1 on a path is its first request
        ctx.server.script(_waiter_path(i), Respond(status=503, delay=WAVE_DELAY))
    for i in range(WAITERS):
        ctx.start(_request(ctx, f"w{i}", _waiter_path(i)))
    budget = 2 * WAVE_DELAY + ctx.policy.breaker.cooldown + 2 * PER_ATTEMPT_SLACK + BASE_SLACK
    await ctx.wait_until(
        lambda: any(a.number > 1 and a.finished for a in ctx.ledger.attempts()), budget
    )


def _given_up(ev: Evidence, probe: Attempt) -> float:
    """When the probe was over for the client: the server's end of it, or the client's
    close of its connection when that came first. A client whose own timer gave up on a
    probe the server was still holding (a loaded machine: CI's 503 came late) closes
    it, and its next probe, a cooldown later, is not a second one in flight."""
    end = probe.ended_at if probe.ended_at is not None else math.inf
    link = link_attempts(ev.attempts, ev.connections).get(probe.seq)
    if link is None:
        return end
    conn = next(c for c in ev.connections if c.seq == link.connection)
    if conn.closed_by == "client" and conn.closed_at is not None:
        return min(end, conn.closed_at)
    return end


def _check_single_probe(ev: Evidence, policy: ClientPolicy) -> Outcome:
    first = [a for a in ev.attempts if a.number == 1]
    retries = sorted((a for a in ev.attempts if a.number > 1), key=lambda a: a.arrived_at)
    want = "after the cooldown, exactly one probe while the others wait"
    if len(first) < 2:
        return Outcome.failed(want, f"only {len(first)} stream(s) reached the server at all")
    if not retries:
        return Outcome.failed(want, "no request after the first failures: no probe")
    # No failure is known before the first request arrived, nor before a connect begun
    # as the case started could time out: a clean CI's loaded proxy once let the
    # reference's probe come 0.212 s after the first arrival, 0.14 s before any 503.
    timers = [t for t in (policy.connect_timeout, policy.first_chunk_timeout) if t]
    tripped = min([a.arrived_at for a in first] + [ev.started_at + t for t in timers])
    probe = retries[0]
    waited = span(tripped, probe.arrived_at, ev.noise)
    cooldown = policy.breaker.cooldown
    quiet = judged(
        decide(waited, cooldown, math.inf, cooldown / 2),
        f"no request for the {cooldown:.3f}s cooldown after the breaker opened",
        f"a retry came {waited.measured:.3f}s after the first request",
        ev.noise,
    )
    if not quiet.ok:
        return quiet
    end = _given_up(ev, probe)
    crowd = [a for a in retries[1:] if a.arrived_at <= end]
    if crowd:
        return Outcome.failed(
            want,
            f"{len(crowd) + 1} requests while the probe was in flight",
            *(
                f"{a.path} arrived {a.arrived_at - probe.arrived_at:.3f}s after the probe"
                for a in crowd
            ),
        )
    return Outcome.passed(
        want, f"one probe {waited.measured:.3f}s after the first request, {len(first)} waiting"
    )


# -- BREAKER-5/6 and 11/12: closed again, count reset; a canary shows it -----------------


def _play_then_canary(first: Callable[[ClientPolicy], Sequence[Step]]) -> Play:
    """s1 plays ``first``; then s2 fails threshold-1 times and hangs on its next request,
    and a canary (a new stream) must still be admitted; s2 is then cancelled."""

    async def play(ctx: CaseContext) -> None:
        p = ctx.policy
        k, cooldown = p.breaker.threshold, p.breaker.cooldown
        ctx.server.script(PATH, *first(p))
        ctx.server.script(OTHER, *[_fail()] * (k - 1), _hang())
        ctx.server.script(CANARY, _ok())
        ctx.start(_request(ctx, "s1", PATH))
        await ctx.wait_ended("s1", retry_budget(p, k, waits=cooldown))
        ctx.start(_request(ctx, "s2", OTHER))
        # The k-th request arriving proves the client booked the k-1 failures before it.
        budget = retry_budget(p, k, waits=k * cooldown)
        await ctx.wait_until(
            lambda: len(ctx.ledger.attempts(OTHER)) >= k or ctx.deliveries.ended("s2"), budget
        )
        ctx.start(_request(ctx, "canary", CANARY))
        await ctx.wait_ended("canary", retry_budget(p, 1, waits=cooldown))
        await ctx.cancel("s2")

    return play


def _check_then_canary(s1_requests: Callable[[int], int], why: str) -> Check:
    def check(ev: Evidence, policy: ClientPolicy) -> Outcome:
        k = policy.breaker.threshold
        return all_of(
            _count(ev, PATH, s1_requests(k), why),
            _answered_once(ev, PATH),
            _count(ev, OTHER, k, f"a new stream makes {k - 1} failed requests and one more", "s2"),
            _admitted(ev, "canary", CANARY),
        )

    return check


def _check_closes(ev: Evidence, policy: ClientPolicy) -> Outcome:
    k, cooldown = policy.breaker.threshold, policy.breaker.cooldown
    atts = http_attempts(ev, PATH)
    return all_of(
        _quiet_before(atts, k, cooldown, f"open after {k} consecutive failures", ev.noise),
        _check_then_canary(lambda k: k + 1, "failures, then the probe that succeeds")(ev, policy),
    )


# -- BREAKER-9/10: fail fast -------------------------------------------------------------


def _reported_open(ctx: CaseContext) -> bool:
    return any(d.state == "breaker_open" for d in ctx.deliveries.all())


async def _play_fail_fast(ctx: CaseContext) -> None:
    p = ctx.policy
    k = p.breaker.threshold
    ctx.server.script(PATH, *[_fail()] * k, _ok())
    ctx.server.script(OTHER, _ok())
    ctx.start(_request(ctx, "s1", PATH))
    await ctx.wait_until(
        lambda: sum(a.finished for a in ctx.ledger.attempts(PATH)) >= k, retry_budget(p, k - 1)
    )
    # The client books the k-th failure when it reads the answer: a reported
    # breaker_open state says it did; otherwise allow it the usual slack.
    await ctx.wait_until(lambda: _reported_open(ctx), REACTION_DEADLINE)
    ctx.start(_request(ctx, "s2", OTHER))
    await ctx.wait_ended("s2", retry_budget(p, 1, waits=p.breaker.cooldown))
    await ctx.cancel("s1")


def _check_fail_fast(ev: Evidence, policy: ClientPolicy) -> Outcome:
    k = policy.breaker.threshold
    out = ev.outcome("s2")
    before = [
        a
        for a in http_attempts(ev, PATH)
        if a.ended_at is not None and (out is None or a.ended_at <= out.at)
    ]
    want = f"{k} consecutive failures before the new stream started"
    tripped = (
        Outcome.passed(want, f"{len(before)}")
        if len(before) >= k
        else Outcome.failed(want, f"{len(before)} failure(s)")
    )
    return all_of(tripped, _refused(ev, "s2", OTHER))


# -- BREAKER-13/14 and 21/22: mid-stream failures do not count ---------------------------


def _calls_to_open(policy: ClientPolicy) -> int:
    b = policy.breaker
    return b.threshold if b.kind == "consecutive" else b.min_throughput


def _midstream_name(i: int) -> str:
    return f"m{i}"


async def _play_midstream(ctx: CaseContext) -> None:
    p = ctx.policy
    ctx.server.script(PATH, broken(2))
    ctx.server.script(CANARY, _ok())
    for i in range(1, _calls_to_open(p) + 1):
        ctx.start(_request(ctx, _midstream_name(i), PATH))
        await ctx.wait_ended(_midstream_name(i), retry_budget(p, 0))
    ctx.start(_request(ctx, "canary", CANARY))
    await ctx.wait_ended("canary", retry_budget(p, 1, waits=p.breaker.cooldown))


def _canary_after(
    ev: Evidence, last_stream: str, within: float, resolution: float, want: str
) -> Outcome:
    """The canary reached the server at most ``within`` after ``last_stream`` ended."""
    last = ev.outcome(last_stream)
    canary = http_attempts(ev, CANARY)
    if last is None or not canary:
        return Outcome.failed(want, f"{last_stream} never ended" if canary else "no request")
    gap = span(last.at, canary[0].arrived_at, ev.noise)
    seen = f"it came {gap.measured:.3f}s after {last_stream} ended"
    return judged(decide(gap, -math.inf, within, resolution), want, seen, ev.noise)


def _prompt_canary(ev: Evidence, last_stream: str, cooldown: float) -> Outcome:
    """The canary reached the server at once after the last stream failed: an open
    breaker would have held it a cooldown (the flaw, half of which is surely it)."""
    flaw = cooldown / 2
    limit = AT_ONCE * flaw
    want = f"the canary reaches the server at once (within {limit:.3f}s)"
    return _canary_after(ev, last_stream, limit, flaw - limit, want)


def _check_midstream(ev: Evidence, policy: ClientPolicy) -> Outcome:
    n = _calls_to_open(policy)
    outcome = all_of(
        _count(ev, PATH, n, f"{n} streams, each failing after its first chunks, never retried"),
        *(ended_with_error(ev, stream=_midstream_name(i)) for i in range(1, n + 1)),
        _admitted(ev, "canary", CANARY),
        _prompt_canary(ev, _midstream_name(n), policy.breaker.cooldown),
    )
    return outcome if outcome.ok else _midstream_unread(ev, n) or outcome


def _midstream_unread(ev: Evidence, n: int) -> Outcome | None:
    """The doubt of ``unread_at_the_break`` for the first attempt of any of the ``n``
    streams (they run one after the other): a stream whose chunks a break discarded
    looks failed before its first chunk to the client, and rightly counts."""
    since = -math.inf
    for i in range(1, n + 1):
        name = _midstream_name(i)
        first = next((a for a in http_attempts(ev, PATH) if a.arrived_at > since), None)
        if first is None:
            return None
        if (doubt := unread_at_the_break(ev, first, name)) is not None:
            return doubt
        end = ev.outcome(name)
        if end is None:
            return None
        since = end.at
    return None


# -- BREAKER-15 to 20: the failure ratio -------------------------------------------------


Plan = list[tuple[Step, ...] | float]  # streams run one after the other; a float holds


def _failures_to_open(policy: ClientPolicy) -> int:
    b = policy.breaker
    return math.ceil(b.ratio * b.min_throughput - 1e-9)


def _streams(failures: int, successes: int, limit: int, *, failing_last: bool) -> Plan:
    """Streams making ``failures`` failed and ``successes`` good calls: streams that give
    up after ``limit`` failures, single good calls, and one stream that fails the
    remainder then succeeds. ``failing_last``: the last call is a failure."""
    full, rest = divmod(failures, limit)
    give_up: Plan = [(*[_fail()] * limit,)] * full
    mixed: Plan = [(*[_fail()] * rest, _ok())] if rest else []
    good: Plan = [(_ok(),)] * (successes - len(mixed))
    return [*good, *mixed, *give_up] if failing_last else [*give_up, *mixed, *good]


def _plan_opens(policy: ClientPolicy) -> Plan:
    """Exactly the minimum throughput, the last call a failure that reaches the ratio."""
    f = _failures_to_open(policy)
    return _streams(
        f, policy.breaker.min_throughput - f, policy.max_attempts or 1, failing_last=True
    )


def _plan_below_minimum(policy: ClientPolicy) -> Plan:
    """One call short of the minimum throughput, every call a failure."""
    return _streams(
        policy.breaker.min_throughput - 1, 0, policy.max_attempts or 1, failing_last=False
    )


def _plan_window(policy: ClientPolicy) -> Plan:
    """The failures of ``_plan_below_minimum``, a window's wait, then a stream that fails."""
    limit = policy.max_attempts or 1
    hold = policy.breaker.window + 0.05
    return [*_plan_below_minimum(policy), hold, (*[_fail()] * limit,)]


def _planned(plan: Plan) -> list[tuple[Step, ...]]:
    return [item for item in plan if not isinstance(item, float)]


def _play_plan(plan_for: Callable[[ClientPolicy], Plan]) -> Play:
    async def play(ctx: CaseContext) -> None:
        p = ctx.policy
        plan = plan_for(p)
        for i, steps in enumerate(_planned(plan), start=1):
            ctx.server.script(f"{PATH}/{i}", *steps)
        ctx.server.script(CANARY, _ok())
        i = 0
        for item in plan:
            if isinstance(item, float):
                await ctx.hold(item)  # scenario time: older calls leave the window
                continue
            i += 1
            ctx.start(_request(ctx, f"p{i}", f"{PATH}/{i}"))
            await ctx.wait_ended(
                f"p{i}", retry_budget(p, len(item), waits=len(item) * p.breaker.cooldown)
            )
        ctx.start(_request(ctx, "canary", CANARY))
        await ctx.wait_ended("canary", retry_budget(p, 1, waits=p.breaker.cooldown))

    return play


def _check_plan(plan_for: Callable[[ClientPolicy], Plan], *, opens: bool) -> Check:
    def check(ev: Evidence, policy: ClientPolicy) -> Outcome:
        streams = _planned(plan_for(policy))
        calls = [
            _count(ev, f"{PATH}/{i}", len(steps), f"stream p{i}'s planned calls", f"p{i}")
            for i, steps in enumerate(streams, start=1)
        ]
        canary = _refused(ev, "canary", CANARY) if opens else _admitted(ev, "canary", CANARY)
        return all_of(*calls, canary)

    return check


# -- BREAKER-23 to 26: new streams once the cooldown has passed ------------------------


def _reaction(policy: ClientPolicy) -> float:
    """How long the play waits for a client that reports no states to book the trip:
    under half a cooldown, so s1 cannot have probed yet when it is cancelled."""
    return min(REACTION_DEADLINE, policy.breaker.cooldown / 2)


async def _trip(ctx: CaseContext) -> float:
    """s1 fails threshold times; returns once the client says it opened (a
    ``breaker_open`` state) or ``_reaction`` later: a moment after the trip."""
    p = ctx.policy
    k = p.breaker.threshold
    ctx.server.script(PATH, *[_fail()] * k, _ok())
    ctx.start(_request(ctx, "s1", PATH))
    await ctx.wait_until(
        lambda: sum(a.finished for a in ctx.ledger.attempts(PATH)) >= k, retry_budget(p, k - 1)
    )
    await ctx.wait_until(lambda: _reported_open(ctx), _reaction(p))
    return now()


async def _cooled(ctx: CaseContext, tripped: float) -> None:
    """Hold until PAST_COOLDOWN cooldowns after the trip: a cooldown up to half again as
    long as the profile's is not this case's flaw (BREAKER-1 judges the lower end)."""
    await ctx.hold(max(0.0, tripped + PAST_COOLDOWN * ctx.policy.breaker.cooldown - now()))


def _tripped(ev: Evidence, policy: ClientPolicy) -> Outcome:
    """s1 made the threshold failures and no more: the play cancels it while the breaker
    is open, so that a new stream has to be the probe. A request of its own within the
    cooldown is BREAKER-1's flaw; one after it means the play cancelled s1 too late."""
    k, cooldown = policy.breaker.threshold, policy.breaker.cooldown
    atts = http_attempts(ev, PATH)
    if len(atts) <= k:
        return _count(ev, PATH, k, f"{k} failures trip the breaker, then s1 is cancelled", "s1")
    quiet = _quiet_before(atts, k, cooldown, f"open after {k} consecutive failures", ev.noise)
    if not quiet.ok:
        return quiet
    return Outcome.unsure(
        f"s1 is cancelled after its {k} failures, before it can probe",
        f"s1 probed after the cooldown: the play was too late to cancel it ({quiet.observed})",
        ev.noise.headline(),
    )


async def _play_next_stream(ctx: CaseContext) -> None:
    """Trip, cancel s1, wait the cooldown out; s2 (a new stream) must be the probe and
    close the breaker, then a canary must get through as well."""
    budget = retry_budget(ctx.policy, 1, waits=ctx.policy.breaker.cooldown)
    ctx.server.script(OTHER, _ok())
    ctx.server.script(CANARY, _ok())
    tripped = await _trip(ctx)
    await ctx.cancel("s1")
    await _cooled(ctx, tripped)
    ctx.start(_request(ctx, "s2", OTHER))
    await ctx.wait_ended("s2", budget)
    ctx.start(_request(ctx, "canary", CANARY))
    await ctx.wait_ended("canary", budget)


def _check_next_stream(ev: Evidence, policy: ClientPolicy) -> Outcome:
    cooldown = policy.breaker.cooldown
    # A canary held for a new cooldown is the flaw (a client whose new streams wait);
    # half of one is surely it, and a prompt one takes milliseconds.
    held = f"the canary reaches the server without a new cooldown (within {cooldown / 2:.3f}s)"
    return all_of(
        _tripped(ev, policy),
        _admitted(ev, "s2", OTHER),
        _admitted(ev, "canary", CANARY),
        _canary_after(ev, "s2", cooldown / 2, cooldown / 2, held),
    )


FAST = tuple(f"f{i}" for i in range(1, FAST_CALLERS + 1))  # started while it is open
NEW = tuple(f"n{i}" for i in range(1, NEW_CALLERS + 1))  # started once it has cooled down


def _caller_path(stream: str) -> str:
    return f"{PATH}/{stream}"


def _probe_hold(policy: ClientPolicy) -> float:
    """How long a probe's answer is held back: half a cooldown, so that callers let
    through with it surely arrive before it resolves, at every scale."""
    return policy.breaker.cooldown / 2


async def _play_new_callers(ctx: CaseContext) -> None:
    """Trip; FAST_CALLERS new streams while open (they fail fast); cancel s1; after the
    cooldown NEW_CALLERS new streams at once: one of them is the probe."""
    p = ctx.policy
    for stream in (*FAST, *NEW):
        ctx.server.script(_caller_path(stream), Stream(events=EVENTS, delay=_probe_hold(p)))
    budget = retry_budget(p, 1, waits=p.breaker.cooldown + _probe_hold(p))
    tripped = await _trip(ctx)
    for stream in FAST:
        ctx.start(_request(ctx, stream, _caller_path(stream)))
    await ctx.cancel("s1")
    for stream in FAST:
        await ctx.wait_ended(stream, budget)
    await _cooled(ctx, tripped)
    for stream in NEW:
        ctx.start(_request(ctx, stream, _caller_path(stream)))
    for stream in NEW:
        await ctx.wait_ended(stream, budget)


def _refused_while_open(ev: Evidence, stream: str, opened: float, cooldown: float) -> Outcome:
    """A stream started while the breaker is open fails fast. It may reach the server
    only after the cooldown, as the probe (its client waits, or the play started it
    late); the probe check judges it then. ``opened``: the tripping request's arrival."""
    path = _caller_path(stream)
    atts = http_attempts(ev, path)
    if not atts:
        return _refused(ev, stream, path)
    gap = span(opened, atts[0].arrived_at, ev.noise)
    want = f"{stream}, started while the breaker is open, sends no request for the cooldown"
    seen = f"its request came {gap.measured:.3f}s after the tripping request"
    return judged(decide(gap, cooldown, math.inf, cooldown / 2), want, seen, ev.noise)


def _before(ev: Evidence, a: Attempt, probe: Attempt, flaw: float) -> Decision:
    """Whether ``a`` arrived before the probe resolved ("out": surely). No client can
    know the probe succeeded before its first event was sent (or, failed, before it
    ended)."""
    resolved = probe.data_events[0].at if probe.data_events else probe.ended_at
    if resolved is None:
        return "out"
    return decide(span(a.arrived_at, resolved, ev.noise), -math.inf, 0.0, flaw)


def _lease_or(
    decision: Decision, ev: Evidence, a: Attempt, probe: Attempt, lease: float
) -> Decision:
    """``decision``, unless ``a`` may be a new probe after the first one's lease ran out.
    A client may presume a probe lost after a whole cooldown with no outcome (the
    reference does, so a leaked probe cannot wedge the breaker). The probe was admitted
    before its request arrived, by up to the loops' lag: CI once had every loop stall
    250 ms, and the reference's second probe arrived 7 ms after the first."""
    if decision != "out":
        return decision
    late = a.arrived_at - probe.arrived_at + ev.noise.lag(probe.arrived_at - lease, a.arrived_at)
    return "unsure" if late >= lease else decision


def _one_probe(ev: Evidence, policy: ClientPolicy) -> Outcome:
    """The first request of a caller after the trip is the probe; no other arrives
    before it resolves, and its stream completes."""
    want = "after the cooldown one probe, and no other request until it resolves"
    paths = {_caller_path(s): s for s in (*FAST, *NEW)}
    reqs = sorted((a for a in ev.attempts if a.path in paths), key=lambda a: a.arrived_at)
    if not reqs:
        return Outcome.failed(want, "no request after the cooldown: no probe")
    probe, others = reqs[0], reqs[1:]
    flaw = _probe_hold(policy) / 2
    cooldown = policy.breaker.cooldown
    decisions = [
        (a, _lease_or(_before(ev, a, probe, flaw), ev, a, probe, cooldown)) for a in others
    ]
    crowd = [a for a, d in decisions if d == "out"]
    if crowd:
        after = (f"{a.path} {a.arrived_at - probe.arrived_at:.3f}s after it" for a in crowd)
        return Outcome.failed(
            want,
            f"{len(crowd) + 1} requests before the probe resolved",
            *after,
            ev.noise.headline(),
        )
    if any(d == "unsure" for _, d in decisions):
        seen = (
            "requests near the probe's first event (undecidable: the measured noise is too large)"
        )
        return Outcome.unsure(want, seen, ev.noise.headline())
    one = Outcome.passed(want, f"one probe ({probe.path}), {len(others)} request(s) after it")
    return all_of(one, ended_with_done(ev, paths[probe.path]))


def _check_new_callers(ev: Evidence, policy: ClientPolicy) -> Outcome:
    tripped = _tripped(ev, policy)
    if not tripped.ok:
        return tripped
    k, cooldown = policy.breaker.threshold, policy.breaker.cooldown
    opened = http_attempts(ev, PATH)[k - 1].arrived_at
    return all_of(
        *(_refused_while_open(ev, stream, opened, cooldown) for stream in FAST),
        _one_probe(ev, policy),
    )


# -- the catalog -------------------------------------------------------------------------

register_row(
    Row(
        title="The breaker opens after K consecutive failures",
        requirement="After the threshold of consecutive failures a client MUST open its "
        "breaker: no request reaches the server for the whole cooldown, then one probe does.",
        source=SEED,
        play=_play_failures(0),
        check=_check_opens,
        needs=BREAKER,
        applies=_consecutive,
        tune=_fast,
    ),
    get_id="SC-BREAKER-1",
    post_id="SC-BREAKER-2",
)
register_row(
    Row(
        title="One half-open probe, however many callers wait",
        requirement="When the cooldown ends a client MUST let exactly one probe through, even "
        "when many streams of the client are waiting on the breaker.",
        source=SEED,
        play=_play_waiters,
        check=_check_single_probe,
        needs=BREAKER,
        applies=_consecutive,
        tune=_fast_single,
    ),
    get_id="SC-BREAKER-3",
    post_id="SC-BREAKER-4",
)
register_row(
    Row(
        title="A successful probe closes the breaker and resets the count",
        requirement="A probe that succeeds MUST close the breaker and reset the failure count: "
        "a new stream is admitted, and threshold-1 failures after it do not open the breaker.",
        source=SEED,
        play=_play_then_canary(lambda p: [*[_fail()] * p.breaker.threshold, _ok()]),
        check=_check_closes,
        needs=BREAKER,
        applies=_consecutive,
        tune=_fast,
    ),
    get_id="SC-BREAKER-5",
    post_id="SC-BREAKER-6",
)
register_row(
    Row(
        title="A failed probe re-opens the breaker for another cooldown",
        requirement="A probe that fails MUST re-open the breaker: no request for another full "
        "cooldown.",
        source=SEED,
        play=_play_failures(1),
        check=_check_reopens,
        needs=BREAKER,
        applies=_consecutive,
        tune=_fast,
    ),
    get_id="SC-BREAKER-7",
    post_id="SC-BREAKER-8",
)
register_row(
    Row(
        title="A new stream fails fast while the breaker is open",
        requirement="A stream started while the breaker is open MUST fail at once with a "
        "circuit-open error, without sending a request.",
        source=SEED,
        play=_play_fail_fast,
        check=_check_fail_fast,
        needs=BREAKER,
        applies=_consecutive_slow,
    ),
    get_id="SC-BREAKER-9",
    post_id="SC-BREAKER-10",
)
register_row(
    Row(
        title="A success resets the consecutive count",
        requirement="A success MUST reset the consecutive-failure count: threshold-1 failures, "
        "a success, threshold-1 failures never open the breaker.",
        source=SEED,
        play=_play_then_canary(lambda p: [*[_fail()] * (p.breaker.threshold - 1), _ok()]),
        check=_check_then_canary(lambda k: k, "threshold-1 failures, then the answer"),
        needs=BREAKER,
        applies=_consecutive,
        tune=_fast,
    ),
    get_id="SC-BREAKER-11",
    post_id="SC-BREAKER-12",
)
register_row(
    Row(
        title="Mid-stream failures do not count (consecutive breaker)",
        requirement="A client MUST NOT count failures after a stream's first chunk: threshold "
        "streams that each fail mid-stream leave the breaker closed, and the next stream "
        "connects at once.",
        source=f"{MIDSTREAM}; {SEED}",
        play=_play_midstream,
        check=_check_midstream,
        needs=BREAKER,
        applies=_consecutive_slow,
    ),
    get_id="SC-BREAKER-13",
    post_id="SC-BREAKER-14",
)
register_row(
    Row(
        title="The breaker opens at the failure ratio once the minimum throughput is reached",
        requirement="A failure-ratio breaker MUST open when, with at least the minimum "
        "throughput of calls in the window, the failure ratio reaches the profile's ratio; a "
        "new stream then fails fast without a request.",
        source=LIBRARY,
        play=_play_plan(_plan_opens),
        check=_check_plan(_plan_opens, opens=True),
        needs=BREAKER,
        applies=_ratio,
        tune=_steady,
    ),
    get_id="SC-BREAKER-15",
    post_id="SC-BREAKER-16",
)
register_row(
    Row(
        title="Below the minimum throughput the breaker stays closed",
        requirement="A failure-ratio breaker MUST NOT open before the window holds the minimum "
        "throughput of calls, even when every call failed.",
        source=LIBRARY,
        play=_play_plan(_plan_below_minimum),
        check=_check_plan(_plan_below_minimum, opens=False),
        needs=BREAKER,
        applies=_ratio,
        tune=_steady,
    ),
    get_id="SC-BREAKER-17",
    post_id="SC-BREAKER-18",
)
register_row(
    Row(
        title="Calls older than the window do not count",
        requirement="A failure-ratio breaker MUST count only the calls inside its sliding "
        "window: failures older than the window cannot open it.",
        source=LIBRARY,
        play=_play_plan(_plan_window),
        check=_check_plan(_plan_window, opens=False),
        needs=BREAKER,
        applies=_ratio,
        tune=_steady_cooldown,
    ),
    get_id="SC-BREAKER-19",
    post_id="SC-BREAKER-20",
)
register_row(
    Row(
        title="Mid-stream failures do not count (failure-ratio breaker)",
        requirement="A client MUST NOT count failures after a stream's first chunk: the "
        "minimum throughput of streams that each fail mid-stream leave the breaker closed, "
        "and the next stream connects at once.",
        source=MIDSTREAM,
        play=_play_midstream,
        check=_check_midstream,
        needs=BREAKER,
        applies=_ratio,
        tune=_steady,
    ),
    get_id="SC-BREAKER-21",
    post_id="SC-BREAKER-22",
)
register_row(
    Row(
        title="After the cooldown a new stream is the probe and closes the breaker",
        requirement="Once the cooldown has passed, a client MUST let a new stream through as "
        "the probe; its success closes the breaker, and the next new stream goes through at "
        "once.",
        source=SEED,
        play=_play_next_stream,
        check=_check_next_stream,
        needs=BREAKER,
        applies=_consecutive,
        tune=_fast,
    ),
    get_id="SC-BREAKER-23",
    post_id="SC-BREAKER-24",
)
register_row(
    Row(
        title="One probe among new callers after the cooldown",
        requirement="When the cooldown ends a client MUST let exactly one probe through, also "
        "when its callers failed fast while the breaker was open and several new ones start "
        "at once.",
        source=SEED,
        play=_play_new_callers,
        check=_check_new_callers,
        needs=BREAKER,
        applies=_consecutive,
        tune=_fast,
    ),
    get_id="SC-BREAKER-25",
    post_id="SC-BREAKER-26",
)
