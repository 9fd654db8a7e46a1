"""SVG drawings for the HTML report, from plain data: scales, axes, legends, the case
timeline, strips of delays against a band, lanes of states, bars of counts.

Every drawing has a legend and an axis with its unit. Sizes are in the viewBox's
units; CSS lets a drawing shrink to the page's width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

__all__ = [
    "Bar",
    "Count",
    "Lane",
    "Sample",
    "Segment",
    "Shade",
    "StateLane",
    "StatesChart",
    "Tick",
    "counts_svg",
    "delays_svg",
    "states_svg",
    "timeline_svg",
]

WIDTH = 900
LEFT = 120  # room for lane labels
RIGHT = 16
CHAR = 6.2  # rough width of one character at the legend's font size
OK, BAD, NEUTRAL = "#2e7d32", "#c62828", "#546e7a"
BAND, SLACK = "#c8e6c9", "#ffe9a8"


def _e(text: object) -> str:
    return escape(str(text), quote=True)


# -- scales and axes ----------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """Maps data values onto [left, right]; logarithmic for data spanning decades."""

    lo: float
    hi: float
    left: float = LEFT
    right: float = WIDTH - RIGHT
    log: bool = False
    min_step: float = 0.0  # 1 for counts: no tick between two whole numbers

    def __call__(self, value: float) -> float:
        if self.log:
            value = max(value, self.lo)
            part = math.log10(value / self.lo) / math.log10(self.hi / self.lo)
        else:
            part = (value - self.lo) / (self.hi - self.lo)
        return self.left + min(max(part, 0.0), 1.0) * (self.right - self.left)

    def ticks(self) -> list[float]:
        if self.log:
            return _log_ticks(self.lo, self.hi)
        step = max(_nice_step((self.hi - self.lo) / 6), self.min_step)
        first = math.ceil(self.lo / step)
        return [n * step for n in range(first, math.floor(self.hi / step) + 1)]


def linear(lo: float, hi: float) -> Scale:
    return Scale(lo, hi if hi > lo else lo + 1.0)


def _nice_step(raw: float) -> float:
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _log_ticks(lo: float, hi: float) -> list[float]:
    ticks = []
    for power in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        ticks += [m * 10.0**power for m in (1, 2, 5) if lo <= m * 10.0**power <= hi]
    return ticks


def number(value: float) -> str:
    """A tick label: few digits, never scientific notation."""
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}" if abs(value) >= 1 else f"{value:.2g}"


def axis(scale: Scale, y: float, label: str, top: float) -> str:
    """A horizontal axis at ``y``: grid lines up to ``top``, tick labels, its unit.
    Drawers put it first, after the legend, so the grid lies behind the data."""
    parts = [f"<line class='ax' x1='{scale.left}' x2='{scale.right}' y1='{y}' y2='{y}'/>"]
    for tick in scale.ticks():
        x = scale(tick)
        parts.append(
            f"<line class='grid' x1='{x:.1f}' x2='{x:.1f}' y1='{top}' y2='{y}'/>"
            f"<line class='ax' x1='{x:.1f}' x2='{x:.1f}' y1='{y}' y2='{y + 4}'/>"
            f"<text x='{x:.1f}' y='{y + 15}' text-anchor='middle'>{number(tick)}</text>"
        )
    parts.append(
        f"<text class='unit' x='{scale.right}' y='{y + 29}' text-anchor='end'>{_e(label)}</text>"
    )
    return "".join(parts)


AXIS_HEIGHT = 34


# -- legends -------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """One legend entry: a swatch (rect, dot, tick, diamond, line, dash) and its meaning."""

    shape: str
    colour: str
    label: str


def _swatch(key: Key, x: float, y: float) -> str:
    c = key.colour
    if key.shape == "dot":
        return f"<circle cx='{x + 5}' cy='{y}' r='4' fill='{c}'/>"
    if key.shape == "tick":
        return f"<line x1='{x + 5}' x2='{x + 5}' y1='{y - 6}' y2='{y + 6}' stroke='{c}'/>"
    if key.shape == "diamond":
        return f"<path d='M{x + 5} {y - 5}l5 5l-5 5l-5-5z' fill='{c}'/>"
    if key.shape == "line":
        return f"<line x1='{x}' x2='{x + 12}' y1='{y}' y2='{y}' stroke='{c}' stroke-width='2'/>"
    if key.shape == "dash":
        return (
            f"<line x1='{x}' x2='{x + 10}' y1='{y}' y2='{y}' stroke='{c}' "
            "stroke-width='2' stroke-dasharray='3 2'/>"
        )
    return f"<rect x='{x}' y='{y - 5}' width='12' height='10' fill='{c}'/>"


def legend(keys: Sequence[Key], top: float = 4) -> tuple[str, float]:
    """Keys laid out in rows across the width; returns the markup and its height."""
    parts = ["<g class='legend'>"]
    x, y = 8.0, top + 8
    for key in keys:
        width = 22 + len(key.label) * CHAR
        if x + width > WIDTH - RIGHT and x > 8:
            x, y = 8.0, y + 16
        parts.append(_swatch(key, x, y) + f"<text x='{x + 16}' y='{y + 4}'>{_e(key.label)}</text>")
        x += width + 14
    parts.append("</g>")
    return "".join(parts), y + 10


def svg(body: str, height: float, label: str) -> str:
    return (
        f"<svg class='chart' viewBox='0 0 {WIDTH} {height:.0f}' width='{WIDTH}' "
        f"height='{height:.0f}' role='img' aria-label='{_e(label)}'>{body}</svg>"
    )


def _lane_label(text: str, y: float) -> str:
    short = text if len(text) <= 18 else text[:17] + "…"
    return f"<text class='lane' x='{LEFT - 8}' y='{y:.1f}' text-anchor='end'>{_e(short)}</text>"


# -- the timeline ----------------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    """A moment on a timeline: a delivery, a state change, an error."""

    at: float
    kind: str
    label: str = ""


@dataclass(frozen=True)
class Bar:
    """A span on a timeline: an attempt from arrival to end, with its sent events."""

    start: float
    end: float
    kind: str  # ok, failed, other
    title: str
    marks: tuple[float, ...] = ()


ATTEMPT_COLOURS = {"ok": "#64b5f6", "failed": "#ef9a9a", "other": "#bdbdbd"}
DELIVERY_COLOURS = {"chunk": OK, "error": BAD, "done": "#000000", "state": "#9e9e9e"}
TIMELINE_ATTEMPTS = 150.0  # the attempts' lanes share this height, however many


def time_scale(span: float) -> tuple[float, str]:
    """Milliseconds for short cases, seconds for long ones: (factor, axis label)."""
    if span < 10:
        return 1000.0, "ms since the case started"
    return 1.0, "s since the case started"


def pack(bars: Sequence[Bar]) -> list[int]:
    """Each bar's lane: the first whose previous bar has ended, so sequential retries
    share a lane and only concurrent attempts add height."""
    ends: list[float] = []
    lanes = []
    for bar in bars:
        lane = next((i for i, end in enumerate(ends) if end <= bar.start), len(ends))
        if lane == len(ends):
            ends.append(bar.end)
        ends[lane] = max(bar.end, bar.start)
        lanes.append(lane)
    return lanes


def timeline_svg(bars: Sequence[Bar], ticks: Sequence[Tick], span: float) -> str:
    """Attempts as bars with ticks for the events sent; what the client delivered as dots
    (chunks, errors, the end) and its state changes as grey dots below."""
    factor, unit = time_scale(span)
    scale = linear(0.0, span * factor)
    keys = [Key("rect", ATTEMPT_COLOURS[k], n) for k, n in _ATTEMPT_NAMES if _has(bars, k)]
    keys += [Key("tick", "#0d47a1", "data event sent")] if any(b.marks for b in bars) else []
    keys += [Key("dot", DELIVERY_COLOURS[k], n) for k, n in _TICK_NAMES if _has(ticks, k)]
    head, top = legend(keys)
    lanes = pack(bars)
    count = max(lanes, default=0) + 1
    lane_h = min(16.0, max(3.0, TIMELINE_ATTEMPTS / count))
    parts = [head, _lane_label("server: attempts", top + 6 + min(lane_h, 12))]
    for bar, lane in zip(bars, lanes, strict=True):
        parts.append(_bar(bar, top + 4 + lane * lane_h, lane_h - 1, scale, factor))
    y = top + 8 + count * lane_h
    delivered = [t for t in ticks if t.kind != "state"]
    states = [t for t in ticks if t.kind == "state"]
    parts.append(_lane_label("client: delivered", y + 10))
    parts += [_dot(scale(t.at * factor), y + 6, t) for t in delivered]
    parts.append(_lane_label("client: states", y + 26))
    parts += [_dot(scale(t.at * factor), y + 22, t) for t in states]
    bottom = y + 34
    parts.insert(1, axis(scale, bottom, unit, top))
    return svg("".join(parts), bottom + AXIS_HEIGHT, "timeline of the case")


_ATTEMPT_NAMES = (
    ("ok", "attempt: answered, completed"),
    ("failed", "attempt: error status or broken"),
    ("other", "attempt: closed by the client, or open"),
)
_TICK_NAMES = (
    ("chunk", "chunk delivered"),
    ("error", "error delivered"),
    ("done", "end of stream delivered"),
    ("state", "state change"),
)


def _has(items: Sequence[Bar] | Sequence[Tick], kind: str) -> bool:
    return any(item.kind == kind for item in items)


def _bar(bar: Bar, y: float, height: float, scale: Scale, factor: float) -> str:
    x0, x1 = scale(bar.start * factor), scale(bar.end * factor)
    marks = "".join(
        f"<line x1='{scale(m * factor):.1f}' x2='{scale(m * factor):.1f}' y1='{y:.1f}' "
        f"y2='{y + height:.1f}' stroke='#0d47a1'/>"
        for m in bar.marks
    )
    return (
        f"<rect x='{x0:.1f}' y='{y:.1f}' height='{height:.1f}' width='{max(x1 - x0, 1.5):.1f}' "
        f"fill='{ATTEMPT_COLOURS.get(bar.kind, '#bdbdbd')}'><title>{_e(bar.title)}</title></rect>"
        + marks
    )


def _dot(cx: float, cy: float, tick: Tick) -> str:
    colour = DELIVERY_COLOURS.get(tick.kind, "#999999")
    title = _e(f"{tick.kind} {tick.label}".strip())
    return f"<circle cx='{cx:.1f}' cy='{cy}' r='3' fill='{colour}'><title>{title}</title></circle>"


# -- delays against a band -------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One judged value (a delay, a silence), in milliseconds."""

    value: float
    ok: bool | None  # None: not judged one by one
    title: str = ""
    span: tuple[float, float] | None = None  # the interval the true value lies in


