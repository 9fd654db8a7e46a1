"""Reports: the rows that travel on pytest reports, the terminal summary, and the JSON
report (schema ``streamcheck-report/1``) with its HTML rendering.

The one writer of the report schema: a case's row (``--streamcheck``) and a test's app
verdict (``--streamcheck-verdicts``, from ``llm_server``) are put on pytest's reports
here, collected here (from this process or xdist workers) and written here.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections import Counter
from collections.abc import Generator, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conformance._case import Verdict, catalog_key
from conformance._coverage import Coverage, coverage
from pytest_streamcheck import __version__
from pytest_streamcheck._llm import VERDICT_ROW_KEY
from pytest_streamcheck.reports._render import KNOWN, VERDICTS, column_of, render_summary

if TYPE_CHECKING:
    from conformance._result import CaseResult
    from pytest_streamcheck._session import StreamcheckSession

__all__ = [
    "REPORT_ATTR",
    "SCHEMA",
    "VERDICT_ATTR",
    "Reporter",
    "build_report",
    "report_row",
    "summary_lines",
]

SCHEMA = "streamcheck-report/1"
# Rows ride on pytest's reports as plain data, so they cross xdist to the controller.
REPORT_ATTR = "streamcheck"  # a case's row
VERDICT_ATTR = "streamcheck_verdict"  # a test's app verdict, on its teardown report


def report_row(
    result: CaseResult, state: StreamcheckSession, *, written: bool = True
) -> dict[str, Any]:
    """JSON-ready data for one case. For a report ``written`` out: the timeline and chart
    always, full evidence only for cases that did not pass. Otherwise (the terminal
    summary alone) neither: building them cost some 5 ms a case."""
    passed = result.verdict is Verdict.PASS
    row = result.to_json(timeline=written, evidence=written and not passed)
    known = state.known.reason_for(result.case.id)
    row["known_failure"] = known
    # Stale: listed as a known failure, yet the case passes (pytest's XPASS).
    row["stale"] = known is not None and result.verdict is Verdict.PASS
    info = state.lanes.info
    if info is not None:
        row["client"] = {
            "name": info.name,
            "version": info.version,
            "capabilities": sorted(info.capabilities),
            "wire_format": info.wire_format,
        }
    return row


class Reporter:
    """Puts rows on reports, collects them (here or from xdist workers), writes reports.

    ``state`` is the streamcheck run's (None without ``--streamcheck``); ``verdicts``
    says whether ``--streamcheck-verdicts`` is on; ``path`` is the JSON report's.
    """

    def __init__(
        self, state: StreamcheckSession | None, *, verdicts: bool, path: Path | None
    ) -> None:
        self.state = state
        self.path = path
        self.rows: list[dict[str, Any]] = []  # cases
        self.verdicts: list[dict[str, Any]] | None = [] if verdicts else None
        self.weather: list[dict[str, Any]] = []  # --streamcheck-weather runs
        self.started = time.time()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if self.state is not None:
            self._case_row(item, call, report, self.state, self._written(self.state))
        verdict = item.stash.get(VERDICT_ROW_KEY, None)  # left there by llm_server
        if self.verdicts is not None and call.when == "teardown" and verdict is not None:
            setattr(report, VERDICT_ATTR, verdict)
        return report

    def _written(self, state: StreamcheckSession) -> bool:
        """Whether a report is written out (JSON, HTML, a bundle), so rows need their
        timelines and evidence. The same on xdist's workers as on its controller."""
        s = state.settings
        return self.path is not None or s.html is not None or s.certify is not None

    @staticmethod
    def _case_row(
        item: pytest.Item,
        call: pytest.CallInfo[None],
        report: pytest.TestReport,
        state: StreamcheckSession,
        written: bool,
    ) -> None:
        from pytest_streamcheck._items import CaseItem
        from pytest_streamcheck._weather_item import WEATHER_ATTR, WeatherItem

        if isinstance(item, WeatherItem) and call.when == "call" and item.run is not None:
            setattr(report, WEATHER_ATTR, item.run.to_json())
        if not isinstance(item, CaseItem):
            return
        result = item.result
        if result is not None and call.when == "setup":
            # The setup waited for the case's lane (and, in a lane, for the cases ahead
            # of it): its duration, as JUnit's time and --durations show it, is the
            # case's own play instead.
            report.duration = result.duration
        reported = getattr(item, "_streamcheck_reported", False)
        # Once per case: on its call, or on the setup that failed or skipped it.
        if result is not None and not reported and (call.when == "call" or not report.passed):
            setattr(report, REPORT_ATTR, report_row(result, state, written=written))
            item._streamcheck_reported = True  # type: ignore[attr-defined]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from pytest_streamcheck._weather_item import WEATHER_ATTR

        row = getattr(report, REPORT_ATTR, None)
        if isinstance(row, dict):
            self.rows.append(row)
        run = getattr(report, WEATHER_ATTR, None)
        if isinstance(run, dict):
            self.weather.append(run)
        verdict = getattr(report, VERDICT_ATTR, None)
        if self.verdicts is not None and isinstance(verdict, dict):
            self.verdicts.append(verdict)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.rows and self.state is not None:
            terminalreporter.section("streamcheck")
            for line in summary_lines(self.rows, self.state):
                terminalreporter.write_line(line)
        if self.weather:
            from pytest_streamcheck.reports._weather import weather_lines

            terminalreporter.section("streamcheck weather")
            for line in weather_lines(self.weather):
                terminalreporter.write_line(line)
        if self.verdicts is not None:
            terminalreporter.section("streamcheck verdicts")
            for line in verdict_lines(self.verdicts):
                terminalreporter.write_line(line)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.state is not None:
            self.state.close()
        if hasattr(session.config, "workerinput"):
            return  # workers send their rows to the controller, which writes the report
        html = self.state.settings.html if self.state is not None else None
        if self.path is None and html is None:
            return
        duration = time.time() - self.started
        if self.state is not None:
            report = build_report(self.rows, self.state, duration)
        else:  # --streamcheck-verdicts alone: no suite ran
            report = _header(duration) | {"cases": []}
        if self.verdicts is not None:
            report["verdicts"] = sorted(self.verdicts, key=lambda r: str(r["test"]))
        if self.weather:
            report["weather"] = self.weather
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
        if html is not None:
            from pytest_streamcheck.reports._html import render_html

            html.parent.mkdir(parents=True, exist_ok=True)
            html.write_text(render_html(report), encoding="utf-8")


