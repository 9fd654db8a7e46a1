"""SC-STALL: silent streams, legitimate gaps and keepalive-only streams.

The seed article's heartbeat check: a stream silent for longer than the timeout
is abandoned, the timer is looked at every check interval, and the stalled
state is shown to the user. What resets the timer is the profile's idle rule:
every byte (the article) or every data chunk (the seed library's pipeline).
Each row is registered for GET (the odd id) and POST (the even id) where it is written.

Every case runs a stall timeout shorter than the profile's test timing (``tune``)
and keeps the profile's relations: the check interval's ratio to the timeout,
a legitimate gap of 2/3 of the timeout (the seed's 60 s phase under 90 s), and a
first-chunk timeout below it. Windows are measured at the server, from the last
byte (or data event) it sent to the moment it saw the connection close; see
docs/timing-stall.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from conformance._case import Capability, Outcome
from conformance._checks import (
    REACTION_DEADLINE,
    all_of,
    answer,
    delivered_exactly,
    ended_with_done,
    ended_with_error,
    judged,
)
from conformance._evidence import Evidence
from conformance.cases._common import Row, one_stream, register_row
from conformance.reference import ClientPolicy, IdleRule
from conformance.timing._noise import Noise
from conformance.timing._waits import Wait, decide, span
from fake_servers import Attempt, Stall, Step, Stream

__all__ = [
    "abandoned_in_window",
    "gave_up_at",
    "kept_through_silence",
    "last_activity",
    "received_by",
    "stalled_state_before_close",
]

SEED = 'seeds/000 §"Connection Open" Is Not "Data Flowing" (the 90-second silent-stream timeout)'
SURFACE = 'seeds/000 §"Connection Open" Is Not "Data Flowing" ("surface this state in the UI")'
COMMIT = "seeds/000 (the silent-stream timeout); seeds/002 §Streaming responses (the commit point)"
IDLE = (
    'seeds/000 ("lastHeartbeat is updated on every byte"); seeds/002 §Streaming responses '
    '("for an idle timeout between chunks, reset a timer per chunk")'
)
EVENTS = 4
K = 2  # data events before a mid-stream silence

# Stall timeouts the cases run at (the profile's test timing is 1.8 s). Cases that
# only bound an abandonment from below (strict) and above (with slack) can run
# short; cases where the client must NOT abandon keep a 0.3 s margin between the
# longest legitimate silence and the timeout.
SHORT_TIMEOUT = 0.3
GAP_TIMEOUT = 0.9  # the legitimate gap is 0.6 s: 0.3 s below the timeout
KEEPALIVE_TIMEOUT = 0.45  # keepalives every 0.15 s: 0.3 s below the timeout
LEGIT_GAP = 2 / 3  # the seed's 60 s research phase under its 90 s timeout
KEEPALIVE_FRACTION = 1 / 3
# Under rule "bytes", the keepalive-only stretch outlasts the latest moment a
# client judging by data would abandon (timeout + interval) by this much.
KEEPALIVE_EXTRA = 0.2
# A client judging by data may start its timer when it starts connecting, before
# the server sees the request; the lower bound allows for that connect.
CONNECT_ALLOWANCE = 0.1
STALL: frozenset[Capability] = frozenset({"stall"})


# -- pure helpers (the kit's judgement) -------------------------------------------


def last_activity(attempt: Attempt, rule: IdleRule, until: float) -> float:
    """When the server last sent what resets a client's idle timer under ``rule``.

    Args:
        attempt: The attempt as the ledger recorded it.
        rule: "bytes" (headers, comments and events count) or "data" (data events only).
        until: Only what was sent at or before this moment counts.

    Returns:
        The latest such moment; before any, the request's arrival less
        ``CONNECT_ALLOWANCE`` (a timer may start when the client starts connecting).
    """
    times = [t for t in _resets(attempt, rule) if t <= until]
    return max(times) if times else attempt.arrived_at - CONNECT_ALLOWANCE


def _resets(attempt: Attempt, rule: IdleRule) -> list[float]:
    """When the server sent what resets a client's idle timer under ``rule``."""
    times = [e.at for e in attempt.events if rule == "bytes" or e.kind == "data"]
    if rule == "bytes" and attempt.headers_at is not None:
        times.append(attempt.headers_at)
    return times


