"""pytest_streamcheck.reports: the report writers' one room, behind a lazy face."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest_streamcheck.reports as reports


def test_every_public_name_loads_from_its_module() -> None:
    """Each name of the face is the very object its module defines."""
    assert sorted(reports.__all__) == sorted(reports._EXPORTS)
    for name, module in reports._EXPORTS.items():
        defined = getattr(importlib.import_module(f"{reports.__name__}.{module}"), name)
        assert getattr(reports, name) is defined, name


def test_importing_the_package_imports_no_writer() -> None:
    """The plugin loads only the writers a run asks for: the face itself loads none."""
    code = (
        "import sys, pytest_streamcheck.reports; "
        "print(sorted(m for m in sys.modules if m.startswith('pytest_streamcheck.reports.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
