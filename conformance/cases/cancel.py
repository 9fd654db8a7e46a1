"""SC-CANCEL: a consumer that stops reading.

The seed library: "breaking out of the loop closes the underlying stream". A
consumer that stops (breaks out after some chunks, or whose task is cancelled)
must not leave the connection open, reading an answer nobody wants, or retry it.
The server is the judge: it sees the close. Each row is registered for GET (the odd
id) and POST (the even id) where it is written.
"""

from __future__ import annotations

from collections.abc import Callable

from conformance._case import CaseContext, Outcome, Play
from conformance._checks import REACTION_DEADLINE, all_of, judged, reaction_resolution
from conformance._evidence import Evidence
from conformance.cases._common import (
    PATH,
    Row,
    register_row,
    request_for,
    retry_budget,
    settle_time,
)
from conformance.cases.offline import mark, marked
from conformance.reference import ClientPolicy
from conformance.timing._noise import Noise
from conformance.timing._waits import at_once
from fake_servers import Attempt, Gap, Stall, Stream

__all__ = ["closed_by_client_within"]

SOURCE = 'seeds/002 §Streaming responses ("Breaking out of the loop closes the underlying stream")'
K = 2  # chunks the consumer reads before it stops
# A long answer: 40 events 50 ms apart, so a client that reads on after its
# consumer stopped is still reading (or the server still sending) well past the
# bound, and the server's "completed" gives it away.
LONG = Stream(events=40, gap=Gap(seconds=0.05))
CANCEL = "cancel() signalled"
FIRST_CHUNK_DEADLINE = 2.0


def closed_by_client_within(
    attempt: Attempt, at: float, noise: Noise, resolution: float
) -> Outcome:
    """The client closed ``attempt`` at once after ``at`` (``conformance.timing.at_once``).

    Args:
        attempt: The attempt that was open when the consumer stopped.
        at: When the consumer stopped (the kit's mark, or its last chunk).
        noise: The harness lag measured during the case.
        resolution: The lateness that is a flaw.

    Returns:
        The outcome, with how long the close took.
    """
    want = (
        f"the server sees the client close the stream at once (within {resolution / 4:.3f}s, "
        "plus the measured harness lag)"
    )
    if attempt.end != "client_closed" or attempt.ended_at is None:
        ended = {"completed": "the answer was read to its end"}.get(attempt.end or "", attempt.end)
        return Outcome.failed(want, f"attempt {attempt.seq} ended: {ended or 'never'}")
    took = attempt.ended_at - at
    seen = f"closed {max(took, 0.0):.3f}s after the consumer stopped"
    return judged(at_once(at, attempt.ended_at, noise, resolution), want, seen, noise)


def _no_retry(ev: Evidence) -> Outcome:
    want = "no new request after the consumer stopped (1 attempt)"
    n = len(ev.attempts)
    return Outcome.passed(want, "1") if n == 1 else Outcome.failed(want, f"{n} attempts")


def _check_break(ev: Evidence, policy: ClientPolicy) -> Outcome:
    chunks = ev.chunks()
    if len(chunks) < K or not ev.attempts:
        return Outcome.failed(f"{K} chunks reach the consumer", f"{len(chunks)} chunk(s)")
    stopped = chunks[K - 1].at
    closed = closed_by_client_within(ev.attempts[0], stopped, ev.noise, reaction_resolution(policy))
    return all_of(closed, _no_retry(ev))


def _check_cancel(ev: Evidence, policy: ClientPolicy) -> Outcome:
    at = marked(ev, CANCEL)
    if at is None or not ev.attempts:
        return Outcome.failed("a stream open when the consumer was cancelled", "none")
    closed = closed_by_client_within(ev.attempts[0], at, ev.noise, reaction_resolution(policy))
    return all_of(closed, _no_retry(ev))


async def _play_break(ctx: CaseContext) -> None:
    ctx.server.script(PATH, LONG)
    ctx.start(request_for(ctx.transport, cancel_after=K))
    await ctx.wait_until(lambda: _attempts_ended(ctx), retry_budget(ctx.policy, 0))
    # The server can see the close before the consumer's own report of its last chunk
    # reaches the kit (a page's reports cross a socket on a loaded loop): wait for the
    # stream to end too, or the check counts the chunks before they have all arrived.
    await ctx.wait_ended("s1", retry_budget(ctx.policy, 0))
    await ctx.hold(settle_time(ctx.policy))


def _play_cancel(ready: Callable[[CaseContext], bool], *steps: Stream) -> Play:
    async def play(ctx: CaseContext) -> None:
        ctx.server.script(PATH, *steps)
        ctx.start(request_for(ctx.transport))
        await ctx.wait_until(lambda: ready(ctx), FIRST_CHUNK_DEADLINE)
        mark(ctx, CANCEL)
        await ctx.cancel("s1")
        await ctx.wait_until(lambda: _attempts_ended(ctx), 2 * REACTION_DEADLINE)
        await ctx.hold(settle_time(ctx.policy))

    return play


def _attempts_ended(ctx: CaseContext) -> bool:
    attempts = ctx.ledger.attempts()
    return bool(attempts) and all(a.finished for a in attempts)


def _read_k(ctx: CaseContext) -> bool:
    return sum(d.kind == "chunk" and d.stream == "s1" for d in ctx.deliveries.all()) >= K


def _headers_sent(ctx: CaseContext) -> bool:
    return any(a.status is not None for a in ctx.ledger.attempts())


register_row(
    Row(
        title=f"A consumer that breaks out after {K} chunks closes the connection",
        requirement="When its consumer stops reading, a client MUST close the connection "
        "promptly (the server sees it go) and MUST NOT retry it.",
        source=SOURCE,
        play=_play_break,
        check=_check_break,
    ),
    get_id="SC-CANCEL-1",
    post_id="SC-CANCEL-2",
)
register_row(
    Row(
        title="A cancelled consumer mid-stream closes the connection",
        requirement="When its consumer is cancelled mid-stream, a client MUST close the "
        "connection promptly and MUST NOT retry it.",
        source=SOURCE,
        play=_play_cancel(_read_k, LONG),
        check=_check_cancel,
    ),
    get_id="SC-CANCEL-3",
    post_id="SC-CANCEL-4",
)
register_row(
    Row(
        title="A consumer cancelled before the first chunk closes the connection",
        requirement="When its consumer is cancelled while waiting for the first chunk, a "
        "client MUST close the connection promptly and MUST NOT retry it.",
        source=SOURCE,
        play=_play_cancel(
            _headers_sent, Stream(events=4, stall=Stall(after=0, seconds=None)), Stream(events=4)
        ),
        check=_check_cancel,
    ),
    get_id="SC-CANCEL-5",
    post_id="SC-CANCEL-6",
)
