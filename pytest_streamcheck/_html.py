"""The HTML rendering of the JSON report: one self-contained page."""

from __future__ import annotations

import html
from typing import Any

from pytest_streamcheck._render import VERDICTS

__all__ = ["render_html"]


_COLOURS = {
    "PASS": "#2e7d32",
    "FAIL": "#c62828",
    "NON-STRICT": "#ef6c00",
    "UNSUPPORTED": "#757575",
    "ERROR": "#6a1b9a",
}


def render_html(report: dict[str, Any]) -> str:
    """A self-contained page: the summary, then each case with its timeline drawn."""
    esc = html.escape
    client = report["client"]
    parts = [
        "<!doctype html><meta charset='utf-8'>",
        f"<title>streamcheck: {esc(str(client.get('name')))}</title>",
        "<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}"
        "td,th{padding:2px 8px;text-align:left}.v{color:#fff;padding:1px 6px;border-radius:3px}"
        "pre{background:#f6f6f6;padding:6px;overflow-x:auto}details{margin:4px 0}</style>",
        f"<h1>{esc(str(client.get('name')))} {esc(str(client.get('version', '')))}</h1>",
        f"<p>pytest-streamcheck {esc(report['kit']['version'])}; profiles "
        f"{esc(', '.join(p['name'] + '@' + str(p['version']) for p in report['profiles']))}; "
        f"timing {esc(str(report['timing']))}; seed {report['seed']}; "
        f"{'conformant' if report['conformant'] else 'NOT conformant'}</p>",
        "<table><tr>"
        + "".join(f"<th>{v}</th>" for v in VERDICTS)
        + "</tr><tr>"
        + "".join(f"<td>{report['summary'][v]}</td>" for v in VERDICTS)
        + "</tr></table>",
    ]
    for case in report["cases"]:
        verdict = case["verdict"]
        badge = f"<span class=v style='background:{_COLOURS[verdict]}'>{verdict}</span>"
        parts.append(
            f"<details{' open' if verdict in ('FAIL', 'ERROR') else ''}><summary>"
            f"{badge} <b>{esc(case['id'])}</b> [{case['level']}] "
            f"{esc(case['title'])}</summary>"
        )
        parts.append(f"<p>{esc(case['requirement'])}<br><i>{esc(case['source'])}</i></p>")
        if case.get("expected"):
            parts.append(
                f"<p>expected: {esc(case['expected'])}<br>observed: "
                f"{esc(case.get('observed', ''))}</p>"
            )
        if case.get("reason"):
            parts.append(f"<p>{esc(case['reason'])}</p>")
        if case.get("chart"):
            parts.append(_timeline_svg(case["chart"]))
        if case.get("timeline"):
            parts.append("<pre>" + esc("\n".join(case["timeline"])) + "</pre>")
        parts.append("</details>")
    return "\n".join(parts)


def _timeline_svg(chart: dict[str, Any], width: int = 900) -> str:
    """Attempts as bars (arrival to end), sent events as ticks, deliveries as dots."""
    t0 = chart["started_at"]
    attempts = chart["attempts"]
    deliveries = chart["deliveries"]
    ends = [a["ended_at"] or a["arrived_at"] for a in attempts] + [d["at"] for d in deliveries]
    span: float = max([float(e) - t0 for e in ends] + [0.001])

    def x(t: float) -> float:
        return float(10 + (t - t0) / span * (width - 20))

    rows = []
    for i, a in enumerate(attempts):
        y = 10 + i * 18
        end = a["ended_at"] or a["arrived_at"]
        rows.append(
            f"<rect x='{x(a['arrived_at']):.1f}' y='{y}' height='12' "
            f"width='{max(x(end) - x(a['arrived_at']), 1):.1f}' fill='#90caf9'>"
            f"<title>attempt {a['seq']}: {a['status']} {a['end']}</title></rect>"
        )
        rows += [
            f"<line x1='{x(at):.1f}' x2='{x(at):.1f}' y1='{y}' y2='{y + 12}' stroke='#1565c0'/>"
            for at in a["events"]
        ]
    y = 14 + len(attempts) * 18
    colours = {"chunk": "#2e7d32", "error": "#c62828", "done": "#000", "state": "#9e9e9e"}
    rows += [_dot(x(d["at"]), y, d, colours) for d in deliveries]
    height = y + 14
    return (
        f"<svg width='{width}' height='{height}' style='border:1px solid #ddd'>"
        + "".join(rows)
        + f"<text x='10' y='{height - 2}' font-size='10'>0 ms</text>"
        f"<text x='{width - 60}' y='{height - 2}' font-size='10'>{span * 1000:.0f} ms</text>"
        "</svg>"
    )


def _dot(cx: float, cy: int, delivery: dict[str, Any], colours: dict[str, str]) -> str:
    title = html.escape(f"{delivery['kind']} {delivery['label']}")
    colour = colours.get(delivery["kind"], "#999")
    return f"<circle cx='{cx:.1f}' cy='{cy}' r='3' fill='{colour}'><title>{title}</title></circle>"