@dataclass(frozen=True)
class Lane:
    """A row of samples and the band they were judged against (milliseconds)."""

    label: str
    samples: tuple[Sample, ...]
    band: tuple[float, float] | None = None
    slack: float = 0.0


def _delay_scale(lanes: Sequence[Lane], from_zero: bool) -> Scale:
    values = [s.value for lane in lanes for s in lane.samples]
    values += [v for lane in lanes if lane.band for v in (*lane.band, lane.band[1] + lane.slack)]
    values += [v for lane in lanes for s in lane.samples if s.span for v in s.span]
    top = max([*values, 1.0])
    positive = [v for v in values if v > 0]
    # Exponential backoff spans decades: linear would crush the first retries.
    if not from_zero and len(lanes) > 1 and positive and top / min(positive) > 30:
        return Scale(min(positive) / 1.5, top * 1.5, log=True)
    near_zero = from_zero or min([*values, top]) < 0.3 * top
    low = min([*values, 0.0]) if near_zero else _floor(min(values), top)
    return linear(low, top * 1.05)


def _floor(low: float, top: float) -> float:
    """A round value a little below ``low``: the axis need not start at zero when all
    the data sits far from it."""
    margin = low - 0.1 * (top - low)
    step = _nice_step((top - margin) / 6)
    return max(0.0, math.floor(margin / step) * step)


