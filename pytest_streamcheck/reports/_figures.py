"""What each check judged, drawn from a report row: delays against their band (backoff
and jitter), states over time with the failures that tripped the breaker, the silent
gap against the stall timeout, chunks delivered against chunks sent (commit).

A check's structured ``figure`` wins when the row has one. Otherwise the drawing comes
from the row's evidence (only cases that did not pass keep it), else its compact
chart, and from the numbers the outcome states. Rows come from any kit version, so a
row this cannot read draws no figure rather than breaking the page.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_streamcheck.reports._charts import (
    Bar,
    Count,
    Lane,
    Sample,
    Segment,
    Shade,
    StateLane,
    StatesChart,
    Tick,
    counts_svg,
    delays_svg,
    states_svg,
    timeline_svg,
)

__all__ = ["Figure", "judged_figure", "timeline"]

MAX_LANES = 20  # streams drawn in a states chart; the rest are left out (and said so)
MAX_CLIENT_LANES = 12  # a structured figure gets a lane per client up to this many
# What reading a malformed row raises: such a row draws nothing.
UNREADABLE = (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError)


@dataclass(frozen=True)
class Figure:
    title: str
    svg: str
    note: str = ""


def judged_figure(case: dict[str, Any]) -> Figure | None:
    """The drawing of what the case's check judged, or None."""
    try:
        return _structured(case.get("figure")) or _derived(case)
    except UNREADABLE:
        return None


def timeline(case: dict[str, Any]) -> str | None:
    """The case's attempts and deliveries on one time axis (from the compact chart)."""
    chart = case.get("chart")
    if not isinstance(chart, dict):
        return None
    try:
        t0 = float(chart["started_at"])
        attempts = [_attempt(a, t0) for a in chart["attempts"]]
        ticks = [Tick(d["at"] - t0, d["kind"], d.get("label") or "") for d in chart["deliveries"]]
        span = max([a.end_or_start for a in attempts] + [t.at for t in ticks] + [0.001])
        return timeline_svg([a.bar for a in attempts], ticks, span)
    except UNREADABLE:
        return None


# -- the row's data, evidence first --------------------------------------------------------


@dataclass(frozen=True)
class _Attempt:
    seq: int
    path: str
    status: int | None
    end: str | None
    start: float  # seconds since the case started
    stop: float | None
    data: tuple[float, ...]  # when each data event was sent
    last_byte: float  # the last thing the server wrote

    @property
    def end_or_start(self) -> float:
        return self.stop if self.stop is not None else self.start

    @property
    def failed(self) -> bool:
        return self.kind == "failed"

    @property
    def kind(self) -> str:
        if self.end in (None, "client_closed"):
            return "other"
        if self.status is None or self.status >= 400 or self.end != "completed":
            return "failed"
        return "ok"

    @property
    def bar(self) -> Bar:
        where = f" ({self.path})" if self.path else ""
        title = f"attempt {self.seq}: {self.status} {self.end}{where}"
        return Bar(self.start, max(self.end_or_start, self.start), self.kind, title, self.data)


@dataclass(frozen=True)
class _Delivery:
    at: float
    kind: str
    stream: str
    label: str


def _attempt(raw: dict[str, Any], t0: float) -> _Attempt:
    """One attempt from the evidence (every event, headers) or the chart (data times)."""
    events = raw.get("events") or []
    if events and isinstance(events[0], dict):
        data = tuple(e["at"] - t0 for e in events if e.get("kind") == "data")
        written = [e["at"] for e in events] + [raw.get("headers_at"), raw.get("first_byte_at")]
    else:
        data = tuple(float(e) - t0 for e in events)
        written = list(events)
    ended = raw.get("ended_at")
    return _Attempt(
        seq=int(raw["seq"]),
        path=str(raw.get("path") or ""),
        status=raw.get("status"),
        end=raw.get("end"),
        start=raw["arrived_at"] - t0,
        stop=None if ended is None else ended - t0,
        data=data,
        last_byte=max([float(w) for w in written if w is not None] + [raw["arrived_at"]]) - t0,
    )


