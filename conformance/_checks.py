"""Pure checks over evidence: each returns an ``Outcome``, never raises, never waits.

These are the kit's judgement. They serve the conformance cases and, where they
need only server-side evidence, the app-level verdict on unchanged code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import replace

from conformance._case import Outcome
from conformance._evidence import Delivery, Evidence
from conformance.reference import ClientPolicy
from conformance.timing._noise import Noise
from conformance.timing._waits import Decision
from fake_servers import Attempt, SentEvent

__all__ = [
    "REACTION_DEADLINE",
    "all_of",
    "answer",
    "answer_chunks",
    "delivered_exactly",
    "ended_with_done",
    "ended_with_error",
    "http_attempts",
    "judged",
    "name_endings",
    "reaction_resolution",
    "resumed_from_delivered",
    "same_data",
    "unread_at_the_break",
]

# How long a case's play waits for a reaction it needs before going on. A deadline,
# not a verdict: the checks judge what happened from the records.
REACTION_DEADLINE = 0.5


def reaction_resolution(policy: ClientPolicy) -> float:
    """The lateness that makes a reaction (a close, a reconnect) a flaw rather than
    noise: the profile's own check interval (10 s at the seeds' numbers, 0.2 s at
    test timing), which scales with the timing like every other duration."""
    return policy.stall_check_interval


def judged(decision: Decision, want: str, seen: str, noise: Noise) -> Outcome:
    """The outcome of a timing decision: the noise headline joins every non-pass."""
    if decision == "in":
        return Outcome.passed(want, seen)
    if decision == "out":
        return Outcome.failed(want, seen, noise.headline())
    return Outcome.unsure(
        want, f"{seen} (undecidable: the measured noise is too large)", noise.headline()
    )


def http_attempts(ev: Evidence, path: str | None = None) -> tuple[Attempt, ...]:
    """Attempts that reached the script (not rejected before it), in arrival order."""
    return tuple(a for a in ev.attempts if (path is None or a.path == path))


def answer(ev: Evidence) -> dict[int, str]:
    """The server's answer by event index, as sent across all attempts."""
    out: dict[int, str] = {}
    for a in ev.attempts:
        for e in a.data_events:
            out.setdefault(e.index, e.data)
    return out


def same_data(got: str, sent: str) -> bool:
    """A delivered chunk is the event the server sent: the same text or, from a client
    that hands its application the parsed JSON (an SDK's event object, dumped again by
    its adapter), the same JSON value."""
    if got == sent:
        return True
    # Only a dumped object is compared by value: a parser's stray CR, LF or padding
    # around the data (which JSON would tolerate) is still a different chunk.
    if not (got.startswith(("{", "[")) and got.endswith(("}", "]"))):
        return False
    if "\r" in got or "\n" in got or not sent.startswith(("{", "[")):
        return False
    try:
        return bool(json.loads(got) == json.loads(sent))
    except (ValueError, RecursionError):
        return False


def answer_chunks(ev: Evidence, stream: str = "s1") -> list[str]:
    """The data of the chunks the consumer got, less the provider format's own events
    (message_start, the finish chunk: ledger kind ``frame``) that a client handing over
    every event delivers too."""
    return [d.data for d in _answer_deliveries(ev, stream)]


def _answer_deliveries(ev: Evidence, stream: str) -> list[Delivery]:
    """``answer_chunks``, as the deliveries (with their times)."""
    got = list(ev.chunks(stream))
    frames = {e.data for a in ev.attempts for e in a.events if e.kind == "frame"}
    if not frames:
        return got
    return [d for d in got if not any(same_data(d.data, f) for f in frames)]


def delivered_exactly(ev: Evidence, expected: list[str], stream: str = "s1") -> Outcome:
    """The consumer got exactly ``expected``, in order: no duplicate, no gap, no splice."""
    got = answer_chunks(ev, stream)
    want = f"exactly {len(expected)} chunk(s), the server's sequence, each once"
    if len(got) == len(expected) and all(map(same_data, got, expected)):
        return Outcome.passed(want, f"{len(got)} chunk(s), in order")
    return Outcome.failed(want, _describe_mismatch(got, expected))