def verdict_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The "streamcheck verdicts" section: each test whose client mishandled a fault."""
    if not rows:
        return ["no client mishandled a fault"]
    lines = []
    for row in sorted(rows, key=lambda r: str(r["test"])):
        lines.append(f"{row['test']}")
        lines += [f"  {line}" for line in str(row["rendered"]).splitlines()]
    must = sum(not row["ok"] for row in rows)
    lines.append(
        f"{len(rows)} test(s) whose client mishandled a fault ({must} with a MUST finding)"
    )
    return lines


def _header(duration: float) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kit": {"name": "pytest-streamcheck", "version": __version__},
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "duration": round(duration, 3),
    }


def summary_lines(rows: Sequence[dict[str, Any]], state: StreamcheckSession) -> list[str]:
    s = state.settings
    client: dict[str, Any] = next((r["client"] for r in rows if r.get("client")), {})
    header = (
        f"client {client.get('name', s.target)} {client.get('version', '')}; "
        f"profiles {', '.join(p.key for p in state.profiles)}; "
        f"{run_timing(rows) or 'no'} timing; seed {s.seed}"
    )
    covered = run_coverage(rows, state)
    lines = render_summary(rows, header, known=bool(state.known.entries), covered=covered)
    lax = [r for r in rows if r["verdict"] == "NON-STRICT" and not r.get("known_failure")]
    if lax and not s.strict:
        lines.append("NON-STRICT (a SHOULD missed; fails only with --streamcheck-strict):")
        lines += [f"  {r['id']} {r['title']}: {r.get('observed', '')}" for r in lax]
    errors = [r for r in rows if r["verdict"] == "ERROR"]
    if errors:
        lines.append("ERROR (the harness or adapter broke; not counted against the client):")
        lines += _grouped(errors)
    lines += _stale_lines(rows, state)
    lines += _noise_lines(rows)
    lines.append(f"reproduce with --streamcheck-seed={s.seed}")
    return lines


def run_timing(rows: Iterable[dict[str, Any]]) -> str | None:
    """The timing the run's cases were judged at (``virtual``, ``test`` or ``real``), or
    ``mixed``; None for a run that played nothing."""
    timings = {r["timing"] for r in rows if r.get("timing")}
    return None if not timings else timings.pop() if len(timings) == 1 else "mixed"


def _noise_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Cases the measured noise made the kit re-judge, or leave undecided."""
    lines = []
    rejudged = [r for r in rows if r.get("rejudged") and r["verdict"] != "INCONCLUSIVE"]
    if rejudged:
        lines.append(
            f"re-judged alone (at the scale shown) after an undecidable try ({len(rejudged)}): "
            + ", ".join(f"{r['id']} at x{r['factor']:g}" for r in rejudged)
        )
    undecided = [r for r in rows if r["verdict"] == "INCONCLUSIVE"]
    if undecided:
        lines.append(
            "INCONCLUSIVE (the kit's own measured noise hid the verdict; the run is not "
            "conformant, and not a failure of the client):"
        )
        lines += _grouped(undecided)
    return lines