def _source(case: dict[str, Any]) -> tuple[dict[str, Any], float]:
    evidence = case.get("evidence")
    data = evidence if isinstance(evidence, dict) and evidence.get("attempts") is not None else None
    data = data or case["chart"]
    return data, float(data["started_at"])


def _attempts(case: dict[str, Any]) -> list[_Attempt]:
    data, t0 = _source(case)
    return sorted((_attempt(a, t0) for a in data["attempts"]), key=lambda a: a.start)


def _deliveries(case: dict[str, Any]) -> list[_Delivery]:
    data, t0 = _source(case)
    out = []
    for d in data["deliveries"]:
        label = d.get("label") or d.get("state") or d.get("error") or d.get("data") or ""
        out.append(_Delivery(d["at"] - t0, d["kind"], str(d.get("stream") or ""), str(label)))
    return sorted(out, key=lambda d: d.at)


def _texts(case: dict[str, Any]) -> list[str]:
    """What the outcome said: observed first, then the details."""
    lines = [case.get("observed") or "", *(case.get("details") or [])]
    return [str(line) for line in lines if line]


# -- a check's own figure ---------------------------------------------------------------------


def _structured(figure: Any) -> Figure | None:
    """The ``figure`` a check attached: delays (in ``unit``) against ``band`` + ``slack``.
    A sample may name its ``client`` (or ``label``), carry its own ``band`` (each retry
    has its envelope) and the interval ``least``-``most`` its true value lies in."""
    if not isinstance(figure, dict) or figure.get("kind") != "delays":
        return None
    factor = _TO_MS.get(figure.get("unit", "s"))
    if factor is None:
        return None
    band = _band(figure.get("band"), factor)
    slack = float(figure.get("slack") or 0.0) * factor
    samples = [_Judged(s, factor) for s in figure.get("samples") or []]
    if not samples:
        return None
    label = str(figure.get("label") or "delays")
    lanes = (
        _sample_lanes(samples, slack)
        or _client_lanes(samples, band, slack)
        or [Lane(f"{len(samples)} samples", tuple(j.sample for j in samples), band, slack)]
    )
    svg = delays_svg(lanes, "ms")
    return Figure(label, svg, _band_note([j.sample for j in samples], lanes[0]))


_TO_MS = {"s": 1000.0, "ms": 1.0}


def _band(raw: Any, factor: float) -> tuple[float, float] | None:
    if not raw:
        return None
    low, high = float(raw[0]) * factor, float(raw[1]) * factor
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"band {raw} cannot be drawn")
    return low, high


class _Judged:
    """One sample of a structured figure, in milliseconds."""

    def __init__(self, raw: dict[str, Any], factor: float) -> None:
        self.name = str(raw.get("client") or raw.get("label") or "")
        value = float(raw["value"]) * factor
        if not math.isfinite(value):
            raise ValueError(f"sample {value} cannot be drawn")
        self.band = _band(raw.get("band"), factor)
        span = None
        if raw.get("least") is not None and raw.get("most") is not None:
            span = (float(raw["least"]) * factor, float(raw["most"]) * factor)
        ok = raw.get("ok")
        title = f"{self.name}: {value:.1f} ms".lstrip(": ")
        if span:
            title += f" (between {span[0]:.1f} and {span[1]:.1f})"
        self.sample = Sample(value, ok if isinstance(ok, bool) else None, title, span)


def _sample_lanes(samples: Sequence[_Judged], slack: float) -> list[Lane]:
    """A lane per sample when the samples have bands of their own (a retry's envelope)."""
    if len({j.band for j in samples if j.band}) < 2 or len(samples) > MAX_LANES:
        return []
    return [Lane(j.name or f"#{i}", (j.sample,), j.band, slack) for i, j in enumerate(samples)]


