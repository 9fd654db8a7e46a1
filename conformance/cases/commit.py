"""SC-COMMIT: commit after the first chunk.

Before the first chunk reaches the consumer a failed attempt may be retried;
after it the stream belongs to the caller: never retried, never replaced, and a
failure reaches the consumer (seeds/002). A stream that carries ids may be
resumed with Last-Event-ID, which must continue it exactly; the resume is judged on
the ledger (the header, what each attempt sent) and the delivered data. Each row is
registered for GET (the odd id) and POST (the even id) where it is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from conformance._case import Outcome, Play
from conformance._checks import (
    all_of,
    answer,
    delivered_exactly,
    ended_with_done,
    ended_with_error,
    resumed_from_delivered,
    unread_at_the_break,
)
from conformance._evidence import Evidence
from conformance.cases._common import Row, broken, one_stream, register_row, resumed_row
from conformance.reference import ClientPolicy
from fake_servers import Attempt, Fault, Step, Stream

LIBRARY = "seeds/002 §Streaming responses (the commit point)"
RESUME_SOURCE = "WHATWG HTML §9.2 (Last-Event-ID); seeds/002 (never repeat delivered data)"
EVENTS = 6
K = 2  # the chunk after which mid-stream failures strike


def _stream(
    steps: Callable[[ClientPolicy], Sequence[Step]], retries: int = 0, faults: Sequence[Fault] = ()
) -> Play:
    """One stream, then a settle window in which a wrongful retry shows."""
    return one_stream(steps, retries=retries, faults=faults, settle=True)


def _in_order(ev: Evidence) -> list[str]:
    ans = answer(ev)
    return [ans[i] for i in sorted(ans)]


def _retried_before_commit(ev: Evidence, policy: ClientPolicy) -> Outcome:
    return all_of(ended_with_done(ev), delivered_exactly(ev, _in_order(ev)))


def _single_attempt(ev: Evidence) -> Outcome:
    n = len(ev.attempts)
    want = "no new request after the first chunk (1 attempt)"
    if n == 1:
        return Outcome.passed(want, "1 attempt")
    return Outcome.failed(
        want,
        f"{n} attempts",
        *(f"attempt {a.seq}: Last-Event-ID={a.last_event_id}" for a in ev.attempts[1:]),
    )


def left_before_the_commit(ev: Evidence, policy: ClientPolicy) -> Outcome | None:
    """Undecidable when the kit broke the case's premise: the client left the first
    attempt before the server sent it any data, and only after the shortest timeout
    that can govern it (connect, first chunk, stall) had run from its own "connecting"
    state. A loaded server that takes 0.2 s to read the request (a CI worker) lets a
    correct client's first-chunk timer fire: its retry is then before the commit, and
    allowed. Re-judged at a coarser scale, where the timeouts are longer; None when
    the premise held (or the client left sooner than any timeout allows)."""
    first = ev.attempts[0] if ev.attempts else None
    if first is None or first.end != "client_closed" or first.ended_at is None:
        return None
    if any(e.at < first.ended_at for e in first.data_events):
        return None
    began = next((d.at for d in ev.of("s1") if d.kind == "state"), first.arrived_at)
    timeouts = [policy.connect_timeout, policy.stall_timeout]
    if policy.first_chunk_timeout is not None:
        timeouts.append(policy.first_chunk_timeout)
    waited = first.ended_at - began
    if waited < min(timeouts):
        return None
    return Outcome.unsure(
        "a first chunk on the first attempt, before its failure (the case's premise)",
        f"the client left attempt {first.seq} after {waited:.3f}s without a data event (the "
        f"server's first came {_first_data(first)}): its timeout, not the kit's failure",
        ev.noise.headline(),
    )


def _first_data(attempt: Attempt) -> str:
    events = attempt.data_events
    ended = attempt.arrived_at if attempt.ended_at is None else attempt.ended_at
    return f"{events[0].at - ended:+.3f}s after it left" if events else "never"


def _surfaced_after(
    count: int, kinds: tuple[str, ...] | None = None
) -> Callable[[Evidence, ClientPolicy], Outcome]:
    def check(ev: Evidence, policy: ClientPolicy) -> Outcome:
        if (premise := left_before_the_commit(ev, policy)) is not None:
            return premise
        first = [e.data for e in ev.attempts[0].data_events][:count] if ev.attempts else []
        outcome = all_of(
            _single_attempt(ev),
            delivered_exactly(ev, first),
            ended_with_error(ev, kinds),
        )
        if outcome.ok or not ev.attempts:
            return outcome
        return unread_at_the_break(ev, ev.attempts[0]) or outcome

    return check


_CUT = broken(3, ids=True)  # the stream the resume rows break


def _surfaced_row(
    *,
    title: str,
    requirement: str,
    after: int,
    end: Literal["truncate", "abort", "abort_mid_line"],
    kinds: tuple[str, ...] | None = None,
) -> Row:
    """The row of a stream that ``end`` breaks after ``after`` chunks, past the commit
    point: the consumer keeps those chunks and gets the error (of ``kinds``), and no retry
    (which a fresh stream would answer) follows. A break comes ``BREAK_HOLD`` after the
    chunks; a clean end (``truncate``) loses nothing, and comes at once."""
    cut = Stream(events=after, end=end) if end == "truncate" else broken(after, end)
    return Row(
        title=title,
        requirement=requirement,
        source=LIBRARY,
        play=_stream(lambda p: [cut, Stream(events=EVENTS)]),
        check=_surfaced_after(after, kinds),
    )


def _resumed_exactly(ev: Evidence, policy: ClientPolicy) -> Outcome:
    """Judged on the ledger's Last-Event-ID and the delivered data, not on the ids the
    client reports: resuming right is what counts, showing ids is SC-SSE-13's."""
    return all_of(
        resumed_from_delivered(ev), ended_with_done(ev), delivered_exactly(ev, _in_order(ev))
    )


