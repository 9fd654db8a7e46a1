"""Every broken client in the zoo is caught by the cases named for it; the reference passes them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from plugin_targets._pytester import PLAIN
from zoo import MUTANTS

TESTS = Path(__file__).parent


def run_suite(
    pytester: pytest.Pytester, target: str, cases: Iterable[str], profile: str, *extra: str
) -> pytest.RunResult:
    """``target`` through exactly ``cases`` (by node id: a -k "SC-SSE-1" would play
    SC-SSE-10..19 too, and the 50-client cases with "SC-BACKOFF-1")."""
    pytester.syspathinsert(TESTS)
    return pytester.runpytest(
        *PLAIN,
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        f"--streamcheck={target}",
        f"--streamcheck-profile={profile}",
        *extra,
        *(f"streamcheck::{case}" for case in cases),
    )


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_caught(pytester: pytest.Pytester, name: str) -> None:
    """The mutant fails at least one of its cases (MUST), or is NON-STRICT (SHOULD)."""
    expect = MUTANTS[name]
    report = pytester.path / "first.json"
    result = run_suite(
        pytester, f"zoo:{name}", expect.ids, expect.profile, f"--streamcheck-report={report}"
    )
    outcomes = result.parseoutcomes()
    # The zoo plays in virtual time (the mutants run on the kit's loop): every verdict is
    # exact, so a mutant is caught on its first run, with no ERROR and no INCONCLUSIVE.
    assert "; virtual timing; seed" in result.stdout.str()
    if expect.level == "MUST":
        assert outcomes.get("failed", 0) >= 1, result.stdout.str()
        assert result.ret == pytest.ExitCode.TESTS_FAILED
    else:
        assert outcomes.get("failed", 0) == 0, result.stdout.str()
        result.stdout.fnmatch_lines(["*NON-STRICT (a SHOULD missed*"])
        strict = run_suite(
            pytester, f"zoo:{name}", expect.ids, expect.profile, "--streamcheck-strict"
        )
        assert strict.parseoutcomes().get("failed", 0) >= 1, strict.stdout.str()
    assert outcomes.get("errors", 0) == 0, result.stdout.str()


# Mutants whose one mistake lies outside these cases: a case that fails them judges
# something its requirement does not ask for.
PASSES = {"hides_ids": ("SC-COMMIT-15", "SC-COMMIT-16", "SC-COMMIT-17", "SC-COMMIT-18")}


@pytest.mark.parametrize("name", sorted(PASSES))
def test_mutant_passes_the_cases_outside_its_mistake(pytester: pytest.Pytester, name: str) -> None:
    """hides_ids resumes right: the resume cases judge Last-Event-ID on the ledger and the
    delivered data, not the ids the client shows its consumer."""
    result = run_suite(
        pytester, f"zoo:{name}", PASSES[name], MUTANTS[name].profile, "--streamcheck-strict"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == len(PASSES[name]), result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


def test_reference_passes_every_catching_case(pytester: pytest.Pytester) -> None:
    """The cases that catch the mutants pass for the reference client (no false failures)."""
    for profile in sorted({e.profile for e in MUTANTS.values()}):
        cases = sorted({c for e in MUTANTS.values() if e.profile == profile for c in e.ids})
        result = run_suite(pytester, "reference", cases, profile, "--streamcheck-strict")
        outcomes = result.parseoutcomes()
        assert outcomes.get("failed", 0) == 0, result.stdout.str()
        assert outcomes.get("errors", 0) == 0, result.stdout.str()
        assert outcomes.get("passed", 0) >= 1


def test_the_zoo_table_in_the_docs_is_current() -> None:
    """docs/zoo.md lists exactly the zoo's mutants and their catching cases."""
    from zoo._doc import zoo_table

    docs = TESTS.parent / "docs" / "zoo.md"
    assert docs.read_text(encoding="utf-8") == zoo_table(), (
        "docs/zoo.md is stale: run python tests/zoo/_doc.py > docs/zoo.md"
    )
