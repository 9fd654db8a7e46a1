"""The conformance cases (the spec, as code), profiles, checks and the reference client.

Importing this package is cheap; the catalog is loaded by ``all_cases()``. Two kinds of
verdict, one name each: ``Verdict`` is a case's (PASS, FAIL, ...), ``AppVerdict`` is what
``judge`` (behind ``llm_server.verdict()``) found about one test's client.
"""

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

__all__ = [
    "BUILTIN_PROFILES",
    "CAPABILITIES",
    "ERROR_KINDS",
    "RULES",
    "AppVerdict",
    "Capability",
    "Case",
    "CaseContext",
    "Delivery",
    "DeliveryLog",
    "ErrorKind",
    "Evidence",
    "Finding",
    "JsonBody",
    "Level",
    "MultipartBody",
    "Outcome",
    "Profile",
    "ProfileError",
    "Rule",
    "StreamRequest",
    "Verdict",
    "all_cases",
    "get_case",
    "get_profile",
    "judge",
    "load_profile",
    "policy_from_dict",
    "policy_to_dict",
    "register",
]
