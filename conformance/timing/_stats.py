"""The backoff statistics: are measured waits spread as declared jitter spreads them?

Pure functions of measured waits (each an interval, ``conformance.timing.Wait``) and
the range the first delay is declared uniform on: for the jitter case (one first retry
per independent client) and the thundering herd (many clients cut at one instant),
with the scan statistics that bound how bunched uniform jitter can look. Every rule
fails and passes on sure evidence only, so the measured noise can make a check
undecidable, never FAIL (docs/timing-backoff.md).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence

from conformance._case import Figure, FigureSample, Outcome
from conformance.timing._noise import OVERLOAD_P99, Noise, ms
from conformance.timing._waits import Wait, decide, describe_waits

__all__ = [
    "HERD_FLOOR",
    "HERD_OUTLIERS",
    "HERD_RANGE",
    "HERD_RISK",
    "HERD_WINDOW",
    "JITTER_EDGE",
    "JITTER_FLOOR",
    "JITTER_OUTLIERS",
    "JITTER_RANGE",
    "JITTER_RESOLUTION",
    "herd_limit",
    "herd_outcome",
    "jitter_outcome",
    "range_probability",
    "scan_bound",
    "scan_max",
    "too_noisy",
]

# The jitter rules (``jitter_outcome``), as shares of the declared range's span.
JITTER_RANGE = 0.3  # of the span, the waits must spread over (trimmed of outliers)
JITTER_EDGE = 0.5  # some wait in the top half of the range
JITTER_FLOOR = 0.5  # and some in the bottom half
JITTER_RESOLUTION = 0.4  # of the span: the overshoot a broken client shows
JITTER_OUTLIERS = 0.1  # of the waits, on each side, that no rule counts
# The herd (``herd_outcome``): the delays must spread over HERD_RANGE of the jitter
# span, and no window of HERD_WINDOW x the span may hold more of them than uniform
# jitter would put there with probability HERD_RISK.
HERD_RANGE = 0.6
HERD_WINDOW = 0.2
HERD_RISK = 1e-7
# A PASS needs more than HERD_OUTLIERS of the delays surely in the bottom HERD_FLOOR of
# the range (their ``most`` there), as the jitter case needs JITTER_OUTLIERS of its
# waits surely in its bottom JITTER_FLOOR: a ``most`` stays an upper bound whatever load
# did, so a fixed delay at or above the middle can never show one delay there.
HERD_FLOOR = 0.5
HERD_OUTLIERS = 0.1


def too_noisy(noise: Noise) -> str | None:
    """Why the measured noise leaves many clients' statistics undecidable, or None.

    Each probe wake-up's lag bounds the harness's share of one wait, but fifty clients'
    work queued at once waits behind several wake-ups, so on a starved machine the
    intervals come out too narrow. The statistics judge only while every loop's p99 lag
    stays at most OVERLOAD_P99 (the one line between a busy and a starved kit); above it
    they are undecidable (re-judged alone at a coarser scale)."""
    worst = noise.worst_p99()
    if worst <= OVERLOAD_P99:
        return None
    return (
        f"too noisy to judge fifty clients at once: a loop's p99 lag was {ms(worst)}, "
        f"above {ms(OVERLOAD_P99)}"
    )


def scan_max(times: Sequence[float], width: float) -> int:
    """The largest number of ``times`` inside any window ``[t, t + width)``."""
    ordered = sorted(times)
    best = 0
    j = 0
    for i, start in enumerate(ordered):
        j = max(j, i)
        while j < len(ordered) and ordered[j] < start + width:
            j += 1
        best = max(best, j - i)
    return best


def _binomial_tail(n: int, p: float, k: int) -> float:
    """P(Binomial(n, p) >= k)."""
    if k <= 0:
        return 1.0
    p = min(max(p, 0.0), 1.0)
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


def scan_bound(n: int, width: float, k: int) -> float:
    """An upper bound on P(some window of ``width`` holds >= ``k`` of ``n`` uniform points).

    The points are uniform on [0, 1]. Every window of ``width`` lies inside one of
    the grid windows ``[j * h, j * h + width + h)`` with ``h = width / m``, so the
    probability is at most their number times a binomial tail; the best ``m`` wins.
    """
    best = 1.0
    for m in range(1, 65):
        step = width / m
        windows = math.floor((1 - width) / step) + 2
        best = min(best, windows * _binomial_tail(n, width + step, k))
    return best


@functools.cache
def herd_limit(n: int, width: float, risk: float = HERD_RISK) -> int:
    """The smallest ``k`` whose ``scan_bound`` is below ``risk``."""
    return next(k for k in range(1, n + 2) if k > n or scan_bound(n, width, k) < risk)


def _waits_figure(label: str, waits: Sequence[Wait], spread: tuple[float, float]) -> Figure:
    """Each client's wait (measured, and its interval) against the declared range."""
    low, high = spread
    return Figure(
        "delays",
        label,
        tuple(
            FigureSample(f"client {i}", w.measured, w.least, w.most, low, high)
            for i, w in enumerate(waits)
        ),
    )