def _what(rule: IdleRule) -> str:
    return "byte" if rule == "bytes" else "data event"


def _silence(
    attempt: Attempt, policy: ClientPolicy, noise: Noise, received_by: float | None = None
) -> Wait | None:
    """The silence between the last timer-resetting send and the close, as an interval
    (``conformance.timing.span``); None if the client did not close the attempt.
    ``received_by``: the latest the client can have had that send (``received_by``)."""
    if attempt.end != "client_closed" or attempt.ended_at is None:
        return None
    last = last_activity(attempt, policy.idle_rule, attempt.ended_at)
    silence = span(last, attempt.ended_at, noise)
    # The close is a timer on the client's loop, often a check that sleeps its interval
    # again after each look: a stall anywhere in the silence, not only near its end,
    # makes every later check late (CI: a correct client closed 371 ms past its window
    # after a 316 ms stall mid-silence). So the least also allows the worst lag of each
    # loop over the whole silence.
    whole = silence.measured - noise.upper_slack((last, attempt.ended_at))
    silence = replace(silence, least=min(silence.least, whole))
    if received_by is None or received_by <= last:
        return silence
    # Bytes can cross a path no probe sees (a browser's network process) long after the
    # server's stamp: the silence the client saw can be as short as from its delivery.
    seen = span(received_by, attempt.ended_at, noise)
    return replace(silence, least=min(silence.least, seen.least))


def received_by(ev: Evidence, attempt: Attempt, policy: ClientPolicy, stream: str) -> float | None:
    """When the client handed its consumer the chunk of the last data event ``attempt``
    sent before its close, if that event is the one that last reset the timer: the
    client had its bytes by then. The stream's first attempt only (its chunks, in
    order, are the attempt's data events); None when not known. When the head reset it
    last: when the head reached the client's code, if measured (``Noise.head_seen``: a
    browser's network process and renderer held one 90 ms beside 2 CPU burners, and
    SC-STALL-2 failed a page that closed 305 ms after it had the head)."""
    if attempt.ended_at is None or not ev.attempts or ev.attempts[0].seq != attempt.seq:
        return None
    last = last_activity(attempt, policy.idle_rule, attempt.ended_at)
    if last == attempt.headers_at:  # the head last: by when its fetch resolved, if known
        return ev.noise.head_seen(attempt)
    data = [e for e in attempt.events if e.kind == "data" and e.at <= attempt.ended_at]
    if not data or data[-1].at != last:
        return None
    chunks = [d.at for d in ev.of(stream) if d.kind == "chunk"]
    return chunks[len(data) - 1] if len(chunks) >= len(data) else None


def abandoned_in_window(
    attempt: Attempt, policy: ClientPolicy, noise: Noise, received: float | None = None
) -> Outcome:
    """The client closed the silent attempt within [timeout, timeout + interval].

    Measured at the server from the last byte (or data event, by the idle rule) it
    sent: the client can only have received it later, and at the latest when it
    delivered it (``received``, from ``received_by``). The stamps' own lag widens the
    interval (``span``); the flaw is a close a whole check interval off.
    """
    t, i = policy.stall_timeout, policy.stall_check_interval
    want = (
        f"the client closes the silent connection {t:.3f}s to {t + i:.3f}s after the last "
        f"{_what(policy.idle_rule)} the server sent (with the measured harness lag)"
    )
    silence = _silence(attempt, policy, noise, received)
    if silence is None:
        end = attempt.end or "still open when the case ended"
        return Outcome.failed(want, f"attempt {attempt.seq} was not closed by the client ({end})")
    seen = f"closed after {silence.measured:.3f}s of silence"
    return judged(decide(silence, t, t + i, i), want, seen, noise)


