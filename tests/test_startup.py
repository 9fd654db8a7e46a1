"""Installing the kit costs a host project nothing: the plugin loads no heavy module.

Each test runs pytest in a subprocess (a fresh interpreter, so ``sys.modules`` shows
what that run alone imported) with the plugin installed, and a probe conftest that
records the modules loaded when the session finishes (before the terminal summary)
and at the very end.
"""

from __future__ import annotations

import importlib.metadata
import json

import pytest

PROBE = """
import json, sys

def _write(when):
    with open("modules.json", "a") as out:
        out.write(json.dumps([when, sorted(sys.modules)]) + "\\n")

def pytest_sessionfinish(session):
    _write("sessionfinish")

def pytest_unconfigure(config):
    plugins = [name for name, _ in config.pluginmanager.list_name_plugin()]
    _write("end")
    with open("plugins.json", "w") as out:
        json.dump(plugins, out)
"""

# The server side of the kit and its heavy dependencies: a run that names no case and
# uses no fixture of the kit must load none of them.
SERVER_SIDE = ("hypercorn", "starlette", "httpx", "httpcore", "h11", "wsproto", "fake_servers")
HEAVY = ("hypothesis", "faker", *SERVER_SIDE)


def _loaded(pytester: pytest.Pytester, *args: str) -> tuple[dict[str, set[str]], list[str]]:
    pytester.makeconftest(PROBE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    rows = [json.loads(line) for line in (pytester.path / "modules.json").read_text().splitlines()]
    modules = {when: {name.split(".")[0] for name in names} for when, names in rows}
    plugins = json.loads((pytester.path / "plugins.json").read_text())
    return modules, plugins


def _heavy(names: set[str]) -> set[str]:
    return {name for name in HEAVY if name in names}


def test_faker_is_not_a_dependency() -> None:
    """faker's own pytest plugin would load faker into every pytest process of a user who
    installs the kit; the fake servers draw their words from fixed pools instead."""
    requires = importlib.metadata.requires("pytest-streamcheck") or []
    assert not [r for r in requires if r.lower().startswith("faker")], requires


def test_a_host_project_s_plain_run_loads_no_heavy_module(pytester: pytest.Pytester) -> None:
    """A trivial test, no --streamcheck: the plugin is registered, and no heavy module
    (hypothesis, faker, the servers' stack) is imported, nor any server-side kit module."""
    pytester.makepyfile(test_host="def test_trivial():\n    assert 1 + 1 == 2\n")
    modules, plugins = _loaded(pytester)
    assert "streamcheck" in plugins, plugins  # the entry point loaded: not a vacuous pass
    assert _heavy(modules["sessionfinish"]) == set(), modules["sessionfinish"]
    end = _heavy(modules["end"])
    # hypothesis's own plugin (present where hypothesis is installed, as in the kit's
    # [test] extra) imports hypothesis in its terminal summary: not the kit's doing.
    if "hypothesispytest" in plugins:
        end.discard("hypothesis")
    assert end == set(), modules["end"]


def test_a_catalog_run_loads_neither_hypothesis_nor_faker(pytester: pytest.Pytester) -> None:
    """One case of the catalog: the kit's servers load, hypothesis and faker do not."""
    modules, _ = _loaded(pytester, "--streamcheck=reference", "streamcheck::SC-RETRY-1")
    assert "hypercorn" in modules["sessionfinish"]  # the case did run a server
    assert {"hypothesis", "faker"} & modules["sessionfinish"] == set()


def test_the_plugin_s_default_lanes_are_the_planner_s() -> None:
    """The plugin writes the default lane count out (importing conformance to read it
    would load the kit into every pytest run); the two must agree."""
    from conformance._schedule import DEFAULT_LANES, OPENING_LANES
    from pytest_streamcheck import _settings

    assert _settings.DEFAULT_LANES == DEFAULT_LANES
    assert _settings.OPENING_LANES == OPENING_LANES