def jitter_outcome(
    samples: Sequence[Wait], spread: tuple[float, float], noise_line: str = ""
) -> Outcome:
    """The delays spread over their declared jitter range, and do not leave it.

    Every rule fails only on sure evidence, where ``k`` = JITTER_OUTLIERS of the waits
    may be outliers on each side:

    - more than ``k`` waits surely beyond the range's end (or before its start);
    - bunched: the waits could not spread over JITTER_RANGE of the span even at the
      widest their intervals allow (the ``k+1``-th largest ``most`` against the
      ``k+1``-th smallest ``least``): no jitter, too little, or one fixed delay;
    - every wait surely below the top JITTER_EDGE of the range, or surely above its
      bottom JITTER_FLOOR.

    It passes on sure evidence too: the waits surely spread over JITTER_RANGE of the
    span (the second largest ``least`` against the second smallest ``most``: sure
    spread is sound by construction, so one outlier a side is enough to set aside),
    some wait surely in the top part, more than ``k`` surely in the bottom part, and at
    most ``k`` that could be beyond the end. Anything between is undecidable (the
    measured noise hides it).

    Load only ever makes a stamp later (issue 27). A ``most`` is then an upper bound of
    the client's own wait whatever load did, a ``least`` only as far as the probes saw
    it: load they missed lifts the latest waits' ``least`` above the truth, and a fixed
    delay spread upward that way looks spread. So the pass takes its bottom from the
    ``most`` (more than ``k`` waits surely in the bottom part: no fixed delay at or
    above the middle can show one there, whatever load did), and its spread and its top
    only from lower ends a correct wait can have (at most the range's end: one above it
    is a late client or an interval that missed the truth, no sign of a spread).

    Args:
        samples: One first-retry wait per independent client.
        spread: The range the first delay is declared uniform on.
        noise_line: The measured noise's headline, for an undecidable outcome.

    Returns:
        The outcome, with the sample's summary and a figure of every wait.
    """
    low, high = spread
    span = high - low
    samples = _as_points_if_unmeasured(samples)
    n = len(samples)
    k = math.floor(JITTER_OUTLIERS * n)
    leasts = sorted(w.least for w in samples)
    mosts = sorted(w.most for w in samples)
    could_spread = mosts[-(k + 1)] - leasts[k]
    # Lower ends a correct wait can have. Tolerance 0: the declared end itself, as the
    # "outside" rule's ``decide`` counts a wait surely past it.
    plausible = [x for x in leasts if x <= high] or [-math.inf]
    sure_spread = plausible[-2] - mosts[1] if n > 2 and len(plausible) > 1 else 0.0
    top_at, bottom_at = low + (1 - JITTER_EDGE) * span, low + JITTER_FLOOR * span
    early = sum(1 for x in mosts if x <= bottom_at)  # surely in the bottom part
    decisions = [decide(w, low, high, JITTER_RESOLUTION * span) for w in samples]
    out, open_ = decisions.count("out"), decisions.count("unsure")
    want = (
        f"{n} clients' own first delays spread over {ms(low)}-{ms(high)}: surely over "
        f"{JITTER_RANGE:.0%} of it (but {k} outliers a side), some surely in its top "
        f"{JITTER_EDGE:.0%} and more than {k} in its bottom {JITTER_FLOOR:.0%}, at most "
        f"{k} surely outside it"
    )
    observed = (
        f"spread surely {ms(max(sure_spread, 0.0))}, at most {ms(could_spread)}; highest "
        f"surely at {(leasts[-1] - low) / span:.2f} of the range, lowest surely at "
        f"{(mosts[0] - low) / span:.2f}, {early} surely in its bottom "
        f"{JITTER_FLOOR:.0%}; {out} surely outside" + (f", {open_} undecidable" if open_ else "")
    )
    details = (f"waits measured (ms): {describe_waits(samples)}",)
    figure = _waits_figure(
        "each client's first delay against the declared jitter range", samples, spread
    )

    def failed(problem: str) -> Outcome:
        return Outcome.failed(want, f"{problem}: {observed}", *details, figure=figure)

    if out > k:
        return failed("delays outside the declared jitter range")
    if could_spread < JITTER_RANGE * span:
        return failed("bunched: the delays do not spread as the declared jitter does")
    if mosts[-1] < top_at:
        return failed("no delay reached the top of the range")
    if leasts[0] > bottom_at:
        return failed("no delay came near the bottom of the range")
    sure = (
        sure_spread >= JITTER_RANGE * span
        and plausible[-1] >= top_at
        and early > k
        and out + open_ <= k
    )
    if not sure:
        return Outcome.unsure(
            want, f"the noise hides the spread: {observed}", noise_line, *details, figure=figure
        )
    return Outcome(True, want, observed, details, figure)


