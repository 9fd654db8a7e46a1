"""Running the suite: selection, collection, targets of every kind, and the verdicts
(PASS, FAIL, NON-STRICT, UNSUPPORTED, ERROR) as pytest outcomes and exit codes."""

from __future__ import annotations

import json
import re

import pytest
from plugin_targets._pytester import CATALOG, PLAIN, only, prepare, suite, write_ini

PIPELINE = "--streamcheck-profile=seed-pipeline"  # 3 attempts at most: a wrong retry ends fast


@pytest.fixture(autouse=True)
def _isolated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    prepare(pytester, monkeypatch)


def _collected(result: pytest.RunResult) -> list[str]:
    """Node ids listed by ``--collect-only -q``."""
    return [line for line in result.outlines if "::" in line]


def _ids(result: pytest.RunResult) -> list[str]:
    return [n.split("::")[-1] for n in _collected(result) if n.startswith("streamcheck::")]


# -- selection and collection ------------------------------------------------------------


def test_k_selects_a_case_by_id(pytester: pytest.Pytester) -> None:
    """``-k SC-RETRY-3`` selects that case (and, -k matching substrings, SC-RETRY-3x only)."""
    result = pytester.runpytest(*PLAIN, "--streamcheck=reference", "-k", "SC-RETRY-3", "--co", "-q")
    ids = _ids(result)
    assert "SC-RETRY-3" in ids
    assert all(re.fullmatch(r"SC-RETRY-3\d?", i) for i in ids), ids


def test_k_selects_an_area(pytester: pytest.Pytester) -> None:
    """``-k RETRY`` selects every case of the area and nothing else."""
    result = pytester.runpytest(*PLAIN, "--streamcheck=reference", "-k", "RETRY", "--co", "-q")
    assert _ids(result) == [c for c in CATALOG if c.startswith("SC-RETRY-")]


def test_without_paths_only_the_suite_is_collected(pytester: pytest.Pytester) -> None:
    """With --streamcheck and no paths the user's tests are not collected; naming a path
    collects them as well as the suite."""
    pytester.makepyfile(test_user="def test_mine():\n    pass\n")
    alone = pytester.runpytest(*PLAIN, "--streamcheck=reference", "--co", "-q")
    assert _ids(alone) == list(CATALOG)
    assert [n for n in _collected(alone) if "test_user" in n] == []

    both = pytester.runpytest(*PLAIN, "--streamcheck=reference", "--co", "-q", "test_user.py")
    assert "test_user.py::test_mine" in _collected(both)
    assert _ids(both) == list(CATALOG)


def test_named_user_tests_run_with_the_suite(pytester: pytest.Pytester) -> None:
    """A user's test named on the command line runs next to the selected cases, and the
    "collected" line counts the suite's items."""
    pytester.makepyfile(test_user="def test_mine():\n    pass\n")
    args = suite("reference", "SC-RETRY-1")
    args[-1] = f"{args[-1]} or test_mine"
    result = pytester.runpytest(*args, "test_user.py")
    result.assert_outcomes(passed=2)
    total = len(CATALOG) + 1
    result.stdout.fnmatch_lines([f"collected {total} items / {total - 2} deselected / 2 selected"])


def test_header_seed_and_reproduce_line(pytester: pytest.Pytester) -> None:
    """The header names target, profiles and seed; a given seed is in the report and in
    the "reproduce with" line."""
    result = pytester.runpytest(
        *suite("reference", "SC-RETRY-1"), "--streamcheck-seed=1234", "--streamcheck-report=r.json"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "streamcheck: target=reference profiles=the client's, else seed-eventsource, "
            "seed-fetch timing=auto seed=1234",
            "*= streamcheck =*",
            "client streamcheck-reference *; seed 1234",
            "reproduce with --streamcheck-seed=1234",
        ]
    )
    assert json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["seed"] == 1234