def delays_svg(
    lanes: Sequence[Lane], unit: str, bars: bool = False, band: str = "declared band"
) -> str:
    """Each lane's samples as dots (or bars from zero) over its band and slack zone."""
    scale = _delay_scale(lanes, from_zero=bars)  # a bar's length must mean its value
    samples = [s for lane in lanes for s in lane.samples]
    keys = [Key("rect", BAND, band)] if any(lane.band for lane in lanes) else []
    keys += [Key("rect", SLACK, "slack")] if any(lane.band and lane.slack for lane in lanes) else []
    keys += [Key("dot", c, n) for ok, c, n in _VERDICT_KEYS if any(s.ok is ok for s in samples)]
    if any(s.span for s in samples):
        keys.append(Key("line", NEUTRAL, "where the true value lies"))
    head, top = legend(keys)
    most = max(len(lane.samples) for lane in lanes)
    # Crowded strips get height to spread their dots; intervals need more to stay apart.
    lane_h = 18.0 if most <= 6 else 54.0
    if most > 6 and any(s.span for s in samples):
        lane_h = min(120.0, max(54.0, 2.2 * most))
    parts = [head]
    for i, lane in enumerate(lanes):
        y = top + 4 + i * lane_h
        parts.append(_lane_label(lane.label, y + lane_h / 2 + 4))
        parts.append(_band(lane, scale, y, lane_h - 2))
        parts += [_sample(s, j, scale, y, lane_h - 2, bars) for j, s in enumerate(lane.samples)]
    bottom = top + 8 + len(lanes) * lane_h
    parts.insert(1, axis(scale, bottom, unit + (" (log scale)" if scale.log else ""), top))
    return svg("".join(parts), bottom + AXIS_HEIGHT, "delays against the declared band")


