"""The reference client, as a library that warns while it streams (a DeprecationWarning
of its own): a catalog run from the kit's checkout must not turn it into an error."""

from __future__ import annotations

import warnings

from conformance._adapter import AdapterRequest, StreamSink
from pytest_streamcheck.targets._reference import ReferenceAdapter

__all__ = ["streamcheck_adapter"]


class WarningLibrary(ReferenceAdapter):
    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        warnings.warn("old_api() is deprecated", DeprecationWarning, stacklevel=1)
        await super().stream(request, sink)


def streamcheck_adapter() -> WarningLibrary:
    return WarningLibrary()
