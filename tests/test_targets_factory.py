"""Target factories: one that takes ``seed`` gets the run's, one that does not is called
plainly (docs/adapters.md "The seed")."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from browser_support import need_chromium

from pytest_streamcheck.targets import load_target
from pytest_streamcheck.targets._reference import ReferenceAdapter


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    mod = types.ModuleType("sct_seeded")
    seen: list[Any] = []

    def seeded(seed: int = 0) -> ReferenceAdapter:
        seen.append(seed)
        return ReferenceAdapter(seed=seed)

    def plain() -> ReferenceAdapter:
        seen.append("plain")
        return ReferenceAdapter()

    mod.seeded, mod.plain, mod.seen = seeded, plain, seen  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sct_seeded", mod)
    return mod


def test_a_factory_that_takes_seed_gets_the_runs(module: types.ModuleType) -> None:
    load_target("sct_seeded:seeded", seed=77)()
    load_target("sct_seeded:plain", seed=77)()
    assert module.seen == [77, "plain"]  # type: ignore[attr-defined]


def test_an_adapter_missing_a_member_is_told_which(module: types.ModuleType) -> None:
    """A new user's fixed-policy adapter left out ``configure``: the error names it."""
    from pytest_streamcheck.targets import TargetError

    class NoConfigure:
        info = ReferenceAdapter.info

        async def reset(self) -> None: ...
        async def stream(self, request: object, sink: object) -> None: ...
        async def offline(self) -> None: ...
        async def online(self) -> None: ...
        async def aclose(self) -> None: ...

    module.partial = NoConfigure  # type: ignore[attr-defined]
    with pytest.raises(TargetError, match=r"which lacks configure of the adapter's members"):
        load_target("sct_seeded:partial")()


def test_a_missing_dependency_refuses_the_target_before_any_case(
    module: types.ModuleType,
) -> None:
    from pytest_streamcheck.targets import TargetError, with_preflight

    def missing() -> None:
        raise TargetError("the thing is not installed: pip install thing")

    module.needy = with_preflight(missing)(lambda: ReferenceAdapter())  # type: ignore[attr-defined]
    with pytest.raises(TargetError, match="the thing is not installed: pip install thing"):
        load_target("sct_seeded:needy")


def test_the_node_targets_say_how_to_install(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMCHECK_NODE_DIR", str(pytester.path / "no-install"))
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--streamcheck=eventsource")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*python -m pytest_streamcheck.clients.node install*"])


def test_the_hello_timeout_reaches_exec_and_browser_adapters() -> None:
    """--streamcheck-hello-timeout: an exec process's and a page's time to say hello."""
    from pytest_streamcheck.targets._exec import ExecAdapter
    from pytest_streamcheck.targets._exec_protocol import HELLO_TIMEOUT

    adapter = load_target("exec:true", hello_timeout=1.5)()
    assert isinstance(adapter, ExecAdapter)
    assert adapter.hello_timeout == 1.5
    assert getattr(load_target("exec:true")(), "hello_timeout", None) == HELLO_TIMEOUT
    need_chromium()
    page = load_target("browser:eventsource", hello_timeout=2.5)()
    assert getattr(page, "hello_timeout", None) == 2.5
