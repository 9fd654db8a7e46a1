"""conformance.run_suite: the catalog against an adapter factory, with no pytest at all."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conformance import DEFAULT_PROFILES, all_cases, select_cases
from pytest_streamcheck._settings import DEFAULT_PROFILES as PLUGIN_DEFAULT

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import sys

from conformance import Verdict, run_suite
from pytest_streamcheck import ReferenceAdapter

cases = ["SC-RETRY-1", "SC-RETRY-3"]
results = run_suite(ReferenceAdapter, profile="seed-eventsource", select=cases)
assert [(r.case.id, r.verdict) for r in results] == [
    ("SC-RETRY-1", Verdict.PASS),
    ("SC-RETRY-3", Verdict.PASS),
], [(r.case.id, r.verdict, r.reason) for r in results]
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"pytest", "_pytest", "pluggy"})
assert not loaded, f"the runner imported {loaded}"
print("ran", len(results))
"""


def test_a_plain_script_runs_cases_without_importing_pytest() -> None:
    """A plain python process runs two cases against the reference client; pytest, its
    internals and pluggy are never imported."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran 2"


def test_the_docs_example_runs_as_a_script() -> None:
    """The example in docs/adapters.md, with the reference client and one case, exits 0."""
    text = (ROOT / "docs" / "adapters.md").read_text(encoding="utf-8")
    section = text.split("## Without pytest", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    for old, new in (
        (
            "from mypackage.streamcheck_adapter import MyAdapter",
            "from pytest_streamcheck import ReferenceAdapter as MyAdapter",
        ),
        ('["SC-RETRY-*", "SC-SSE-1"]', '["SC-SSE-1"]'),  # one case is enough here
    ):
        assert old in code
        code = code.replace(old, new)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("SC-SSE-1 PASS")


def test_select_takes_ids_and_globs_in_catalog_order() -> None:
    """Ids and globs pick cases in catalog order; None is the whole catalog."""
    picked = [c.id for c in select_cases(["SC-RETRY-3", "SC-RETRY-1?"])]
    assert picked == ["SC-RETRY-3", *(f"SC-RETRY-1{n}" for n in range(10))]
    assert [c.id for c in select_cases("SC-RETRY-1")] == ["SC-RETRY-1"]
    assert select_cases(None) == all_cases()


def test_an_id_or_glob_matching_no_case_is_refused() -> None:
    """A typo is an error naming it, not an empty green run."""
    with pytest.raises(ValueError, match="'SC-RETRY-999'"):
        select_cases(["SC-RETRY-1", "SC-RETRY-999"])


def test_the_plugin_default_profiles_are_the_runners() -> None:
    """--streamcheck-profile's default (kept as text so pytest's --help loads no kit) agrees."""
    assert tuple(PLUGIN_DEFAULT.split(",")) == DEFAULT_PROFILES


def test_lanes_return_catalog_order_and_a_case_asked_again_plays_again() -> None:
    """run_suite with three lanes gives the serial run's verdicts in catalog order; a
    case asked for twice (a rerun) is played twice, never waited on forever."""
    from conformance import Verdict, run_suite
    from conformance._lanes import Lanes
    from conformance._profiles import get_profile
    from pytest_streamcheck import ReferenceAdapter

    ids = ["SC-RETRY-1", "SC-RETRY-2", "SC-COMMIT-1", "SC-SSE-1", "SC-SSE-2"]
    side_by_side = run_suite(ReferenceAdapter, select=ids, lanes=3)
    serial = run_suite(ReferenceAdapter, select=ids, lanes=1)
    assert [r.case.id for r in side_by_side] == [r.case.id for r in serial] == ids
    assert {r.verdict for r in side_by_side} == {r.verdict for r in serial} == {Verdict.PASS}

    case = select_cases(["SC-SSE-1"])[0]
    lanes = Lanes(ReferenceAdapter, [get_profile("seed-eventsource")], lanes=2).start()
    try:
        assert [lanes.result(case).verdict for _ in range(2)] == [Verdict.PASS] * 2
    finally:
        lanes.close()


def _declaring(profile: str | None) -> type:
    """The reference client, declaring ``profile`` as a client that names its own would."""
    from dataclasses import replace

    from pytest_streamcheck import ReferenceAdapter

    class Declaring(ReferenceAdapter):
        info = replace(ReferenceAdapter.info, profile=profile)

    return Declaring


def test_a_run_that_names_no_profile_judges_under_the_clients_declared_one() -> None:
    """AdapterInfo.profile picks the profile when the caller names none; a named one wins."""
    from conformance import run_suite

    declared = run_suite(_declaring("seed-pipeline"), select=["SC-RETRY-1"], lanes=1)
    assert [r.profile for r in declared] == ["seed-pipeline@1"]
    named = run_suite(
        _declaring("seed-pipeline"), profile="seed-eventsource", select=["SC-RETRY-1"], lanes=1
    )
    assert [r.profile for r in named] == ["seed-eventsource@1"]
    silent = run_suite(_declaring(None), select=["SC-RETRY-1"], lanes=1)
    assert [r.profile for r in silent] == ["seed-eventsource@1"]


def test_a_declared_profile_the_kit_does_not_know_is_a_harness_error() -> None:
    """The run stops with a message naming the client and its profile, never judging
    the client under another profile."""
    from conformance import HarnessError, run_suite

    with pytest.raises(HarnessError, match="declares the profile 'no-such-profile'"):
        run_suite(_declaring("no-such-profile"), select=["SC-RETRY-1"], lanes=1)


def test_an_empty_profile_list_is_refused() -> None:
    """An empty list would leave every case UNSUPPORTED: a run that judged nothing."""
    from conformance import run_suite

    with pytest.raises(ValueError, match="an empty list"):
        run_suite(_declaring(None), profile=[], select=["SC-RETRY-1"])


RESET_TAKES = 1.2  # seconds: past the 0.6 s command limit, within a declared 2.4 s


def _slow_to_reset(limit: float | None) -> type:
    """The reference client, whose every reset takes RESET_TAKES, declaring ``limit``."""
    import asyncio

    from conformance.reference import ClientPolicy
    from pytest_streamcheck import ReferenceAdapter

    class SlowToReset(ReferenceAdapter):
        async def configure(self, policy: ClientPolicy) -> None:
            self._policy = policy  # the reference's configure resets: not slowed here
            await super().reset()

        async def reset(self) -> None:
            await asyncio.sleep(RESET_TAKES)
            await super().reset()

    if limit is not None:
        SlowToReset.reset_limit = limit  # type: ignore[attr-defined]
    return SlowToReset


def test_the_runner_waits_out_the_reset_limit_an_adapter_declares(monkeypatch) -> None:
    """A reset past COMMAND_LIMIT is an ERROR; an adapter that declares a longer
    ``reset_limit`` (the browser's reopen: docs/browser.md) gets that, and passes."""
    from conformance import Verdict, _host, run_suite

    # Tolerance: configure is limited too; the reference's takes milliseconds, and 0.6 s
    # covers a worker starved beside 2 CPU burners. The reset's 1.2 s is twice that.
    monkeypatch.setattr(_host, "COMMAND_LIMIT", 0.6)
    monkeypatch.setattr(_host, "COMMAND_MARGIN", 0.6)
    (cut,) = run_suite(_slow_to_reset(None), select=["SC-RETRY-1"], lanes=1)
    assert cut.verdict == Verdict.ERROR
    assert "did not finish resetting the client within 0.6s" in cut.reason
    (waited,) = run_suite(_slow_to_reset(2.4), select=["SC-RETRY-1"], lanes=1)
    assert waited.verdict == Verdict.PASS, waited.reason


def test_a_rejudging_try_gets_a_limit_that_grows_with_its_scale() -> None:
    """A case undecidable at every scale, whose play lasts 50 ms times its scale: past a
    0.5 s case limit at x12 and x30, but within LIMIT_GROWTH times the first try's pace,
    so it ends INCONCLUSIVE at every scale, not an ERROR at x12."""
    from conformance import Verdict
    from conformance._case import Case, Level, Outcome
    from conformance._lanes import Lanes
    from conformance._profiles import get_profile
    from conformance.timing import REJUDGE_FACTORS
    from pytest_streamcheck import ReferenceAdapter

    profile = get_profile("seed-eventsource")
    per_base = 0.05 / profile.at("test").backoff.base

    async def play(ctx: Any) -> None:
        await ctx.hold(per_base * ctx.policy.backoff.base)

    case = Case(
        id="SC-TEST-1",
        title="undecidable at every scale",
        level=Level.MUST,
        requirement="none",
        source="tests",
        play=play,
        check=lambda ev, policy: Outcome.unsure("a verdict", "none, at any scale"),
    )
    runner = Lanes(
        ReferenceAdapter, [profile], timing="test", case_timeout=0.5, lanes=1
    ).start()  # re-judging is real time's: virtual time has no noise to re-judge for
    try:
        (result,) = runner.run([case])
    finally:
        runner.close()
    assert result.verdict == Verdict.INCONCLUSIVE, result.reason
    assert [t.factor for t in result.rejudged] == [1.0, *REJUDGE_FACTORS]
