"""Make docs/img/report.png: the HTML report of a real run with failures, at a laptop's width.

The client is the zoo's reference client with five mistakes at once (too wide a jitter,
a breaker that opens one failure late, no stall detection, retrying 401, and passing
off a broken stream as complete), so the report has failures in several areas; a short
case time limit turns the hung stall cases into ERRORs. Needs Chromium
(``apt-get install chromium``) and Playwright (the ``[test]`` extra). Run from the
repository root: ``python docs/img/report_png.py [DIR]`` (DIR keeps the page).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "img" / "report.png"
FIGURE = ROOT / "docs" / "img" / "report-jitter.png"
FIGURE_CASE = "SC-BACKOFF-9"  # too wide a jitter: the delays overshoot the band
WIDTH, HEIGHT = 1366, 1500  # a laptop's width; the headline, the table, the first failure


def sloppy_client() -> Any:
    """The ``--streamcheck`` factory: a zoo mutant carrying several mistakes."""
    from zoo import backoff, breaker, retry, stall  # type: ignore[import-not-found]

    changes = (
        backoff.jitter_too_wide,
        breaker.opens_after_more,
        stall.never_detects_stalls,
        retry.retries_401,
    )

    class Sloppy(retry.swallows_midstream_error):  # type: ignore[misc]
        name = "sloppy-demo"

        @staticmethod
        def policy_change(policy: Any) -> Any:
            for mutant in changes:
                policy = mutant.policy_change(policy)
            return policy

    return Sloppy()


def run_suite(where: Path) -> Path:
    (where / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
    )
    env = dict(os.environ)
    paths = [str(Path(__file__).parent), str(ROOT / "tests"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    html = where / "report.html"
    args = ["-p", "no:cacheprovider", "-q", "--streamcheck=report_png:sloppy_client"]
    args += ["--streamcheck-timeout=3", f"--streamcheck-html={html}"]
    args.append(f"--streamcheck-report={where / 'report.json'}")
    subprocess.run([sys.executable, "-m", "pytest", *args], cwd=where, env=env, check=False)
    return html


def screenshot(html: Path) -> None:
    """The top of the page, and one failure's drawing of what its check judged."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"))
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.goto(html.as_uri())
        page.screenshot(path=str(OUT))
        page.locator(f"#{FIGURE_CASE} .body").screenshot(path=str(FIGURE))
        browser.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        keep = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp)  # keep the page
        keep.mkdir(parents=True, exist_ok=True)
        screenshot(run_suite(keep))
    print(f"wrote {OUT.relative_to(ROOT)} and {FIGURE.relative_to(ROOT)}")
