"""The app-level verdict: what a client did with the faults, judged from the ledger.

Pure: a function of the ledger's attempts (what the server sent is recorded there:
statuses, headers, Retry-After hints, stalls, stream endings, rejections), what the
app produced (its text or the exception it raised, when the test hands them over)
and, optionally, the profile the client claims. No clock, no IO: the fixture takes
the snapshot and the time; tests judge hand-built records in microseconds.

Attempts are grouped into logical calls without trusting SDK headers: the same
request (method, path, query and body fingerprint, or the same Idempotency-Key)
arriving after the previous attempt of that request failed is a retry of it,
whoever retried (the SDK or a loop around it). Rules that the server cannot see
(a truncated stream accepted, a mid-stream error swallowed) are judged only from
what the app produced, never guessed from retries: a client that surfaces a
mid-stream failure instead of restarting gets no finding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from conformance._profiles import Profile, Timing
from conformance._verdict._calls import Inputs, cancelled_by_app, group_calls, look_at
from conformance._verdict._judges_backoff import envelope, fixed_schedule, no_backoff
from conformance._verdict._judges_breaker import breaker_threshold, hammering
from conformance._verdict._judges_post import body_changed, resent
from conformance._verdict._judges_retry import (
    gave_up,
    non_retryable,
    retry_after_ignored,
    storm,
)
from conformance._verdict._judges_stream import accepted, not_closed, restarted, sat_through
from conformance._verdict._result import AppVerdict, Call, Finding
from conformance._verdict._rules import RULES, FindingLevel, Rule
from conformance.reference import ClientPolicy
from conformance.timing._noise import Noise
from fake_servers._ledger import Attempt
from fake_servers._script import Scenario

__all__ = [
    "RULES",
    "AppVerdict",
    "Call",
    "Finding",
    "FindingLevel",
    "Rule",
    "judge",
]

_SEED = ClientPolicy()  # the seed article's numbers, used when no profile is given


_RULE_FUNCS: tuple[Callable[[Inputs], Iterator[Finding]], ...] = (
    non_retryable,
    retry_after_ignored,
    gave_up,
    storm,
    no_backoff,
    fixed_schedule,
    envelope,
    hammering,
    resent,
    body_changed,
    restarted,
    sat_through,
    not_closed,
    accepted,
)


def _not_judged(ins: Inputs) -> tuple[str, ...]:
    out = []
    if ins.app_output is None and ins.error is None:
        out.append(
            "V-TRUNCATED-ACCEPTED, V-MIDSTREAM-SWALLOWED (pass app_output= or error=: "
            "invisible from the server)"
        )
    if ins.idempotent is None:
        out.append("V-POST-RESENT (pass idempotent=False for a non-idempotent call)")
    if ins.profile is None:
        out.append("V-BACKOFF-ENVELOPE (pass profile=)")
    if ins.stopped_reading_at is None:
        out.append(
            "V-CANCEL-NOT-CLOSED (if the app stops reading early, call app_stopped_reading())"
        )
    if ins.profile is not None and not breaker_threshold(ins):
        out.append(f"V-BREAKER-NO-PAUSE ({ins.profile.key} has no consecutive-failure breaker)")
    return tuple(out)


def judge(
    attempts: Sequence[Attempt],
    *,
    scenario: Scenario | None = None,
    app_output: str | None = None,
    error: BaseException | str | None = None,
    profile: Profile | None = None,
    timing: Timing = "real",
    idempotent: bool | None = None,
    stall_timeout: float | None = None,
    stopped_reading_at: float | None = None,
    judged_at: float | None = None,
    noise: Noise | None = None,
) -> AppVerdict:
    """Judge what a client did with the faults, from the ledger and what the app produced.

    Args:
        attempts: The ledger's attempts (any order; judged in arrival order).
        scenario: The scenario the server ran; only its seed is read, to name the text
            a restarted stream repeated (everything else is in the ledger).
        app_output: The text the app produced, when it returned normally.
        error: The exception (or message) the app raised, if it raised.
        profile: The policy the client claims; without it the seed article's numbers
            judge the matrix, Retry-After cap, breaker and stall timeout, and backoff is
            judged only for unmistakable faults (no wait, a fixed delay).
        timing: The profile's timing the client ran at ("real", or "test" when the
            client was configured with the profile's test numbers).
        idempotent: False when the test says the call must not run twice.
        stall_timeout: The silence (s) after which the app promises to abandon a stream.
        stopped_reading_at: When (on ``fake_servers.now()``) the app stopped reading.
        judged_at: When the snapshot was taken (default: the latest time in the records).
        noise: The harness lag measured meanwhile (``Noise.from_ledger(ledger.lags())``);
            without it the slacks are the stated unmeasured ones (docs/timing.md).

    Returns:
        The verdict: findings (MUST first), the logical calls, and what was not judged.
    """
    ordered = sorted(attempts, key=lambda a: a.seq)
    looks = tuple(look_at(a, cancelled_by_app(a, stopped_reading_at)) for a in ordered)
    groups = group_calls(looks)
    policy = profile.at(timing) if profile is not None else _SEED
    ins = Inputs(
        looks=looks,
        calls=tuple((n, tuple(g.looks)) for n, g in enumerate(groups, start=1)),
        policy=policy,
        profile=profile,
        app_output=app_output,
        error=_describe(error),
        idempotent=idempotent,
        stall_timeout=stall_timeout,
        stopped_reading_at=stopped_reading_at,
        judged_at=judged_at if judged_at is not None else _latest(ordered),
        seed=scenario.seed if scenario is not None else None,
        scale=profile.test_scale if profile is not None and timing == "test" else 1.0,
        noise=noise if noise is not None else Noise(),
    )
    found = [f for rule in _RULE_FUNCS for f in rule(ins)]
    found.sort(key=lambda f: (f.level != "MUST", min(f.attempts, default=0)))
    findings = [f for f in found if not f.undecided]
    calls = tuple(
        Call(
            number=n,
            method=g.looks[0].a.method,
            path=g.looks[0].a.path,
            key=g.label,
            attempts=tuple(look.seq for look in g.looks),
            outcomes=tuple(look.outcome for look in g.looks),
        )
        for n, g in enumerate(groups, start=1)
    )
    return AppVerdict(
        findings=tuple(findings),
        undecided=tuple(f for f in found if f.undecided),
        calls=calls,
        not_judged=_not_judged(ins),
        profile=None if profile is None else f"{profile.key} ({timing} timing)",
        app_output=app_output,
        error=ins.error,
    )


def _describe(error: BaseException | str | None) -> str | None:
    if error is None or isinstance(error, str):
        return error
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 300 else text[:297] + "..."


def _latest(attempts: Sequence[Attempt]) -> float:
    times = [0.0]
    for a in attempts:
        times += [
            a.arrived_at,
            0.0 if a.ended_at is None else a.ended_at,
            *(e.at for e in a.events),
        ]
    return max(times)
