"""The compatibility matrix (``python -m pytest_streamcheck matrix``): targets run as their
own pytest runs, a crashing one gets a column that says so, and the same JSON reports
always render the same matrix."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from _node import NODE

from pytest_streamcheck._matrix import (
    Column,
    _slugs,
    build_matrix,
    errored,
    moved_outputs,
    run_target,
    slug,
)

TESTS = Path(__file__).parent
# A few cases: the zoo's gives_up_at_once fails the first three, passes the last.
CASES = "SC-RETRY-13 or SC-RETRY-23 or SC-BREAKER-5 or SC-SSE-15"
MUTANT = "zoo:gives_up_at_once"
CRASHER = (
    "import os\n\ndef streamcheck_adapter():\n    os._exit(3)  # dies as the first case starts\n"
)
SLEEPER = "import time\n\ntime.sleep(60)\n\ndef streamcheck_adapter():\n    pass\n"


def _env(extra: Path) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(TESTS), str(extra), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("STREAMCHECK_SEED", None)
    return env


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_streamcheck", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=240,
        check=False,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One matrix run: the reference, a broken client of the zoo, a client that crashes."""
    base = tmp_path_factory.mktemp("matrix")
    (base / "mods").mkdir()
    (base / "mods" / "sct_crasher.py").write_text(CRASHER, encoding="utf-8")
    env = _env(base / "mods")
    out = base / "out"
    args = ["matrix", "reference", MUTANT, "sct_crasher", "--out", str(out), "-j", "3"]
    result = _cli(
        *args, "--timeout", "180", "--", "-p", "no:hypothesispytest", "-k", CASES, env=env, cwd=base
    )
    matrix = json.loads((out / "matrix.json").read_text(encoding="utf-8"))
    return {"base": base, "out": out, "env": env, "result": result, "matrix": matrix}


def test_each_target_is_a_column_and_a_crash_says_so(run: dict[str, Any]) -> None:
    result, matrix = run["result"], run["matrix"]
    assert result.returncode == 1, result.stdout + result.stderr  # a target crashed
    assert re.search(r"wall time \d+\.\d s", result.stdout)
    assert "matrix: sct_crasher: CRASHED after" in result.stdout
    assert "sct_crasher: no report (exited with code 3 without a report" in result.stderr
    ref, mutant, crasher = matrix["columns"]
    assert ref["client"] == {"name": "streamcheck-reference", "version": "0.1.0"}
    assert ref["profiles"] == ["seed-eventsource@1", "seed-fetch@1"]
    assert (ref["coverage"]["judged"], ref["coverage"]["applicable"]) == (4, 4)
    assert ref["coverage"]["grade"] == "partial 4/4 judged (4 of 208 selected)"
    assert (
        "NOT conformant: 204 of the catalog's 208 cases not selected"
        in (ref["coverage"]["headline"])
    )
    assert mutant["client"]["name"] == "zoo-gives_up_at_once"
    assert mutant["coverage"]["grade"] == "failing"
    assert (ref["coverage"]["kind"], mutant["coverage"]["kind"]) == ("partial", "failing")
    assert crasher["coverage"] is None
    assert crasher["crashed"].startswith("exited with code 3 without a report")
    assert (ref["html"], mutant["html"]) == ("reference.html", "zoo_gives_up_at_once.html")


def test_cases_are_rows_by_area_with_the_area_grade(run: dict[str, Any]) -> None:
    areas = {a["area"]: a for a in run["matrix"]["areas"]}
    assert list(areas) == ["RETRY", "BREAKER", "SSE"]  # catalog order
    retry = areas["RETRY"]
    assert [g and g["grade"] for g in retry["grades"]] == ["partial", "failing", None]
    row = retry["cases"][0]
    assert (row["id"], row["level"]) == ("SC-RETRY-13", "MUST")
    assert row["title"]
    assert row["cells"][0] == {"verdict": "PASS", "href": "reference.html#SC-RETRY-13"}
    assert row["cells"][1]["verdict"] == "FAIL"
    assert row["cells"][2] is None  # the crashed target's
    assert [c and c["verdict"] for c in areas["SSE"]["cases"][0]["cells"]] == ["PASS", "PASS", None]