# -- targets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "client"),
    [("sct_reference:make_adapter", "sct-factory"), ("sct_reference", "sct-module")],
    ids=["module:factory", "module"],
)
def test_a_python_target(pytester: pytest.Pytester, target: str, client: str) -> None:
    """``module:factory`` calls that factory; a bare module's ``streamcheck_adapter()``."""
    result = pytester.runpytest(*suite(target, "SC-RETRY-1", "SC-COMMIT-5"))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"client {client} *"])


def test_a_target_registered_as_an_entry_point(pytester: pytest.Pytester) -> None:
    """A name in the ``streamcheck.clients`` entry points is a target, and the usage error
    for an unknown target lists it (a subprocess, so importlib.metadata sees the dist)."""
    dist = pytester.mkdir("sct_registered-1.0.dist-info")
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sct-registered\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        "[streamcheck.clients]\nsct-registered = sct_reference:make_adapter\n", encoding="utf-8"
    )
    result = pytester.runpytest_subprocess(*suite("sct-registered", "SC-RETRY-1"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["client sct-factory *"])

    unknown = pytester.runpytest_subprocess(*PLAIN, "--streamcheck=sct-unknown")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    registered = unknown.stderr.str().split("registered: ", 1)[1]
    assert "sct-registered" in registered.strip().split(", ")  # beside the shipped adapters


def test_a_sync_adapter_passes(pytester: pytest.Pytester) -> None:
    """A ``SyncClientAdapter`` around ``SyncStreamingClient`` passes GET and POST cases."""
    ids = ("SC-RETRY-1", "SC-RETRY-2", "SC-RETRY-3", "SC-COMMIT-5", "SC-RETRY-37")
    result = pytester.runpytest(*suite("sct_sync", *ids))
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["client sct-sync 1.0; *"])


# -- verdicts --------------------------------------------------------------------------------


def test_a_missing_capability_is_unsupported(pytester: pytest.Pytester) -> None:
    """A client without "post" gets UNSUPPORTED (a skip with the reason) for POST cases,
    never FAIL; its GET cases run."""
    result = pytester.runpytest(
        *suite("sct_sync:get_only", "SC-RETRY-1", "SC-RETRY-2", "SC-COMMIT-6"), "-rs"
    )
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]2[]] *UNSUPPORTED: the client lacks the capability post"]
    )
    # A missing capability leaves an applicable case unjudged: the grade says so.
    result.stdout.re_match_lines(
        [
            r"RETRY\s+1\s+0\s+0\s+1\s+0\s+0\s+1/2\s+partial$",
            r"COMMIT\s+0\s+0\s+0\s+1\s+0\s+0\s+0/1\s+not judged$",
            r"coverage: judged 1 of 3 applicable cases .*; 2 applicable unjudged \(a capability "
            r"is missing\)$",
        ]
    )


def test_an_adapter_that_raises_is_an_error_and_the_suite_goes_on(
    pytester: pytest.Pytester,
) -> None:
    """An exception from ``stream()`` is a pytest ERROR (not a failure) with its text,
    and the next case runs on a fresh adapter and passes."""
    result = pytester.runpytest(
        *suite("sct_reference:crashes_on_post", "SC-RETRY-2", "SC-RETRY-3"), "-v"
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "streamcheck::SC-RETRY-2 ERROR*",
            "streamcheck::SC-RETRY-3 PASSED*",
            "*ERROR at setup of SC-RETRY-2*",
            "ERROR (the harness or the adapter broke; not counted against the client)",
            "SC-RETRY-2: adapter.stream raised RuntimeError: the adapter crashed on purpose",
        ]
    )
    result.stdout.re_match_lines([r"RETRY\s+1\s+0\s+0\s+0\s+1\s+0\s+1/2\s+undecided$"])


