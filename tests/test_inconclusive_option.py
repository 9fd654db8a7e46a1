"""--streamcheck-inconclusive: what an INCONCLUSIVE case does to the run's exit code.

The noise that leaves a case undecided cannot be summoned on demand, so the one case
played here is played for real and its verdict then turned INCONCLUSIVE, as the runner
gives it after re-judging: what is tested is the step from a verdict to pytest's
outcome, the exit code and the headline."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from plugin_targets._pytester import prepare, suite

from conformance._case import Verdict
from pytest_streamcheck._session import StreamcheckSession

CASE = "SC-RETRY-1"


@pytest.fixture(autouse=True)
def _isolated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    prepare(pytester, monkeypatch)
    played = StreamcheckSession.result

    def undecided(self: StreamcheckSession, case: Any, upcoming: Any = ()) -> Any:
        result = played(self, case, upcoming)
        reason = "the measured noise hid the verdict at x1, x2, x4, x12 and x30"
        return dataclasses.replace(result, verdict=Verdict.INCONCLUSIVE, reason=reason)

    monkeypatch.setattr(StreamcheckSession, "result", undecided)


@pytest.mark.parametrize(
    ("option", "exit_code", "outcome"),
    [
        ((), pytest.ExitCode.TESTS_FAILED, {"errors": 1}),
        (("--streamcheck-inconclusive=fail",), pytest.ExitCode.TESTS_FAILED, {"errors": 1}),
        (("--streamcheck-inconclusive=skip",), pytest.ExitCode.OK, {"skipped": 1}),
    ],
)
def test_inconclusive_fails_the_run_unless_asked_to_skip(
    pytester: pytest.Pytester, option: tuple[str, ...], exit_code: int, outcome: dict[str, int]
) -> None:
    """Fail by default; skip on request. Either way the headline and the report say
    INCONCLUSIVE and not conformant: a skip never reads as a pass."""
    args = [*suite("reference", CASE), "-rs", "--streamcheck-report=r.json", *option]
    result = pytester.runpytest(*args)
    assert result.ret == exit_code, result.stdout.str()
    result.assert_outcomes(**outcome)
    result.stdout.fnmatch_lines(["*NOT conformant*1 INCONCLUSIVE*"])
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert [c["verdict"] for c in report["cases"]] == ["INCONCLUSIVE"]
    assert report["conformant"] is False
    if "skipped" in outcome:
        result.stdout.fnmatch_lines(["*INCONCLUSIVE (not conformant): the measured noise hid*"])


def test_a_value_it_does_not_know_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*suite("reference", CASE), "--streamcheck-inconclusive=pass")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--streamcheck-inconclusive: 'pass' is not valid; valid: fail, skip*"]
    )