_VERDICT_KEYS = (
    (True, OK, "within its bounds"),
    (False, BAD, "out of bounds"),
    (None, NEUTRAL, "sample, not judged alone"),
)


def _band(lane: Lane, scale: Scale, y: float, height: float) -> str:
    if lane.band is None:
        return ""
    low, high = lane.band
    x0, x1, x2 = scale(low), scale(high), scale(high + lane.slack)
    title = f"band {number(low)}-{number(high)}, slack {number(lane.slack)}"
    return (
        f"<rect x='{x0:.1f}' y='{y:.1f}' width='{max(x1 - x0, 1):.1f}' height='{height:.1f}' "
        f"fill='{BAND}'><title>{_e(title)}</title></rect>"
        f"<rect x='{x1:.1f}' y='{y:.1f}' width='{x2 - x1:.1f}' height='{height:.1f}' "
        f"fill='{SLACK}'/>"
    )


def _sample(s: Sample, index: int, scale: Scale, y: float, height: float, bars: bool) -> str:
    colour = {True: OK, False: BAD, None: NEUTRAL}[s.ok]
    title = f"<title>{_e(s.title or number(s.value))}</title>"
    x = scale(s.value)
    if bars:
        x0 = scale(0.0 if not scale.log else scale.lo)
        return (
            f"<rect x='{x0:.1f}' y='{y + height / 2 - 3:.1f}' width='{max(x - x0, 1):.1f}' "
            f"height='6' fill='{colour}' opacity='0.75'>{title}</rect>"
            f"<circle class='s' cx='{x:.1f}' cy='{y + height / 2:.1f}' r='5' fill='{colour}'>"
            f"{title}</circle>"
        )
    # Deterministic vertical spread (golden-ratio steps) so equal values stay visible.
    cy = y + 4 + ((index * 0.618034) % 1.0) * (height - 8) if height > 20 else y + height / 2
    whisker = ""
    if s.span is not None:
        x0, x1 = scale(s.span[0]), scale(s.span[1])
        whisker = (
            f"<line class='span' x1='{x0:.1f}' x2='{x1:.1f}' y1='{cy:.1f}' y2='{cy:.1f}' "
            f"stroke='{colour}' stroke-width='2'/>"
        )
    return (
        f"{whisker}<circle class='s' cx='{x:.1f}' cy='{cy:.1f}' r='3.5' fill='{colour}'>"
        f"{title}</circle>"
    )


