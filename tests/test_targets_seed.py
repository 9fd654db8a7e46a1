"""A target's factory that takes ``seed`` gets the run's; one that does not is called
plainly (docs/adapters.md "The seed")."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from pytest_streamcheck._reference import ReferenceAdapter
from pytest_streamcheck._targets import load_target


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
