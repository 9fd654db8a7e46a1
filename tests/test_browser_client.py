"""The browser example client (examples/browser-client): its node:test suite, and that the
modules the page loads use nothing a browser lacks.

The page itself runs the catalog in headless Chromium
(``pytest --streamcheck=browser:examples/browser-client/index.html``), not here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _node import NODE, run_node_tests

CLIENT_DIR = Path(__file__).resolve().parent.parent / "examples" / "browser-client"
PAGE_MODULES = sorted([*CLIENT_DIR.glob("*.mjs"), *(CLIENT_DIR / "shared").glob("*.mjs")])
IMPORT = re.compile(r"""^\s*(?:import|export)\b[^'"]*?\bfrom\s+['"]([^'"]+)['"]""", re.MULTILINE)
# What Node has and a browser does not; `import(...)` of a bare name would need a bundler.
NODE_ONLY = re.compile(r"\b(?:process\.|Buffer\b|require\(|__dirname|__filename)")


@pytest.mark.slow
@pytest.mark.skipif(NODE is None, reason="node is not on PATH")
def test_node_unit_tests_pass() -> None:
    """The shared pure modules, the resilience layer over a scripted transport, the
    network watch, the transports and the protocol glue, under node:test."""
    run_node_tests(CLIENT_DIR)


def test_the_pages_modules_are_found() -> None:
    names = {p.relative_to(CLIENT_DIR).as_posix() for p in PAGE_MODULES}
    assert {"page.mjs", "streamcheck.mjs", "client.mjs", "shared/resilience.mjs"} <= names


@pytest.mark.parametrize("module", PAGE_MODULES, ids=lambda p: p.relative_to(CLIENT_DIR).as_posix())
def test_page_modules_import_only_files_the_page_server_serves(module: Path) -> None:
    """The kit serves the page's directory and nothing else: every import is a relative
    path inside it, no `node:` module, no bare package name."""
    text = module.read_text(encoding="utf-8")
    for spec in IMPORT.findall(text):
        assert spec.startswith(("../", "./")), f"{module.name} imports {spec!r}"
        target = (module.parent / spec).resolve()
        assert target.is_relative_to(CLIENT_DIR), f"{module.name} imports {spec!r} from outside"
        assert target.is_file(), f"{module.name} imports {spec!r}, which does not exist"


@pytest.mark.parametrize("module", PAGE_MODULES, ids=lambda p: p.relative_to(CLIENT_DIR).as_posix())
def test_page_modules_use_no_node_only_api(module: Path) -> None:
    code = "\n".join(
        line
        for line in module.read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith(("//", "*", "/*"))
    )
    found = NODE_ONLY.findall(code)
    assert not found, f"{module.name} uses {found}"


@pytest.mark.parametrize("page", ["index.html", "ignores-network-events.html", "eventsource.html"])
def test_each_page_loads_the_one_start_module(page: str) -> None:
    """The variants differ from index.html by one data attribute, not by code."""
    html = (CLIENT_DIR / page).read_text(encoding="utf-8")
    assert '<script type="module" src="page.mjs"></script>' in html
