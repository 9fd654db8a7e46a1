"""The retry rules: non-retryable statuses, Retry-After, giving up, retry storms."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from conformance._verdict._calls import Inputs, Look
from conformance._verdict._judges_breaker import breaker_threshold, failures_before
from conformance._verdict._result import Finding, make_finding

__all__ = [
    "STORM_ATTEMPTS",
    "STORM_WINDOW",
    "gave_up",
    "non_retryable",
    "retry_after_ignored",
    "storm",
]

STORM_ATTEMPTS = 10  # without a profile's limit: more than this in STORM_WINDOW is a storm
STORM_WINDOW = 60.0


def non_retryable(ins: Inputs) -> Iterator[Finding]:
    matrix = ins.policy.matrix
    for number, looks in ins.calls:
        hits = [
            (prev, nxt)
            for prev, nxt in itertools.pairwise(looks)
            if prev.status is not None
            and prev.status >= 400
            and not matrix.is_retryable(prev.status)
            and prev.status != 408  # RFC 9110 §15.5.9: the client MAY repeat the request
            and prev.a.header("authorization") == nxt.a.header("authorization")
        ]
        if not hits:
            continue
        must = any(prev.status in matrix.never for prev, _ in hits)
        seqs = sorted({s for prev, nxt in hits for s in (prev.seq, nxt.seq)})
        said = ", ".join(f"#{p.seq} got {p.status}, #{n.seq} retried it" for p, n in hits)
        yield make_finding(
            "V-RETRY-NON-RETRYABLE",
            seqs,
            f"{said} (same request, same credentials)",
            level="MUST" if must else "SHOULD",
            call=number,
        )


def retry_after_ignored(ins: Inputs) -> Iterator[Finding]:
    cap = ins.policy.retry_after_cap
    for number, looks in ins.calls:
        for wait in ins.delays(looks):
            prev, nxt, delay = wait.prev, wait.nxt, wait.most
            if prev.hint is None:
                continue
            wanted = min(prev.hint, cap)
            said = (
                f"#{prev.seq} got {prev.status} asking to wait {prev.hint:g} s; #{nxt.seq} "
                f"came {delay:.3f} s later (at least {wanted:g} s expected, cap {cap:g} s)"
            )
            if delay < wanted:  # ``most`` carries the lower-bound slack
                yield make_finding("V-RETRY-AFTER-IGNORED", (prev.seq, nxt.seq), said, call=number)
                continue
            if wait.load_could_lift_past(wanted):  # load only lengthens a wait
                yield make_finding(
                    "V-RETRY-AFTER-IGNORED",
                    (prev.seq, nxt.seq),
                    f"{said}; a retry far sooner, made up to {wait.late_by_load * 1000:.0f} ms "
                    "late by the load the kit measured, would look the same",
                    call=number,
                    undecided=True,
                )


def gave_up(ins: Inputs) -> Iterator[Finding]:
    if ins.idempotent is False:
        return  # not retrying a non-idempotent call is right
    matrix = ins.policy.matrix
    threshold = breaker_threshold(ins)
    for number, looks in ins.calls:
        only = looks[0]
        if len(looks) != 1 or only.state != "failed" or only.committed:
            continue
        status = only.status
        if status is not None and status >= 400 and not matrix.is_retryable(status):
            continue
        if only.hint is not None and only.hint > ins.policy.retry_after_cap:
            continue  # a hint beyond the cap: giving up is honest
        if threshold and failures_before(ins, only) >= threshold - 1:
            continue  # a breaker that just opened rightly stops here
        yield make_finding(
            "V-RETRY-NONE",
            (only.seq,),
            f"#{only.seq} failed ({only.outcome}) before any chunk and was never retried",
            call=number,
        )


def storm(ins: Inputs) -> Iterator[Finding]:
    limit = ins.policy.max_attempts if ins.profile is not None else None
    for number, looks in ins.calls:
        if limit is not None:
            if len(looks) > limit:
                yield make_finding(
                    "V-RETRY-STORM",
                    [look.seq for look in looks],
                    f"{len(looks)} attempts for one call; the profile allows {limit}",
                    call=number,
                )
            continue
        window = STORM_WINDOW * ins.scale
        burst = _densest(looks, window)
        if len(burst) > STORM_ATTEMPTS:
            yield make_finding(
                "V-RETRY-STORM",
                [look.seq for look in burst],
                f"{len(burst)} attempts for one call within {window:g} s "
                f"(more than {STORM_ATTEMPTS})",
                call=number,
            )


def _densest(looks: Sequence[Look], window: float) -> list[Look]:
    best: list[Look] = []
    for i, first in enumerate(looks):
        run = [look for look in looks[i:] if look.a.arrived_at - first.a.arrived_at <= window]
        if len(run) > len(best):
            best = run
    return best
