"""The HTML report, checked in a real headless browser: Chromium from the distribution's
packages (``apt-get install chromium``), driven by Playwright for Python.

One real run with a failure (a zoo client whose jitter is too wide) makes the report;
one browser serves the whole module. Without Playwright or Chromium the browser tests
skip, saying how to get them.
"""

from __future__ import annotations

import copy
import html
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from plugin_targets._pytester import PLAIN, SEED_ENV, only

from conformance._case import all_cases
from pytest_streamcheck.reports._html import render_html

TESTS = Path(__file__).parent
TARGET = "zoo:jitter_too_wide"
FAILING = "SC-BACKOFF-9"  # the jitter case: its delays overshoot the declared range
CASES = (FAILING, "SC-RETRY-2", "SC-COMMIT-5", "SC-BREAKER-1", "SC-STALL-1", "SC-BREAKER-15")
UNSUPPORTED = "SC-BREAKER-15"  # a ratio breaker: not in the default profiles
POST = "SC-RETRY-2"  # the only POST case; the others are GET
HOW_TO_GET_CHROMIUM = "no Chromium: apt-get install chromium (Debian/Ubuntu) runs these tests"
LAPTOP = {"width": 1366, "height": 768}


@dataclass(frozen=True)
class Run:
    report: dict[str, Any]
    html: Path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A real run of six cases against a broken client, with its JSON and HTML reports."""
    where = tmp_path_factory.mktemp("html-report")
    (where / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if k != SEED_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    args = [*PLAIN, f"--streamcheck={TARGET}", "-k", only(*CASES), "-q"]
    args += ["--streamcheck-report=report.json", "--streamcheck-html=report.html"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the one FAIL
    report = json.loads((where / "report.json").read_text(encoding="utf-8"))
    return Run(report, where / "report.html")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="no Playwright: pip install -e '.[test]' installs it"
    )
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip(HOW_TO_GET_CHROMIUM)
    with sync_api.sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=chromium)
        except sync_api.Error as exc:  # installed but unusable here: skip, never fail
            pytest.skip(f"Chromium at {chromium} does not start ({exc}); {HOW_TO_GET_CHROMIUM}")
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, run: Run) -> Iterator[Any]:
    """The report opened at a laptop's size; the test fails on any script error."""
    opened = browser.new_page(viewport=LAPTOP)
    opened.set_default_timeout(5000)  # a missing element fails in seconds, not 30
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.goto(run.html.as_uri())
    yield opened
    opened.close()
    assert not errors, errors


def _visible_ids(page: Any) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(
        "details.case", "els => els.filter(e => e.offsetParent !== null).map(e => e.id)"
    )
    return ids


# -- the page in a browser ------------------------------------------------------------------


def test_the_headline_gives_the_verdict_and_coverage(page: Any) -> None:
    headline = page.locator("#headline")
    assert headline.is_visible()
    assert "NOT conformant" in headline.inner_text()
    assert "1 FAIL" in headline.inner_text()
    assert headline.locator(f"a[href='#{FAILING}']").is_visible()
    coverage = page.locator("#coverage").inner_text()
    total = len(all_cases())
    assert f"Judged 5 of 5 applicable cases (6 of the catalog's {total} selected)" in coverage
    assert f"not conformant: {total - 6} of the catalog's {total} cases not selected; 1 FAIL" in (
        coverage
    )
    # The area x verdict table: the failure is counted under its area.
    cell = page.locator("#areas a[data-area='BACKOFF'][data-verdict='FAIL']")
    assert cell.inner_text() == "1"


def test_failures_come_first_open_and_every_row_names_its_transport(page: Any) -> None:
    assert _visible_ids(page)[0] == FAILING
    assert page.locator(f"#{FAILING}").get_attribute("open") is not None
    assert page.locator("details.case[data-verdict='PASS'][open]").count() == 0
    rows = page.locator("details.case > summary")
    assert rows.count() == len(CASES)
    for i in range(rows.count()):
        assert rows.nth(i).locator(".tr").inner_text() in ("GET", "POST")
        assert rows.nth(i).locator(".dur").inner_text().endswith(("ms", " s"))