def kept_through_silence(ev: Evidence, policy: ClientPolicy) -> Outcome:
    """A stream whose silences stay below the timeout is read to its end on one attempt.

    If the client gave up on it (``gave_up_at``), that is wrong only when the server had
    been silent for less than the timeout (a longer silence means the server's own gap
    stretched under load, and the requirement's premise did not hold), and only surely
    when the loops were not late enough to hide what the server sent (``_missed``).
    """
    want = "the stream is read to its end on one connection, never abandoned"
    first = ev.attempts[0] if ev.attempts else None
    if first is None:
        return Outcome.failed(want, "no attempt reached the server")
    outcome = ev.outcome()
    gave_up = gave_up_at(ev, first)
    if gave_up is not None and (outcome is None or outcome.kind != "done"):
        return _judge_giving_up(first, policy, ev.noise, gave_up, want)
    return all_of(_one_attempt(ev), ended_with_done(ev), delivered_exactly(ev, _in_order(ev)))


def gave_up_at(ev: Evidence, attempt: Attempt, stream: str = "s1") -> float | None:
    """When the client gave up on ``attempt`` for silence: the server saw it close, or,
    when the server had sent everything first (a client loop starved past the stream's
    end leaves its last bytes unread), the client surfaced the "stalled" error. None if
    it did neither."""
    if attempt.end == "client_closed" and attempt.ended_at is not None:
        return attempt.ended_at
    outcome = ev.outcome(stream)
    return outcome.at if outcome is not None and outcome.error == "stalled" else None


def _judge_giving_up(
    attempt: Attempt, policy: ClientPolicy, noise: Noise, gave_up: float, want: str
) -> Outcome:
    t = policy.stall_timeout
    silence = span(last_activity(attempt, policy.idle_rule, gave_up), gave_up, noise)
    if silence.most >= t:
        return Outcome.passed(
            want,
            f"premise not met: the server itself was silent for {silence.measured:.3f}s under load",
        )
    seen = f"abandoned after {silence.measured:.3f}s of silence, below the {t:.3f}s timeout"
    missed, hidden = _missed(attempt, policy, noise, gave_up)
    if hidden >= missed:
        return Outcome.unsure(
            want,
            f"{seen}; the loops were up to {hidden:.3f}s late meanwhile, enough to hide the "
            f"{missed:.3f}s of sends before it",
            noise.headline(),
        )
    return Outcome.failed(want, seen, noise.headline())


def _missed(
    attempt: Attempt, policy: ClientPolicy, noise: Noise, gave_up: float
) -> tuple[float, float]:
    """What a client that rightly saw a whole timeout of silence must have missed, and
    how much of it the harness can hide.

    Such a client read nothing the server sent in the timeout before it gave up: the
    earliest of those sends was ``missed`` seconds before. A loop late by that much
    (the client's own included: an in-process client shares the kit's process, and a
    timeout scaled to a few hundred milliseconds makes a starved core look like
    silence) can hold them all unread, and a tick runs before the read it delays.
    ``hidden``: the measured allowance over that timeout (``Noise.upper_slack``). A
    client that blocks its own loop that long is left undecidable, never passed.
    """
    since = gave_up - policy.stall_timeout
    sends = [t for t in _resets(attempt, policy.idle_rule) if since <= t <= gave_up]
    missed = gave_up - min(sends, default=gave_up)
    return missed, noise.upper_slack((since, gave_up))


def stalled_state_before_close(ev: Evidence, policy: ClientPolicy, stream: str = "s1") -> Outcome:
    """A "stalled" state reached the consumer during the silence, before the close."""
    want = 'a "stalled" state during the silence, before the connection is abandoned'
    first = ev.attempts[0] if ev.attempts else None
    if first is None:
        return Outcome.failed(want, "no attempt reached the server")
    closed = first.ended_at if first.end == "client_closed" else None
    limit = closed if closed is not None else float("inf")
    silent_from = last_activity(first, policy.idle_rule, limit)
    stalled = [d for d in ev.of(stream) if d.kind == "state" and d.state == "stalled"]
    if any(silent_from <= d.at <= limit for d in stalled):
        return Outcome.passed(want, "it was")
    states = ", ".join(ev.states(stream)) or "none"
    return Outcome.failed(want, f"no stalled state in that time; states seen: {states}")


