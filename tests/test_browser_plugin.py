"""``pytest --streamcheck=browser:...`` end to end: the plugin runs cases against a page
in Chromium, and the native EventSource under the profile it declares."""

from __future__ import annotations

import json

import pytest
from browser_support import PAGES, need_chromium
from plugin_targets._pytester import prepare, suite

pytestmark = pytest.mark.slow


@pytest.fixture
def tester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    need_chromium()
    return prepare(pytester, monkeypatch)


def test_a_page_passes_the_cases_it_handles(tester: pytest.Pytester) -> None:
    page = PAGES / "tiny.html"
    args = suite(f"browser:{page}", "SC-SSE-1", "SC-SSE-7")
    result = tester.runpytest_subprocess(*args, "--streamcheck-report=report.json", "-q")
    assert result.ret == 0, result.stdout.str()
    report = json.loads((tester.path / "report.json").read_text())
    assert report["client"]["name"] == "tiny"
    assert [c["verdict"] for c in report["cases"]] == ["PASS", "PASS"]


def test_the_native_eventsource_runs_under_the_profile_it_declares(
    tester: pytest.Pytester,
) -> None:
    args = suite("browser:eventsource", "SC-SSE-15", "SC-SSE-29", "SC-BREAKER-1")
    result = tester.runpytest_subprocess(*args, "--streamcheck-report=report.json", "-q")
    report = json.loads((tester.path / "report.json").read_text())
    verdicts = {c["id"]: (c["verdict"], c["profile"]) for c in report["cases"]}
    assert verdicts == {
        "SC-SSE-29": ("FAIL", "html-eventsource@1"),  # it cannot send a first Last-Event-ID
        "SC-BREAKER-1": ("UNSUPPORTED", "html-eventsource@1"),  # EventSource has none
        "SC-SSE-15": ("PASS", "html-eventsource@1"),  # a 200 not text/event-stream fails
    }, result.stdout.str()
    assert result.ret == 1
