"""The network-weather report: weather runs as JSON (schema ``streamcheck-weather/1``)
and as one standalone HTML page.

The page reads only the JSON report, so a page made later from a saved report says
what the run said. Per weather: the clients run under it side by side, then three
plots drawn here as inline SVG: completion over time, the backend's requests per
second with the outages shaded, and the spread of slowdowns. No script, no network;
every text from the report is escaped (a target's name is the user's to choose).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from html import escape
from pathlib import Path
from typing import Any

from conformance.weather._run import WeatherRun
from fake_servers._files import FileRefused, check_output_path, shown_path
from pytest_streamcheck import __version__
from pytest_streamcheck.reports._charts import (
    AXIS_HEIGHT,
    RIGHT,
    WIDTH,
    Key,
    Scale,
    axis,
    legend,
    number,
    svg,
)

__all__ = [
    "WEATHER_SCHEMA",
    "check_weather_paths",
    "render_weather_html",
    "weather_lines",
    "weather_report",
    "weather_table",
    "write_weather_report",
]

WEATHER_SCHEMA = "streamcheck-weather/1"
# Distinct at a glance (Tableau 10); a matrix past ten clients cycles.
PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
)
OUTAGE = "#ffd7a8"
DASH = "&ndash;"  # a figure the run has not got (cells are HTML)
PLOT_LEFT = 64.0  # room for the y axis's tick labels and its rotated unit
PLOT_HEIGHT = 220.0


def _e(value: object) -> str:
    return escape(str(value), quote=True)


# -- the JSON report -----------------------------------------------------------------


def weather_report(runs: Sequence[WeatherRun], *, command: str = "") -> dict[str, Any]:
    """The JSON report of ``runs``: each run's ``to_json()``, plus its series'
    ``slowdowns`` (the completed streams' took / fault-free, which ``took`` alone cannot
    give: it holds failed streams too). Infinite figures (requests per completed stream
    when none completed) are null, so the file is strict JSON."""
    return {
        "schema": WEATHER_SCHEMA,
        "kit": {"name": "pytest-streamcheck", "version": __version__},
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        "runs": [_finite(_run_json(run)) for run in runs],
    }


def _run_json(run: WeatherRun) -> dict[str, Any]:
    data = run.to_json()
    slowdowns = sorted(
        o.took / o.fault_free
        for o in run.outcomes
        if o.completed and o.took is not None and o.fault_free > 0
    )
    data["series"]["slowdowns"] = [round(s, 4) for s in slowdowns]
    return data


def _finite(value: Any) -> Any:
    """``value`` with every infinite or NaN float made None, through dicts and lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def write_weather_report(
    runs: Sequence[WeatherRun],
    *,
    json_path: Path | None,
    html_path: Path | None,
    command: str = "",
) -> dict[str, Any]:
    """Write the JSON report and/or its HTML page; return the report.

    Raises:
        ValueError: an output path is a directory (or another kind of file it cannot
            write), its folder does not exist or is not writable. Both paths are checked
            before either is written.
    """
    check_weather_paths(json_path, html_path)
    report = weather_report(runs, command=command)
    if json_path is not None:
        text = json.dumps(report, indent=2, sort_keys=False, allow_nan=False)
        json_path.write_text(text + "\n", encoding="utf-8")
    if html_path is not None:
        html_path.write_text(render_weather_html(report), encoding="utf-8")
    return report


def check_weather_paths(json_path: Path | None, html_path: Path | None) -> None:
    """Refuse output paths the reports could not be written to, as
    ``write_weather_report`` does: a caller checks them before a long run, not after.

    Raises:
        ValueError: why a path cannot be written, naming it.
    """
    for what, path in (("JSON report", json_path), ("HTML report", html_path)):
        if path is not None:
            _check_output(what, path)