def _client_lanes(
    samples: Sequence[_Judged], band: tuple[float, float] | None, slack: float
) -> list[Lane]:
    """A lane per client when a few clients each gave several samples."""
    clients: dict[str, list[Sample]] = {}
    for judged in samples:
        clients.setdefault(judged.name, []).append(judged.sample)
    if not 1 < len(clients) <= MAX_CLIENT_LANES or len(samples) == len(clients):
        return []
    return [Lane(c or "(no client)", tuple(s), band, slack) for c, s in clients.items()]


def _band_note(samples: Sequence[Sample], lane: Lane) -> str:
    if lane.band is None:
        return f"{len(samples)} samples"
    low, high = lane.band
    inside = sum(low <= s.value <= high for s in samples)
    slack = sum(high < s.value <= high + lane.slack for s in samples)
    beyond = sum(s.value > high + lane.slack for s in samples)
    below = sum(s.value < low for s in samples)
    return (
        f"{len(samples)} samples: {inside} in the band {low:.1f}-{high:.1f} ms, {slack} in "
        f"its slack (+{lane.slack:.1f} ms), {beyond} beyond it, {below} below it"
    )


# -- derived from the row ------------------------------------------------------------------------


def _derived(case: dict[str, Any]) -> Figure | None:
    builders = _BUILDERS.get(str(case.get("area")), ())
    return next((f for f in (b(case) for b in builders) if f is not None), None)


_RETRY_ROW = re.compile(
    r"retry (\d+): waited ([\d.]+) ms \(at most ([\d.]+) ms\), envelope ([\d.]+) ms-([\d.]+) ms"
)
_UPPER_SLACK = re.compile(r"upper end \+ ([\d.]+) ms|\(\+ ([\d.]+) ms\)")


def _envelope(case: dict[str, Any]) -> Figure | None:
    """Backoff: each retry's wait against its envelope (the check's own rows)."""
    slack_match = _UPPER_SLACK.search(case.get("expected") or "")
    slack = float(next(g for g in slack_match.groups() if g)) if slack_match else 0.0
    lanes, seen = [], set()
    for line in _texts(case):
        for m in _RETRY_ROW.finditer(line):
            if m.group(0) in seen:
                continue
            seen.add(m.group(0))
            n, waited, most, low, high = m.group(1), *map(float, m.groups()[1:])
            ok = most >= low and waited <= high + slack  # as the envelope check bounds it
            title = f"retry {n}: waited {waited:.1f} ms (at most {most:.1f} ms)"
            lanes.append(Lane(f"retry {n}", (Sample(waited, ok, title),), (low, high), slack))
    if not lanes:
        return None
    lanes.sort(key=lambda lane: int(lane.label.split()[-1]))
    bad = sum(1 for lane in lanes if lane.samples[0].ok is False)
    note = f"{len(lanes)} retries, {bad} outside its envelope (+{slack:.0f} ms slack above)"
    svg = delays_svg(lanes, "wait before the retry, ms", band="envelope")
    return Figure("Each retry's wait against its envelope", svg, note)


_WAITS = re.compile(r"^waits(?: measured)? \(ms\): (.*)$")
_SPREAD = re.compile(r"spread over ([\d.]+) ms-([\d.]+) ms")
_BEYOND = re.compile(r"by more than ([\d.]+) ms")


def _jitter(case: dict[str, Any]) -> Figure | None:
    """Jitter: every client's first delay against the declared range and its slack."""
    values = _listed(_WAITS, _texts(case))
    spread = _SPREAD.search(case.get("expected") or "")
    if not values or spread is None:
        return None
    low, high = float(spread.group(1)), float(spread.group(2))
    beyond = _BEYOND.search(case.get("expected") or "")
    slack = float(beyond.group(1)) if beyond else 0.0
    # The check counts overshoots one by one; the range's ends it judges as a whole.
    samples = tuple(
        Sample(v, False if v > high + slack else None, f"client {i}: {v:.0f} ms")
        for i, v in enumerate(values, start=1)
    )
    lane = Lane("first delays", samples, (low, high), slack)
    title = "Each client's first delay against the declared jitter range"
    svg = delays_svg([lane], "first delay, ms", band="declared jitter range")
    return Figure(title, svg, _band_note(samples, lane))


