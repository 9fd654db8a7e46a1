"""What most cases share: the row a case module writes, the endpoint, the request per
transport, time budgets.

Every case module writes its requirements the same way: one ``Row`` each, filled by
field name, registered with the ids of its cases written out where the row is made::

    register_row(Row(title=..., requirement=..., source=..., play=..., check=...),
                 get_id="SC-AREA-1", post_id="SC-AREA-2")

so ``grep SC-AREA-1 conformance/`` finds the case's definition.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from conformance._case import (
    Capability,
    Case,
    CaseContext,
    Check,
    JsonBody,
    Level,
    Outcome,
    Play,
    StreamRequest,
    register,
)
from conformance.reference import ClientPolicy
from conformance.timing._noise import Noise
from conformance.timing._waits import Wait, decide
from fake_servers import Fault, Framing, Stall, Step, Stream

__all__ = [
    "BREAK_HOLD",
    "PATH",
    "REFUSED_WINDOW",
    "RESUME",
    "Applies",
    "Row",
    "Transport",
    "broken",
    "one_stream",
    "refused_applies",
    "refused_then_online",
    "register_row",
    "request_for",
    "resume_applies",
    "resumed_row",
    "retry_budget",
    "retrying_or_ended",
    "settle_time",
    "waited_the_hint",
]

PATH = "/v1/stream"
Transport = Literal["get", "post"]
Applies = Callable[[ClientPolicy, str], str | None]
# How long the server holds a break after the chunks before it, so that they reach the
# consumer first, as on a real network, where a failure comes after the data it follows.
# Back to back, a browser's fetch loses them: a reset errors its body stream, whose
# queue is emptied of what the page had not read yet (measured in Chromium 156 with
# headers, two events and a TCP reset: 28 of 30 tries delivered the events back to back,
# 70 of 70 with 5 ms between, quiet and beside 3 CPU burners; docs/browser.md). What the
# hold leaves open, a page starved past it, the checks find (``unread_at_the_break``).
BREAK_HOLD = 0.05


@dataclass(frozen=True, kw_only=True)
class Row:
    """One requirement as its cases share it: a ``Case`` without its id and transport.

    ``needs`` lists the capabilities beyond the transport's own (``register_row`` adds
    that); ``applies`` None: the row applies to every policy. The other fields are the
    ``Case``'s of the same name.
    """

    title: str
    requirement: str
    source: str
    play: Play
    check: Check
    level: Level = Level.MUST
    needs: frozenset[Capability] = frozenset()
    applies: Applies | None = None
    tune: Callable[[ClientPolicy], ClientPolicy] | None = None
    tune_optional: bool = False
    quiet_gc: bool = False
    alone: bool = False


def register_row(row: Row, *, get_id: str | None = None, post_id: str | None = None) -> None:
    """Register ``row``'s cases: ``get_id`` for GET, ``post_id`` for POST (at least one)."""
    pairs: tuple[tuple[str | None, Transport], ...] = ((get_id, "get"), (post_id, "post"))
    if get_id is None and post_id is None:
        raise ValueError(f"row {row.title!r} has no case id")
    for case_id, transport in pairs:
        if case_id is None:
            continue
        case = Case(
            id=case_id,
            title=row.title,
            level=row.level,
            requirement=row.requirement,
            source=row.source,
            play=row.play,
            check=row.check,
            transport=transport,
            needs=row.needs | {transport},
            tune=row.tune,
            tune_optional=row.tune_optional,
            quiet_gc=row.quiet_gc,
            alone=row.alone,
        )
        register(case if row.applies is None else replace(case, applies=row.applies))


def broken(
    events: int,
    end: Literal["abort", "abort_mid_line"] = "abort",
    *,
    ids: bool = False,
    framing: Framing | None = None,
) -> Stream:
    """A stream of ``events`` chunks (with ``ids``, laid out by ``framing``) that ``end``
    breaks ``BREAK_HOLD`` after the last of them: a scripted silence, which the ledger
    shows as the stall it is."""
    stall = Stall(after=events, seconds=BREAK_HOLD)
    return Stream(events=events, end=end, stall=stall, ids=ids, framing=framing or Framing())


RESUME: frozenset[Capability] = frozenset({"resume"})


def resume_applies(policy: ClientPolicy, transport: str) -> str | None:
    """Rows that resume a stream with Last-Event-ID need a profile that does."""
    return None if policy.resume else "the profile does not resume with Last-Event-ID"


def resumed_row(
    *,
    title: str,
    requirement: str,
    source: str,
    cut: Step,
    resumed: Step,
    check: Check,
    settle: bool = False,
) -> Row:
    """The row of a stream that ``cut`` breaks and the client must resume once with
    Last-Event-ID (``resumed`` answers the resumed request): it needs the capability and
    a profile that resumes. ``settle``: keep watching after the end, for a wrongful retry."""
    return Row(
        title=title,
        requirement=requirement,
        source=source,
        play=one_stream(lambda p: [cut, resumed], retries=1, settle=settle),
        check=check,
        needs=RESUME,
        applies=resume_applies,
    )


# Fixed allowance per attempt for connecting, the server's reply and the
# adapter's reporting, on a busy 2-core machine; budgets are deadlines, so a
# generous value costs nothing when the client is correct.
PER_ATTEMPT_SLACK = 0.5
BASE_SLACK = 2.0