def _check_output(what: str, path: Path) -> None:
    try:
        check_output_path(path)
        # check_output_path lets the writer make missing folders; this one does not: a
        # mistyped folder would otherwise scatter reports in a new tree.
        if not path.absolute().parent.is_dir():
            raise FileRefused("its folder does not exist")
    except FileRefused as exc:
        raise ValueError(f"weather {what}: {shown_path(path)}: {exc}") from None


# -- reading a report (saved ones too: every field is checked, never trusted) ---------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _float(value: Any) -> float | None:
    """A finite number, or None (a bool, a string, a missing field, an infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _numbers(value: Any) -> list[float]:
    return [f for f in map(_float, _list(value)) if f is not None]


def _pairs(value: Any) -> list[tuple[float, float]]:
    pairs = []
    for item in _list(value):
        got = _numbers(item)
        if isinstance(item, list) and len(item) == 2 and len(got) == 2:
            pairs.append((got[0], got[1]))
    return pairs


@dataclass(frozen=True)
class _Run:
    """One run of the report, as the page shows it: its name there and its colour."""

    label: str
    colour: str
    data: dict[str, Any]

    @property
    def metrics(self) -> dict[str, Any]:
        return _dict(self.data.get("metrics"))

    @property
    def series(self) -> dict[str, Any]:
        return _dict(self.data.get("series"))

    @property
    def error(self) -> str | None:
        error = self.data.get("error")
        if error is None and self.data.get("metrics") is None:
            return "the run has no metrics"
        return None if error is None else str(error)


def _weathers(report: dict[str, Any]) -> dict[str, list[_Run]]:
    """The report's runs by weather (``name@version``), in the order they came."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for data in _list(report.get("runs")):
        data = _dict(data)
        key = str(_dict(data.get("weather")).get("key") or "unknown weather")
        groups.setdefault(key, []).append(data)
    return {key: _labelled(runs) for key, runs in groups.items()}


def _labelled(runs: list[dict[str, Any]]) -> list[_Run]:
    """Each run named by its target (and client, where they differ); a name seen twice
    gets its position, so two runs of one client stay apart."""
    names = []
    for data in runs:
        target, client = str(data.get("target") or ""), str(data.get("client") or "")
        names.append(f"{target} ({client})" if client and client != target else target or client)
    labels = [
        n if names.count(n) == 1 else f"{n} #{names[:i].count(n) + 1}" for i, n in enumerate(names)
    ]
    return [
        _Run(label or "?", PALETTE[i % len(PALETTE)], data)
        for i, (label, data) in enumerate(zip(labels, runs, strict=True))
    ]


# -- the page ------------------------------------------------------------------------


def render_weather_html(report: dict[str, Any]) -> str:
    """The whole page for a ``streamcheck-weather/1`` report."""
    weathers = _weathers(report)
    names = ", ".join(weathers) or "no runs"
    return "\n".join(
        [
            "<!doctype html><html lang='en'><meta charset='utf-8'>",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<title>streamcheck weather: {_e(names)}</title>",
            f"<style>{CSS}</style>",
            "<body><main>",
            f"<h1>Network weather: {_e(names)}</h1>",
            f"<p class='meta'>{_meta(report)}</p>",
            *(_section(key, runs) for key, runs in weathers.items()),
            "</main></body></html>",
        ]
    )


def _meta(report: dict[str, Any]) -> str:
    kit = _dict(report.get("kit"))
    parts = [f"{kit.get('name', 'pytest-streamcheck')} {kit.get('version', '')}".strip()]
    parts.append(f"generated {report.get('generated_at', '')}")
    parts = [_e(p) for p in parts]
    if report.get("command"):
        parts.append(f"command <code>{_e(report['command'])}</code>")
    return " · ".join(parts)


def _section(key: str, runs: Sequence[_Run]) -> str:
    weather = _dict(runs[0].data.get("weather"))
    return (
        f"<section class='weather'><h2>{_e(key)}</h2>"
        f"<p class='desc'>{_e(weather.get('description', ''))}</p>"
        f"<p class='faults'>{_faults(weather)}</p>"
        f"{_table(runs)}"
        f"{_completion_plot(runs)}{_requests_plot(runs)}{_slowdown_plot(runs)}"
        "</section>"
    )


