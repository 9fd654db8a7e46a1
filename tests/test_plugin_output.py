"""What a run prints and records: short failures (everything with -vv and in the JSON
report), short ERRORs, known failures (unknown ids, KNOWN and STALE), JUnit XML per area,
and --help."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from plugin_targets._pytester import PLAIN, XDIST, prepare

from conformance._runner import SuiteRunner
from pytest_streamcheck._items import ERROR_HEAD
from pytest_streamcheck._settings import OPTIONS
from pytest_streamcheck.reports._render import cap

TESTS = Path(__file__).parent
PIPELINE = "--streamcheck-profile=seed-pipeline"  # 3 attempts at most
RETRIES_401 = "--streamcheck=sct_reference:retries_401"  # fails SC-RETRY-3 only


@pytest.fixture(autouse=True)
def _isolated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    prepare(pytester, monkeypatch)
    pytester.syspathinsert(TESTS)  # the zoo's broken clients


def _json(pytester: pytest.Pytester, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text(encoding="utf-8"))
    return data


def _section(result: pytest.RunResult, case_id: str) -> list[str]:
    """The lines pytest printed for one case's failure or error, its heading included."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if re.match(rf"_+ .*{case_id} \[", line))
    end = next(i for i in range(start + 1, len(lines)) if re.match(r"^(_{3,} |={3,} )", lines[i]))
    return lines[start:end]


# -- failures ----------------------------------------------------------------------------

JITTER = ("--streamcheck=zoo:jitter_too_wide", "streamcheck::SC-BACKOFF-9")


def test_a_long_failure_is_short_by_default(pytester: pytest.Pytester) -> None:
    """A jitter FAIL (700 timeline rows) prints under 40 lines: requirement, source,
    expected, observed, and the timeline's first and last rows; the JSON report keeps
    every row."""
    result = pytester.runpytest(*PLAIN, *JITTER, "--streamcheck-report=r.json")
    result.assert_outcomes(failed=1)
    section = _section(result, "SC-BACKOFF-9")
    assert len(section) < 40, "\n".join(section)
    result.stdout.fnmatch_lines(
        [
            "SC-BACKOFF-9 [[]MUST[]] Jitter spreads the delays over the declared range  ->  FAIL",
            "requirement: A client MUST add the jitter*",
            "source:      seeds/000 *",
            "expected:    50 clients' own first delays spread over *",
            "observed:    delays outside the declared jitter range*",
            "             waits measured (ms): *",
            "noise:       virtual time: every stamp exact",
            "timeline (ms since the case started):",
            "  ... * more rows (use -vv or the JSON report)",
        ]
    )
    timeline = _json(pytester, "r.json")["cases"][0]["timeline"]
    assert len(timeline) > 100
    shown = [row for row in timeline if f"  {row}" in section]
    assert shown == timeline[:8] + timeline[-8:]


def test_vv_prints_the_whole_timeline(pytester: pytest.Pytester) -> None:
    """With -vv every timeline row of the report is printed."""
    result = pytester.runpytest(*PLAIN, *JITTER, "--streamcheck-report=r.json", "-vv")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "more rows" not in out
    timeline = _json(pytester, "r.json")["cases"][0]["timeline"]
    assert all(f"  {row}" in out for row in timeline)


