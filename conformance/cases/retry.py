"""SC-RETRY: the retry matrix, network failures, Retry-After and bounded retries.

Each requirement is one row, registered for GET (the odd id) and POST (the even id)
where it is written (``conformance.cases._common.register_row``). SC-RETRY-25/26 are
retired (never reused): they played SC-COMMIT-3/4's script and judged it again.

The seed's matrix (400, 401, 403, 404 and 422 never; 429 and 5xx always) is a rule:
a profile that declares otherwise declares a failure, and is judged by it. The
statuses the seeds leave open (408, 409) are judged by the profile's own matrix: a
client that retries 409 and says so passes; under the seed profiles it must not.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace

from conformance._case import Level, Outcome
from conformance._checks import (
    all_of,
    answer,
    delivered_exactly,
    ended_with_done,
    ended_with_error,
)
from conformance._evidence import Evidence
from conformance.cases._common import (
    Row,
    one_stream,
    refused_applies,
    refused_then_online,
    register_row,
    request_for,
    waited_the_hint,
)
from conformance.reference import ClientPolicy
from conformance.timing._waits import decide, span, wait_between
from fake_servers import Fault, Respond, Stall, Stream

MATRIX = "seeds/000 §The Retryable-Error Matrix"
NETWORK = 'seeds/000 §The Retryable-Error Matrix ("retry on network errors by default")'
PIPELINE = "seeds/002 §Streaming responses (retry and timeout before the first chunk)"
EVENTS = 5

__all__: list[str] = []


def _full_answer(ev: Evidence) -> list[str]:
    ans = answer(ev)
    return [ans[i] for i in sorted(ans)]


def _succeeded_exactly(ev: Evidence) -> Outcome:
    return all_of(ended_with_done(ev), delivered_exactly(ev, _full_answer(ev)))


def _attempts_at_least(ev: Evidence, n: int, why: str) -> Outcome:
    got = len(ev.attempts)
    want = f"at least {n} attempts ({why})"
    if got >= n:
        return Outcome.passed(want, f"{got} attempts")
    return Outcome.failed(want, f"{got} attempt(s)")


# -- never retried -----------------------------------------------------------


def _declared(policy: ClientPolicy, status: int, seed_retries: bool) -> str:
    """A note for the expected side when the profile's matrix departs from the seed's."""
    if policy.matrix.is_retryable(status) == seed_retries:
        return ""
    says = "retries" if not seed_retries else "does not retry"
    return f" (the profile declares it {says} a {status}: the seed's matrix decides)"


def _not_retried(ev: Evidence, status: int, note: str = "", *, never: bool = True) -> Outcome:
    attempts = len(ev.attempts)
    once = (
        Outcome.passed(f"exactly 1 request for a {status}{note}", "1 request")
        if attempts == 1
        else Outcome.failed(
            f"exactly 1 request for a {status}: it is {'never' if never else 'not'} retried{note}",
            f"{attempts} requests",
            *(f"attempt {a.seq} got {a.status}" for a in ev.attempts),
            # A retry was sent: no lateness of the kit explains it, unless the client's
            # own silence timer gave up on an answer a starved server sent late (CI: a
            # 400 sent 260 ms late met a 200 ms timer); the runner then decides.
            sure=attempts > 1 and not ev.timer_fired,
        )
    )
    return all_of(
        once,
        ended_with_error(ev, ["non_retryable_status"], status=status),
        delivered_exactly(ev, []),
    )


def _retried_until_done(ev: Evidence, status: int, note: str = "") -> Outcome:
    return all_of(
        _attempts_at_least(ev, 3, f"two {status}s, then a stream{note}"), _succeeded_exactly(ev)
    )


def _no_retry(status: int) -> Row:
    def check(ev: Evidence, policy: ClientPolicy) -> Outcome:
        return _not_retried(ev, status, _declared(policy, status, seed_retries=False))

    return Row(
        title=f"{status} is not retried",
        requirement=(
            f"A client MUST NOT retry a {status} response, and MUST surface it to the "
            "consumer as a non-retryable error carrying the status."
        ),
        source=MATRIX,
        play=one_stream(lambda p: [Respond(status=status)], settle=True),
        check=check,
    )


# -- retried until success -----------------------------------------------------


def _retried(status: int) -> Row:
    def check(ev: Evidence, policy: ClientPolicy) -> Outcome:
        return _retried_until_done(ev, status, _declared(policy, status, seed_retries=True))

    return Row(
        title=f"{status} is retried until success",
        requirement=(
            f"A client MUST retry a {status} response and deliver the stream that a "
            "later attempt returns, exactly once."
        ),
        source=MATRIX,
        play=one_stream(
            lambda p: [Respond(status=status), Respond(status=status), Stream(events=EVENTS)],
            retries=2,
        ),
        check=check,
    )


register_row(_no_retry(400), get_id="SC-RETRY-1", post_id="SC-RETRY-2")
register_row(_no_retry(401), get_id="SC-RETRY-3", post_id="SC-RETRY-4")
register_row(_no_retry(403), get_id="SC-RETRY-5", post_id="SC-RETRY-6")
register_row(_no_retry(404), get_id="SC-RETRY-7", post_id="SC-RETRY-8")
register_row(_no_retry(422), get_id="SC-RETRY-9", post_id="SC-RETRY-10")
register_row(_retried(429), get_id="SC-RETRY-11", post_id="SC-RETRY-12")
register_row(_retried(503), get_id="SC-RETRY-13", post_id="SC-RETRY-14")
register_row(_retried(500), get_id="SC-RETRY-15", post_id="SC-RETRY-16")
register_row(_retried(502), get_id="SC-RETRY-17", post_id="SC-RETRY-18")
register_row(_retried(504), get_id="SC-RETRY-19", post_id="SC-RETRY-20")


# -- as the profile's matrix says -------------------------------------------------

PROFILE_MATRIX = (
    "seeds/000 §The Retryable-Error Matrix (4xx never retried) and seeds/002 §Streaming "
    "responses (408 retried): the seeds disagree, so the profile's retry matrix decides"
)


def _as_declared(status: int, meaning: str) -> Row:
    def steps(policy: ClientPolicy) -> list[Respond | Stream]:
        if policy.matrix.is_retryable(status):
            return [Respond(status=status), Respond(status=status), Stream(events=EVENTS)]
        return [Respond(status=status)]

    def check(ev: Evidence, policy: ClientPolicy) -> Outcome:
        if policy.matrix.is_retryable(status):
            return _retried_until_done(ev, status, " (the profile declares it retried)")
        return _not_retried(ev, status, " (the profile declares it not retried)", never=False)

    return Row(
        title=f"{status} ({meaning}) is handled as the profile's matrix declares",
        requirement=(
            f"A client MUST retry a {status} response if its profile's retry matrix lists "
            "it (delivering the later attempt's stream exactly once), and otherwise MUST NOT "
            "retry it and MUST surface it as a non-retryable error carrying the status."
        ),
        source=PROFILE_MATRIX,
        play=lambda ctx: one_stream(
            steps, retries=2 if ctx.policy.matrix.is_retryable(status) else 0, settle=True
        )(ctx),
        check=check,
    )


# The seeds disagree on a 408 (seeds/000: no 4xx; seeds/002: retried), so a profile may
# declare either. They agree on a 409: a conflict repeats itself, whatever a library's
# own profile says (the stainless SDKs retry it), so its row is the seed's.
register_row(_as_declared(408, "Request Timeout"), get_id="SC-RETRY-39", post_id="SC-RETRY-40")
register_row(_no_retry(409), get_id="SC-RETRY-41", post_id="SC-RETRY-42")


# -- network failures ----------------------------------------------------------

SEND_LATENCY_SLACK = 0.1  # the client's request can reach the server this long after it sent
RETRY_AFTER_TEST_CAP = 0.3  # far above any backoff at test timing (<= 0.1 s)

register_row(
    Row(
        title="Connection refused is retried",
        requirement="A client MUST retry when the connection is refused, and deliver the "
        "stream once the server is reachable again.",
        source=NETWORK,
        play=refused_then_online(lambda ctx: request_for(ctx.transport)),
        check=lambda ev, p: _succeeded_exactly(ev),
        applies=refused_applies,
    ),
    get_id="SC-RETRY-21",
    post_id="SC-RETRY-22",
)


def _check_reset_before_headers(ev: Evidence, policy: ClientPolicy) -> Outcome:
    conns = ev.connections
    reset_seen = (
        Outcome.passed("the first connection was reset")
        if conns and conns[0].fault
        else Outcome.failed("the first connection was reset by the proxy", "no reset connection")
    )
    more = (
        Outcome.passed("a second connection after the reset")
        if len(conns) >= 2
        else Outcome.failed("a second connection after the reset", f"{len(conns)} connection(s)")
    )
    return all_of(reset_seen, more, _succeeded_exactly(ev))


register_row(
    Row(
        title="A reset before the headers is retried",
        requirement="A client MUST retry when the connection is reset before any response byte.",
        source=NETWORK,
        play=one_stream(lambda p: [Stream(events=EVENTS)], retries=1, faults=[Fault.reset(0)]),
        check=_check_reset_before_headers,
    ),
    get_id="SC-RETRY-23",
    post_id="SC-RETRY-24",
)


def _ttfc_applies(policy: ClientPolicy, transport: str) -> str | None:
    return None if policy.first_chunk_timeout else "the profile has no time-to-first-chunk timeout"


def _check_ttfc(ev: Evidence, policy: ClientPolicy) -> Outcome:
    limit = policy.first_chunk_timeout or 0.0
    first = ev.attempts[0] if ev.attempts else None
    if first is None or first.ended_at is None or first.end != "client_closed":
        return Outcome.failed(
            f"the client abandons the silent first attempt after {limit:.3f}s",
            "the first attempt was not closed by the client" if first is not None else "no attempt",
        )
    waited = span(first.arrived_at, first.ended_at, ev.noise)
    # The client's timer starts when it sends, before the server records the arrival,
    # so "too early" needs slack for connecting and sending: up to half the timeout
    # (0.1 s at test timing; measured 1-10 ms under load). The upper bound catches the
    # client without the timeout (its stall watchdog abandons the attempt much later):
    # half the timeout late is that flaw's least.
    early = min(SEND_LATENCY_SLACK, limit / 2)
    want = (
        f"the silent first attempt abandoned after {limit:.3f}s (less the send latency, "
        "plus the measured harness lag)"
    )
    seen = f"abandoned after {waited.measured:.3f}s"
    decision = decide(waited, limit - early, limit, limit / 2)
    if decision == "unsure":
        return Outcome.unsure(want, seen, ev.noise.headline())
    if decision == "out":
        return Outcome.failed(want, seen, ev.noise.headline())
    return all_of(_attempts_at_least(ev, 2, "the first timed out"), _succeeded_exactly(ev))


register_row(
    Row(
        title="A time-to-first-chunk timeout is retried",
        requirement=(
            "A client with a time-to-first-chunk timeout MUST abandon an attempt whose first "
            "chunk has not arrived in time, and retry it."
        ),
        source=PIPELINE,
        play=one_stream(
            lambda p: [
                Stream(events=EVENTS, stall=Stall(after=0, seconds=None)),
                Stream(events=EVENTS),
            ],
            retries=1,
            waits=lambda p: p.first_chunk_timeout or 0.0,
        ),
        check=_check_ttfc,
        applies=_ttfc_applies,
    ),
    get_id="SC-RETRY-27",
    post_id="SC-RETRY-28",
)


# -- Retry-After -----------------------------------------------------------------


# A hint is at least this many times the longest first delay the profile would use on
# its own: a client that ignores it waits at most a third of it (a fixed 1 s retry
# meets a 3 s hint), surely under the half that fails.
HINT_OVER_BACKOFF = 3
# The date form's date lies this much further ahead than its hint. A client subtracts the
# wall clock it reads itself, some time after the server read its own to write the date.
# In virtual time that time is none of the measured wait: when the rounded-up date lay
# just over the hint ahead, a correct client (OpenAI's SDK, beside a second suite) waited
# under the 1 s hint. A client that ignores the date still waits its own backoff, under
# half the hint.
DATE_HEADROOM = 1.0


def _own_delay(policy: ClientPolicy) -> float:
    return policy.backoff.envelope(1)[1]


def _retry_after(
    status: int,
    form: str,
    least: float,
    respond: Callable[[float], Respond],
    *,
    whole: bool,
    cap: float | None = None,
    headroom: float = 0.0,
) -> Row:
    """The hint is ``least`` seconds, or HINT_OVER_BACKOFF times the profile's own first
    delay if that is longer (whole seconds for the seconds and date forms: ``whole``).
    ``cap``: run with the profile's Retry-After cap lowered to this, when the client can
    be configured. Whole-second hints would otherwise cost a full second per case; the
    check reads the cap from the policy, so it holds either way, and a client that
    ignores the header still fails. The server sends ``respond(hint + headroom)``; the
    check asks for the hint. The date form's date is rounded up to its whole second, so
    it never asks for less."""

    def hint(policy: ClientPolicy) -> float:
        seconds = max(least, HINT_OVER_BACKOFF * _own_delay(policy))
        return float(math.ceil(seconds)) if whole else math.ceil(seconds * 1000) / 1000

    def check(ev: Evidence, policy: ClientPolicy) -> Outcome:
        # A profile that ignores hints has no cap to clamp them to: the hint stands.
        cap = policy.retry_after_cap if policy.retry_after else math.inf
        expected = min(hint(policy), cap)
        ignores = "" if policy.retry_after else "; the profile declares it ignores Retry-After"
        if len(ev.attempts) < 2:
            return Outcome.failed(
                f"a retry after at least {expected:.3f}s{ignores}", f"{len(ev.attempts)} attempt(s)"
            )
        wait = wait_between(ev.attempts[0], ev.attempts[1], ev.noise)
        want = (
            f"the retry waits at least {expected:.3f}s (Retry-After {form} of "
            f"{hint(policy):.3f}s{_plus(headroom)}, capped at {cap:.3f}s){ignores}"
        )
        seen = f"waited {wait.measured:.3f}s (at most {wait.most:.3f}s of its own)"
        return all_of(waited_the_hint(wait, expected, want, seen, ev.noise), _succeeded_exactly(ev))

    return Row(
        title=f"Retry-After ({form}) on a {status} is respected",
        requirement=(
            f"A client MUST wait at least the delay a {status} response's {form} asks "
            "for (up to the profile's cap) before retrying."
        ),
        source="RFC 9110 §10.2.3; seeds/000 §The Retryable-Error Matrix (429 and 503)",
        play=one_stream(
            lambda p: [respond(hint(p) + headroom), Stream(events=EVENTS)],
            retries=1,
            waits=lambda p: min(hint(p) + headroom + 1.0, max(p.retry_after_cap, _own_delay(p))),
        ),
        check=check,
        tune=None if cap is None else _cap_retry_after(cap),
        tune_optional=True,
    )


def _plus(headroom: float) -> str:
    return f" and {headroom:g}s of headroom" if headroom else ""


def _cap_retry_after(cap: float) -> Callable[[ClientPolicy], ClientPolicy]:
    return lambda p: replace(p, retry_after_cap=min(cap, p.retry_after_cap))


register_row(
    _retry_after(
        429,
        "in seconds",
        1.0,
        lambda h: Respond(status=429, headers=(("retry-after", str(round(h))),)),
        whole=True,
        cap=RETRY_AFTER_TEST_CAP,
    ),
    get_id="SC-RETRY-29",
    post_id="SC-RETRY-30",
)
register_row(
    _retry_after(
        503,
        "as an HTTP date",
        1.0,
        lambda h: Respond(status=503, retry_after_date=h),
        whole=True,
        cap=RETRY_AFTER_TEST_CAP,
        headroom=DATE_HEADROOM,
    ),
    get_id="SC-RETRY-31",
    post_id="SC-RETRY-32",
)
register_row(
    _retry_after(
        429,
        "as retry-after-ms",
        0.3,
        lambda h: Respond(status=429, headers=(("retry-after-ms", str(round(h * 1000))),)),
        whole=False,
    ),
    get_id="SC-RETRY-33",
    post_id="SC-RETRY-34",
)


# -- bounded -----------------------------------------------------------------------


def _bounded_applies(policy: ClientPolicy, transport: str) -> str | None:
    """The limit is what stops the retries: a profile that retries no 502 or 503, or
    allows one attempt, stops for the status (``non_retryable_status``), never the limit."""
    if not policy.max_attempts:
        return "the profile sets no attempt limit"
    if policy.max_attempts < 2:
        return "the profile allows no retry, so no limit is reached"
    if not (policy.matrix.is_retryable(502) and policy.matrix.is_retryable(503)):
        return "the profile does not retry a 502 and a 503"
    return None


def _bounded_steps(policy: ClientPolicy) -> list[Respond]:
    limit = policy.max_attempts or 1
    # The last answer differs, so "the last error surfaced" is observable.
    return [Respond(status=503)] * (limit - 1) + [Respond(status=502)]


def _check_bounded(ev: Evidence, policy: ClientPolicy) -> Outcome:
    limit = policy.max_attempts or 0
    count = len(ev.attempts)
    want = f"exactly {limit} attempts (the profile's limit)"
    bounded = (
        Outcome.passed(want, f"{count}")
        if count == limit
        else Outcome.failed(want, f"{count} attempts")
    )
    return all_of(bounded, ended_with_error(ev, ["gave_up"], status=502))


register_row(
    Row(
        title="Retries stop at the profile's limit and surface the last error",
        requirement=(
            "A client MUST stop after the number of attempts its policy allows and surface "
            "the last error (its status) to the consumer."
        ),
        source="seeds/002 §Streaming responses (maxRetryAttempts); seeds/000",
        play=lambda ctx: one_stream(
            _bounded_steps, retries=(ctx.policy.max_attempts or 1) - 1, settle=True
        )(ctx),
        check=_check_bounded,
        applies=_bounded_applies,
    ),
    get_id="SC-RETRY-35",
    post_id="SC-RETRY-36",
)


# -- the error a user can act on ---------------------------------------------------

EXPIRED = "session expired: sign in again"
EXPIRED_BODY = json.dumps({"error": {"type": "unauthorized", "message": EXPIRED}}).encode()


def _check_message(ev: Evidence, policy: ClientPolicy) -> Outcome:
    outcome = ev.outcome()
    want = f"the error's detail carries the server's message ({EXPIRED!r})"
    if outcome is None or outcome.kind != "error":
        return Outcome.failed(want, "no error reached the consumer")
    if EXPIRED in outcome.detail:
        return Outcome.passed(want, "it does")
    return Outcome.failed(want, f"detail was {outcome.detail[:120]!r}")


register_row(
    Row(
        title="A 401 reaches the consumer with the server's message",
        level=Level.SHOULD,
        requirement=(
            "A client SHOULD surface a non-retryable error with the server's message, so "
            "the application can send the user to sign in or fix their input."
        ),
        source='seeds/000 §The Retryable-Error Matrix ("surface the error, send the user to '
        'login or to fix their input")',
        play=one_stream(
            lambda p: [
                Respond(
                    status=401, body=EXPIRED_BODY, headers=(("content-type", "application/json"),)
                )
            ]
        ),
        check=_check_message,
    ),
    get_id="SC-RETRY-37",
    post_id="SC-RETRY-38",
)
