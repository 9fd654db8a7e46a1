"""The run's reports: JSON (schema streamcheck-report/1), HTML, JUnit XML properties,
and one merged report under pytest-xdist."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from plugin_targets._pytester import PLAIN, XDIST, only, prepare, suite

import pytest_streamcheck

CASES = ("SC-RETRY-1", "SC-RETRY-2", "SC-RETRY-3")  # SC-RETRY-3 fails: the target retries 401
FAILING = "SC-RETRY-3"


@pytest.fixture(autouse=True)
def _isolated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    prepare(pytester, monkeypatch)


def _failing_run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    """Two passing cases and one MUST failure, under seed-pipeline (3 attempts at most)."""
    result = pytester.runpytest(
        *suite("sct_reference:retries_401", *CASES),
        "--streamcheck-profile=seed-pipeline",
        "--streamcheck-seed=42",
        *extra,
    )
    result.assert_outcomes(passed=2, failed=1)
    return result


def _json(pytester: pytest.Pytester, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text(encoding="utf-8"))
    return data


def test_the_json_report(pytester: pytest.Pytester) -> None:
    """The JSON report names the client, the kit, profiles, seed and platform, counts the
    verdicts, and lists each selected case; a failed one carries its evidence."""
    _failing_run(pytester, "--streamcheck-report=out/report.json")
    report = _json(pytester, "out/report.json")
    assert report["schema"] == "streamcheck-report/1"
    assert report["kit"] == {
        "name": "pytest-streamcheck",
        "version": pytest_streamcheck.__version__,
    }
    assert report["client"]["name"] == "sct-retries-401"
    assert report["client"]["version"] == pytest_streamcheck.__version__
    assert report["client"]["target"] == "sct_reference:retries_401"
    assert [p["name"] for p in report["profiles"]] == ["seed-pipeline"]
    assert (report["seed"], report["timing"], report["strict"]) == (42, "virtual", False)
    assert {"python", "system", "machine"} <= set(report["platform"])
    assert report["summary"] == {
        "PASS": 2,
        "FAIL": 1,
        "NON-STRICT": 0,
        "UNSUPPORTED": 0,
        "ERROR": 0,
        "INCONCLUSIVE": 0,
    }
    assert report["conformant"] is False
    total = len(report["cases"]) + report["coverage"]["total"] - 3
    assert report["coverage"] == {
        "total": total,
        "selected": 3,
        "applicable": 3,
        "judged": 3,
        "skipped": {},
        "conformant": False,
        "why_not": [f"{total - 3} of the catalog's {total} cases not selected", "1 FAIL"],
        "areas": [
            {
                "area": "RETRY",
                "grade": "failing",
                "judged": 3,
                "applicable": 3,
                "selected": 3,
                "total": report["coverage"]["areas"][0]["total"],
            }
        ],
    }
    selection = report["selection"]  # the suite() helper selects with -k
    assert (selection["ids"], selection["markexpr"]) == (None, None)
    assert selection["keyword"].startswith("(SC-RETRY-1 or SC-RETRY-2 or SC-RETRY-3)")

    cases = {c["id"]: c for c in report["cases"]}
    assert set(cases) == set(CASES)
    assert {i: c["verdict"] for i, c in cases.items()} == {
        "SC-RETRY-1": "PASS",
        "SC-RETRY-2": "PASS",
        "SC-RETRY-3": "FAIL",
    }
    failed = cases[FAILING]
    assert (failed["level"], failed["transport"]) == ("MUST", "get")
    assert failed["requirement"].startswith("A client MUST NOT retry a 401")
    assert failed["source"].startswith("seeds/000")
    assert failed["expected"] == "exactly 1 request for a 401: it is never retried"
    assert failed["observed"].startswith("3 requests; s1 ended: error gave_up status=401")
    assert any("attempt 3: GET /v1/stream -> 401" in row for row in failed["timeline"])
    assert [a["status"] for a in failed["evidence"]["attempts"]] == [401, 401, 401]
    assert failed["evidence"]["deliveries"], "what the client delivered is evidence too"
    assert "evidence" not in cases["SC-RETRY-1"]


def test_the_html_report(pytester: pytest.Pytester) -> None:
    """The HTML page shows each case with its timeline drawn as an SVG."""
    _failing_run(pytester, "--streamcheck-html=report.html")
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert "NOT conformant" in page
    sections = {}
    for part in page.split("<details")[1:]:
        case = re.search(r"<b>(SC-[A-Z]+-\d+)</b>", part)
        assert case is not None
        sections[case.group(1)] = part
    assert set(sections) == set(CASES)
    assert all("<svg" in section for section in sections.values())
    assert "attempt 3: 401" in sections[FAILING]


def test_junit_xml_carries_the_case_properties(pytester: pytest.Pytester) -> None:
    """Each case's testcase in --junitxml has streamcheck_id, _verdict and _level."""
    _failing_run(pytester, "--junitxml=junit.xml")
    root = ET.parse(pytester.path / "junit.xml").getroot()
    found = {}
    for case in root.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        found[case.get("name")] = props
    assert found == {
        "SC-RETRY-1": {
            "streamcheck_id": "SC-RETRY-1",
            "streamcheck_verdict": "PASS",
            "streamcheck_level": "MUST",
        },
        "SC-RETRY-2": {
            "streamcheck_id": "SC-RETRY-2",
            "streamcheck_verdict": "PASS",
            "streamcheck_level": "MUST",
        },
        "SC-RETRY-3": {
            "streamcheck_id": "SC-RETRY-3",
            "streamcheck_verdict": "FAIL",
            "streamcheck_level": "MUST",
        },
    }


