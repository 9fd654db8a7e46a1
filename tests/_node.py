"""Node for the example clients' tests: where it is, and their node:test suites."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["NODE", "run_node_tests"]

NODE = shutil.which("node")


def run_node_tests(directory: Path) -> None:
    """``node --test test/`` in ``directory``; fails with the end of its output."""
    assert NODE is not None
    result = subprocess.run(
        [NODE, "--test", "test/"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
