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
    """Seconds from each failed attempt's arrival to the next attempt's arrival.

    The arrival comes before the server answered, so before the SDK can have read the
    status and started its sleep. (Not the headers' stamp: Hypercorn writes the head
    at once, and a loaded loop stamped it after the SDK, closing on the status alone,
    had begun its 1 s sleep: a 0.999 s gap.)
    """
    return [b.arrived_at - a.arrived_at for a, b in itertools.pairwise(attempts)]