def test_filters_show_only_the_matching_cases(page: Any) -> None:
    page.select_option("#f-verdict", "FAIL")
    assert _visible_ids(page) == [FAILING]
    assert page.locator("#f-count").inner_text() == f"showing 1 of {len(CASES)} cases"
    page.select_option("#f-transport", "post")  # the failing case is GET: nothing left
    assert _visible_ids(page) == []
    assert page.locator("#none").is_visible()
    page.select_option("#f-verdict", "")
    assert _visible_ids(page) == [POST]
    page.click("#f-reset")
    assert sorted(_visible_ids(page)) == sorted(CASES)
    page.select_option("#f-area", "BREAKER")
    page.select_option("#f-level", "MUST")
    assert sorted(_visible_ids(page)) == ["SC-BREAKER-1", UNSUPPORTED]
    page.fill("#f-text", "breaker-15")
    assert _visible_ids(page) == [UNSUPPORTED]
    # A count in the area table sets the filters to its area and verdict.
    page.click("#f-reset")
    page.click("#areas a[data-area='BACKOFF'][data-verdict='FAIL']")
    assert page.input_value("#f-verdict") == "FAIL"
    assert _visible_ids(page) == [FAILING]


def test_an_expanded_failure_draws_what_was_judged_with_axis_and_legend(page: Any) -> None:
    page.click("#f-close")
    case = page.locator(f"#{FAILING}")
    assert not case.locator("figure.judged").is_visible()
    case.locator("summary").click()
    judged = case.locator("figure.judged svg")
    assert judged.is_visible()
    assert "first delay" in case.locator("figure.judged h3").inner_text()
    assert judged.locator("g.legend").is_visible()
    assert "declared" in judged.locator("g.legend").text_content()  # its band or range
    assert "ms" in judged.locator("text.unit").text_content()
    assert judged.locator("line.ax").count() > 3  # the baseline and its ticks
    assert judged.locator("circle.s").count() == 50  # a dot per client's first delay
    timeline = case.locator("figure.timeline svg")
    assert timeline.is_visible()
    assert timeline.locator("text.unit").text_content() == "ms since the case started"
    assert "attempt: error status or broken" in timeline.locator("g.legend").text_content()


def test_every_drawing_has_a_legend_and_an_axis(page: Any, run: Run) -> None:
    page.click("#f-open")
    charts = page.locator("svg.chart")
    ran = [c for c in run.report["cases"] if c["verdict"] != "UNSUPPORTED"]
    assert charts.count() >= 2 * len(ran) - 1  # a timeline each, a figure for most
    for i in range(charts.count()):
        chart = charts.nth(i)
        assert chart.is_visible()
        assert chart.locator("g.legend text").count() >= 1
        assert chart.locator("text.unit").count() == 1
    titles = page.locator("figure.judged h3").all_inner_texts()
    assert any("states over time" in t for t in titles)  # the breaker
    assert any("silent gap" in t for t in titles)  # the stall
    assert any("Chunks delivered" in t for t in titles)  # the commit


def test_a_link_opens_its_case_and_the_page_fits_a_laptop(page: Any, run: Run) -> None:
    page.select_option("#f-verdict", "FAIL")  # hides the case the link points to
    page.goto(run.html.as_uri() + "#SC-COMMIT-5")
    case = page.locator("#SC-COMMIT-5")
    assert case.get_attribute("open") is not None
    assert case.locator("figure.judged svg").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= LAPTOP["width"]


def test_inconclusive_noise_and_a_checks_own_figure(browser: Any, run: Run, tmp_path: Path) -> None:
    """Rows from a newer kit: an INCONCLUSIVE verdict with its measured noise, and a
    check's structured figure, drawn as a strip of delays against the band."""
    report = copy.deepcopy(run.report)
    report["conformant"] = True  # even so: an inconclusive case is not conformant
    cases = {c["id"]: c for c in report["cases"]}
    for case in report["cases"]:
        if case["verdict"] == "FAIL":
            case["verdict"] = "PASS"
    cases[POST].update(verdict="INCONCLUSIVE", noise=_NOISE)
    cases[FAILING]["figure"] = _FIGURE
    path = tmp_path / "newer.html"
    path.write_text(render_html(report), encoding="utf-8")
    page = browser.new_page(viewport=LAPTOP)
    page.set_default_timeout(5000)
    try:
        page.goto(path.as_uri())
        assert "NOT conformant" in page.inner_text("#headline")
        assert "1 INCONCLUSIVE" in page.inner_text("#headline")
        assert _visible_ids(page)[0] == POST
        badge = page.locator(f"#{POST} summary .v")
        styles = page.evaluate(
            "s => [...document.querySelectorAll(s)].map(e => getComputedStyle(e).backgroundImage)",
            "details.case summary .v",
        )
        assert badge.evaluate("e => getComputedStyle(e).backgroundImage").startswith("repeating")
        assert styles.count(styles[0]) == 1, "INCONCLUSIVE looks like no other verdict"
        noise = page.locator(f"#{POST} table.noise")
        assert noise.is_visible()
        assert "client loop" in noise.inner_text()
        assert "12.0" in noise.inner_text()  # the client loop's p99, in ms
        page.locator(f"#{FAILING} summary").click()
        figure = page.locator(f"#{FAILING} figure.judged")
        assert figure.locator("h3").inner_text() == _FIGURE["label"]
        assert figure.locator("svg circle.s").count() == len(_FIGURE["samples"])
        assert figure.locator("svg circle.s[fill='#c62828']").count() == 1  # ok: false
        assert "4 samples: 2 in the band" in figure.inner_text()
    finally:
        page.close()