def _faults(weather: dict[str, Any]) -> str:
    shown = []
    for fault in map(_dict, _list(weather.get("faults"))):
        rate = _float(fault.get("rate")) or 0.0
        span = _numbers(fault.get("seconds"))
        lasting = (
            f", {number(span[0])}{DASH}{number(span[1])} s" if len(span) == 2 and span[1] else ""
        )
        if fault.get("kind") == "deploy":
            shown.append(f"deploy: {number(rate)} outages an hour{lasting}")
        else:
            shown.append(f"{_e(fault.get('kind'))}: {rate:.1%} of attempts{lasting}")
    return "faults: " + ("; ".join(shown) or "none")


# -- the table: one column per client ------------------------------------------------


def _rate(key: str, interval: bool = False) -> Callable[[_Run], str]:
    def cell(run: _Run) -> str:
        rate = _dict(run.metrics.get(key))
        value = _float(rate.get("value"))
        if value is None:
            return DASH
        counted = f" <span class='n'>({_int(rate.get('count'))}/{_int(rate.get('total'))})</span>"
        low, high = _float(rate.get("low")), _float(rate.get("high"))
        if not interval or low is None or high is None:
            return f"{value:.1%}{counted}"
        return f"{value:.1%} <span class='ci'>[{low:.1%}, {high:.1%}]</span>{counted}"

    return cell