def _as_points_if_unmeasured(waits: Sequence[Wait]) -> Sequence[Wait]:
    """Without measured noise nothing is undecidable (``conformance.timing._waits``): the
    statistics judge the measured waits as points."""
    if any(w.known for w in waits):
        return waits
    return [Wait(w.measured, w.measured, w.measured, known=False) for w in waits]


def range_probability(n: int, share: float) -> float:
    """P(``n`` uniform points on [0, 1] all fall within some interval of length ``share``)."""
    return n * share ** (n - 1) - (n - 1) * share**n


def _most_in_window(waits: Sequence[Wait], width: float, sure: bool) -> int:
    """The most waits in one window of ``width``: surely inside it (whole interval), or
    possibly (interval meets it)."""
    best = 0
    for start in sorted({w.least for w in waits} | {w.most - width for w in waits}):
        end = start + width
        if sure:
            count = sum(1 for w in waits if w.least >= start and w.most <= end)
        else:
            count = sum(1 for w in waits if w.most >= start and w.least <= end)
        best = max(best, count)
    return best


def herd_outcome(delays: Sequence[Wait], clients: int, spread: tuple[float, float]) -> Outcome:
    """The herd's own delays (each client from the cut to its reconnect) are spread out:
    over most of the declared range, and no window holds more of them than uniform
    jitter would put there.

    It passes on sure evidence only: the delays surely spread (the largest ``least``
    against the smallest ``most``), more than HERD_OUTLIERS of them surely in the bottom
    HERD_FLOOR of the range, and no window could hold the limit. As in
    ``jitter_outcome``, the bottom is judged on the ``most`` (load only ever makes a
    stamp later, so no fixed delay at or above the middle shows one there, however load
    spreads it upward: issue 27's fixed 1.5 s delay read 1.8-3.7 s and PASSed), and the
    spread only on lower ends a correct delay can have (at most the range's end).

    Args:
        delays: Each reconnected client's delay, as an interval.
        clients: How many clients lost their stream.
        spread: The range each first delay is declared uniform on.

    Returns:
        The outcome, with the delays' spread and busiest window against the limits.
    """
    low, high = spread
    span = high - low
    width = HERD_WINDOW * span
    limit = herd_limit(clients, HERD_WINDOW)
    k = math.floor(HERD_OUTLIERS * clients)
    bottom_at = low + HERD_FLOOR * span
    want = (
        f"all {clients} clients reconnect, their own delays spread over at least "
        f"{ms(HERD_RANGE * span)}, more than {k} surely in the bottom {HERD_FLOOR:.0%} of "
        f"the range, and at most {limit - 1} of them in any {ms(width)} (for uniform "
        f"jitter over {ms(span)} a spread or a window fails with p < {HERD_RISK:g})"
    )
    if len(delays) < clients:
        return Outcome.failed(want, f"{len(delays)} of {clients} clients reconnected")
    delays = _as_points_if_unmeasured(delays)
    figure = _waits_figure("each client's delay from the cut to its reconnect", delays, spread)
    # Lower ends a correct delay can have (tolerance 0: the declared end itself).
    plausible = max((w.least for w in delays if w.least <= high), default=-math.inf)
    sure_spread = plausible - min(w.most for w in delays)
    could_spread = max(w.most for w in delays) - min(w.least for w in delays)
    sure_bunch = _most_in_window(delays, width, sure=True)
    could_bunch = _most_in_window(delays, width, sure=False)
    early = sum(1 for w in delays if w.most <= bottom_at)  # surely in the bottom part
    observed = (
        f"delays from {ms(min(w.measured for w in delays))} to "
        f"{ms(max(w.measured for w in delays))}, surely spread over {ms(max(sure_spread, 0))}, "
        f"{early} surely in the bottom {HERD_FLOOR:.0%}; "
        f"{sure_bunch} surely and {could_bunch} possibly in one {ms(width)} window"
    )
    details = (f"delays measured (ms): {describe_waits(delays)}",)
    if could_spread < HERD_RANGE * span or sure_bunch >= limit:
        return Outcome.failed(want, f"bunched: {observed}", *details, figure=figure)
    # A window widened by a typical interval's width: a correct herd's intervals meet
    # one that wide no more often than uniform points fall into it.
    widened = (
        math.ceil(100 * (HERD_WINDOW + statistics.median(w.most - w.least for w in delays) / span))
        / 100
    )
    could_limit = herd_limit(clients, min(widened, 1.0))
    if sure_spread < HERD_RANGE * span or early <= k or could_bunch >= could_limit:
        return Outcome.unsure(want, f"noise hides the spread: {observed}", *details, figure=figure)
    return Outcome(True, want, observed, details, figure)