def _describe_mismatch(got: list[str], expected: list[str]) -> str:
    for i, (g, e) in enumerate(zip(got, expected, strict=False)):
        if not same_data(g, e):
            dup = " (a duplicate of an earlier chunk)" if g in got[:i] else ""
            return f"{len(got)} chunk(s); chunk {i + 1} was {g!r}{dup}, expected {e!r}"
    if len(got) > len(expected):
        return f"{len(got)} chunk(s): {len(got) - len(expected)} more than the server's sequence"
    return f"{len(got)} chunk(s): the last {len(expected) - len(got)} missing"


def ended_with_done(ev: Evidence, stream: str = "s1") -> Outcome:
    outcome = ev.outcome(stream)
    want = "the stream completes (done)"
    if outcome is not None and outcome.kind == "done":
        return Outcome.passed(want)
    return Outcome.failed(want, _describe_outcome(outcome))


def ended_with_error(
    ev: Evidence, kinds: Iterable[str] | None = None, stream: str = "s1", status: int | None = None
) -> Outcome:
    """The stream ended with an error surfaced to the consumer (of one of ``kinds``)."""
    allowed = tuple(kinds) if kinds is not None else None
    want = "an error surfaced to the consumer" + (f" ({' or '.join(allowed)})" if allowed else "")
    if status is not None:
        want += f" carrying status {status}"
    outcome = ev.outcome(stream)
    if outcome is None or outcome.kind != "error":
        return Outcome.failed(want, _describe_outcome(outcome))
    if allowed is not None and outcome.error not in allowed:
        return Outcome.failed(want, outcome.describe())
    if status is not None and outcome.status != status:
        return Outcome.failed(want, f"error {outcome.error} with status {outcome.status}")
    return Outcome.passed(want, f"error {outcome.error}")


def _describe_outcome(outcome: Delivery | None) -> str:
    if outcome is None:
        return "neither done nor an error reached the consumer before the deadline"
    return outcome.describe()


def all_of(*outcomes: Outcome) -> Outcome:
    """Passes when every outcome passes; reports the first failure."""
    for o in outcomes:
        if not o.ok:
            return o
    return Outcome.passed(
        "; ".join(o.expected for o in outcomes), "; ".join(o.observed for o in outcomes)
    )


# -- resumption, judged from the ledger ------------------------------------------------


def resumed_from_delivered(ev: Evidence, stream: str = "s1") -> Outcome:
    """Every resumed attempt's Last-Event-ID names the last delivered event of those the
    earlier attempts sent.

    Judged from the ledger (the header, the events each attempt sent) and the delivered
    data, never from the ids the client reports: a client that resumes right but hands
    its consumer no ids passes. Delivered chunks are matched to the answer by position,
    as far as they follow it (the exact-delivery check judges the rest). No clocks for
    an event no later attempt sent again: an exec adapter may stamp a delivery after the
    resumed request arrived, so one the consumer got counts as got before the resume (a
    broken stream breaks after its last whole event). An event the resumed attempt or a
    later one sent again (a replay from the start) may have reached the consumer from
    the replay: a break right after a write can discard what the client had not read
    (Chromium's EventSource lost all three events of a reset sent with them), so it
    counts as got before only if delivered before its replay was sent (``_got_before``).
    When the header is right for one reading of the times and not the other, the case's
    premise is in doubt: undecidable, not the client's failure.
    """
    if len(ev.attempts) < 2:
        return Outcome.failed(
            "a resumed attempt after the broken one", f"{len(ev.attempts)} attempt(s)"
        )
    want = "each resumed attempt sends Last-Event-ID: the id of the last event delivered"
    got = _delivered_at(ev, stream)
    sent: list[SentEvent] = []
    for i, (before, att) in enumerate(zip(ev.attempts, ev.attempts[1:], strict=False)):
        sent.extend(e for e in before.data_events if e.id is not None)
        sure, maybe = _got_before(sent, got, ev, i + 1)
        last = max(sure, key=lambda e: e.index, default=None)
        above = [e for e in maybe if last is None or e.index > last.index]
        right = {None if last is None else last.id, *(e.id for e in above)}
        if above and att.last_event_id in right:
            return Outcome.unsure(
                want,
                f"attempt {att.seq}: Last-Event-ID={att.last_event_id}; premise not met: "
                f"whether the consumer got events {_indices(above)} before attempt "
                f"{att.seq} or from its replay is within the measured lag (the break may "
                "have discarded them before the client read them)",
                ev.noise.headline(),
            )
        doubt = unread_at_the_break(ev, before, stream, by=att.arrived_at)
        if last is None and not above:
            failed = f"no event sent before attempt {att.seq} was delivered"
            return doubt or Outcome.failed(want, failed)
        best = max([*sure, *above], key=lambda e: e.index)
        if att.last_event_id != best.id:
            return doubt or Outcome.failed(
                want,
                f"attempt {att.seq}: Last-Event-ID={att.last_event_id}",
                f"the last delivered event sent before it: #{best.index} id={best.id} "
                f"{best.data!r}",
            )
    resumed = ", ".join(f"{a.last_event_id}" for a in ev.attempts[1:])
    return Outcome.passed(want, f"Last-Event-ID={resumed}")