def _int(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "?"


def _figure(key: str, shown: Callable[[float], str], none: str = DASH) -> Callable[[_Run], str]:
    """A cell for one number of the metrics; ``none`` where it is null."""

    def cell(run: _Run) -> str:
        value = _float(run.metrics.get(key))
        return none if value is None else shown(value)

    return cell


def _slowdown(run: _Run) -> str:
    p50, p95 = _float(run.metrics.get("slowdown_p50")), _float(run.metrics.get("slowdown_p95"))
    return DASH if p50 is None or p95 is None else f"{p50:.2f}&times; / {p95:.2f}&times;"


def _timing(run: _Run) -> str:
    played = _float(run.data.get("played"))
    clock = f", {played:.0f} s played" if played is not None else ""
    timing = run.data.get("timing")
    return f"{_e(timing) if timing else DASH}{clock}"


def _wall(run: _Run) -> str:
    wall = _float(run.data.get("wall"))
    return DASH if wall is None else f"{wall:.1f} s"


def _met(run: _Run) -> str:
    met = [f"{_e(kind)} {_int(n)}" for kind, n in _dict(run.data.get("faults")).items()]
    return ", ".join([*met, f"clear {_int(run.data.get('attempts_clear'))}"])


@dataclass(frozen=True)
class _Row:
    label: str
    hint: str
    cell: Callable[[_Run], str]  # the cell's HTML, escaped


ROWS = (
    _Row("completed", "every token, reported done; 95 % interval", _rate("completed", True)),
    _Row("first try", "completed on the first request", _rate("first_try")),
    _Row("failed honestly", "the client reported an error", _rate("failed_honestly")),
    _Row("failed silently", "reported done with tokens missing", _rate("failed_silently")),
    _Row(
        "unfinished",
        "neither done nor an error before the run stopped waiting",
        _rate("unfinished"),
    ),
    _Row(
        "duplicated tokens",
        "tokens the application got twice",
        _figure("duplicated_tokens", number),
    ),
    _Row("lost tokens", "missing from streams reported done", _figure("lost_tokens", number)),
    _Row("stalls surfaced", "streams whose user was told of a stall", _rate("stalls_surfaced")),
    _Row(
        "requests per completed stream",
        "backend requests / completed streams",
        _figure("requests_per_completed", lambda v: f"{v:.2f}", f"{DASH} (none completed)"),
    ),
    _Row("slowdown p50 / p95", "time to complete / fault-free time", _slowdown),
    _Row(
        "herd peak",
        "requests in the busiest second after an outage",
        _figure("herd_peak", lambda v: f"{v:.0f} req/s", "no outage"),
    ),
    _Row("faults met", "attempts that met each fault, and clear ones", _met),
    _Row("timing", "virtual: the kit's clock; real: the wall clock", _timing),
    _Row("wall", "seconds of wall time the run took", _wall),
)


def _table(runs: Sequence[_Run]) -> str:
    head = "".join(_heading(run) for run in runs)
    body = [f"<tr><th scope='row' title='{_e(row.hint)}'>{row.label}</th>" for row in ROWS]
    for run in runs:
        if run.error is not None:  # one cell down the whole column: no figures
            body[0] += f"<td rowspan='{len(ROWS)}' class='error'><pre>{_e(run.error)}</pre></td>"
            continue
        for i, row in enumerate(ROWS):
            body[i] += f"<td>{row.cell(run)}</td>"
    rows = "".join(f"{tr}</tr>" for tr in body)
    return (
        f"<table class='runs'><thead><tr><th></th>{head}</tr></thead><tbody>{rows}</tbody></table>"
    )


def _heading(run: _Run) -> str:
    streams, users, seed = (_int(run.data.get(k)) for k in ("streams", "users", "seed"))
    about = f"{streams} streams, {users} users, seed {seed}"
    return (
        f"<th scope='col'><span class='swatch' style='background:{run.colour}'></span>"
        f"{_e(run.label)}<br><small>{about}</small></th>"
    )


# -- the plots -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Line:
    label: str
    colour: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class _Plot:
    title: str
    x_label: str
    y_label: str
    lines: tuple[_Line, ...]
    shades: tuple[tuple[float, float], ...] = ()  # x spans shaded behind the lines
    x_lo: float | None = 0.0  # None: from the data's least x
    y_top: float | None = None  # None: the data's greatest y
    counts: bool = True  # whole numbers on the y axis


def _steps(xs: Sequence[float], rise: float) -> list[tuple[float, float]]:
    """A cumulative step line through sorted ``xs``: up by ``rise`` at each."""
    points = []
    for i, x in enumerate(xs):
        points += [(x, i * rise), (x, (i + 1) * rise)]
    return points


def _completion_plot(runs: Sequence[_Run]) -> str:
    ok = [run for run in runs if run.error is None]
    lines = []
    for run in ok:
        done = sorted(_numbers(run.series.get("completions")))
        end = max([_float(run.data.get("played")) or 0.0, *done])  # flat to the run's end
        lines.append(_Line(run.label, run.colour, ((0.0, 0.0), *_steps(done, 1), (end, len(done)))))
    # Up to the streams run, so a line short of the top is streams that never completed.
    top = max([_float(run.data.get("streams")) or 0.0 for run in ok], default=0.0)
    plot = _Plot("Completion over time", "s into the run", "streams completed", tuple(lines))
    return _draw(replace(plot, y_top=top or None))


def _requests_plot(runs: Sequence[_Run]) -> str:
    ok = [run for run in runs if run.error is None]
    lines = tuple(
        _Line(run.label, run.colour, tuple(_pairs(run.series.get("requests_per_second"))))
        for run in ok
    )
    outages = sorted({o for run in ok for o in _pairs(run.series.get("outages"))})
    return _draw(
        _Plot("Backend requests per second", "s into the run", "requests", lines, tuple(outages))
    )


def _slowdown_plot(runs: Sequence[_Run]) -> str:
    lines = []
    for run in runs:
        slowdowns = sorted(_numbers(run.series.get("slowdowns")))
        if run.error is None and slowdowns:
            lines.append(_Line(run.label, run.colour, tuple(_steps(slowdowns, 1 / len(slowdowns)))))
    plot = _Plot(
        "Slowdown of completed streams (cumulative share)",
        "slowdown: time to complete / fault-free time",
        "share of completed streams",
        tuple(lines),
        x_lo=None,
        y_top=1.0,
        counts=False,
    )
    return _draw(plot)


def _draw(plot: _Plot) -> str:
    """A line plot: legend, both axes with their grids, shaded spans, one line each."""
    keys = [Key("line", line.colour, line.label) for line in plot.lines]
    keys += [Key("rect", OUTAGE, "outage")] if plot.shades else []
    head, top = legend(keys)
    top += 6
    bottom = top + PLOT_HEIGHT
    x, y = _scales(plot, top, bottom)
    parts = [head, _y_axis(y, plot.y_label), axis(x, bottom, plot.x_label, top)]
    parts += [_shade(x(a), x(b), top, bottom) for a, b in plot.shades]
    parts += [_polyline(line, x, y) for line in plot.lines if line.points]
    if not any(line.points for line in plot.lines):
        mid = (PLOT_LEFT + WIDTH - RIGHT) / 2
        parts.append(
            f"<text x='{mid}' y='{(top + bottom) / 2}' text-anchor='middle'>no data</text>"
        )
    chart = svg("".join(parts), bottom + AXIS_HEIGHT, plot.title)
    return f"<figure><h3>{_e(plot.title)}</h3>{chart}</figure>"


def _scales(plot: _Plot, top: float, bottom: float) -> tuple[Scale, Scale]:
    xs = [p[0] for line in plot.lines for p in line.points] + [e for s in plot.shades for e in s]
    ys = [p[1] for line in plot.lines for p in line.points]
    x_lo = min(xs, default=0.0) if plot.x_lo is None else plot.x_lo
    x_hi = max(xs, default=1.0)
    # Slowdowns span decades when an outage held a few streams: linear would crush the rest.
    log = x_lo > 0 and x_hi / x_lo > 20
    x = Scale(x_lo, x_hi if x_hi > x_lo else x_lo + 1, PLOT_LEFT, WIDTH - RIGHT, log)
    y_hi = plot.y_top or max([*ys, 1.0])
    y = Scale(0.0, y_hi, bottom, top, min_step=1.0 if plot.counts else 0.0)
    return x, y


def _y_axis(scale: Scale, label: str) -> str:
    """The vertical axis: ticks with their horizontal grid, the unit along the side."""
    bottom, top, right = scale.left, scale.right, WIDTH - RIGHT
    parts = [f"<line class='ax' x1='{PLOT_LEFT}' x2='{PLOT_LEFT}' y1='{top}' y2='{bottom}'/>"]
    for tick in scale.ticks():
        y = scale(tick)
        parts.append(
            f"<line class='grid' x1='{PLOT_LEFT}' x2='{right}' y1='{y:.1f}' y2='{y:.1f}'/>"
            f"<text x='{PLOT_LEFT - 6}' y='{y + 4:.1f}' text-anchor='end'>{number(tick)}</text>"
        )
    mid = (top + bottom) / 2
    parts.append(
        f"<text class='unit' x='14' y='{mid:.1f}' text-anchor='middle' "
        f"transform='rotate(-90 14 {mid:.1f})'>{_e(label)}</text>"
    )
    return "".join(parts)


def _shade(x0: float, x1: float, top: float, bottom: float) -> str:
    return (
        f"<rect x='{x0:.1f}' y='{top:.1f}' width='{max(x1 - x0, 1.0):.1f}' "
        f"height='{bottom - top:.1f}' fill='{OUTAGE}' opacity='0.7'/>"
    )


def _polyline(line: _Line, x: Scale, y: Scale) -> str:
    points = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in line.points)
    return (
        f"<polyline fill='none' stroke='{line.colour}' stroke-width='1.6' stroke-opacity='0.85' "
        f"stroke-linejoin='round' points='{points}'><title>{_e(line.label)}</title></polyline>"
    )


CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#212121}
main{max-width:1100px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:0 0 2px}h2{font-size:18px;margin:28px 0 4px;border-bottom:2px solid #333}
h3{font-size:13px;margin:14px 0 4px;color:#444}
.meta,.desc,.faults{color:#555;margin:0 0 8px;font-size:12.5px}.desc{color:#333;font-size:14px}
code{font:12px ui-monospace,monospace;background:#f6f7f8;padding:0 3px}
table.runs{border-collapse:collapse;margin:10px 0}
table.runs th,table.runs td{padding:3px 12px;border-bottom:1px solid #ddd;text-align:left;
vertical-align:top}
table.runs td{font-variant-numeric:tabular-nums}
table.runs tbody th{font-weight:600;white-space:nowrap;cursor:help}
table.runs small,.n,.ci{color:#666;font-weight:normal}.ci{font-size:12px}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px}
td.error{background:#fdecea;border-left:4px solid #c62828;max-width:28em}
td.error pre{white-space:pre-wrap;margin:0;font-size:12px}
figure{margin:8px 0}
svg.chart{max-width:100%;height:auto;border:1px solid #e5e5e5;background:#fff;display:block}
svg.chart text{font:11px system-ui,sans-serif;fill:#333}
svg.chart text.unit{fill:#666;font-style:italic}
svg.chart .ax{stroke:#555}svg.chart .grid{stroke:#eee}
"""


# -- one line and one table row per run (the terminal, the docs) -----------------------


def weather_lines(runs: list[dict[str, Any]]) -> list[str]:
    """One line per weather run, for the terminal summary and a failure's message."""
    out = []
    for run in runs:
        m = run.get("metrics")
        head = f"{run['weather']['key']}: {run['streams']} streams from {run['users']} users"
        if not m:
            out.append(f"{head}: not measured ({run.get('error')})")
            continue
        c = m["completed"]
        out.append(
            f"{head}, {run['timing']} time, {run['wall']:.1f} s: completed {c['value']:.1%} "
            f"[{c['low']:.1%}, {c['high']:.1%}], first try {m['first_try']['value']:.1%}, "
            f"failed honestly {m['failed_honestly']['count']}, silently "
            f"{m['failed_silently']['count']}, duplicated tokens {m['duplicated_tokens']}, "
            f"lost tokens {m['lost_tokens']}, requests per completed stream "
            + _ratio(m["requests_per_completed"])
        )
    return out


def _ratio(value: float | None) -> str:
    """Requests per completed stream; none completed: no ratio."""
    return "-" if value is None else f"{value:.2f}"


def weather_table(runs: Sequence[dict[str, Any]], command: str) -> str:
    """The weather table (Markdown) of ``runs`` (``WeatherRun.to_json()``), with the
    command that made it: rendered from the JSON, so the docs' table can be checked
    against the report it came from."""
    head = (
        "| client | weather | timing | streams | completed [95 % CI] | first try | failed "
        "honestly | failed silently | duplicated tokens | lost tokens | requests per "
        "completed | slowdown p95 | herd peak |"
    )
    rows = [head, "|" + "---|" * 13, *(_row(run) for run in runs)]
    return "\n".join([f"Made by `{command}`.", "", *rows])


def _row(run: dict[str, Any]) -> str:
    m, key = run.get("metrics"), run["weather"]["key"]
    if not m:
        error = str(run.get("error") or "").replace("|", "/")
        why = error.splitlines()[0][:120] if error else ""
        return f"| {run['target']} | {key} | | | ERROR: {why} |" + " |" * 8
    c = m["completed"]
    slow, herd = m.get("slowdown_p95"), m.get("herd_peak")
    cells = [
        run["target"],
        key,
        f"{run['timing']} ({run['wall']:.0f} s)",
        f"{m['streams']} / {run['users']} users",
        f"{c['value']:.1%} [{c['low']:.1%}, {c['high']:.1%}]",
        f"{m['first_try']['value']:.1%}",
        str(m["failed_honestly"]["count"]),
        str(m["failed_silently"]["count"]),
        str(m["duplicated_tokens"]),
        str(m["lost_tokens"]),
        _ratio(m["requests_per_completed"]),
        "" if slow is None else f"{slow:.2f}",
        "" if herd is None else str(herd),
    ]
    return "| " + " | ".join(cells) + " |"
