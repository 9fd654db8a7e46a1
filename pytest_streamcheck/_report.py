"""Reports: the per-case row that travels on pytest reports, the terminal summary,
and the JSON report (schema ``streamcheck-report/1``) with its HTML rendering."""

from __future__ import annotations

import html
import json
import platform
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from conformance._case import Verdict, catalog_key
from pytest_streamcheck import __version__
from pytest_streamcheck._llm import VERDICTS_KEY
from pytest_streamcheck._render import VERDICTS, render_summary
from pytest_streamcheck._runner import CaseResult
from pytest_streamcheck._session import StreamcheckSession

__all__ = ["SCHEMA", "Reporter", "build_report", "render_html", "report_row", "summary_lines"]

SCHEMA = "streamcheck-report/1"
REPORT_ATTR = "streamcheck"


def report_row(result: CaseResult, state: StreamcheckSession) -> dict[str, Any]:
    """JSON-ready data for one case: the chart always, full evidence only for cases that
    did not pass."""
    row = result.to_json()
    if result.verdict is Verdict.PASS:
        row.pop("evidence", None)
    known = state.known.reason_for(result.case.id)
    row["known_failure"] = known
    runner = state._runner
    if runner is not None:
        info = runner.info
        row["client"] = {
            "name": info.name,
            "version": info.version,
            "capabilities": sorted(info.capabilities),
        }
    return row


class Reporter:
    """Collects case rows (from this process, or from xdist workers) and writes reports."""

    def __init__(self, state: StreamcheckSession) -> None:
        self.state = state
        self.rows: list[dict[str, Any]] = []
        self.started = time.time()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = getattr(report, REPORT_ATTR, None)
        if isinstance(row, dict):
            self.rows.append(row)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.rows:
            return
        terminalreporter.section("streamcheck")
        for line in summary_lines(self.rows, self.state):
            terminalreporter.write_line(line)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.state.close()
        if hasattr(session.config, "workerinput"):
            return  # workers send their rows to the controller, which writes the report
        s = self.state.settings
        if not (s.report or s.html):
            return
        report = build_report(self.rows, self.state, time.time() - self.started)
        verdicts = session.config.stash.get(VERDICTS_KEY, None)  # --streamcheck-verdicts
        if verdicts is not None:
            report["verdicts"] = verdicts
        if s.report:
            s.report.parent.mkdir(parents=True, exist_ok=True)
            s.report.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
        if s.html:
            s.html.parent.mkdir(parents=True, exist_ok=True)
            s.html.write_text(render_html(report), encoding="utf-8")


def summary_lines(rows: Sequence[dict[str, Any]], state: StreamcheckSession) -> list[str]:
    s = state.settings
    client: dict[str, Any] = next((r["client"] for r in rows if r.get("client")), {})
    header = (
        f"client {client.get('name', s.target)} {client.get('version', '')}; "
        f"profiles {', '.join(p.key for p in s.profiles)}; seed {s.seed}"
    )
    lines = render_summary(rows, header)
    lax = [r for r in rows if r["verdict"] == "NON-STRICT"]
    if lax and not s.strict:
        lines.append("NON-STRICT (a SHOULD missed; fails only with --streamcheck-strict):")
        lines += [f"  {r['id']} {r['title']}: {r.get('observed', '')}" for r in lax]
    errors = [r for r in rows if r["verdict"] == "ERROR"]
    if errors:
        lines.append("ERROR (the harness or adapter broke; not counted against the client):")
        lines += [f"  {r['id']}: {r['reason'][:200]}" for r in errors]
    lines.append(f"reproduce with --streamcheck-seed={s.seed}")
    return lines


def build_report(
    rows: Iterable[dict[str, Any]], state: StreamcheckSession, duration: float
) -> dict[str, Any]:
    rows = sorted(rows, key=lambda r: catalog_key(r["id"]))
    s = state.settings
    client = next((r.get("client") for r in rows if r.get("client")), None) or {"name": s.target}
    counts = Counter(r["verdict"] for r in rows)
    conformant = (
        counts["FAIL"] == 0 and counts["ERROR"] == 0 and (not s.strict or counts["NON-STRICT"] == 0)
    )
    return {
        "schema": SCHEMA,
        "kit": {"name": "pytest-streamcheck", "version": __version__},
        "client": {**client, "target": s.target},
        "profiles": [p.to_json() for p in s.profiles],
        "timing": rows[0]["timing"] if rows else None,
        "seed": s.seed,
        "strict": s.strict,
        "platform": {
            "python": sys.version.split()[0],
            "system": platform.system(),
            "machine": platform.machine(),
            "release": platform.release(),
        },
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "duration": round(duration, 3),
        "summary": {v: counts[v] for v in VERDICTS},
        "conformant": conformant,
        "cases": [{k: v for k, v in r.items() if k != "client"} for r in rows],
    }


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