def _got_before(
    sent: list[SentEvent], got: dict[int, float], ev: Evidence, resumed: int
) -> tuple[list[SentEvent], list[SentEvent]]:
    """Of the delivered events in ``sent``: those surely got before attempt
    ``ev.attempts[resumed]`` (sent again by no later attempt, or delivered before the
    replay sent it), and those that may have come from the replay (delivered after its
    send, yet by the resumed request's arrival plus the case's measured slack, within
    which a delivery stamp can trail the delivery). Later deliveries came from it."""
    att = ev.attempts[resumed]
    replayed: dict[int, float] = {}
    for later in ev.attempts[resumed:]:
        for e in later.data_events:
            replayed.setdefault(e.index, e.at)
    limit = att.arrived_at + ev.noise.worst_slack()
    sure: list[SentEvent] = []
    maybe: list[SentEvent] = []
    for e in sent:
        at, again = got.get(e.index), replayed.get(e.index)
        if at is None:
            continue
        # A replay's stamp is taken after its write returned, so the bytes may have left
        # up to the server loop's lag before it: a delivery that close came from either.
        if again is None or at < again - ev.noise.lower_slack(again):
            sure.append(e)
        elif at <= limit:
            maybe.append(e)
    return sure, maybe


def unread_at_the_break(
    ev: Evidence, attempt: Attempt, stream: str = "s1", *, by: float | None = None
) -> Outcome | None:
    """Undecidable when a break may have discarded ``attempt``'s data before the client
    read it: the attempt sent data and was broken (``aborted``), the consumer of
    ``stream`` got no chunk by ``by`` (default: the next attempt's arrival, else the
    stream's outcome), and the measured slack of the way from the server to the
    consumer over the time between the first data and the break (the loops' lag, and
    the attempt's network hop back) is at least that time.

    The cases hold each break a while after the data before it (``BREAK_HOLD``), so a
    client that reads as data comes has it first; a browser's fetch empties its body
    stream's queue when the connection resets, and a page starved past the hold loses
    chunks it never saw, then rightly treats the attempt as failed before its first
    chunk. Quiet, the hold exceeds the slack, so a client that drops data it had time
    to read is judged (and fails); None when the premise held or cannot be in doubt.
    """
    if attempt.end != "aborted" or attempt.ended_at is None:
        return None
    first = attempt.data_events[0].at if attempt.data_events else attempt.first_byte_at
    if first is None:
        return None
    if by is None:
        later = [a.arrived_at for a in ev.attempts if a.arrived_at > attempt.arrived_at]
        end = ev.outcome(stream)
        by = min(later) if later else (end.at if end is not None else math.inf)
    if any(c.at <= by for c in ev.chunks(stream)):
        return None
    # The client's code can read no chunk before it has the response (a browser page: when
    # its fetch resolved, measured). Beside 2 CPU burners a page's fetch resolved 11 ms
    # after the break, 62 ms after the head left the server, while its own loop was quiet.
    seen = ev.noise.head_seen(attempt)
    readable = first if seen is None else max(first, seen)
    had = attempt.ended_at - readable
    slack = ev.noise.upper_slack((first, attempt.ended_at)) + ev.noise.hop_back(attempt)
    if slack < had:
        return None
    since = "the data" if readable == first else "its response reached the client's code"
    return Outcome.unsure(
        f"attempt {attempt.seq}'s chunks reach the consumer before its break (the case's premise)",
        f"no chunk delivered before {_by_what(ev, by)}; the break came {had * 1000:.0f} ms "
        f"after {since}, within the measured slack ({slack * 1000:.0f} ms): it may have "
        "discarded them unread",
        ev.noise.headline(),
    )