_RECONNECTS = re.compile(r"^reconnects after the cut \(ms\): (.*)$")
_HERD_SPREAD = re.compile(r"spread over at least ([\d.]+) ms")


def _herd(case: dict[str, Any]) -> Figure | None:
    """The herd: when each client reconnected after the cut."""
    values = _listed(_RECONNECTS, _texts(case))
    if not values:
        return None
    samples = tuple(Sample(v, None, f"client {i}: {v:.0f} ms") for i, v in enumerate(values, 1))
    spread = _HERD_SPREAD.search(case.get("expected") or "")
    # The spread the check requires, drawn from the first reconnect.
    band = (min(values), min(values) + float(spread.group(1))) if spread else None
    lane = Lane("reconnects", samples, band)
    note = f"{len(values)} reconnects from {min(values):.0f} to {max(values):.0f} ms after the cut"
    svg = delays_svg([lane], "ms after the cut", band="the spread required")
    return Figure("When each client reconnected after the cut", svg, note)


def _listed(pattern: re.Pattern[str], lines: Iterable[str]) -> list[float]:
    for line in lines:
        m = pattern.match(line)
        if m:
            return [float(v) for v in m.group(1).split(",") if v.strip()]
    return []


def _waits(case: dict[str, Any]) -> Figure | None:
    """Any backoff case: the measured wait before each retry, per path."""
    by_path: dict[str, list[_Attempt]] = {}
    for a in _attempts(case):
        by_path.setdefault(a.path or "requests", []).append(a)
    lanes = []
    for path, attempts in list(by_path.items())[:MAX_CLIENT_LANES]:
        gaps = [
            Sample((b.start - a.end_or_start) * 1000, None, f"before #{b.seq}")
            for a, b in itertools.pairwise(attempts)
        ]
        if gaps:
            lanes.append(Lane(path, tuple(gaps)))
    if not lanes:
        return None
    title = "The wait before each retry (from the end of the failed attempt)"
    return Figure(title, delays_svg(lanes, "ms"), "no band: this check states none per retry")


_COOLDOWN = re.compile(r"the ([\d.]+)s cooldown after request (\d+) failed")


def _states(case: dict[str, Any]) -> Figure | None:
    """Breaker (and offline): the client's states over time, the requests that failed,
    and each cooldown the check expected as a shaded window."""
    attempts = _attempts(case)
    deliveries = _deliveries(case)
    if not attempts and not deliveries:
        return None
    span = max([a.end_or_start for a in attempts] + [d.at for d in deliveries] + [0.001])
    streams = list(dict.fromkeys(d.stream for d in deliveries))
    lanes = tuple(_state_lane(s, deliveries, span) for s in streams[:MAX_LANES])
    shades = tuple(_cooldowns(case.get("expected") or "", attempts))
    chart = StatesChart(tuple(a.bar for a in attempts), lanes, span, shades)
    failed = sum(a.failed for a in attempts)
    note = f"{failed} of {len(attempts)} requests failed"
    if len(streams) > MAX_LANES:
        note += f"; {len(streams) - MAX_LANES} more streams not drawn"
    return Figure(
        "The client's states over time, with the failed requests", states_svg(chart), note
    )


def _state_lane(stream: str, deliveries: Sequence[_Delivery], span: float) -> StateLane:
    """A stream's states as segments (each lasts until the next). The compact chart does
    not tell streams apart: its states are drawn as moments, not spans."""
    mine = [d for d in deliveries if d.stream == stream]
    states = [d for d in mine if d.kind == "state"]
    ticks = [Tick(d.at, d.kind, d.label[:60]) for d in mine if d.kind in ("error", "done")]
    if not stream:
        ticks += [Tick(d.at, "state", d.label) for d in states]
        return StateLane("client (all streams)", (), tuple(ticks))
    ends = [d.at for d in states[1:]] + [span]
    segments = tuple(
        Segment(d.at, end if d.label not in ("done", "failed") else d.at, d.label)
        for d, end in zip(states, ends, strict=True)
    )
    return StateLane(f"client {stream}", segments, tuple(ticks))


