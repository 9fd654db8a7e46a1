"""SC-COMMIT: commit after the first chunk.

Before the first chunk reaches the consumer a failed attempt may be retried;
after it the stream belongs to the caller: never retried, never replaced, and a
failure reaches the consumer (seeds/002). A stream that carries ids may be
resumed with Last-Event-ID, which must continue it exactly; the resume is judged on
the ledger (the header, what each attempt sent) and the delivered data. Row k gets
SC-COMMIT-(2k-1) for GET and SC-COMMIT-2k for POST.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from conformance._case import Case, Level, Outcome, register
from conformance._checks import (
    all_of,
    answer,
    delivered_exactly,
    ended_with_done,
    ended_with_error,
    resumed_from_delivered,
)
from conformance._evidence import Evidence
from conformance.cases._common import Transport, one_stream
from conformance.reference._config import ClientPolicy
from fake_servers import Fault, Step, Stream

LIBRARY = "seeds/002 §Streaming responses (the commit point)"
RESUME = "WHATWG HTML §9.2 (Last-Event-ID); seeds/002 (never repeat delivered data)"
EVENTS = 6
K = 2  # the chunk after which mid-stream failures strike


@dataclass(frozen=True)
class _Row:
    title: str
    requirement: str
    steps: Callable[[ClientPolicy], Sequence[Step]]
    check: Callable[[Evidence, ClientPolicy], Outcome]
    source: str = LIBRARY
    retries: int = 0
    faults: tuple[Fault, ...] = ()
    resume: bool = False


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


def _surfaced_after(
    count: int, kinds: tuple[str, ...] | None = None
) -> Callable[[Evidence, ClientPolicy], Outcome]:
    def check(ev: Evidence, policy: ClientPolicy) -> Outcome:
        first = [e.data for e in ev.attempts[0].data_events][:count] if ev.attempts else []
        return all_of(
            _single_attempt(ev),
            delivered_exactly(ev, first),
            ended_with_error(ev, kinds),
        )

    return check


def _resumed_exactly(ev: Evidence, policy: ClientPolicy) -> Outcome:
    """Judged on the ledger's Last-Event-ID and the delivered data, not on the ids the
    client reports: resuming right is what counts, showing ids is SC-SSE-13's."""
    return all_of(
        resumed_from_delivered(ev), ended_with_done(ev), delivered_exactly(ev, _in_order(ev))
    )


ROWS: list[_Row] = [
    _Row(
        "A failure before the headers is retried, and the answer delivered once",
        "A client MUST retry a failure before the headers and deliver the answer exactly once.",
        lambda p: [Stream(events=EVENTS)],
        _retried_before_commit,
        retries=1,
        faults=(Fault.reset(0),),
    ),
    _Row(
        "A failure after the headers, before the first chunk, is retried",
        "A client MUST treat a failure before the first chunk as uncommitted: retry it and "
        "deliver the answer exactly once.",
        lambda p: [Stream(events=0, end="abort"), Stream(events=EVENTS)],
        _retried_before_commit,
        retries=1,
    ),
    _Row(
        f"A failure after chunk {K} is surfaced, not retried",
        "After the first chunk a client MUST NOT retry or replace the stream: the consumer "
        "keeps the chunks it got, once, and receives the error.",
        lambda p: [Stream(events=K, end="abort"), Stream(events=EVENTS)],
        _surfaced_after(K),
    ),
    _Row(
        "A failure in the middle of a line is surfaced without a partial chunk",
        "A client MUST NOT deliver a partial event when the connection breaks mid-line, and "
        "MUST NOT retry after the first chunk.",
        lambda p: [Stream(events=K, end="abort_mid_line"), Stream(events=EVENTS)],
        _surfaced_after(K),
    ),
    _Row(
        "A failure after the last chunk, before the terminal event, is an error",
        "A client MUST report a stream that breaks before its terminal event as failed, "
        "never as complete, and MUST NOT retry it.",
        lambda p: [Stream(events=EVENTS, end="abort"), Stream(events=EVENTS)],
        _surfaced_after(EVENTS),
    ),
    _Row(
        f"A clean end after chunk {K} without the terminal event is a truncation",
        "A client MUST report a stream that ends cleanly without its terminal event as "
        "truncated, never as complete.",
        lambda p: [Stream(events=K, end="truncate"), Stream(events=EVENTS)],
        _surfaced_after(K, ("truncated",)),
    ),
    _Row(
        "A clean end after the last chunk without the terminal event is a truncation",
        "A client MUST NOT report a stream that lacks its terminal event as complete, even "
        "when every chunk arrived.",
        lambda p: [Stream(events=EVENTS, end="truncate"), Stream(events=EVENTS)],
        _surfaced_after(EVENTS, ("truncated",)),
    ),
    _Row(
        "A resumed stream continues exactly after Last-Event-ID",
        "A client that resumes a stream carrying ids MUST send the last delivered id as "
        "Last-Event-ID and deliver exactly the server's sequence: no duplicate, no gap.",
        lambda p: [Stream(events=3, ids=True, end="abort"), Stream(events=EVENTS, ids=True)],
        _resumed_exactly,
        source=RESUME,
        retries=1,
        resume=True,
    ),
    _Row(
        "A resumed stream that the server replays from the start is not duplicated",
        "A client that resumes a stream carrying ids MUST NOT deliver an event it already "
        "delivered, even when the server ignores Last-Event-ID and replays.",
        lambda p: [
            Stream(events=3, ids=True, end="abort"),
            Stream(events=EVENTS, ids=True, resume=False),
        ],
        _resumed_exactly,
        source=RESUME,
        retries=1,
        resume=True,
    ),
]


def _resume_applies(policy: ClientPolicy, transport: str) -> str | None:
    return None if policy.resume else "the profile does not resume with Last-Event-ID"


def _make(row: _Row, transport: Transport, case_id: str) -> Case:
    needs = frozenset({transport, "resume"} if row.resume else {transport})
    case = Case(
        id=case_id,
        title=row.title,
        level=Level.MUST,
        requirement=row.requirement,
        source=row.source,
        play=one_stream(row.steps, retries=row.retries, faults=row.faults, settle=True),
        check=row.check,
        transport=transport,
        needs=needs,  # type: ignore[arg-type]
    )
    return replace(case, applies=_resume_applies) if row.resume else case


for _n, _row in enumerate(ROWS, start=1):
    register(_make(_row, "get", f"SC-COMMIT-{2 * _n - 1}"))
    register(_make(_row, "post", f"SC-COMMIT-{2 * _n}"))

__all__: list[str] = []
