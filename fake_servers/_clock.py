"""The one clock every part of the kit reads.

The ledger, the fault proxy and the adapters all timestamp with ``now()`` so that
server-side and client-side records can be compared directly. On a loop in virtual time
(``fake_servers._virtual``) that is the loop's clock, shared by the server, the proxy
and the client on it; everywhere else, the machine's monotonic clock.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["now"]


def now() -> float:
    """Seconds on the kit's clock: the running virtual loop's, else CLOCK_MONOTONIC."""
    # By duck type: the virtual loop's module need not be loaded to read the clock.
    loop = asyncio._get_running_loop()
    if getattr(loop, "virtual", False):
        return float(loop.virtual_now())  # type: ignore[union-attr]
    return time.monotonic()