def _grouped(errors: Sequence[dict[str, Any]]) -> list[str]:
    """One line per distinct reason: a client that never started is one line, not 138."""
    by_reason: dict[str, list[str]] = {}
    for r in errors:
        by_reason.setdefault((r["reason"].splitlines() or [""])[0][:200], []).append(r["id"])
    lines = []
    for reason, ids in by_reason.items():
        more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
        lines.append(f"  {', '.join(ids[:3])}{more}: {reason}")
    return lines


def _stale_lines(rows: Sequence[dict[str, Any]], state: StreamcheckSession) -> list[str]:
    stale = [r for r in rows if r.get("stale")]
    if not stale:
        return []
    head = (
        f"STALE known failures (listed in {state.settings.known_failures} but passing now: "
        f"remove them; they fail the run under --streamcheck-strict or xfail_strict):"
    )
    return [head, *(f"  {r['id']} {r['title']}: {r['known_failure']}" for r in stale)]


def run_coverage(rows: Iterable[dict[str, Any]], state: StreamcheckSession) -> Coverage:
    """What the run judged against the whole catalog (conformance._coverage)."""
    catalog = {case.id: case.area for case in state.cases}
    return coverage(rows, catalog, strict=state.settings.strict)


def build_report(
    rows: Iterable[dict[str, Any]], state: StreamcheckSession, duration: float
) -> dict[str, Any]:
    rows = sorted(rows, key=lambda r: catalog_key(r["id"]))
    s = state.settings
    client = next((r.get("client") for r in rows if r.get("client")), None) or {"name": s.target}
    counts = Counter(r["verdict"] for r in rows)
    covered = run_coverage(rows, state)
    return {
        "schema": SCHEMA,
        "kit": {"name": "pytest-streamcheck", "version": __version__},
        "client": {**client, "target": s.target},
        "profiles": [p.to_json() for p in state.profiles],
        "timing": run_timing(rows),
        # the format the cases' plain endpoints spoke; "auto": by the request's path
        "wire_format": s.wire_format or client.get("wire_format") or "auto",
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
        "conformant": covered.conformant,
        "coverage": covered.to_json(),
        "selection": state.selection(),
        "known_failures": {
            "file": str(s.known_failures) if s.known_failures else None,
            "xfailed": [r["id"] for r in rows if column_of(r) == KNOWN],
            "stale": [r["id"] for r in rows if r.get("stale")],
        },
        "cases": [{k: v for k, v in r.items() if k != "client"} for r in rows],
    }