def request_for(transport: Transport, **changes: object) -> StreamRequest:
    """The case's request: a GET stream, or a POST with a JSON body and an idempotency key."""
    if transport == "get":
        return replace(StreamRequest(PATH, "GET"), **changes)  # type: ignore[arg-type]
    post = StreamRequest(
        PATH,
        "POST",
        headers=(("idempotency-key", "streamcheck-case"),),
        body=JsonBody({"prompt": "Make the headline bigger.", "stream": True}),
        idempotent=True,
    )
    return replace(post, **changes)  # type: ignore[arg-type]


def retry_budget(policy: ClientPolicy, retries: int, waits: float = 0.0) -> float:
    """A deadline for a stream that needs ``retries`` retries and ``waits`` extra seconds.

    The worst-case backoff of each retry, plus a breaker cooldown if the retries
    could trip it, plus fixed slack per attempt.
    """
    backoff = sum(policy.backoff.envelope(k)[1] for k in range(1, retries + 1))
    breaker = policy.breaker.cooldown if retries >= policy.breaker.threshold else 0.0
    return backoff + breaker + waits + PER_ATTEMPT_SLACK * (retries + 1) + BASE_SLACK


async def wait_ended_progressing(ctx: CaseContext, stream: str, budget: float, most: int) -> bool:
    """``ctx.wait_ended``, its deadline running from the stream's latest chunk, for up to
    ``most`` chunks. A script that writes a byte at a time takes 0.25 s on a quiet machine
    and over 3 s on a starved one (CI's xdist workers, while the loops' p99 stayed under
    20 ms): a client still delivering is never cut short by the kit's slowness, and one
    that stops still meets the whole ``budget`` after its last chunk."""

    def chunks() -> int:
        return sum(d.stream == stream and d.kind == "chunk" for d in ctx.deliveries.all())

    def past(seen: int) -> Callable[[], bool]:
        return lambda: ctx.deliveries.ended(stream) or chunks() > seen

    seen, moved = 0, True
    for _ in range(most):
        moved = await ctx.wait_until(past(seen), budget)
        if not moved or ctx.deliveries.ended(stream):
            break
        seen = chunks()
    # The last word is wait_ended's, so a stream that never got a chunk is judged as any
    # other wait's (the hung-adapter rule reads that wait); one that stalled has waited.
    return await ctx.wait_ended(stream, 0.0 if seen and not moved else budget)


def settle_time(policy: ClientPolicy) -> float:
    """How long to keep watching after the outcome, so a wrongful retry can show up."""
    return max(0.1, 2 * policy.backoff.envelope(1)[1] + 0.05)


def waited_the_hint(wait: Wait, hint: float, want: str, seen: str, noise: Noise) -> Outcome:
    """A retry waited at least the server's Retry-After ``hint``. The flaw is the hint
    ignored: a wait half the hint short is surely that."""
    decision = decide(wait, hint, math.inf, hint / 2)
    if decision == "unsure":
        return Outcome.unsure(want, seen, noise.headline())
    return Outcome.passed(want, seen) if decision == "in" else Outcome.failed(want, seen)


def retrying_or_ended(ctx: CaseContext, stream: str = "s1") -> bool:
    """The client announced a retry, or the stream ended: the first attempt has failed."""
    return ctx.deliveries.ended(stream) or any(
        d.kind == "state" and d.state == "retrying" and d.stream == stream
        for d in ctx.deliveries.all()
    )


REFUSED_WINDOW = 0.1  # longest the proxy refuses connections when the client reports nothing


def refused_applies(policy: ClientPolicy, transport: str) -> str | None:
    """Refused-connection cases need retries that outlast the refusal window."""
    if policy.max_attempts is None:
        return None
    span = sum(policy.backoff.envelope(k)[0] for k in range(1, policy.max_attempts))
    if span >= 3 * REFUSED_WINDOW:
        return None
    return (
        f"the profile's retries span at least {span:.3f}s, too short to outlast a "
        f"{REFUSED_WINDOW}s refusal window reliably"
    )


def refused_then_online(request: Callable[[CaseContext], StreamRequest], events: int = 5) -> Play:
    """Start a stream while the proxy refuses connections; back online once the client
    says it will retry (a client reporting no states gets REFUSED_WINDOW), so a fast
    client never sits out its breaker. The deadline allows for one cooldown."""

    async def play(ctx: CaseContext) -> None:
        ctx.server.script(PATH, Stream(events=events))
        ctx.proxy.offline()
        ctx.start(request(ctx))
        await ctx.wait_until(lambda: retrying_or_ended(ctx), REFUSED_WINDOW)
        ctx.proxy.online()
        await ctx.wait_ended("s1", retry_budget(ctx.policy, ctx.policy.breaker.threshold + 1))

    return play


def one_stream(
    steps: Callable[[ClientPolicy], Sequence[Step]],
    *,
    retries: int = 0,
    waits: Callable[[ClientPolicy], float] = lambda p: 0.0,
    faults: Sequence[Fault] = (),
    settle: bool = False,
    progress: int = 0,
    **request_changes: object,
) -> Play:
    """Play one stream against a scripted endpoint and wait for its outcome.

    ``progress``: the wait's deadline runs from the stream's latest chunk, for at most
    that many chunks (see ``wait_ended_progressing``)."""

    async def play(ctx: CaseContext) -> None:
        ctx.server.script(PATH, *steps(ctx.policy))
        if faults:
            ctx.proxy.next_connections(*faults)
        ctx.start(request_for(ctx.transport, **request_changes))
        budget = retry_budget(ctx.policy, retries, waits(ctx.policy))
        if progress:
            await wait_ended_progressing(ctx, "s1", budget, progress)
        else:
            await ctx.wait_ended("s1", budget)
        if settle:
            await ctx.hold(settle_time(ctx.policy))

    return play