def test_an_error_and_a_skip_carry_their_verdicts_in_junit(pytester: pytest.Pytester) -> None:
    """ERROR (raised in setup) and UNSUPPORTED cases have their properties too."""
    result = pytester.runpytest(
        *suite("sct_reference:crashes_on_post", "SC-RETRY-1", "SC-RETRY-2"), "--junitxml=j.xml"
    )
    result.assert_outcomes(passed=1, errors=1)
    unsupported = pytester.runpytest(*suite("sct_sync:get_only", "SC-RETRY-2"), "--junitxml=u.xml")
    unsupported.assert_outcomes(skipped=1)
    verdicts = {}
    for name in ("j.xml", "u.xml"):
        for case in ET.parse(pytester.path / name).getroot().iter("testcase"):
            props = {p.get("name"): p.get("value") for p in case.iter("property")}
            verdicts[(name, case.get("name"))] = props.get("streamcheck_verdict")
    assert verdicts == {
        ("j.xml", "SC-RETRY-1"): "PASS",
        ("j.xml", "SC-RETRY-2"): "ERROR",
        ("u.xml", "SC-RETRY-2"): "UNSUPPORTED",
    }


WORKER_CHECK = """
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session):
    yield  # after every sessionfinish, the plugin's too
    worker = getattr(session.config, "workerinput", None)
    if worker is not None:
        wrote = (session.config.rootpath / "report.json").exists()
        (session.config.rootpath / f"{worker['workerid']}.wrote").write_text(str(wrote))
"""


def test_under_xdist_the_controller_writes_one_merged_report(pytester: pytest.Pytester) -> None:
    """With ``-n 2`` the workers write nothing and the controller's report has every
    selected case, with the client the workers ran and the run's one seed."""
    pytester.makeconftest(WORKER_CHECK)
    ids = ("SC-RETRY-1", "SC-RETRY-2", "SC-RETRY-3", "SC-COMMIT-5", "SC-RETRY-37")
    report_path = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        *XDIST,
        "--streamcheck=reference",
        "-k",
        only(*ids),
        "-n",
        "2",
        f"--streamcheck-report={report_path}",
    )
    result.assert_outcomes(passed=5)
    assert sorted(p.name for p in pytester.path.glob("*.wrote")) == ["gw0.wrote", "gw1.wrote"]
    assert {p.read_text() for p in pytester.path.glob("*.wrote")} == {"False"}
    report = _json(pytester, "report.json")
    assert sorted(c["id"] for c in report["cases"]) == sorted(ids)
    assert report["summary"]["PASS"] == 5
    assert report["client"]["name"] == "streamcheck-reference"
    seed = re.search(r"^streamcheck: .* seed=(\d+)$", result.stdout.str(), re.MULTILINE)
    assert seed is not None
    assert report["seed"] == int(seed.group(1))
    result.stdout.fnmatch_lines([f"reproduce with --streamcheck-seed={seed.group(1)}"])


