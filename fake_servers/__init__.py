"""Fake streaming servers with scripted failures, a TCP fault proxy and the ledger.

The public layer, ``__all__``, is what a test writes and reads, in five groups:

- writing a script: the builders ``respond``, ``stream``, ``stall``, ``drip``,
  ``truncate``, ``abort``, ``raw`` (one step, field by field, as a file spells it), the
  gaps ``fixed``, ``uniform``, ``exponential``, and ``endpoint``, ``scenario``; and the
  failure shorthands ``reply``, ``rate_limited``, ``outage``, ``drop_after``,
  ``stall_after``, ``truncate_after``, ``error_after`` (one call per failure, in the
  wire format of the provider whose path it is on);
- files: ``load_scenario``, ``parse_scenario``, ``dump_scenario``, ``ScenarioError``;
- running: ``FakeServer``, ``FaultProxy``, ``Fault``, and ``now``, the kit's one clock;
- reading: ``Ledger``, ``LedgerTimeout``, ``Attempt``, ``SentEvent``, ``Connection``;
- wire formats: ``register_format``, ``get_format``, ``format_names``, ``sent_text``.

Decision (issue 13): the builders, not the frozen dataclasses they return, are the
public way to write a script: they take a scenario file's keys and shapes, so a script
has one spelling in Python and in files, and the docs show only them. The dataclasses
(``Respond``, ``Stream``, ``Raw``, ``Stall``, ``Gap``, ``Framing``, ``Endpoint``,
``Scenario``, ``Step``, ``Ending``) stay importable from here, for annotations, ``isinstance`` and
hand-built steps, but are not advertised: they are not in ``__all__`` (so not in
``import *``). Every name resolves on first use, so importing the package stays cheap;
the implementation lives in private modules.
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
    "WIRE_FORMATS": "_app",
    "register_format": "_formats",
    "get_format": "_formats",
    "format_names": "_formats",
    "sent_text": "_formats",
    "FaultProxy": "_proxy",
    "Fault": "_proxy",
}

if TYPE_CHECKING:  # the same names, eagerly, for type checkers
    from fake_servers._app import WIRE_FORMATS
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

    # The data layer: importable (X as X, for type checkers), not in __all__.
    from fake_servers._script import Ending as Ending
    from fake_servers._script import Endpoint as Endpoint
    from fake_servers._script import Framing as Framing
    from fake_servers._script import Gap as Gap
    from fake_servers._script import Raw as Raw
    from fake_servers._script import Respond as Respond
    from fake_servers._script import Scenario as Scenario
    from fake_servers._script import Stall as Stall
    from fake_servers._script import Step as Step
    from fake_servers._script import Stream as Stream
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
    "WIRE_FORMATS",
    "Attempt",
    "Connection",
    "FakeServer",
    "Fault",
    "FaultProxy",
    "Ledger",
    "LedgerTimeout",
    "ScenarioError",
    "SentEvent",
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
