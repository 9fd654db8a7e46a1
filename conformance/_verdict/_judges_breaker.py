"""The breaker rule (V-BREAKER-NO-PAUSE) and the failure runs a breaker counts."""

from __future__ import annotations

from collections.abc import Iterator

from conformance._verdict._calls import Inputs, Look, late_by_load, lifted_by_load
from conformance._verdict._result import Finding, make_finding
from conformance._verdict._rules import FindingLevel
from conformance.timing._waits import seen_from, span

__all__ = [
    "breaker_threshold",
    "failures_before",
    "hammering",
]


# A pause of at least this share of the cooldown is breaker-like. The rule catches
# hammering (no pause, or a backoff's); the conformance cases judge the cooldown's length.
# CI once measured a correct client's 0.5 s sleep as 0.496 s between the server's stamps.
BREAKER_LIKE = 0.9


def breaker_threshold(ins: Inputs) -> int:
    breaker = ins.policy.breaker
    return breaker.threshold if breaker.kind == "consecutive" else 0


def _counts_for_breaker(look: Look, ins: Inputs) -> bool | None:
    """True: a failure the breaker counts; False: a success (resets it); None: neither."""
    if look.state == "ok":
        return False
    if look.state != "failed" or look.committed:
        return None  # mid-stream failures do not count (seeds/002)
    if look.status is None or look.status < 400:
        return True
    return ins.policy.matrix.is_retryable(look.status)


def failures_before(ins: Inputs, target: Look) -> int:
    run = 0
    for look in ins.looks:
        if look.a.path != target.a.path:
            continue
        if look.seq == target.seq:
            return run
        counted = _counts_for_breaker(look, ins)
        if counted is True:
            run += 1
        elif counted is False:
            run = 0
    return run


def hammering(ins: Inputs) -> Iterator[Finding]:
    threshold = breaker_threshold(ins)
    if not threshold:
        return
    cooldown = ins.policy.breaker.cooldown
    level: FindingLevel = "MUST" if ins.profile is not None else "SHOULD"
    for path in dict.fromkeys(look.a.path for look in ins.looks):
        run: list[Look] = []
        for look in (x for x in ins.looks if x.a.path == path):
            if len(run) >= threshold:
                gap = span(seen_from(run[-1].a), look.a.arrived_at, ins.noise)
                pause = gap.measured  # at most this long
                seqs = [*(x.seq for x in run), look.seq]
                said = (
                    f"{len(run)} consecutive failures on {path}, then #{look.seq} only "
                    f"{pause:.3f} s later (a breaker would pause {cooldown:g} s)"
                )
                if gap.most < BREAKER_LIKE * cooldown:
                    yield make_finding("V-BREAKER-NO-PAUSE", seqs, said, level=level)
                    break
                late = late_by_load(ins.noise, run[-1].a.arrived_at, look.a.arrived_at)
                if lifted_by_load(pause, late, BREAKER_LIKE * cooldown):
                    yield make_finding(
                        "V-BREAKER-NO-PAUSE",
                        seqs,
                        f"{said}; a retry with no pause, made up to {late * 1000:.0f} ms late "
                        "by the load the kit measured, would look the same",
                        level=level,
                        undecided=True,
                    )
                    break
            counted = _counts_for_breaker(look, ins)
            if counted is True:
                run.append(look)
            elif counted is False:
                run = []