def _one_attempt(ev: Evidence) -> Outcome:
    n = len(ev.attempts)
    want = "a single attempt (no reconnect)"
    if n == 1:
        return Outcome.passed(want, "1 attempt")
    return Outcome.failed(want, f"{n} attempts")


def _in_order(ev: Evidence) -> list[str]:
    ans = answer(ev)
    return [ans[i] for i in sorted(ans)]


# -- checks ---------------------------------------------------------------------


def _check_before_first_chunk(ev: Evidence, policy: ClientPolicy) -> Outcome:
    if not ev.attempts:
        return Outcome.failed("an attempt", "no attempt reached the server")
    first = ev.attempts[0]
    retried = (
        Outcome.passed("a new attempt after the abandoned one", f"{len(ev.attempts)} attempts")
        if len(ev.attempts) >= 2
        else Outcome.failed("a new attempt after the abandoned one", "1 attempt")
    )
    return all_of(
        abandoned_in_window(first, policy, ev.noise, received_by(ev, first, policy, "s1")),
        retried,
        ended_with_done(ev),
        delivered_exactly(ev, _in_order(ev)),
    )


def _check_after_first_chunk(ev: Evidence, policy: ClientPolicy) -> Outcome:
    if not ev.attempts:
        return Outcome.failed("an attempt", "no attempt reached the server")
    first = ev.attempts[0]
    sent = [e.data for e in first.data_events]
    received = received_by(ev, first, policy, "s1")
    return all_of(
        abandoned_in_window(first, policy, ev.noise, received),
        _one_attempt(ev),
        delivered_exactly(ev, sent),
        ended_with_error(ev, ["stalled"]),
    )


def _check_state(ev: Evidence, policy: ClientPolicy) -> Outcome:
    return stalled_state_before_close(ev, policy)


def _check_keepalive(ev: Evidence, policy: ClientPolicy) -> Outcome:
    if policy.idle_rule == "bytes":
        return kept_through_silence(ev, policy)
    return _check_after_first_chunk(ev, policy)


# -- scripts --------------------------------------------------------------------


def _forever_after(after: int) -> Stream:
    return Stream(events=EVENTS, stall=Stall(after=after, seconds=None))


def _gap_steps(p: ClientPolicy) -> list[Step]:
    return [Stream(events=EVENTS, stall=Stall(after=K - 1, seconds=LEGIT_GAP * p.stall_timeout))]


def _keepalive_steps(p: ClientPolicy) -> list[Step]:
    beat = KEEPALIVE_FRACTION * p.stall_timeout
    # Rule "data": keepalives forever, the client must leave. Rule "bytes": a stretch
    # that outlasts a data-judging client's timeout, then the rest of the answer.
    seconds = _keepalive_stretch(p) if p.idle_rule == "bytes" else None
    return [Stream(events=EVENTS, stall=Stall(after=K, seconds=seconds, keepalive=beat))]


def _keepalive_stretch(p: ClientPolicy) -> float:
    return p.stall_timeout + p.stall_check_interval + KEEPALIVE_EXTRA


def _abandon_wait(p: ClientPolicy) -> float:
    return p.stall_timeout + p.stall_check_interval + REACTION_DEADLINE


def _keepalive_wait(p: ClientPolicy) -> float:
    return _keepalive_stretch(p) if p.idle_rule == "bytes" else _abandon_wait(p)


# -- rows -----------------------------------------------------------------------


