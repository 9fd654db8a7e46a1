"""The conformance cases (the spec, as code), profiles, checks and the reference client.

Importing this package imports nothing else: every name below is loaded from its
private module on first use, so ``conformance.reference`` (the reference client, a
product of its own) can be imported without the kit. ``all_cases()`` loads the catalog;
the runner (``run_suite``, ``SuiteRunner``: the fake servers and the proxy) comes with
its first use. ``run_suite(adapter_factory, profile=..., select=...)`` runs cases
against a client from a plain script or any test runner; the adapter contract
(``ClientAdapter``, ``StreamSink``, ...) is here too, and the pytest plugin re-exports
it. Two kinds of verdict, one name each: ``Verdict`` is a case's (PASS, FAIL, ...),
``AppVerdict`` is what ``judge`` (behind ``llm_server.verdict()``) found about one
test's client.
"""

from typing import TYPE_CHECKING

from conformance.reference._exports import lazy_getattr

if TYPE_CHECKING:
    from conformance._adapter import (
        ADAPTER_API,
        AdapterInfo,
        AdapterRequest,
        ClientAdapter,
        Diagnostics,
        HostsLibraryClients,
        LagCollector,
        NoiseProbe,
        ResetLimit,
        Startable,
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
    from conformance._result import CaseResult, HarnessError
    from conformance._runner import DEFAULT_PROFILES, SuiteRunner
    from conformance._suite import run_suite, select_cases
    from conformance._verdict import RULES, AppVerdict, Finding, Rule, judge

# private module -> the public names it provides
_MODULES = {
    "_adapter": (
        "ADAPTER_API",
        "AdapterInfo",
        "AdapterRequest",
        "ClientAdapter",
        "Diagnostics",
        "HostsLibraryClients",
        "LagCollector",
        "NoiseProbe",
        "ResetLimit",
        "Startable",
        "StreamCancelled",
        "StreamSink",
        "SyncClientAdapter",
    ),
    "_case": (
        "CAPABILITIES",
        "Capability",
        "Case",
        "CaseContext",
        "JsonBody",
        "Level",
        "MultipartBody",
        "Outcome",
        "StreamRequest",
        "Verdict",
        "all_cases",
        "get_case",
        "register",
    ),
    "_evidence": ("ERROR_KINDS", "Delivery", "DeliveryLog", "ErrorKind", "Evidence"),
    "_profiles": (
        "BUILTIN_PROFILES",
        "Profile",
        "ProfileError",
        "get_profile",
        "load_profile",
        "policy_from_dict",
        "policy_to_dict",
    ),
    "_result": ("CaseResult", "HarnessError"),
    # The runner and the suite bring up the fake servers and the proxy.
    "_runner": ("DEFAULT_PROFILES", "SuiteRunner"),
    "_suite": ("run_suite", "select_cases"),
    "_verdict": ("RULES", "AppVerdict", "Finding", "Rule", "judge"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "ADAPTER_API",
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
    "Diagnostics",
    "ErrorKind",
    "Evidence",
    "Finding",
    "HarnessError",
    "HostsLibraryClients",
    "JsonBody",
    "LagCollector",
    "Level",
    "MultipartBody",
    "NoiseProbe",
    "Outcome",
    "Profile",
    "ProfileError",
    "ResetLimit",
    "Rule",
    "Startable",
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


__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