def test_the_llm_fixture_module_does_not_import_the_report_writer() -> None:
    """One writer of reports, imported one way: the fixture's module never loads it."""
    code = (
        "import sys, pytest_streamcheck._llm\n"
        "assert 'pytest_streamcheck.reports._report' not in sys.modules, 'import cycle is back'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_clients_declared_profile_is_judged_and_reported(pytester: pytest.Pytester) -> None:
    """With no --streamcheck-profile, the profile the adapter declares is the one every
    case is judged under, and the one the summary and the report name."""
    result = pytester.runpytest(
        *suite("sct_reference:declares_pipeline", "SC-RETRY-1"),
        "--streamcheck-report=report.json",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*profiles=the client's, else seed-eventsource, seed-fetch *"])
    result.stdout.fnmatch_lines(["*profiles seed-pipeline@1;*"])
    report = _json(pytester, "report.json")
    assert [p["name"] for p in report["profiles"]] == ["seed-pipeline"]
    assert [c["profile"] for c in report["cases"]] == ["seed-pipeline@1"]


def test_the_report_records_the_selection_by_id(pytester: pytest.Pytester) -> None:
    """Cases named as streamcheck::ID are the selection, in catalog order; such a run is
    never conformant, and the coverage says why."""
    result = pytester.runpytest(
        *PLAIN,
        "--streamcheck=reference",
        "streamcheck::SC-RETRY-2",
        "streamcheck::SC-RETRY-1",
        "--streamcheck-report=report.json",
    )
    result.assert_outcomes(passed=2)
    report = _json(pytester, "report.json")
    assert report["selection"] == {
        "ids": ["SC-RETRY-1", "SC-RETRY-2"],
        "keyword": None,
        "markexpr": None,
    }
    assert report["conformant"] is False
    assert report["coverage"]["why_not"] == [
        f"{report['coverage']['total'] - 2} of the catalog's {report['coverage']['total']} "
        "cases not selected"
    ]


def test_a_junit_testcase_time_is_the_cases_own_duration(pytester: pytest.Pytester) -> None:
    """In lanes, a case's item waits for its lane and for the cases ahead of it; JUnit's
    ``time`` (and --durations) is the case's own play, as the JSON report's duration."""
    cases = ("SC-STALL-1", "SC-RETRY-1", "SC-RETRY-2", "SC-COMMIT-5")  # the stall is slow
    result = pytester.runpytest(
        *suite("reference", *cases),
        "--streamcheck-timing=test",
        "--streamcheck-lanes=2",
        "--streamcheck-report=r.json",
        "--junitxml=j.xml",
    )
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    # The reference passes each case, or (its real-time stall undecidable beside a second
    # suite, at every scale) is INCONCLUSIVE: an error that is no failure of the client,
    # and a setup whose time is the case's own play all the same.
    verdicts = {c["id"]: c["verdict"] for c in report["cases"]}
    assert set(verdicts.values()) <= {"PASS", "INCONCLUSIVE"}, result.stdout.str()
    assert "PASS" in verdicts.values(), result.stdout.str()
    own = {c["id"]: c["duration"] for c in report["cases"]}
    tree = ET.parse(pytester.path / "j.xml")
    shown = {t.get("name"): float(t.get("time") or 0) for t in tree.iter("testcase")}
    assert set(shown) == set(own)
    # call and teardown add their own few milliseconds; a lane's wait would add seconds
    assert all(abs(shown[c] - own[c]) < 0.05 for c in cases), (shown, own)
