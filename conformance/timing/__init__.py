"""The kit's real-time noise model, in one room: what the harness measured of its own
lateness, what that makes of a wait, and what the runner does when it hides a verdict.

- ``_noise``: ``Noise`` and ``LagSeries``, the lag the probes measured by ``Source``
  (``fake_servers._noise``), the allowances it grants a stamp, and the constants that
  set them;
- ``_waits``: ``Wait``, the one measurement of a wait (``wait_between``, ``wait_from``,
  ``span``), and ``decide`` / ``at_once``: in, out, or undecidable;
- ``_stats``: the jitter and herd statistics over many clients' waits;
- ``_rejudge``: the pure re-judging policy (``Rejudging``), its budget and scales, and
  ``sure``: when a failure stands despite the noise.

Under virtual time (``Noise.exact``) every allowance is one clock tick. The reasoning
is docs/timing.md; the runs that set each constant, its "Calibration history".

The room spans two layers of the kit: ``_noise`` and ``_waits`` sit under the evidence
a case records (``conformance._evidence`` holds a ``Noise``), ``_stats`` and
``_rejudge`` above the outcome it judges. So importing this package imports nothing
else (every name below is loaded from its module on first use), and the kit's own
modules import a name from the module that defines it; this face is for the plugin,
scripts and tests.
"""

from typing import TYPE_CHECKING

from conformance.reference._exports import lazy_getattr

if TYPE_CHECKING:
    from conformance.timing._noise import (
        CONGESTED_LAG,
        LAG_FACTOR,
        LOWER_FLOOR,
        OVERLOAD_P99,
        PAGE_STALL,
        PATH_FLOOR,
        QUEUED_ITERATIONS,
        REACH,
        UNMEASURED_SLACK,
        LagSeries,
        Noise,
        connection_accepts,
        ms,
    )
    from conformance.timing._rejudge import (
        FIXED_RETRIES,
        LIMIT_GROWTH,
        REJUDGE_BUDGET,
        REJUDGE_FACTORS,
        Decided,
        Inconclusive,
        Play,
        RejudgeBudget,
        RejudgeError,
        Rejudging,
        Stage,
        Step,
        Tried,
        factors_for,
        sure,
    )
    from conformance.timing._stats import (
        HERD_FLOOR,
        HERD_OUTLIERS,
        HERD_RANGE,
        HERD_RISK,
        HERD_WINDOW,
        JITTER_EDGE,
        JITTER_FLOOR,
        JITTER_OUTLIERS,
        JITTER_RANGE,
        JITTER_RESOLUTION,
        herd_limit,
        herd_outcome,
        jitter_outcome,
        range_probability,
        scan_bound,
        scan_max,
        too_noisy,
    )
    from conformance.timing._waits import (
        AT_ONCE,
        Decision,
        Wait,
        at_once,
        decide,
        describe_waits,
        seen_from,
        span,
        wait_between,
        wait_from,
    )

# private module -> the public names it provides
_MODULES = {
    # the measured noise and the allowances it grants
    "_noise": (
        "CONGESTED_LAG",
        "LAG_FACTOR",
        "LOWER_FLOOR",
        "OVERLOAD_P99",
        "PAGE_STALL",
        "PATH_FLOOR",
        "QUEUED_ITERATIONS",
        "REACH",
        "UNMEASURED_SLACK",
        "LagSeries",
        "Noise",
        "connection_accepts",
        "ms",
    ),
    # a wait as an interval, and the decision on it
    "_waits": (
        "AT_ONCE",
        "Decision",
        "Wait",
        "at_once",
        "decide",
        "describe_waits",
        "seen_from",
        "span",
        "wait_between",
        "wait_from",
    ),
    # the jitter and herd statistics
    "_stats": (
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
    ),
    # re-judging an undecidable case, and when a failure is sure
    "_rejudge": (
        "FIXED_RETRIES",
        "LIMIT_GROWTH",
        "REJUDGE_BUDGET",
        "REJUDGE_FACTORS",
        "Decided",
        "Inconclusive",
        "Play",
        "RejudgeBudget",
        "RejudgeError",
        "Rejudging",
        "Stage",
        "Step",
        "Tried",
        "factors_for",
        "sure",
    ),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "AT_ONCE",
    "CONGESTED_LAG",
    "FIXED_RETRIES",
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
    "LAG_FACTOR",
    "LIMIT_GROWTH",
    "LOWER_FLOOR",
    "OVERLOAD_P99",
    "PAGE_STALL",
    "PATH_FLOOR",
    "QUEUED_ITERATIONS",
    "REACH",
    "REJUDGE_BUDGET",
    "REJUDGE_FACTORS",
    "UNMEASURED_SLACK",
    "Decided",
    "Decision",
    "Inconclusive",
    "LagSeries",
    "Noise",
    "Play",
    "RejudgeBudget",
    "RejudgeError",
    "Rejudging",
    "Stage",
    "Step",
    "Tried",
    "Wait",
    "at_once",
    "connection_accepts",
    "decide",
    "describe_waits",
    "factors_for",
    "herd_limit",
    "herd_outcome",
    "jitter_outcome",
    "ms",
    "range_probability",
    "scan_bound",
    "scan_max",
    "seen_from",
    "span",
    "sure",
    "too_noisy",
    "wait_between",
    "wait_from",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