register_row(
    Row(
        title="A failure before the headers is retried, and the answer delivered once",
        requirement="A client MUST retry a failure before the headers and deliver the answer "
        "exactly once.",
        source=LIBRARY,
        play=_stream(lambda p: [Stream(events=EVENTS)], retries=1, faults=(Fault.reset(0),)),
        check=_retried_before_commit,
    ),
    get_id="SC-COMMIT-1",
    post_id="SC-COMMIT-2",
)
register_row(
    Row(
        title="A failure after the headers, before the first chunk, is retried",
        requirement="A client MUST treat a failure before the first chunk as uncommitted: "
        "retry it and deliver the answer exactly once.",
        source=LIBRARY,
        play=_stream(lambda p: [Stream(events=0, end="abort"), Stream(events=EVENTS)], retries=1),
        check=_retried_before_commit,
    ),
    get_id="SC-COMMIT-3",
    post_id="SC-COMMIT-4",
)
register_row(
    _surfaced_row(
        title=f"A failure after chunk {K} is surfaced, not retried",
        requirement="After the first chunk a client MUST NOT retry or replace the stream: the "
        "consumer keeps the chunks it got, once, and receives the error.",
        after=K,
        end="abort",
    ),
    get_id="SC-COMMIT-5",
    post_id="SC-COMMIT-6",
)
register_row(
    _surfaced_row(
        title="A failure in the middle of a line is surfaced without a partial chunk",
        requirement="A client MUST NOT deliver a partial event when the connection breaks "
        "mid-line, and MUST NOT retry after the first chunk.",
        after=K,
        end="abort_mid_line",
    ),
    get_id="SC-COMMIT-7",
    post_id="SC-COMMIT-8",
)
register_row(
    _surfaced_row(
        title="A failure after the last chunk, before the terminal event, is an error",
        requirement="A client MUST report a stream that breaks before its terminal event as "
        "failed, never as complete, and MUST NOT retry it.",
        after=EVENTS,
        end="abort",
    ),
    get_id="SC-COMMIT-9",
    post_id="SC-COMMIT-10",
)
register_row(
    _surfaced_row(
        title=f"A clean end after chunk {K} without the terminal event is a truncation",
        requirement="A client MUST report a stream that ends cleanly without its terminal "
        "event as truncated, never as complete.",
        after=K,
        end="truncate",
        kinds=("truncated",),
    ),
    get_id="SC-COMMIT-11",
    post_id="SC-COMMIT-12",
)
register_row(
    _surfaced_row(
        title="A clean end after the last chunk without the terminal event is a truncation",
        requirement="A client MUST NOT report a stream that lacks its terminal event as "
        "complete, even when every chunk arrived.",
        after=EVENTS,
        end="truncate",
        kinds=("truncated",),
    ),
    get_id="SC-COMMIT-13",
    post_id="SC-COMMIT-14",
)
register_row(
    resumed_row(
        title="A resumed stream continues exactly after Last-Event-ID",
        requirement="A client that resumes a stream carrying ids MUST send the last delivered "
        "id as Last-Event-ID and deliver exactly the server's sequence: no duplicate, no gap.",
        source=RESUME_SOURCE,
        cut=_CUT,
        resumed=Stream(events=EVENTS, ids=True),
        check=_resumed_exactly,
        settle=True,
    ),
    get_id="SC-COMMIT-15",
    post_id="SC-COMMIT-16",
)
register_row(
    resumed_row(
        title="A resumed stream that the server replays from the start is not duplicated",
        requirement="A client that resumes a stream carrying ids MUST NOT deliver an event it "
        "already delivered, even when the server ignores Last-Event-ID and replays.",
        source=RESUME_SOURCE,
        cut=_CUT,
        resumed=Stream(events=EVENTS, ids=True, resume=False),
        check=_resumed_exactly,
        settle=True,
    ),
    get_id="SC-COMMIT-17",
    post_id="SC-COMMIT-18",
)

__all__ = ["left_before_the_commit"]