def test_a_hung_adapter_hits_the_time_limit_and_the_suite_goes_on(
    pytester: pytest.Pytester,
) -> None:
    """A stream that blocks its thread and ignores cancellation is an ERROR naming the
    time limit once --streamcheck-timeout passes; the next case still passes."""
    result = pytester.runpytest(
        *suite("sct_sync:hangs_on_post", "SC-RETRY-2", "SC-RETRY-3"),
        "--streamcheck-timeout=2",
        "-v",
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "streamcheck::SC-RETRY-2 ERROR*",
            "streamcheck::SC-RETRY-3 PASSED*",
            "SC-RETRY-2: case SC-RETRY-2 passed its 2s time limit*",
        ]
    )


def test_a_must_failure_fails_the_run_and_explains_itself(pytester: pytest.Pytester) -> None:
    """A client that retries 401 FAILS the MUST case (exit 1), and the failure shows the
    requirement, its source, expected, observed and the timeline of attempts."""
    result = pytester.runpytest(*suite("sct_reference:retries_401", "SC-RETRY-3"), PIPELINE)
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "SC-RETRY-3 [[]MUST[]] 401 is not retried  ->  FAIL",
            "requirement: A client MUST NOT retry a 401 response*",
            "source:      seeds/000 *",
            "profile:     seed-pipeline@1 in virtual time (its own durations, every stamp exact)",
            "expected:    exactly 1 request for a 401: it is never retried",
            "observed:    3 requests; s1 ended: error gave_up status=401 (*)",
            "timeline (ms since the case started):",
            "* ms  attempt 1: GET /v1/stream -> 401",
            "* ms  attempt 2: GET /v1/stream -> 401",
        ]
    )


def test_a_known_failure_is_xfailed_with_its_reason(pytester: pytest.Pytester) -> None:
    """Listed in the known-failures file, the same failure is xfailed and the run passes."""
    pytester.makefile(
        ".txt", known="# expected failures\nSC-RETRY-3  retries 401 on purpose (bug 12)\n"
    )
    result = pytester.runpytest(
        *suite("sct_reference:retries_401", "SC-RETRY-3"),
        PIPELINE,
        "--streamcheck-known-failures=known.txt",
        "-rx",
    )
    result.assert_outcomes(xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["XFAIL streamcheck::SC-RETRY-3 - known failure: retries 401 on purpose (bug 12)"]
    )


TERSE = ("sct_sync:terse", "SC-RETRY-37")


def test_a_should_miss_is_non_strict(pytester: pytest.Pytester) -> None:
    """A missed SHOULD passes the run and is listed in the summary as NON-STRICT."""
    result = pytester.runpytest(*suite(*TERSE))
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "NON-STRICT (a SHOULD missed; fails only with --streamcheck-strict):",
            "  SC-RETRY-37 A 401 reaches the consumer with the server's message: "
            "detail was 'request failed'; s1 ended: error non_retryable_status status=401*",
        ]
    )


@pytest.mark.parametrize("where", ["command line", "ini file"])
def test_strict_fails_a_should_miss(pytester: pytest.Pytester, where: str) -> None:
    """With --streamcheck-strict (or ``streamcheck_strict = true``) a missed SHOULD fails."""
    if where == "ini file":
        write_ini(pytester, streamcheck_strict="true")
        result = pytester.runpytest(*suite(*TERSE))
    else:
        result = pytester.runpytest(*suite(*TERSE), "--streamcheck-strict")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "SC-RETRY-37 [[]SHOULD[]] * ->  NON-STRICT",
            "observed:    detail was 'request failed'; s1 ended: *",
        ]
    )


def test_only_selects_exactly(pytester: pytest.Pytester) -> None:
    """The tests' own ``only()`` selection picks exactly the named cases."""
    ids = ("SC-RETRY-1", "SC-RETRY-3", "SC-COMMIT-5", "SC-RETRY-37")
    result = pytester.runpytest(*PLAIN, "--streamcheck=reference", "-k", only(*ids), "--co", "-q")
    assert sorted(_ids(result)) == sorted(ids)