def test_the_short_summary_has_one_line_per_failure_even_on_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On CI pytest prints a failure's message whole in the short summary: a case's
    message is one line (observed, and expected), not its whole text again."""
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest(*PLAIN, RETRIES_401, PIPELINE, "streamcheck::SC-RETRY-3")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "FAILED streamcheck::SC-RETRY-3 - 3 requests; s1 ended: error gave_up status=401 "
            "(*) (expected exactly 1 request for a 401: it is never retried)",
            "*= 1 failed in *",
        ],
        consecutive=True,
    )
    assert result.stdout.str().count("requirement:") == 1


# -- errors ------------------------------------------------------------------------------


def test_a_client_that_does_not_start_is_one_short_error_per_case(
    pytester: pytest.Pytester,
) -> None:
    """``exec:false`` for 11 cases: each ERROR is the kit's message in a few lines, no
    pytest internals; the client is started once, and later cases say so."""
    result = pytester.runpytest(*PLAIN, "--streamcheck=exec:false", "-k", "SC-RETRY-1")
    result.assert_outcomes(errors=11)
    out = result.stdout.str()
    assert len(result.outlines) < 80, out
    assert "CallInfo" not in out
    assert "_pytest/" not in out
    first = "exec client `false` exited with code 1 while the kit was waiting for the `hello` reply"
    assert _section(result, "SC-RETRY-1") == [
        _section(result, "SC-RETRY-1")[0],
        ERROR_HEAD,
        f"SC-RETRY-1: {first}",
        "  (nothing on stderr)",
    ]
    result.stdout.fnmatch_lines(
        [
            f"SC-RETRY-10: the client did not start (see the first ERROR): {first}",
            "ERROR (the harness or adapter broke; not counted against the client):",
            f"  SC-RETRY-1: {first}",
            "  SC-RETRY-10, SC-RETRY-11, SC-RETRY-12 and 7 more: the client did not start *",
            f"ERROR streamcheck::SC-RETRY-1 - {first[:20]}*",
        ]
    )


def test_a_kit_bug_in_setup_shows_a_traceback_without_pytest_frames(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception that is no harness error (a bug in the kit) keeps its traceback,
    short, from the kit's frames only."""

    def broken(self: SuiteRunner, case: object) -> None:
        raise RuntimeError("a bug in the kit")

    monkeypatch.setattr(SuiteRunner, "run", broken)
    result = pytester.runpytest(*PLAIN, "--streamcheck=reference", "streamcheck::SC-RETRY-1")
    result.assert_outcomes(errors=1)
    section = _section(result, "SC-RETRY-1")
    assert "E   RuntimeError: a bug in the kit" in section
    assert not [line for line in section if "_pytest" in line or "pluggy" in line], section
    assert any("_items.py" in line for line in section), section


