"""The weather report: its JSON, its standalone HTML page with three SVG plots, and
where it refuses to write."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from conformance.weather import StreamOutcome, WeatherRun, get_weather, run_weather, summarize
from pytest_streamcheck import __version__
from pytest_streamcheck.reports._weather import (
    WEATHER_SCHEMA,
    check_weather_paths,
    render_weather_html,
    weather_report,
    write_weather_report,
)
from pytest_streamcheck.targets._load import load_target

HOSTILE = "<script>alert(1)</script>"


def _outcome(
    number: int, *, end: str = "done", lost: int = 0, took: float = 10.0, attempts: int = 1
) -> StreamOutcome:
    """A 10-token stream whose fault-free time is 10 s, started at ``number`` s."""
    seen = tuple(range(1, 11 - lost)) if end != "unfinished" else ()
    return StreamOutcome(
        number=number,
        tokens=10,
        fault_free=10.0,
        started_at=float(number),
        end=end,  # type: ignore[arg-type]
        ended_at=None if end == "unfinished" else number + took,
        attempts=attempts,
        seen=seen,
        stalls=0,
    )


def _run(
    target: str,
    outcomes: Sequence[StreamOutcome],
    *,
    outages: tuple[tuple[float, float], ...] = (),
    error: str | None = None,
) -> WeatherRun:
    """A run of ``outcomes`` as run_weather would make it (origin at 0 s)."""
    arrivals = [o.started_at for o in outcomes for _ in range(o.attempts)]
    metrics = None if error else summarize(outcomes, arrivals, outages)
    per_second: dict[int, int] = {}
    for t in arrivals:
        per_second[int(t)] = per_second.get(int(t), 0) + 1
    return WeatherRun(
        target=target,
        client=target,
        weather=get_weather("seed-mix"),
        timing="virtual",
        seed=7,
        streams=len(outcomes),
        users=2,
        wall=0.25,
        played=60.0,
        metrics=metrics,
        error=error,
        outcomes=tuple(outcomes),
        faults={"status_5xx": 1},
        attempts_clear=4,
        requests_per_second=tuple(sorted(per_second.items())),
        completions=tuple(sorted(o.ended_at for o in outcomes if o.completed and o.ended_at)),
        outages=outages,
    )


def _good() -> WeatherRun:
    """3 of 4 completed (one after a retry, twice as slow), one failed honestly."""
    return _run(
        "steady-client",
        [
            _outcome(1),
            _outcome(2, took=20.0, attempts=2),
            _outcome(3),
            _outcome(4, end="error", took=3.0),
        ],
        outages=((0.5, 1.5),),  # the retry lands just after it
    )


def _bad() -> WeatherRun:
    """1 of 4 completed; one reported done with tokens missing, two never ended."""
    return _run(
        "textbook-client",
        [
            _outcome(1),
            _outcome(2, lost=4),
            _outcome(3, end="unfinished"),
            _outcome(4, end="unfinished"),
        ],
    )


def test_report_holds_the_schema_and_every_run() -> None:
    good, bad = _good(), _bad()
    report = weather_report([good, bad], command="streamcheck weather seed-mix")
    assert report["schema"] == WEATHER_SCHEMA == "streamcheck-weather/1"
    assert report["kit"]["version"] == __version__
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report["generated_at"])
    assert report["command"] == "streamcheck weather seed-mix"
    assert [r["target"] for r in report["runs"]] == ["steady-client", "textbook-client"]
    first = report["runs"][0]
    assert first["weather"]["key"] == "seed-mix@1"
    assert first["metrics"]["completed"] == good.to_json()["metrics"]["completed"]
    assert first["metrics"]["completed"]["count"] == 3
    # The completed streams' slowdowns only: the failed one's 3 s is not among them.
    assert first["series"]["slowdowns"] == [1.0, 1.0, 2.0]
    json.dumps(report, allow_nan=False)


def test_a_run_with_nothing_completed_is_strict_json() -> None:
    """Requests per completed stream is infinite there: null in the report."""
    run = _run("hopeless", [_outcome(1, end="error"), _outcome(2, end="unfinished")])
    assert run.metrics is not None
    assert run.metrics.requests_per_completed == float("inf")
    report = weather_report([run])
    assert report["runs"][0]["metrics"]["requests_per_completed"] is None
    json.dumps(report, allow_nan=False)
    assert "none completed" in render_weather_html(report)


def test_the_page_shows_the_clients_side_by_side_with_three_plots() -> None:
    page = render_weather_html(weather_report([_good(), _bad()]))
    assert page.startswith("<!doctype html>")
    assert "<h1>Network weather: seed-mix@1</h1>" in page
    assert "steady-client" in page
    assert "textbook-client" in page
    assert "75.0% <span class='ci'>[" in page  # completed, with its interval
    assert "(3/4)" in page
    assert "25.0%" in page
    assert "1.00&times; / 1.90&times;" in page  # slowdown p50 / p95: the retry took 2x
    assert "2 req/s" in page  # the herd peak: stream 2's two requests, just after the outage
    assert "no outage" in page
    assert page.count("<svg") == 3
    for title in ("Completion over time", "Backend requests per second", "Slowdown"):
        assert title in page
    assert "outage</text>" in page  # the shaded outage has its legend entry
    assert "<script" not in page
    assert "http" not in page


def test_hostile_strings_are_escaped() -> None:
    run = _run(HOSTILE, [_outcome(1)])
    failed = _run("x", [_outcome(1)], error=f"broke: {HOSTILE}")
    page = render_weather_html(weather_report([run, failed], command=HOSTILE))
    assert HOSTILE not in page
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_run_with_an_error_shows_the_error_instead_of_figures() -> None:
    failed = _run("broken-client", [_outcome(1)], error="the adapter never said hello")
    page = render_weather_html(weather_report([_good(), failed]))
    assert "the adapter never said hello" in page
    assert "rowspan=" in page
    assert page.count("<td>") == page.count("<tr>") - 1  # one figure a row: the good run's


def test_a_malformed_report_still_renders() -> None:
    """A saved report is read, never trusted: wrong types show as missing figures."""
    report = {
        "runs": [
            {"target": 3, "metrics": {"completed": "all"}, "series": {"completions": ["a"]}},
            "junk",
        ]
    }
    page = render_weather_html(report)
    assert page.count("<svg") == 3


def test_writing_both_files_and_reading_them_back(tmp_path: Path) -> None:
    json_path, html_path = tmp_path / "weather.json", tmp_path / "weather.html"
    report = write_weather_report(
        [_good(), _bad()], json_path=json_path, html_path=html_path, command="c"
    )
    saved = json.loads(json_path.read_text(encoding="utf-8"))
    assert saved == report
    page = html_path.read_text(encoding="utf-8")
    assert page == render_weather_html(saved)  # a saved report renders the same page


def test_writing_refuses_a_directory_or_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"JSON report: .*is a directory"):
        write_weather_report([_good()], json_path=tmp_path, html_path=None)
    missing = tmp_path / "no-such-folder" / "weather.html"
    ok = tmp_path / "weather.json"
    with pytest.raises(ValueError, match=r"HTML report: .*its folder does not exist"):
        write_weather_report([_good()], json_path=ok, html_path=missing)
    assert not ok.exists()  # both paths are checked before either is written
    with pytest.raises(ValueError, match="is a directory"):  # checked before a long run too
        check_weather_paths(None, tmp_path)
    check_weather_paths(ok, None)


def test_a_real_weather_run_renders() -> None:
    run = run_weather(
        load_target("reference"), get_weather("flaky-backend"), streams=10, users=5, seed=1
    )
    assert run.error is None
    assert run.metrics is not None
    report = weather_report([run])
    json.dumps(report, allow_nan=False)
    page = render_weather_html(report)
    assert "flaky-backend@1" in page
    assert run.target in page
    assert f"({run.metrics.completed.count}/10)" in page
    assert page.count("<svg") == 3
    assert "no data" not in page
