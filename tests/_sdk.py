"""What the tests of the real SDKs (openai, anthropic) read off the fake server."""

from __future__ import annotations

import itertools

from fake_servers import Attempt, FakeServer, sent_text

__all__ = ["SLACK", "answer", "gaps"]

SLACK = 3.0  # upper bounds only: a shared, loaded 2-core machine delays the retry


def answer(server: FakeServer, attempt: Attempt | None = None) -> str:
    """What the (last) attempt sent, once finished (the ledger records a write after it)."""
    attempt = attempt or server.ledger.wait_finished(5)[-1]
    return sent_text(attempt, server.scenario.seed)


def gaps(attempts: tuple[Attempt, ...]) -> list[float]:
    """Seconds from each attempt's headers to the next attempt's arrival.

    The headers' time is recorded before they are written, so before the SDK can
    have read the status and started its sleep (the end is recorded after the
    last write, which the SDK may already have read).
    """
    return [b.arrived_at - a.headers_at for a, b in itertools.pairwise(attempts) if a.headers_at]
