"""The one monotonic clock every part of the kit reads.

The ledger, the fault proxy and the adapters all timestamp with ``now()`` so that
server-side and client-side records can be compared directly.
"""

from __future__ import annotations

import time

__all__ = ["now"]


def now() -> float:
    """Seconds on the kit's monotonic clock (CLOCK_MONOTONIC, nanosecond resolution)."""
    return time.monotonic()
