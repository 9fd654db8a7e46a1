"""Fake streaming servers with scripted failures, a TCP fault proxy and the ledger.

Public names are re-exported here; the implementation lives in private modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> private module; resolved on first use so that importing the package stays cheap
_EXPORTS = {
    "now": "_clock",
    "Ending": "_script",
    "Endpoint": "_script",
    "Framing": "_script",
    "Gap": "_script",
    "Raw": "_script",  # SSE field cases (issue 10)
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
    "raw": "_builders",  # SSE field cases (issue 10)
    "respond": "_builders",
    "stream": "_builders",
    "stall": "_builders",
    "drip": "_builders",
    "truncate": "_builders",
    "abort": "_builders",
    "reply": "_shorthand",
    "rate_limited": "_shorthand",
    "outage": "_shorthand",
    "drop_after": "_shorthand",
    "stall_after": "_shorthand",
    "truncate_after": "_shorthand",
    "error_after": "_shorthand",
    "fixed": "_builders",
    "uniform": "_builders",
    "exponential": "_builders",
    "endpoint": "_builders",
    "scenario": "_builders",
    "ScenarioError": "_loader",
    "load_scenario": "_loader",
    "parse_scenario": "_loader",
    "dump_scenario": "_loader",
    "FakeServer": "_server",
    "register_format": "_formats",
    "get_format": "_formats",
    "format_names": "_formats",
    "sent_text": "_formats",
    "FaultProxy": "_proxy",
    "Fault": "_proxy",
}

if TYPE_CHECKING:  # the same names, eagerly, for type checkers
    from fake_servers._builders import (
        abort,
        drip,
        endpoint,
        exponential,
        fixed,
        raw,
        respond,
        scenario,
        stall,
        stream,
        truncate,
        uniform,
    )
    from fake_servers._clock import now
    from fake_servers._formats import format_names, get_format, register_format, sent_text
    from fake_servers._ledger import Attempt, Connection, Ledger, LedgerTimeout, SentEvent
    from fake_servers._loader import ScenarioError, dump_scenario, load_scenario, parse_scenario
    from fake_servers._proxy import Fault, FaultProxy
    from fake_servers._script import (
        Ending,
        Endpoint,
        Framing,
        Gap,
        Raw,
        Respond,
        Scenario,
        Stall,
        Step,
        Stream,
    )
    from fake_servers._server import FakeServer
    from fake_servers._shorthand import (
        drop_after,
        error_after,
        outage,
        rate_limited,
        reply,
        stall_after,
        truncate_after,
    )

__all__ = [
    "Attempt",
    "Connection",
    "Ending",
    "Endpoint",
    "FakeServer",
    "Fault",
    "FaultProxy",
    "Framing",
    "Gap",
    "Ledger",
    "LedgerTimeout",
    "Raw",
    "Respond",
    "Scenario",
    "ScenarioError",
    "SentEvent",
    "Stall",
    "Step",
    "Stream",
    "abort",
    "drip",
    "drop_after",
    "dump_scenario",
    "endpoint",
    "error_after",
    "exponential",
    "fixed",
    "format_names",
    "get_format",
    "load_scenario",
    "now",
    "outage",
    "parse_scenario",
    "rate_limited",
    "raw",
    "register_format",
    "reply",
    "respond",
    "scenario",
    "sent_text",
    "stall",
    "stall_after",
    "stream",
    "truncate",
    "truncate_after",
    "uniform",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fake_servers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"fake_servers.{module}"), name)
    globals()[name] = value
    return value
