"""What the plugin's pytester tests share: an isolated pytester directory, exact
case selection, and the arguments of a small suite run."""

from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path

import pytest

import conformance
import fake_servers
import pytest_streamcheck
from conformance._case import all_cases

__all__ = [
    "CATALOG",
    "PLAIN",
    "SEED_ENV",
    "TARGETS",
    "XDIST",
    "only",
    "prepare",
    "suite",
    "write_ini",
]

TARGETS = Path(__file__).parent
SEED_ENV = "STREAMCHECK_SEED"


def _preload_the_kit() -> None:
    """Import every module of the kit in this (outer) process.

    An in-process run drops the modules it imported when it ends, while packages
    imported earlier keep what they cached (the lazy re-exports, the case registry).
    The next run would then mix classes from two imports of one module, and
    ``except StreamError`` would miss. Modules imported here outlive every run.
    """
    packages = [fake_servers, conformance, pytest_streamcheck]
    while packages:
        package = packages.pop()
        for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
            if info.name.endswith(".__main__"):
                continue
            module = importlib.import_module(info.name)
            if info.ispkg:
                packages.append(module)


_preload_the_kit()
CATALOG: tuple[str, ...] = tuple(case.id for case in all_cases())
# The inner runs' ini: pytest-asyncio warns (an error here) when this is unset.
BASE_INI = ("asyncio_default_fixture_loop_scope = function",)
# Arguments of every inner run that spreads no workers (XDIST is for those that do).
# Hypothesis's plugin re-imports hypothesis in each in-process run (0.7 s apiece); no
# inner run needs it. Registering xdist's and anyio's hooks cost 33 ms of CPU a run
# (of 440, measured over 8 in-process runs of one case), and the suite has hundreds.
XDIST = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio")
PLAIN = (*XDIST, "-p", "no:xdist", "-p", "no:xdist.looponfail")


def write_ini(pytester: pytest.Pytester, **settings: str) -> None:
    """(Re)write the inner runs' pytest.ini with these settings."""
    lines = [f"{name} = {value}" for name, value in settings.items()]
    pytester.makefile(".ini", pytest="\n".join(["[pytest]", *BASE_INI, *lines]))


def prepare(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """Write the inner runs' pytest.ini, make the targets importable, forget any seed."""
    write_ini(pytester)
    pytester.syspathinsert(TARGETS)  # in-process runs
    path = os.pathsep.join(filter(None, [str(TARGETS), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)  # subprocess runs
    # The plugin exports its seed for xdist workers; in-process runs share this
    # environment. setenv then delenv: the original value is restored afterwards.
    monkeypatch.setenv(SEED_ENV, "")
    monkeypatch.delenv(SEED_ENV)
    return pytester


def only(*ids: str) -> str:
    """A ``-k`` expression selecting exactly these cases (``-k`` matches substrings,
    so SC-RETRY-1 alone would select SC-RETRY-10 to SC-RETRY-19 too)."""
    unknown = set(ids) - set(CATALOG)
    assert not unknown, f"not in the catalog: {sorted(unknown)}"
    wanted = " or ".join(ids)
    others = [c for c in CATALOG if c not in ids and any(i.lower() in c.lower() for i in ids)]
    return f"({wanted}) and not ({' or '.join(others)})" if others else wanted


def suite(target: str, *ids: str) -> list[str]:
    """Arguments for a run of exactly these cases against ``target``."""
    return [*PLAIN, f"--streamcheck={target}", "-k", only(*ids)]
