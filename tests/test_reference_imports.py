"""The reference client imports on its own: httpx and the standard library, none of the kit.

Each import runs in a fresh interpreter, since this process has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What a fresh interpreter has loaded after ``statement``, as a sorted JSON list.
_PROBE = """
import json, sys
{statement}
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(statement: str) -> set[str]:
    probe = _PROBE.format(statement=statement)
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(out.stdout))


def _kit(modules: set[str]) -> list[str]:
    """The modules of the kit among ``modules``: all but ``conformance`` itself (a lazy
    façade) and ``conformance.reference`` with its own modules."""
    return sorted(
        m
        for m in modules
        if m.split(".")[0] in ("conformance", "fake_servers", "pytest_streamcheck")
        and m != "conformance"
        and m != "conformance.reference"
        and not m.startswith("conformance.reference.")
    )


@pytest.mark.parametrize(
    "statement",
    [
        "import conformance.reference",
        "from conformance.reference import SSEDecoder",
        "from conformance.reference import SSEDecoder, StreamingClient, ClientPolicy",
        "import conformance.reference as r; [getattr(r, name) for name in r.__all__]",
    ],
)
def test_the_reference_client_loads_no_module_of_the_kit(statement: str) -> None:
    """Importing the reference client, even every public name of it, loads no module of
    fake_servers, pytest_streamcheck or conformance outside conformance.reference."""
    assert _kit(_modules_after(statement)) == []


def test_the_reference_client_needs_only_httpx_and_the_standard_library() -> None:
    """Everything the whole client loads is its own, the standard library's or httpx's."""
    loaded = _modules_after("from conformance.reference import *")
    allowed = _modules_after("import httpx")
    extra = {
        m
        for m in loaded - allowed
        if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "conformance"
    }
    assert sorted(extra) == []


def test_the_conformance_package_itself_loads_nothing() -> None:
    """``import conformance`` runs only its façade; each kit name loads on first use."""
    assert _kit(_modules_after("import conformance")) == []
    assert "conformance._verdict" in _modules_after("from conformance import judge")