# -- states over time ------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    state: str


@dataclass(frozen=True)
class StateLane:
    """One stream: the client's states as segments, and moments (errors, chunks, done)."""

    label: str
    segments: tuple[Segment, ...]
    ticks: tuple[Tick, ...] = ()


STATE_COLOURS = {
    "connecting": "#90caf9",
    "retrying": "#ffe082",
    "breaker_open": "#e57373",
    "committed": "#a5d6a7",
    "stalled": "#ffb74d",
    "offline": "#b0bec5",
    "done": "#2e7d32",
    "failed": "#8e0000",
}


REQUESTS_HEIGHT = 60.0


@dataclass(frozen=True)
class Shade:
    """A window on the time axis the check cared about (e.g. a cooldown)."""

    start: float
    end: float
    label: str


@dataclass(frozen=True)
class StatesChart:
    requests: tuple[Bar, ...]
    lanes: tuple[StateLane, ...]
    span: float
    shades: tuple[Shade, ...] = field(default=())


def states_svg(chart: StatesChart) -> str:
    """The requests the server saw (failed ones red), each stream's states as coloured
    segments, errors as diamonds, and shaded windows such as a breaker's cooldown."""
    factor, unit = time_scale(chart.span)
    scale = linear(0.0, chart.span * factor)
    seen = {seg.state for lane in chart.lanes for seg in lane.segments}
    seen |= {t.label for lane in chart.lanes for t in lane.ticks if t.kind == "state"}
    keys = [
        Key("rect", ATTEMPT_COLOURS[k], n) for k, n in _ATTEMPT_NAMES if _has(chart.requests, k)
    ]
    keys += [Key("rect", _state_colour(s), f"state: {s}") for s in _ordered(seen)]
    if any(t.kind == "error" for lane in chart.lanes for t in lane.ticks):
        keys.append(Key("diamond", BAD, "error delivered"))
    if chart.shades:
        keys.append(Key("rect", "#e1bee7", chart.shades[0].label))
    head, top = legend(keys)
    lane_h = 16.0
    # Concurrent requests get sub-lanes that share at most REQUESTS_HEIGHT.
    rows = pack(chart.requests)
    count = max(rows, default=0) + 1
    row_h = min(lane_h, max(3.0, REQUESTS_HEIGHT / count))
    first = top + 4 + count * row_h + 2
    bottom = first + 4 + len(chart.lanes) * lane_h
    parts = [head]
    parts += [_shade(s, scale, factor, top, bottom) for s in chart.shades]
    parts.append(_lane_label("server: requests", top + 4 + min(row_h * count, lane_h) / 2 + 4))
    parts += [
        _bar(b, top + 4 + row * row_h, row_h - 1, scale, factor)
        for b, row in zip(chart.requests, rows, strict=True)
    ]
    for i, lane in enumerate(chart.lanes):
        y = first + i * lane_h
        parts.append(_lane_label(lane.label, y + lane_h / 2 + 4))
        parts += [_segment(s, scale, factor, y, lane_h - 3) for s in lane.segments]
        parts += [_moment(t, scale, factor, y + (lane_h - 3) / 2) for t in lane.ticks]
    parts.insert(1, axis(scale, bottom, unit, top))
    return svg("".join(parts), bottom + AXIS_HEIGHT, "client states over time")


def _ordered(states: set[str]) -> list[str]:
    known = [s for s in STATE_COLOURS if s in states]
    return known + sorted(states - set(known))