# -- known failures ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("SC-RETRI-99  typo", "the id SC-RETRI-99 matches no case in the catalog; did you mean *"),
        ("SC-NOPE-*  a glob", "the glob SC-NOPE-* matches no case in the catalog"),
    ],
    ids=["id", "glob"],
)
def test_a_known_failure_naming_no_case_is_a_usage_error(
    pytester: pytest.Pytester, entry: str, message: str
) -> None:
    pytester.makefile(".txt", known=f"SC-RETRY-3  fine\n{entry}\n")
    result = pytester.runpytest(
        *PLAIN, "--streamcheck=reference", "--streamcheck-known-failures=known.txt"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*known.txt:2: {message}"])


KNOWN = "SC-RETRY-1  was broken once\nSC-RETRY-3  retries 401 on purpose\n"
THREE = ("streamcheck::SC-RETRY-1", "streamcheck::SC-RETRY-2", "streamcheck::SC-RETRY-3")


def _known_run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    pytester.makefile(".txt", known=KNOWN)
    return pytester.runpytest(
        *PLAIN, RETRIES_401, PIPELINE, *THREE, "--streamcheck-known-failures=known.txt", *extra
    )


def test_known_and_stale_failures_are_counted_apart(pytester: pytest.Pytester) -> None:
    """A listed failure counts as KNOWN, not FAIL (the run passes); a listed case that
    passes is STALE, in the summary and the JSON report."""
    result = _known_run(pytester, "--streamcheck-report=r.json", "--junitxml=j.xml")
    result.assert_outcomes(passed=1, xfailed=1, xpassed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.re_match_lines(
        [
            r"area\s+PASS\s+FAIL\s+NON-STRICT\s+UNSUPPORTED\s+ERROR\s+INCONCLUSIVE\s+KNOWN\s+STALE"
            r"\s+judged/appl grade$",
            # a listed failure is still the client's: the area grade says so
            r"RETRY\s+1\s+0\s+0\s+0\s+0\s+0\s+1\s+1\s+3/3\s+failing$",
            r"STALE known failures \(listed in known.txt but passing now: remove them; .*\):$",
            r"  SC-RETRY-1 400 is not retried: was broken once$",
        ]
    )
    report = _json(pytester, "r.json")
    assert report["known_failures"] == {
        "file": "known.txt",
        "xfailed": ["SC-RETRY-3"],
        "stale": ["SC-RETRY-1"],
    }
    assert {c["id"]: c["stale"] for c in report["cases"]} == {
        "SC-RETRY-1": True,
        "SC-RETRY-2": False,
        "SC-RETRY-3": False,
    }
    out = _testcases(pytester, "j.xml")["SC-RETRY-1"].find("system-out")
    assert out is not None
    assert out.text == "STALE known failure (was broken once): the case passes now"


@pytest.mark.parametrize(
    "strict", [["--streamcheck-strict"], ["-o", "xfail_strict=true"]], ids=["kit", "pytest"]
)
def test_a_stale_known_failure_fails_a_strict_run(
    pytester: pytest.Pytester, strict: list[str]
) -> None:
    result = _known_run(pytester, *strict)
    result.assert_outcomes(passed=1, failed=1, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["FAILED streamcheck::SC-RETRY-1 - [[]XPASS(strict)[]] known failure: was broken once"]
    )


def test_a_listed_should_miss_is_known_and_a_listed_error_stays_an_error(
    pytester: pytest.Pytester,
) -> None:
    """A listed NON-STRICT case is a known failure even in a non-strict run (so not
    stale, and xfail_strict leaves it alone); a listed case that ERRORs is not hidden."""
    pytester.makefile(".txt", known="SC-RETRY-37  terse on purpose\n")
    terse = pytester.runpytest(
        *PLAIN,
        "--streamcheck=sct_sync:terse",
        "streamcheck::SC-RETRY-37",
        "--streamcheck-known-failures=known.txt",
        "-o",
        "xfail_strict=true",
    )
    terse.assert_outcomes(xfailed=1)
    terse.stdout.re_match_lines([r"RETRY\s+0\s+0\s+0\s+0\s+0\s+0\s+1\s+0\s+1/1\s+partial$"])
    assert "NON-STRICT (a SHOULD missed" not in terse.stdout.str()

    pytester.makefile(".txt", known="SC-RETRY-2  crashes on purpose\n")
    crash = pytester.runpytest(
        *PLAIN,
        "--streamcheck=sct_reference:crashes_on_post",
        "streamcheck::SC-RETRY-2",
        "--streamcheck-known-failures=known.txt",
    )
    crash.assert_outcomes(errors=1)
    assert crash.ret == pytest.ExitCode.TESTS_FAILED


# -- JUnit XML and --help ----------------------------------------------------------------


def _testcases(pytester: pytest.Pytester, name: str) -> dict[str, ET.Element]:
    root = ET.parse(pytester.path / name).getroot()
    return {str(case.get("name")): case for case in root.iter("testcase")}


def test_junit_has_a_classname_per_area_and_shows_non_strict(pytester: pytest.Pytester) -> None:
    """Classnames are ``streamcheck.AREA``; a NON-STRICT pass carries a system-out line
    beside its verdict property, a plain pass has none."""
    ids = ("streamcheck::SC-RETRY-1", "streamcheck::SC-COMMIT-5", "streamcheck::SC-RETRY-37")
    result = pytester.runpytest(*PLAIN, "--streamcheck=sct_sync:terse", *ids, "--junitxml=j.xml")
    result.assert_outcomes(passed=3)
    cases = _testcases(pytester, "j.xml")
    assert {n: c.get("classname") for n, c in cases.items()} == {
        "SC-RETRY-1": "streamcheck.RETRY",
        "SC-COMMIT-5": "streamcheck.COMMIT",
        "SC-RETRY-37": "streamcheck.RETRY",
    }
    lax = cases["SC-RETRY-37"]
    props = {p.get("name"): p.get("value") for p in lax.iter("property")}
    assert props["streamcheck_verdict"] == "NON-STRICT"
    out = lax.find("system-out")
    assert out is not None
    assert out.text is not None
    assert out.text.startswith("NON-STRICT: a SHOULD was missed (fails only with")
    assert cases["SC-RETRY-1"].find("system-out") is None


def test_junit_failure_message_is_one_line(pytester: pytest.Pytester) -> None:
    """A FAIL's ``message`` is observed and expected; the element's text has the rest."""
    result = pytester.runpytest(
        *PLAIN, RETRIES_401, PIPELINE, "streamcheck::SC-RETRY-3", "--junitxml=j.xml"
    )
    result.assert_outcomes(failed=1)
    failure = _testcases(pytester, "j.xml")["SC-RETRY-3"].find("failure")
    assert failure is not None
    assert failure.text is not None
    message = failure.get("message") or ""
    assert message.startswith("3 requests; s1 ended: error gave_up status=401 ("), message
    assert message.endswith(" (expected exactly 1 request for a 401: it is never retried)")
    assert "\n" not in message
    assert "requirement: A client MUST NOT retry a 401" in failure.text


def test_under_xdist_ids_junit_and_short_lines_hold(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``-n 2`` the workers (which parse the command line again) select the named
    cases; the controller writes area classnames and keeps each failure's one line."""
    monkeypatch.setenv("CI", "true")
    ids = ("streamcheck::SC-RETRY-1", "streamcheck::SC-RETRY-3", "streamcheck::SC-COMMIT-5")
    result = pytester.runpytest_subprocess(
        *XDIST, RETRIES_401, PIPELINE, *ids, "-n", "2", "--junitxml=j.xml"
    )
    result.assert_outcomes(passed=2, failed=1)
    # The count is the server's: a loaded worker's third retry of the 401 may not have
    # reached it when the case ended (CI: "2 requests"); this test is about the line.
    result.stdout.fnmatch_lines(
        ["FAILED streamcheck::SC-RETRY-3 - * requests; s1 ended: * (expected *)"]
    )
    assert result.stdout.str().count("requirement:") == 1
    classnames = {n: c.get("classname") for n, c in _testcases(pytester, "j.xml").items()}
    assert classnames == {
        "SC-RETRY-1": "streamcheck.RETRY",
        "SC-RETRY-3": "streamcheck.RETRY",
        "SC-COMMIT-5": "streamcheck.COMMIT",
    }


def test_help_names_each_option_argument(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*PLAIN, "--help")
    result.stdout.fnmatch_lines(
        [
            "*--streamcheck=TARGET*",
            "*--streamcheck-profile=PROFILE[[],PROFILE[]]*",
            "*--streamcheck-timing=MODE*",
            "*--streamcheck-report=PATH*",
            "*--streamcheck-html=PATH*",
            "*--streamcheck-known-failures=PATH*",
            "*--streamcheck-seed=N*",
            "*--streamcheck-timeout=SECONDS*",
        ]
    )
    assert not re.search(r"--streamcheck[a-z-]*=(STREAMCHECK|HTML|FAILURES)", result.stdout.str())


def test_the_readme_lists_every_option() -> None:
    """Each option has a row in the README's options table, with its ini twin."""
    readme = (TESTS.parent / "README.md").read_text(encoding="utf-8")
    for option, ini, _ in OPTIONS:
        row = rf"^\| `{re.escape(option)}(=[^`]+)?` \(`{ini}`\) \|"
        assert re.search(row, readme, re.MULTILINE), option


def test_cap_keeps_the_first_and_last_rows() -> None:
    """Long texts keep their head and tail (an exec client's stderr ends with the
    exception) and say how many rows were left out; short ones are whole."""
    rows = [f"row {n}" for n in range(30)]
    assert cap(rows, 5, 20, False, "lines") == [
        *rows[:5],
        "... 5 more lines (use -vv or the JSON report)",
        *rows[10:],
    ]
    assert cap(rows, 5, 20, True, "lines") == rows
    assert cap(rows[:26], 5, 20, False, "lines") == rows[:26]  # one left out: keep it
