"""pytest_streamcheck.reports: the report writers' one room, behind a lazy face."""

from __future__ import annotations

import subprocess
import sys

import pytest_streamcheck.reports as reports


def test_every_public_name_loads_from_its_module() -> None:
    assert sorted(reports.__all__) == sorted(reports._EXPORTS)
    for name in reports.__all__:
        value = getattr(reports, name)
        assert getattr(value, "__module__", reports._EXPORTS[name]).endswith(
            reports._EXPORTS[name]
        ) or not callable(value)


def test_importing_the_package_imports_no_writer() -> None:
    """The plugin loads only the writers a run asks for: the face itself loads none."""
    code = (
        "import sys, pytest_streamcheck.reports; "
        "print(sorted(m for m in sys.modules if m.startswith('pytest_streamcheck.reports.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