def _state_colour(state: str) -> str:
    return STATE_COLOURS.get(state, "#d7ccc8")


def _segment(seg: Segment, scale: Scale, factor: float, y: float, height: float) -> str:
    x0, x1 = scale(seg.start * factor), scale(seg.end * factor)
    title = f"{seg.state}: {(seg.end - seg.start) * 1000:.1f} ms"
    return (
        f"<rect x='{x0:.1f}' y='{y:.1f}' width='{max(x1 - x0, 2):.1f}' height='{height:.1f}' "
        f"fill='{_state_colour(seg.state)}'><title>{_e(title)}</title></rect>"
    )


def _moment(tick: Tick, scale: Scale, factor: float, cy: float) -> str:
    x = scale(tick.at * factor)
    title = f"<title>{_e(f'{tick.kind} {tick.label}'.strip())}</title>"
    if tick.kind == "error":
        return f"<path d='M{x:.1f} {cy - 6:.1f}l6 6l-6 6l-6-6z' fill='{BAD}'>{title}</path>"
    if tick.kind == "state":
        colour = _state_colour(tick.label)
        return f"<circle cx='{x:.1f}' cy='{cy:.1f}' r='4' fill='{colour}'>{title}</circle>"
    colour = DELIVERY_COLOURS.get(tick.kind, "#999999")
    return f"<circle cx='{x:.1f}' cy='{cy:.1f}' r='2' fill='{colour}'>{title}</circle>"


def _shade(shade: Shade, scale: Scale, factor: float, top: float, bottom: float) -> str:
    x0, x1 = scale(shade.start * factor), scale(shade.end * factor)
    return (
        f"<rect x='{x0:.1f}' y='{top:.1f}' width='{max(x1 - x0, 1):.1f}' "
        f"height='{bottom - top:.1f}' fill='#e1bee7' opacity='0.6'>"
        f"<title>{_e(shade.label)}</title></rect>"
    )


# -- counts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Count:
    label: str
    value: int
    kind: str  # a key of COUNT_KINDS
    note: str = ""  # written after the bar, e.g. how the stream ended


COUNT_KINDS = {
    "sent": ("#64b5f6", "chunks the server sent"),
    "delivered": (OK, "chunks delivered to the consumer"),
}


def counts_svg(rows: Sequence[Count], expected: int | None, unit: str) -> str:
    """Horizontal bars of counts (chunks sent per attempt, chunks delivered), with the
    count the check expected as a dashed line."""
    top_value = max([r.value for r in rows] + [expected or 0, 1])
    scale = Scale(0.0, math.ceil(top_value * 1.25), min_step=1.0)
    keys = [Key("rect", *COUNT_KINDS[k]) for k in COUNT_KINDS if any(r.kind == k for r in rows)]
    keys += [Key("dash", "#000000", f"expected: {expected}")] if expected is not None else []
    head, top = legend(keys)
    lane_h = 18.0
    parts = [head]
    for i, row in enumerate(rows):
        y = top + 4 + i * lane_h
        x1 = scale(row.value)
        parts.append(_lane_label(row.label, y + lane_h / 2 + 3))
        parts.append(
            f"<rect x='{LEFT}' y='{y:.1f}' width='{max(x1 - LEFT, 1):.1f}' "
            f"height='{lane_h - 4}' fill='{COUNT_KINDS[row.kind][0]}'>"
            f"<title>{_e(row.value)}</title></rect>"
            f"<text x='{x1 + 4:.1f}' y='{y + lane_h / 2 + 3:.1f}'>"
            f"{row.value}{_e('  ' + row.note if row.note else '')}</text>"
        )
    bottom = top + 8 + len(rows) * lane_h
    if expected is not None:
        x = scale(expected)
        parts.append(
            f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{top}' y2='{bottom}' stroke='#000' "
            "stroke-width='1.5' stroke-dasharray='4 3'/>"
        )
    parts.insert(1, axis(scale, bottom, unit, top))
    return svg("".join(parts), bottom + AXIS_HEIGHT, "counts the check compared")
