"""pytest-streamcheck: the conformance kit for resilient LLM streaming clients.

The public names for adapter authors are re-exported here and resolved on first
use, so that loading the plugin costs nothing in a run that does not use it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AdapterInfo": "_adapter",
    "AdapterRequest": "_adapter",
    "ClientAdapter": "_adapter",
    "StreamCancelled": "_adapter",
    "StreamSink": "_adapter",
    "SyncClientAdapter": "_adapter",
    "CaseResult": "_runner",
    "HarnessError": "_runner",
    "SuiteRunner": "_runner",
    "ExecAdapter": "_exec",
    "ReferenceAdapter": "_reference",
    "LLMServer": "_llm",
}

if TYPE_CHECKING:
    from pytest_streamcheck._adapter import (
        AdapterInfo,
        AdapterRequest,
        ClientAdapter,
        StreamCancelled,
        StreamSink,
        SyncClientAdapter,
    )
    from pytest_streamcheck._exec import ExecAdapter
    from pytest_streamcheck._llm import LLMServer
    from pytest_streamcheck._reference import ReferenceAdapter
    from pytest_streamcheck._runner import CaseResult, HarnessError, SuiteRunner

__all__ = [
    "AdapterInfo",
    "AdapterRequest",
    "CaseResult",
    "ClientAdapter",
    "ExecAdapter",
    "HarnessError",
    "LLMServer",
    "ReferenceAdapter",
    "StreamCancelled",
    "StreamSink",
    "SuiteRunner",
    "SyncClientAdapter",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_streamcheck' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"pytest_streamcheck.{module}"), name)
    globals()[name] = value
    return value
