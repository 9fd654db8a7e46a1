"""pytest-streamcheck: the conformance kit for resilient LLM streaming clients.

The public names for adapter authors are re-exported here and resolved on first
use, so that loading the plugin costs nothing in a run that does not use it. The
adapter contract and the runner live in ``conformance`` (``conformance.run_suite``
runs the catalog without pytest); the plugin is a shell over them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The kit's names come from the ``conformance`` façade, which knows their private modules.
_KIT = (
    "ADAPTER_API",
    "AdapterInfo",
    "AdapterRequest",
    "CaseResult",
    "ClientAdapter",
    "HarnessError",
    "JsonBody",
    "MultipartBody",
    "StreamCancelled",
    "StreamRequest",
    "StreamSink",
    "SuiteRunner",
    "SyncClientAdapter",
)
_EXPORTS = {  # name -> the module to take it from
    **dict.fromkeys(_KIT, "conformance"),
    "ExecAdapter": "pytest_streamcheck.targets._exec",
    "ReferenceAdapter": "pytest_streamcheck.targets._reference",
    # The thread-per-stream base for synchronous clients (docs/adapters.md, "Sync clients").
    "ThreadedSyncAdapter": "pytest_streamcheck.clients._py_common",
    "LLMServer": "pytest_streamcheck._llm",
}

if TYPE_CHECKING:
    from conformance import (
        ADAPTER_API,
        AdapterInfo,
        AdapterRequest,
        CaseResult,
        ClientAdapter,
        HarnessError,
        JsonBody,
        MultipartBody,
        StreamCancelled,
        StreamRequest,
        StreamSink,
        SuiteRunner,
        SyncClientAdapter,
    )
    from pytest_streamcheck._llm import LLMServer
    from pytest_streamcheck.clients._py_common import ThreadedSyncAdapter
    from pytest_streamcheck.targets._exec import ExecAdapter
    from pytest_streamcheck.targets._reference import ReferenceAdapter

__all__ = [
    "ADAPTER_API",
    "AdapterInfo",
    "AdapterRequest",
    "CaseResult",
    "ClientAdapter",
    "ExecAdapter",
    "HarnessError",
    "JsonBody",
    "LLMServer",
    "MultipartBody",
    "ReferenceAdapter",
    "StreamCancelled",
    "StreamRequest",
    "StreamSink",
    "SuiteRunner",
    "SyncClientAdapter",
    "ThreadedSyncAdapter",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_streamcheck' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
