"""The console script ``streamcheck`` (pyproject's [project.scripts]): ``streamcheck run
TARGET`` plays the suite in any folder with no pytest project, leaving the folder's own
pytest configuration out unless asked; ``matrix`` and ``verify`` are reachable through it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Installed beside the interpreter by `pip install -e .` (the venv's bin directory).
SCRIPT = Path(sys.executable).with_name("streamcheck")
ONE = "streamcheck::SC-RETRY-13"
QUIET = ("-p", "no:hypothesispytest", "-q")


def _streamcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.is_file(), f"no {SCRIPT}: pip install -e '.[test]' again to install it"
    env = {k: v for k, v in os.environ.items() if k not in ("STREAMCHECK_SEED", "PYTEST_ADDOPTS")}
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )


def _host_project(folder: Path) -> None:
    """A folder whose pytest configuration would break any run that read it."""
    (folder / "conftest.py").write_text(
        "def pytest_configure(config):\n    raise SystemExit('the host conftest ran')\n",
        encoding="utf-8",
    )
    (folder / "pytest.ini").write_text("[pytest]\naddopts = --no-such-option\n", encoding="utf-8")
    (folder / "test_host.py").write_text("def test_host():\n    assert False\n", encoding="utf-8")


def test_run_plays_the_suite_in_an_empty_folder(tmp_path: Path) -> None:
    run = _streamcheck("run", "reference", ONE, *QUIET, "--junitxml=junit.xml", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert "coverage: judged 1 of 1 applicable cases" in run.stdout
    assert (tmp_path / "junit.xml").is_file()  # pytest's options, relative to the folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml"]  # no .pytest_cache


def test_run_leaves_a_host_projects_configuration_out(tmp_path: Path) -> None:
    _host_project(tmp_path)
    run = _streamcheck("run", "reference", ONE, *QUIET, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout  # not test_host.py


def test_run_with_project_reads_it(tmp_path: Path) -> None:
    _host_project(tmp_path)
    run = _streamcheck("run", "--with-project", "reference", ONE, *QUIET, cwd=tmp_path)
    assert run.returncode != 0
    assert "no-such-option" in run.stderr or "the host conftest ran" in run.stderr


def test_run_exits_with_pytests_status(tmp_path: Path) -> None:
    run = _streamcheck("run", "reference", "-k", "no-such-case", *QUIET, cwd=tmp_path)
    assert run.returncode == pytest.ExitCode.NO_TESTS_COLLECTED


def test_the_other_commands_are_reachable(tmp_path: Path) -> None:
    helped = _streamcheck("--help", cwd=tmp_path)
    assert helped.returncode == 0
    assert helped.stdout.startswith("usage: streamcheck ")
    assert all(name in helped.stdout for name in ("run", "matrix", "verify"))
    missing = _streamcheck("verify", "nope", "--require-conformant", cwd=tmp_path)
    assert (missing.returncode, missing.stderr.strip()) == (2, "verify: not a directory: nope")
    usage = _streamcheck("matrix", "--out", "o", cwd=tmp_path)
    assert usage.returncode == 2
    assert "matrix: name at least one TARGET or --from-json FILE" in usage.stderr
    assert _streamcheck("run", cwd=tmp_path).returncode == 2  # no TARGET


def test_a_catalog_run_from_the_kit_s_checkout_leaves_a_library_its_warnings() -> None:
    """The kit's own tests make every warning an error (tests/conftest.py); a catalog run
    from its checkout does not impose that on the library it judges (issue 28)."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root / "tests" / "plugin_targets")}
    command = ("-m", "pytest", "-p", "no:cacheprovider", "--streamcheck=sct_warns", ONE, "-q")
    run = subprocess.run(
        [sys.executable, *command],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
