"""Moved to ``conformance._adapter`` (the runner needs it, and runs without pytest).

Kept so that existing imports of ``pytest_streamcheck._adapter`` work; the public
names are ``pytest_streamcheck.AdapterInfo`` ... and ``conformance.AdapterInfo`` ...
"""

from conformance._adapter import (
    AdapterFactory,
    AdapterInfo,
    AdapterRequest,
    ClientAdapter,
    StreamCancelled,
    StreamSink,
    SyncClientAdapter,
)

__all__ = [
    "AdapterFactory",
    "AdapterInfo",
    "AdapterRequest",
    "ClientAdapter",
    "StreamCancelled",
    "StreamSink",
    "SyncClientAdapter",
]
