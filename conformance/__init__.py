"""The conformance cases (the spec, as code), profiles, checks and the reference client.

Importing this package is cheap; the catalog is loaded by ``all_cases()``, and the
runner (``run_suite``, ``SuiteRunner``: the fake servers and the proxy) on first use.
``run_suite(adapter_factory, profile=..., select=...)`` runs cases against a client
from a plain script or any test runner; the adapter contract (``ClientAdapter``,
``StreamSink``, ...) is here too, and the pytest plugin re-exports it. Two kinds of
verdict, one name each: ``Verdict`` is a case's (PASS, FAIL, ...), ``AppVerdict`` is what
``judge`` (behind ``llm_server.verdict()``) found about one test's client.
"""

import importlib
from typing import TYPE_CHECKING, Any

from conformance._adapter import (
    AdapterInfo,
    AdapterRequest,
    ClientAdapter,
    StreamCancelled,
    StreamSink,
    SyncClientAdapter,
)
from conformance._case import (
    CAPABILITIES,
    Capability,
    Case,
    CaseContext,
    JsonBody,
    Level,
    MultipartBody,
    Outcome,
    StreamRequest,
    Verdict,
    all_cases,
    get_case,
    register,
)
from conformance._evidence import ERROR_KINDS, Delivery, DeliveryLog, ErrorKind, Evidence
from conformance._profiles import (
    BUILTIN_PROFILES,
    Profile,
    ProfileError,
    get_profile,
    load_profile,
    policy_from_dict,
    policy_to_dict,
)
from conformance._verdict import RULES, AppVerdict, Finding, Rule, judge

if TYPE_CHECKING:
    from conformance._runner import (
        DEFAULT_PROFILES,
        CaseResult,
        HarnessError,
        SuiteRunner,
        run_suite,
        select_cases,
    )

_RUNNER = (
    "DEFAULT_PROFILES",
    "CaseResult",
    "HarnessError",
    "SuiteRunner",
    "run_suite",
    "select_cases",
)

__all__ = [
    "BUILTIN_PROFILES",
    "CAPABILITIES",
    "DEFAULT_PROFILES",
    "ERROR_KINDS",
    "RULES",
    "AdapterInfo",
    "AdapterRequest",
    "AppVerdict",
    "Capability",
    "Case",
    "CaseContext",
    "CaseResult",
    "ClientAdapter",
    "Delivery",
    "DeliveryLog",
    "ErrorKind",
    "Evidence",
    "Finding",
    "HarnessError",
    "JsonBody",
    "Level",
    "MultipartBody",
    "Outcome",
    "Profile",
    "ProfileError",
    "Rule",
    "StreamCancelled",
    "StreamRequest",
    "StreamSink",
    "SuiteRunner",
    "SyncClientAdapter",
    "Verdict",
    "all_cases",
    "get_case",
    "get_profile",
    "judge",
    "load_profile",
    "policy_from_dict",
    "policy_to_dict",
    "register",
    "run_suite",
    "select_cases",
]


def __getattr__(name: str) -> Any:
    # The runner brings up the fake servers and the proxy: loaded on first use.
    if name not in _RUNNER:
        raise AttributeError(f"module 'conformance' has no attribute {name!r}")
    value = getattr(importlib.import_module("conformance._runner"), name)
    globals()[name] = value
    return value