def _by_what(ev: Evidence, by: float) -> str:
    nxt = next((a for a in ev.attempts if a.arrived_at == by), None)
    return f"attempt {nxt.seq}" if nxt is not None else "the stream ended"


def _indices(events: list[SentEvent]) -> str:
    return ", ".join(f"#{e.index}" for e in sorted(events, key=lambda e: e.index))


def _delivered_at(ev: Evidence, stream: str) -> dict[int, float]:
    """When the consumer got each of the answer's events, by index: its chunks as far
    as they follow the answer's order."""
    ans = answer(ev)
    out: dict[int, float] = {}
    for index, chunk in zip(sorted(ans), _answer_deliveries(ev, stream), strict=False):
        if not same_data(chunk.data, ans[index]):
            break
        out[index] = chunk.at
    return out


# -- what every failure says: how each stream ended ------------------------------------


def name_endings(outcome: Outcome, ev: Evidence) -> Outcome:
    """A FAIL (or a missed SHOULD) says what the client ended with: each stream's final
    outcome (done, or its error) or that it never ended, unless the text names it already.
    One stream: on the observed line; several: one detail line, shown first. Passes and
    undecidable outcomes are returned as they are."""
    if outcome.ok or outcome.undecidable:
        return outcome
    text = " ".join((outcome.observed, *outcome.details))
    streams = list(dict.fromkeys(d.stream for d in ev.deliveries))
    if not streams:
        return _add_ending(outcome, "no stream delivered anything", single=True)
    single = len(streams) == 1
    groups: dict[str, list[tuple[str, str]]] = {}
    for stream in streams:
        end = ev.outcome(stream)
        if _named(text, stream, end, single):
            continue
        head, detail = _ending(end)
        groups.setdefault(head, []).append((stream, detail))
    if not groups:
        return outcome
    parts = [_group_text(head, members) for head, members in groups.items()]
    return _add_ending(outcome, "; ".join(parts), single=single)


def _named(text: str, stream: str, end: Delivery | None, single: bool) -> bool:
    if f"{stream} ended" in text or f"{stream} never ended" in text:
        return True
    if not single:
        return False
    return _describe_outcome(end) in text if end is not None else "neither done nor" in text


def _ending(end: Delivery | None) -> tuple[str, str]:
    """(what the stream ended with, its detail); ("", "") for a stream that never ended."""
    if end is None:
        return "", ""
    if end.kind == "done":
        return "done", ""
    status = f" status={end.status}" if end.status is not None else ""
    return f"error {end.error}{status}", end.detail


def _group_text(head: str, members: list[tuple[str, str]]) -> str:
    names = [stream for stream, _ in members]
    who = (
        ", ".join(names) if len(names) <= 3 else f"{names[0]}, {names[1]} and {len(names) - 2} more"
    )
    if not head:
        return f"{who} never ended"
    details = {detail for _, detail in members}
    detail = details.pop() if len(details) == 1 else ""
    return f"{who} ended: {head}" + (f" ({detail})" if detail else "")


def _add_ending(outcome: Outcome, ending: str, *, single: bool) -> Outcome:
    if single:
        return replace(outcome, observed=f"{outcome.observed}; {ending}")
    return replace(outcome, details=(ending, *outcome.details))
