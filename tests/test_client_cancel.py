"""A consumer that stops reading inside ``async with`` closes the connection at once."""

from __future__ import annotations

import pytest
from test_client_support import make_client, wait_ledger

from fake_servers import FakeServer, Stream, fixed

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("how", ["break", "return"])
async def test_leaving_the_loop_inside_async_with_closes_the_connection(
    fake_server: FakeServer, how: str
) -> None:
    """Both __aexit__ and the iterator's finaliser close; the second must not undo the first."""
    fake_server.script("/s", Stream(events=50, gap=fixed(0.05)))

    async def consume() -> int:
        seen = 0
        async with client.stream(fake_server.url + "/s") as events:
            async for _ in events:
                seen += 1
                if seen == 2:
                    if how == "return":
                        return seen
                    break
        return seen

    # The client stays open, as a long-lived one in an app does: only the stream's
    # own close can end the connection.
    async with make_client() as client:
        assert await consume() == 2
        await wait_ledger(
            fake_server.ledger, lambda led: led.attempts()[0].end is not None, "the close"
        )
    attempt = fake_server.ledger.attempts()[0]
    assert attempt.end == "client_closed"
    assert len(attempt.data_events) < 10  # closed long before the 50 events were sent