def test_cells_link_to_the_cases_anchor_in_each_clients_report(run: dict[str, Any]) -> None:
    out: Path = run["out"]
    page = (out / "zoo_gives_up_at_once.html").read_text(encoding="utf-8")
    assert "id='SC-RETRY-13'" in page
    md = (out / "matrix.md").read_text(encoding="utf-8")
    assert "[FAIL](zoo_gives_up_at_once.html#SC-RETRY-13)" in md
    assert "| **RETRY** | | | **partial** 2/2 judged | **failing** 2/2 judged | not run |" in md
    assert "CRASHED: exited with code 3" in md
    html = (out / "matrix.html").read_text(encoding="utf-8")
    assert "href='zoo_gives_up_at_once.html#SC-RETRY-13'" in html
    assert "CRASHED" in html
    assert "<script" not in html
    assert "http" not in html  # self-contained: nothing to fetch


def test_from_json_renders_the_same_matrix_without_running(run: dict[str, Any]) -> None:
    """The reports alone render the matrix: byte for byte the same twice, the same as the
    run's (less the crashed column), and no time in it but the reports' own."""
    out: Path = run["out"]
    reports = [str(out / "reference.json"), str(out / "zoo_gives_up_at_once.json")]
    rendered = []
    for name in ("again1", "again2"):
        again = run["base"] / name
        result = _cli(
            "matrix", "--out", str(again), "--from-json", *reports, env=run["env"], cwd=run["base"]
        )
        assert result.returncode == 0, result.stderr
        assert not list(again.glob("*.log"))  # nothing ran
        rendered.append(
            {f: (again / f).read_bytes() for f in ("matrix.json", "matrix.md", "matrix.html")}
        )
    assert rendered[0] == rendered[1]
    matrix = json.loads(rendered[0]["matrix.json"])
    expected = dict(run["matrix"], columns=run["matrix"]["columns"][:2])
    expected["areas"] = [
        dict(a, grades=a["grades"][:2], cases=[dict(c, cells=c["cells"][:2]) for c in a["cases"]])
        for a in run["matrix"]["areas"]
    ]
    for column in matrix["columns"]:  # links point from the other directory to the reports
        column["report"] = Path(column["report"]).name
        column["html"] = Path(column["html"]).name
    for area in matrix["areas"]:
        for case in area["cases"]:
            for cell in case["cells"]:
                cell["href"] = cell["href"] and cell["href"].split("/")[-1]
    assert matrix == expected
    stamps = set(re.findall(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rendered[0]["matrix.md"]))
    own = {json.loads(Path(r).read_text())["generated_at"].encode() for r in reports}
    assert stamps == own


def test_a_target_that_outlives_its_time_limit_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sct_sleeper.py").write_text(SLEEPER, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", _env(tmp_path)["PYTHONPATH"])
    column, seconds = run_target("sct_sleeper", "sleeper", tmp_path, timeout=2.0)
    assert column.crashed == "timed out after 2 s (killed)"
    assert seconds < 30
    matrix = build_matrix([column])
    assert matrix["columns"][0]["crashed"] == column.crashed
    assert matrix["areas"] == []


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert _cli("matrix", "--out", str(tmp_path / "o"), env=env, cwd=tmp_path).returncode == 2
    missing = _cli(
        "matrix", "--out", str(tmp_path / "o"), "--from-json", "nope.json", env=env, cwd=tmp_path
    )
    assert missing.returncode == 2
    assert "no such report: nope.json" in missing.stderr
    assert _cli("matrix", "reference", env=env, cwd=tmp_path).returncode == 2  # no --out
    assert _cli("nothing", env=env, cwd=tmp_path).returncode == 2


