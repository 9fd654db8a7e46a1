"""What a weather did to a client's streams, computed from the ledger and the deliveries.

Pure: ``outcome_of`` reads one stream's attempts and deliveries, ``summarize`` the run.
Tokens are recognised by their marks (``fake_servers._marks``: the server marks every
answer in a weather run), so a client is measured alike whether it reports events, JSON
or only the text its application sees.
"""

from __future__ import annotations

import math
import operator
import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from conformance._evidence import Delivery
from fake_servers._ledger import Attempt
from fake_servers._marks import marks_in

__all__ = [
    "HERD_WINDOW",
    "METRICS",
    "Rate",
    "StreamOutcome",
    "WeatherMetrics",
    "outcome_of",
    "parse_condition",
    "rate",
    "summarize",
]

Z95 = 1.959964  # the normal quantile of a two-sided 95 % interval
HERD_WINDOW = 30.0  # seconds after an outage ends in which the herd is measured
End = Literal["done", "error", "unfinished"]


@dataclass(frozen=True)
class Rate:
    """``count`` of ``total``, with its Wilson 95 % confidence interval."""

    count: int
    total: int
    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.1%} [{self.low:.1%}, {self.high:.1%}] ({self.count}/{self.total})"


def rate(count: int, total: int) -> Rate:
    """The Wilson score interval: right at 0 and 1 too, where the normal one collapses."""
    if total <= 0:
        return Rate(count, total, 0.0, 0.0, 1.0)
    p = count / total
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * total)) / (1 + z2 / total)
    half = Z95 * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    low = 0.0 if count == 0 else max(0.0, centre - half)  # exact at the ends: no float dust
    high = 1.0 if count == total else min(1.0, centre + half)
    return Rate(count, total, p, low, high)


@dataclass(frozen=True)
class StreamOutcome:
    """One stream of a weather run, as its user lived it."""

    number: int
    tokens: int  # the answer's length
    fault_free: float  # seconds the answer takes with no fault
    started_at: float
    end: End  # what the client told its application last: done, an error, or nothing
    ended_at: float | None
    attempts: int  # requests the backend got for it
    seen: tuple[int, ...]  # token indices the application got, in order, repeats included
    stalls: int  # times the client told its user the stream stalled

    @property
    def duplicated(self) -> int:
        return len(self.seen) - len(set(self.seen))

    @property
    def lost(self) -> int:
        """Tokens of the answer the application never got."""
        return self.tokens - len(set(self.seen) & set(range(1, self.tokens + 1)))

    @property
    def completed(self) -> bool:
        """Reported complete with every token there (repeats are counted apart)."""
        return self.end == "done" and self.lost == 0

    @property
    def intact(self) -> bool:
        """Completed, each token once, in order."""
        return self.completed and list(self.seen) == list(range(1, self.tokens + 1))

    @property
    def first_try(self) -> bool:
        return self.completed and self.attempts == 1

    @property
    def silent(self) -> bool:
        """Reported complete with tokens missing: the user sees a cut answer as whole."""
        return self.end == "done" and self.lost > 0

    @property
    def took(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.started_at


def outcome_of(
    number: int,
    tokens: int,
    fault_free: float,
    started_at: float,
    attempts: Sequence[Attempt],
    deliveries: Sequence[Delivery],
) -> StreamOutcome:
    """One stream's outcome from its attempts and its deliveries (its stream's only)."""
    text = "".join(d.data for d in deliveries if d.kind == "chunk")
    seen = tuple(index for _, index, _, _ in marks_in(text))
    ends = [d for d in deliveries if d.kind in ("done", "error")]
    last = ends[-1] if ends else None
    stalls = sum(d.kind == "state" and d.state == "stalled" for d in deliveries)
    return StreamOutcome(
        number=number,
        tokens=tokens,
        fault_free=fault_free,
        started_at=started_at,
        end="unfinished" if last is None else "done" if last.kind == "done" else "error",
        ended_at=None if last is None else last.at,
        attempts=len(attempts),
        seen=seen,
        stalls=stalls,
    )


@dataclass(frozen=True)
class Herd:
    """The backend's busiest second just after one outage, against its usual rate."""

    outage_end: float
    peak: int  # requests in the busiest one-second bin of HERD_WINDOW after the outage
    waiting: int  # streams that had met the outage and were still to be served


@dataclass(frozen=True)
class WeatherMetrics:
    """A weather run's outcome for one client: rates with 95 % intervals, counts, times."""

    streams: int
    completed: Rate
    first_try: Rate
    intact: Rate
    failed_honestly: Rate
    failed_silently: Rate
    unfinished: Rate
    stalls_surfaced: Rate  # streams whose user was told of a stall
    duplicated_tokens: int
    lost_tokens: int  # in streams reported complete (what users were told was whole)
    requests: int
    requests_per_completed: float
    slowdown_p50: float | None  # time to complete / fault-free time, of completed streams
    slowdown_p95: float | None
    extra_p50: float | None  # seconds over the fault-free time
    extra_p95: float | None
    herd_peak: int | None  # the highest per-second request count after an outage
    herds: tuple[Herd, ...]

    @property
    def completion(self) -> float:
        return self.completed.value

    def value(self, name: str) -> float:
        """A metric by name (``METRICS``), as a number: a rate's value, a count."""
        if name not in METRICS:
            raise KeyError(f"no weather metric {name!r}; known: {', '.join(METRICS)}")
        got = getattr(self, METRICS[name])
        if isinstance(got, Rate):
            return got.value
        return math.nan if got is None else float(got)

    def require(self, *conditions: str) -> None:
        """Fail (AssertionError) unless every condition holds, e.g. ``"completion >= 0.99"``,
        ``"duplicated_tokens == 0"``; the message shows each failed one with its figure."""
        failed = [text for text in conditions if not self._holds(text)]
        if failed:
            shown = "; ".join(f"{c} (is {self._shown(c)})" for c in failed)
            raise AssertionError(f"weather thresholds not met: {shown}")

    def _holds(self, condition: str) -> bool:
        name, compare, bound = parse_condition(condition)
        got = self.value(name)
        return not math.isnan(got) and compare(got, bound)

    def _shown(self, condition: str) -> str:
        name = parse_condition(condition)[0]
        got = getattr(self, METRICS[name])
        return str(got)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["completion"] = self.completion
        if not math.isfinite(self.requests_per_completed):  # none completed: no ratio
            out["requests_per_completed"] = None
        return out


# The names ``require`` and ``value`` take, and the field each reads.
METRICS: dict[str, str] = {
    "completion": "completed",
    "completed": "completed",
    "first_try": "first_try",
    "intact": "intact",
    "failed_honestly": "failed_honestly",
    "failed_silently": "failed_silently",
    "silent_failures": "failed_silently",
    "unfinished": "unfinished",
    "stalls_surfaced": "stalls_surfaced",
    "duplicated_tokens": "duplicated_tokens",
    "lost_tokens": "lost_tokens",
    "requests_per_completed": "requests_per_completed",
    "slowdown_p50": "slowdown_p50",
    "slowdown_p95": "slowdown_p95",
    "extra_p50": "extra_p50",
    "extra_p95": "extra_p95",
    "herd_peak": "herd_peak",
}
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}
_CONDITION = re.compile(r"\s*([a-z_0-9]+)\s*(>=|<=|==|>|<)\s*([0-9.eE+-]+%?)\s*")