def _timeout(seconds: float) -> Callable[[ClientPolicy], ClientPolicy]:
    """A shorter stall timeout, the check interval scaled with it (the profile's ratio)."""

    def tune(policy: ClientPolicy) -> ClientPolicy:
        """A stall timeout of a few hundred milliseconds, its check interval in the
        profile's ratio: a case waits out the silence, not minutes of it."""
        ratio = policy.stall_check_interval / policy.stall_timeout
        return replace(policy, stall_timeout=seconds, stall_check_interval=seconds * ratio)

    return tune


def _first_chunk_governs(policy: ClientPolicy, transport: str) -> str | None:
    limit = policy.first_chunk_timeout
    if limit is not None and limit <= policy.stall_timeout:
        return (
            f"its time-to-first-chunk timeout ({limit:.3f}s) ends a silence before the "
            "first chunk first (see SC-RETRY-27)"
        )
    return None


register_row(
    Row(
        title="A stream silent before its first chunk is abandoned in time and retried",
        requirement="A client MUST abandon a connection that stays silent after the headers "
        "for longer than its stall timeout (within one check interval), and MUST retry it: "
        "nothing reached the consumer yet.",
        source=SEED,
        play=one_stream(
            lambda p: [_forever_after(0), Stream(events=EVENTS)], retries=1, waits=_abandon_wait
        ),
        check=_check_before_first_chunk,
        needs=STALL,
        applies=_first_chunk_governs,  # judged on the tuned policy (the runner's rule)
        tune=_timeout(SHORT_TIMEOUT),
    ),
    get_id="SC-STALL-1",
    post_id="SC-STALL-2",
)
register_row(
    Row(
        title=f"A stream silent after chunk {K} is abandoned in time and the stall surfaced",
        requirement="A client MUST abandon a stream that goes silent after its first chunk for "
        "longer than its stall timeout (within one check interval), MUST NOT retry or replace "
        "it, and MUST surface the stall to the consumer as an error.",
        source=COMMIT,
        play=one_stream(
            lambda p: [_forever_after(K), Stream(events=EVENTS)], waits=_abandon_wait, settle=True
        ),
        check=_check_after_first_chunk,
        needs=STALL,
        tune=_timeout(SHORT_TIMEOUT),
    ),
    get_id="SC-STALL-3",
    post_id="SC-STALL-4",
)
register_row(
    Row(
        title="The stalled state is surfaced before the stream is abandoned",
        requirement='A client MUST surface a silent stream as "stalled" to its consumer before '
        "it abandons the connection.",
        source=SURFACE,
        play=one_stream(lambda p: [_forever_after(K)], waits=_abandon_wait),
        check=_check_state,
        needs=STALL,
        tune=_timeout(SHORT_TIMEOUT),
    ),
    get_id="SC-STALL-5",
    post_id="SC-STALL-6",
)
register_row(
    Row(
        title="A gap of 2/3 of the stall timeout is waited out",
        requirement="A client MUST NOT abandon a stream whose silences stay below its stall "
        "timeout (the seed's 60-second research phase under a 90-second timeout).",
        source=SEED,
        play=one_stream(_gap_steps, waits=lambda p: LEGIT_GAP * p.stall_timeout),
        check=kept_through_silence,
        needs=STALL,
        tune=_timeout(GAP_TIMEOUT),
    ),
    get_id="SC-STALL-7",
    post_id="SC-STALL-8",
)
register_row(
    Row(
        title="A keepalive-only stretch is judged by the profile's idle rule",
        requirement='Under the idle rule "bytes" a client MUST NOT abandon a stream that sends '
        'only keepalive comments for longer than its stall timeout; under the rule "data" '
        "it MUST abandon it within one check interval of the timeout and surface the stall.",
        source=IDLE,
        play=one_stream(_keepalive_steps, waits=_keepalive_wait),
        check=_check_keepalive,
        needs=STALL,
        tune=_timeout(KEEPALIVE_TIMEOUT),
    ),
    get_id="SC-STALL-9",
    post_id="SC-STALL-10",
)
