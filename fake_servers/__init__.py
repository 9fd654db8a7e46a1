"""Fake streaming servers with scripted failures, a TCP fault proxy and the ledger.

Public names are re-exported here; the implementation lives in private modules.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> private module; resolved on first use so that importing the package stays cheap
_EXPORTS = {
    "now": "_clock",
    "Ending": "_script",
    "Endpoint": "_script",
    "Framing": "_script",
    "Gap": "_script",
    "Respond": "_script",
    "Scenario": "_script",
    "Stall": "_script",
    "Step": "_script",
    "Stream": "_script",
    "Attempt": "_ledger",
    "Connection": "_ledger",
    "Ledger": "_ledger",
    "LedgerTimeout": "_ledger",
    "SentEvent": "_ledger",
    "respond": "_builders",
    "stream": "_builders",
    "stall": "_builders",
    "drip": "_builders",
    "truncate": "_builders",
    "abort": "_builders",
    "fixed": "_builders",
    "uniform": "_builders",
    "exponential": "_builders",
    "endpoint": "_builders",
    "scenario": "_builders",
    "ScenarioError": "_loader",
    "load_scenario": "_loader",
    "parse_scenario": "_loader",
    "FakeServer": "_server",
    "FaultProxy": "_proxy",
    "Fault": "_proxy",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fake_servers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"fake_servers.{module}"), name)
    globals()[name] = value
    return value