def parse_condition(condition: str) -> tuple[str, Callable[[float, float], bool], float]:
    """A threshold's metric, comparison and bound; ValueError naming what is wrong."""
    found = _CONDITION.fullmatch(condition)
    if found is None:
        raise ValueError(
            f"a weather threshold reads 'metric op number' (e.g. 'completion >= 0.99'), "
            f"not {condition!r}"
        )
    name, op, number = found.groups()
    if name not in METRICS:
        raise ValueError(f"no weather metric {name!r}; known: {', '.join(METRICS)}")
    bound = float(number[:-1]) / 100 if number.endswith("%") else float(number)
    return name, _OPS[op], bound


def _quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def summarize(
    outcomes: Sequence[StreamOutcome],
    arrivals: Sequence[float],
    outages: Sequence[tuple[float, float]] = (),
) -> WeatherMetrics:
    """The run's metrics from every stream's outcome, the backend's request arrivals
    (all attempts, for the herd) and the outages (start, end) the weather scheduled."""
    n = len(outcomes)
    done = [o for o in outcomes if o.completed]
    slowdowns = [o.took / o.fault_free for o in done if o.took is not None and o.fault_free > 0]
    extras = [o.took - o.fault_free for o in done if o.took is not None]
    requests = sum(o.attempts for o in outcomes)
    herds = tuple(_herd(end, arrivals, outcomes, start) for start, end in outages)
    return WeatherMetrics(
        streams=n,
        completed=rate(len(done), n),
        first_try=rate(sum(o.first_try for o in outcomes), n),
        intact=rate(sum(o.intact for o in outcomes), n),
        failed_honestly=rate(sum(o.end == "error" for o in outcomes), n),
        failed_silently=rate(sum(o.silent for o in outcomes), n),
        unfinished=rate(sum(o.end == "unfinished" for o in outcomes), n),
        stalls_surfaced=rate(sum(o.stalls > 0 for o in outcomes), n),
        duplicated_tokens=sum(o.duplicated for o in outcomes),
        lost_tokens=sum(o.lost for o in outcomes if o.end == "done"),
        requests=requests,
        requests_per_completed=requests / len(done) if done else math.inf,
        slowdown_p50=_quantile(sorted(slowdowns), 0.5),
        slowdown_p95=_quantile(sorted(slowdowns), 0.95),
        extra_p50=_quantile(sorted(extras), 0.5),
        extra_p95=_quantile(sorted(extras), 0.95),
        herd_peak=max((h.peak for h in herds), default=None),
        herds=herds,
    )


def _herd(
    end: float, arrivals: Sequence[float], outcomes: Sequence[StreamOutcome], start: float
) -> Herd:
    bins = Counter(int(t - end) for t in arrivals if end <= t < end + HERD_WINDOW)
    waiting = sum(
        1
        for o in outcomes
        if o.started_at < end and (o.ended_at is None or o.ended_at > start) and o.end != "error"
    )
    return Herd(end, max(bins.values(), default=0), waiting)


def per_second(arrivals: Sequence[float], origin: float) -> list[tuple[int, int]]:
    """Requests the backend got in each second of the run (for the report's plot)."""
    bins = Counter(int(t - origin) for t in arrivals)
    last = max(bins, default=-1)
    return [(s, bins.get(s, 0)) for s in range(last + 1)]
