"""The targets: what ``--streamcheck=TARGET`` names, and the adapters that drive them.

``load_target`` resolves a TARGET into an adapter factory (``_load``): the reference
client (``_reference``), a process of any language speaking the exec protocol (``_exec``,
``_exec_protocol``, ``_peer``), a page in headless Chromium (``_browser`` and its
``_browser_*`` rooms), a shipped library client (``pytest_streamcheck.clients``), or a
user's factory. ``TargetError`` and ``with_preflight`` are what a factory may raise and
wear before anything starts.
"""

from pytest_streamcheck.targets._load import ENTRY_POINT_GROUP, describe_targets, load_target
from pytest_streamcheck.targets._preflight import PREFLIGHT, TargetError, with_preflight

__all__ = [
    "ENTRY_POINT_GROUP",
    "PREFLIGHT",
    "TargetError",
    "describe_targets",
    "load_target",
    "with_preflight",
]