def _cooldowns(expected: str, attempts: Sequence[_Attempt]) -> Iterable[Shade]:
    for m in _COOLDOWN.finditer(expected):
        cooldown, n = float(m.group(1)), int(m.group(2))
        if 0 < n <= len(attempts):
            start = attempts[n - 1].end_or_start
            yield Shade(start, start + cooldown, "cooldown: no request expected")


# A stated slack in older reports; the kit now allows the measured harness lag instead.
_SILENCE = re.compile(
    r"closes the silent connection ([\d.]+)s to ([\d.]+)s(?: \(\+([\d.]+)s slack\))?"
)


def _silence(case: dict[str, Any]) -> Figure | None:
    """Stall: how long each abandoned connection had been silent, against the timeout."""
    m = _SILENCE.search(case.get("expected") or "")
    if m is None:
        return None
    low, high, slack = (float(g or 0.0) * 1000 for g in m.groups())
    attempts = _attempts(case)
    closed = [a for a in attempts if a.end in (None, "client_closed")] or attempts
    last = max([a.end_or_start for a in attempts] + [d.at for d in _deliveries(case)] + [0.0])
    lanes = []
    for a in closed:
        gap = ((a.stop if a.stop is not None else last) - a.last_byte) * 1000
        ok = low <= gap <= high + slack
        how = "closed by the client" if a.end == "client_closed" else f"{a.end or 'still open'}"
        title = f"attempt {a.seq}: silent {gap:.0f} ms, then {how}"
        lanes.append(Lane(f"attempt {a.seq}", (Sample(gap, ok, title),), (low, high), slack))
    if not lanes:
        return None
    allowance = f"+{slack:.0f} ms slack" if slack else "plus the measured harness lag"
    note = f"the timeout window {low:.0f}-{high:.0f} ms, {allowance}"
    title = "The silent gap before the client gave up, against the stall timeout"
    return Figure(title, delays_svg(lanes, "ms of silence", True, "timeout window"), note)


_EXPECTED_CHUNKS = re.compile(r"exactly (\d+) chunk\(s\)")


def _chunks(case: dict[str, Any]) -> Figure | None:
    """Commit: the chunks each attempt sent against the chunks the consumer got."""
    attempts = _attempts(case)
    if not attempts:
        return None
    deliveries = _deliveries(case)
    rows = [Count(f"attempt {a.seq} sent", len(a.data), "sent") for a in attempts]
    for stream in dict.fromkeys(d.stream for d in deliveries):
        mine = [d for d in deliveries if d.stream == stream]
        got = sum(d.kind == "chunk" for d in mine)
        end = next((d for d in mine if d.kind in ("done", "error")), None)
        note = "then no end" if end is None else f"then {end.kind} {end.label}".rstrip()
        label = (
            f"delivered ({stream})"
            if stream and len({d.stream for d in deliveries}) > 1
            else "delivered"
        )
        rows.append(Count(label, got, "delivered", note))
    m = _EXPECTED_CHUNKS.search(case.get("expected") or "")
    expected = int(m.group(1)) if m else None
    sent = sum(len(a.data) for a in attempts)
    got = sum(r.value for r in rows if r.kind == "delivered")
    note = f"{sent} chunks sent over {len(attempts)} attempt(s), {got} delivered"
    return Figure(
        "Chunks delivered against chunks sent", counts_svg(rows, expected, "chunks"), note
    )


_BUILDERS: dict[str, tuple[Callable[[dict[str, Any]], Figure | None], ...]] = {
    "BACKOFF": (_envelope, _jitter, _herd, _waits),
    "BREAKER": (_states,),
    "OFFLINE": (_states,),
    "STALL": (_silence, _states),
    "COMMIT": (_chunks,),
}