_NOISE = {
    "client_loop": {"p50": 0.001, "p99": 0.012, "max": 0.03},
    "server_loop": {"p50": 0.0005, "p99": 0.002, "max": 0.004},
    "proxy_loop": {"p50": 0.0004, "p99": 0.001, "max": 0.002},
}
_FIGURE: dict[str, Any] = {
    "kind": "delays",
    "label": "first delays of 4 clients",
    "unit": "s",
    "band": [0.3, 0.45],
    "slack": 0.06,
    "samples": [
        {"client": "u0", "value": 0.31, "ok": True},
        {"client": "u1", "value": 0.44, "ok": True},
        {"client": "u2", "value": 0.48, "ok": None},
        {"client": "u3", "value": 0.7, "ok": False},
    ],
}


# -- the markup, no browser needed ----------------------------------------------------------


def _minimal(**case: Any) -> dict[str, Any]:
    row = {"id": "SC-RETRY-1", "area": "RETRY", "title": "t", "level": "MUST"}
    row.update({"verdict": "FAIL", "transport": "get", "requirement": "r", "source": "s"})
    row.update(case)
    return {"client": {"name": "c"}, "conformant": False, "cases": [row]}


def test_all_data_is_escaped() -> None:
    page = render_html(
        _minimal(title="<script>alert(1)</script>", expected="x", observed="a & 'b'")
    )
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a &amp; &#x27;b&#x27;" in page


def test_a_row_it_cannot_read_draws_no_figure_and_breaks_nothing() -> None:
    bad = {"kind": "delays", "samples": [{"value": "soon"}]}
    page = render_html(_minimal(area="BACKOFF", figure=bad, chart={"started_at": "x"}))
    assert "SC-RETRY-1" in page
    assert "<figure" not in page


def test_a_figure_with_a_band_per_sample_gets_a_lane_per_sample() -> None:
    """Envelope-style figures: each retry has its own band, and the interval its wait
    lies in (least to most) is drawn around the measured value."""
    retries = [
        {"label": f"retry {n}", "value": v, "least": v - 0.002, "most": v + 0.001}
        | {"band": [low, high], "ok": ok}
        for n, v, low, high, ok in ((1, 0.25, 0.2, 0.3, True), (2, 0.9, 0.4, 0.6, False))
    ]
    figure = {"kind": "delays", "label": "waits", "unit": "s", "band": [0.2, 0.6]}
    page = render_html(_minimal(area="BACKOFF", figure={**figure, "samples": retries}))
    assert page.count("<text class='lane'") == 2
    assert ">retry 1</text>" in page
    assert ">retry 2</text>" in page
    assert page.count("<line class='span'") == 2
    assert "between 248.0 and 251.0" in page


def test_the_page_is_self_contained(run: Run) -> None:
    """Nothing to fetch: no stylesheet, script, image or font from elsewhere."""
    page = run.html.read_text(encoding="utf-8")
    for fetches in ("<link", "<script src", "<img", "<iframe", "url(", "@import"):
        assert fetches not in page


def test_a_failure_says_how_to_fix_it_and_its_command_reproduces_it(
    run: Run, tmp_path: Path
) -> None:
    """The failing case's page shows the advice for its area and a command; that command,
    run as written, plays the one case again, with the run's seed, to the same FAIL."""
    from pytest_streamcheck.reports._render import reproduce_command

    failing = next(c for c in run.report["cases"] if c["id"] == FAILING)
    command = reproduce_command(run.report, failing)
    page = run.html.read_text(encoding="utf-8")
    assert "How to fix it" in page
    assert "Jitter" in page
    assert html.escape(command) in page
    passed = next(c for c in run.report["cases"] if c["verdict"] == "PASS")
    assert html.escape(reproduce_command(run.report, passed)) in page
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if k != SEED_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    argv = shlex.split(command)
    assert argv[0] == "pytest"
    assert f"--streamcheck-seed={run.report['seed']}" in argv
    done = subprocess.run(
        [sys.executable, "-m", *argv, *PLAIN, "--streamcheck-report=again.json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    again = json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))
    assert [(c["id"], c["verdict"]) for c in again["cases"]] == [(FAILING, "FAIL")], done.stdout
