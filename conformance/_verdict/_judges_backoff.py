"""The backoff rules: no wait, a fixed delay without jitter, the profile's envelope."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence

from conformance._verdict._calls import Inputs, Look, RetryWait, late_by_load
from conformance._verdict._judges_breaker import breaker_threshold
from conformance._verdict._result import Finding, make_finding

__all__ = [
    "FIXED_MIN_DELAYS",
    "FIXED_SHARE",
    "FIXED_TOLERANCE",
    "JITTER_BAND",
    "JITTER_MIN_DELAYS",
    "JITTER_MIN_SPAN",
    "MIN_FIXED_DELAY",
    "NO_BACKOFF",
    "NO_BACKOFF_RETRIES",
    "envelope",
    "fixed_schedule",
    "no_backoff",
]

# Three or more retries averaging under 20 ms did not back off. The mean absorbs one
# scheduling hiccup; a full-jitter client (delays drawn from 0) with a base of 0.1 s
# draws three such retries with probability about 0.06**3 / 6 / (0.1 * 0.2 * 0.4) < 0.5 %.
NO_BACKOFF = 0.02
NO_BACKOFF_RETRIES = 3
# Delays within 25 ms (or 2 %) of their median are one fixed delay: scheduling noise
# on a loaded machine stays under it, while jittered exponential delays of retries 1-3
# fall in disjoint ranges (the seed: 0.2-0.3, 0.4-0.6, 0.8-1.2 s) and cannot all fit.
FIXED_TOLERANCE = 0.025
FIXED_MIN_DELAYS = 3  # at least this many, and 3/4 of the delays, at one fixed delay
FIXED_SHARE = 0.75
MIN_FIXED_DELAY = 0.1  # shorter fixed delays are V-BACKOFF-NONE's business
JITTER_MIN_DELAYS = 5  # delays judged inside a profile's envelope before judging jitter
JITTER_BAND = 0.02  # all at one relative position in the envelope: no jitter
JITTER_MIN_SPAN = 0.05  # envelopes narrower than this (s) are not judged for jitter


def _backoff_delays(ins: Inputs, looks: Sequence[Look]) -> list[RetryWait]:
    """Waits the client chose itself: not after a Retry-After hint, not a breaker pause."""
    threshold = breaker_threshold(ins)
    return [
        wait
        for wait in ins.delays(looks)
        if wait.prev.hint is None and not (threshold and wait.n >= threshold)
    ]


def no_backoff(ins: Inputs) -> Iterator[Finding]:
    if ins.profile is not None:
        return  # the profile's envelope judges every delay
    for number, looks in ins.calls:
        delays = _backoff_delays(ins, looks)
        # By ``ceiling``, as fixed_schedule: the server's measured lag in ``most`` would
        # lift a loaded run's zero waits past the 20 ms mean (4 CPU burners: missed).
        waits = [wait.ceiling for wait in delays]
        if len(waits) < NO_BACKOFF_RETRIES:
            continue
        seqs = [looks[0].seq, *(wait.nxt.seq for wait in delays)]
        shown = ", ".join(f"{d * 1000:.0f} ms" for d in waits)
        mean = statistics.fmean(waits)
        if mean < NO_BACKOFF:
            said = f"{len(waits)} retries averaging under {NO_BACKOFF * 1000:.0f} ms after the"
            yield make_finding("V-BACKOFF-NONE", seqs, f"{said} failure: {shown}", call=number)
            continue
        late = _late_by_load(ins, looks)
        if late > 0 and mean - late < NO_BACKOFF:  # load only lengthens a wait
            yield make_finding(
                "V-BACKOFF-NONE",
                seqs,
                f"the retries came {shown} after the failure: retries with no wait, made up "
                f"to {late * 1000:.0f} ms late by the load the kit measured, would look the same",
                call=number,
                undecided=True,
            )


def fixed_schedule(ins: Inputs) -> Iterator[Finding]:
    if ins.profile is not None:
        return  # the envelope (growing with the retry number) and its jitter test judge it
    for number, looks in ins.calls:
        # Each wait as measured from the earliest moment the client could react: the
        # lower bound's slack (the server's lag where it stamped) differs from wait to
        # wait and would spread one fixed delay over more than the band.
        waits = _backoff_delays(ins, looks)
        delays = [wait.ceiling for wait in waits]
        if len(delays) < FIXED_MIN_DELAYS:
            continue
        mid = statistics.median(delays)
        band = max(FIXED_TOLERANCE, 0.02 * mid)
        enough = max(FIXED_MIN_DELAYS, FIXED_SHARE * len(delays))
        seqs = [look.seq for look in looks]
        alike = sum(abs(d - mid) <= band for d in delays)
        if mid >= MIN_FIXED_DELAY and alike >= enough:
            yield make_finding(
                "V-BACKOFF-NO-JITTER",
                seqs,
                f"{alike} of {len(delays)} retries came {mid:.3f} s (within {band * 1000:.0f} "
                "ms) after the failure: a fixed delay, neither growing nor jittered",
                call=number,
            )
            continue
        late = _late_by_load(ins, looks)
        if late > 0 and _fits_one_delay(delays, band + late, enough):
            yield make_finding(
                "V-BACKOFF-NO-JITTER",
                seqs,
                f"the retries came {min(delays):.3f}-{max(delays):.3f} s after the failure: "
                f"one fixed delay made up to {late * 1000:.0f} ms late by the load the "
                "kit measured would look the same, and so would jitter",
                call=number,
                undecided=True,
            )


def _late_by_load(ins: Inputs, looks: Sequence[Look]) -> float:
    """``late_by_load`` over the whole call."""
    return late_by_load(ins.noise, looks[0].a.arrived_at, looks[-1].a.arrived_at)


def _fits_one_delay(delays: Sequence[float], reach: float, enough: float) -> bool:
    """Whether ``enough`` delays fit one fixed delay that load only ever lengthens: all
    at most ``reach`` above the shortest of them."""
    low = min(delays)
    return low >= MIN_FIXED_DELAY and sum(d - low <= reach for d in delays) >= enough


def envelope(ins: Inputs) -> Iterator[Finding]:
    if ins.profile is None:
        return
    backoff = ins.policy.backoff
    for number, looks in ins.calls:
        positions: list[float] = []
        judged: list[int] = []
        for wait in _backoff_delays(ins, looks):
            n, nxt = wait.n, wait.nxt
            low, high = backoff.envelope(n)
            if wait.most < low or wait.least > high:  # each carries its slack
                shown = wait.most if wait.most < low else wait.least
                yield make_finding(
                    "V-BACKOFF-ENVELOPE",
                    (wait.prev.seq, nxt.seq),
                    f"retry {n} (#{nxt.seq}) came {shown:.3f} s after the failure; "
                    f"{ins.profile.key} allows [{low:.3f}, {high:.3f}] s",
                    source=f"{ins.profile.key}: {ins.profile.source}",
                    call=number,
                )
            elif wait.load_could_lift_past(low):  # load only lengthens a wait
                yield make_finding(
                    "V-BACKOFF-ENVELOPE",
                    (wait.prev.seq, nxt.seq),
                    f"retry {n} (#{nxt.seq}) came {wait.most:.3f} s after the failure; "
                    f"{ins.profile.key} allows [{low:.3f}, {high:.3f}] s, and a retry far "
                    f"sooner, made up to {wait.late_by_load * 1000:.0f} ms late by the load "
                    "the kit measured, would look the same",
                    source=f"{ins.profile.key}: {ins.profile.source}",
                    call=number,
                    undecided=True,
                )
            elif high - low >= JITTER_MIN_SPAN:
                positions.append(min(max((wait.ceiling - low) / (high - low), 0.0), 1.0))
                judged.append(nxt.seq)
        # Under the declared jitter positions are uniform: n of them inside one band of
        # width w has probability below n * w**(n-1) (8e-7 for 5 in 0.02).
        if len(positions) >= JITTER_MIN_DELAYS and max(positions) - min(positions) <= JITTER_BAND:
            yield make_finding(
                "V-BACKOFF-NO-JITTER",
                judged,
                f"{len(positions)} delays all at {statistics.median(positions):.0%} of "
                f"their envelope: {ins.profile.key} declares jitter, none was drawn",
                source=f"{ins.profile.key}: {ins.profile.source}",
                call=number,
            )