def test_an_unreadable_report_is_a_column_that_says_so(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    from pytest_streamcheck._matrix import load_column

    column = load_column(bad, tmp_path)
    assert column.report is None
    assert column.crashed is not None
    assert column.crashed.startswith("unreadable report")


def test_file_names_of_targets() -> None:
    assert slug("zoo:gives_up_at_once") == "zoo_gives_up_at_once"
    assert (
        slug("exec:node examples/node-client/client.mjs")
        == "exec_node_examples_node-client_client.mjs"
    )
    from pytest_streamcheck._matrix import _slugs

    assert _slugs(["a:b", "a b", "c"]) == ["a_b", "a_b-2", "c"]
    assert Column("x", None, None, None, "boom").crashed == "boom"


# -- the caller's folder: relative targets, its own pytest configuration left out ---------

HOSTILE_CONFTEST = "def pytest_configure(config):\n    raise SystemExit('the host conftest ran')\n"
HOSTILE_INI = "[pytest]\naddopts = --no-such-option\n"
HOSTILE_TEST = "def test_host():\n    assert False, 'a host test ran'\n"
TWO = "SC-RETRY-13 or SC-SSE-15"


def _exec(script: str) -> str:
    return f"exec:{shlex.quote(sys.executable)} {script}"


@pytest.fixture(scope="module")
def relative(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One matrix run from a folder of its own, with a host project's conftest.py, ini and
    a failing test in it: a client named by a relative path, one whose path is wrong, and
    --junitxml passed through."""
    base = tmp_path_factory.mktemp("caller")
    (base / "clients").mkdir()
    for name in ("minimal.py", "_proto.py"):
        shutil.copy(TESTS / "exec_clients" / name, base / "clients" / name)
    (base / "conftest.py").write_text(HOSTILE_CONFTEST, encoding="utf-8")
    (base / "pytest.ini").write_text(HOSTILE_INI, encoding="utf-8")
    (base / "test_host.py").write_text(HOSTILE_TEST, encoding="utf-8")
    targets = [_exec("clients/minimal.py"), _exec("clients/missing.py")]
    extra = ["-p", "no:hypothesispytest", "-k", TWO, "--junitxml=reports/junit.xml"]
    result = _cli("matrix", *targets, "--out", "out", "--", *extra, env=_env(base), cwd=base)
    matrix = json.loads((base / "out" / "matrix.json").read_text(encoding="utf-8"))
    return {"base": base, "result": result, "matrix": matrix, "names": _slugs(targets)}


def test_relative_paths_in_a_target_resolve_against_the_callers_folder(
    relative: dict[str, Any],
) -> None:
    good = relative["matrix"]["columns"][0]
    assert good["crashed"] is None, good
    assert good["errored"] is None
    assert (good["coverage"]["judged"], good["coverage"]["applicable"]) == (2, 2)
    assert good["client"]["name"]  # it said hello: it started from clients/minimal.py


def test_the_callers_pytest_configuration_takes_no_part(relative: dict[str, Any]) -> None:
    base: Path = relative["base"]
    out = relative["result"].stdout + relative["result"].stderr
    assert "the host conftest ran" not in out
    assert "no-such-option" not in out
    log = (base / "out" / f"{relative['names'][0]}.log").read_text(encoding="utf-8")
    assert "test_host" not in log
    assert not (base / ".pytest_cache").exists()


def test_an_all_error_column_exits_1_and_says_why(relative: dict[str, Any]) -> None:
    result, matrix = relative["result"], relative["matrix"]
    assert result.returncode == 1, result.stdout + result.stderr
    bad = matrix["columns"][1]
    assert bad["crashed"] is None  # it has a report: every case in it is an ERROR
    assert bad["coverage"]["grade"].startswith("undecided 0/2 judged")
    assert bad["errored"].startswith("every case ERROR, none judged: exec client")
    assert "can't open file" in bad["errored"]  # what the client's own output said
    assert "missing.py" in bad["errored"]
    assert f"{_exec('clients/missing.py')}: NOTHING JUDGED after" in result.stdout
    assert "every case ERROR, none judged" in result.stderr
    assert "1 with nothing judged but ERRORs" in result.stdout
    out: Path = relative["base"] / "out"
    assert "every case ERROR, none judged: exec client" in (out / "matrix.md").read_text()
    assert "every case ERROR, none judged" in (out / "matrix.html").read_text()


def test_output_options_passed_through_land_beside_each_targets_report(
    relative: dict[str, Any],
) -> None:
    base: Path = relative["base"]
    assert "matrix: --junitxml: one per target, in out as NAME.<the name given>" in (
        relative["result"].stdout
    )
    assert not (base / "reports").exists()  # not the one file every target would overwrite
    for name in relative["names"]:
        junit = ET.parse(base / "out" / f"{name}.junit.xml").getroot()
        cases = [c.get("name") for c in junit.iter("testcase")]
        assert len(cases) == 2, cases


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_the_documented_node_example_runs_from_the_checkout(tmp_path: Path) -> None:
    """docs/matrix.md's command, as written, from the folder it names paths from."""
    checkout = TESTS.parent
    target = "exec:node examples/node-client/client.mjs"
    result = _cli(
        "matrix",
        target,
        "--out",
        str(tmp_path),
        "--",
        "-p",
        "no:hypothesispytest",
        "-k",
        TWO,
        env=_env(tmp_path),
        cwd=checkout,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    column = json.loads((tmp_path / "matrix.json").read_text(encoding="utf-8"))["columns"][0]
    assert (column["coverage"]["judged"], column["errored"]) == (2, None)


@pytest.mark.parametrize("option", [["--streamcheck-report=x.json"], ["--streamcheck-html", "x"]])
def test_the_matrix_refuses_its_own_report_options(tmp_path: Path, option: list[str]) -> None:
    out = tmp_path / "o"
    result = _cli(
        "matrix", "reference", "--out", str(out), "--", *option, env=_env(tmp_path), cwd=tmp_path
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the matrix writes each target's reports itself" in result.stderr
    assert not out.exists()  # refused before anything ran


def test_output_paths_move_next_to_the_report(tmp_path: Path) -> None:
    given = [
        "-k",
        "X",
        "--junitxml=a/junit.xml",
        "--junit-xml",
        "/abs/j.xml",
        "--streamcheck-certify=cert/",
        "--report-log",
        "log.jsonl",
        "--junitxml",
    ]
    moved = moved_outputs(given, tmp_path, "ref")
    here = tmp_path.resolve()
    assert moved == [
        "-k",
        "X",
        f"--junitxml={here / 'ref.junit.xml'}",
        "--junit-xml",
        str(here / "ref.j.xml"),
        f"--streamcheck-certify={here / 'ref.cert'}",
        "--report-log",
        str(here / "ref.log.jsonl"),
        "--junitxml",  # no value: pytest says so
    ]


def _report(*verdicts: tuple[str, str]) -> dict[str, Any]:
    return {
        "cases": [
            {"id": f"SC-X-{i}", "verdict": v, "reason": r} for i, (v, r) in enumerate(verdicts)
        ]
    }


def test_errored_names_the_error_only_when_nothing_was_judged() -> None:
    node = (
        "exec client `node c.mjs` exited\nlast stderr lines:\n  | at\n  | Error: no c.mjs\n  | at"
    )
    assert errored(_report(("ERROR", "see the first"), ("ERROR", node))) == (
        "every case ERROR, none judged: exec client `node c.mjs` exited (Error: no c.mjs)"
    )
    assert errored(_report(("ERROR", "x"), ("UNSUPPORTED", "no capability"))) == (
        "1 of 2 cases ERROR, none judged: x"
    )
    assert errored(_report(("ERROR", "x"), ("PASS", ""))) is None
    assert errored(_report(("UNSUPPORTED", "x"))) is None
    assert errored(_report()) is None
