"""Many users in one page (docs/browser.md, "Many clients in one page"): the streams of
each ``client`` key go to a loopback host name of that key's own, so Chromium's limit of
6 connections per host caps each simulated user, not the whole herd."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from browser_support import PAGES, LoopThread, need_chromium, open_stream

from conformance._evidence import DeliveryLog
from fake_servers import FakeServer, Stall, Stream
from pytest_streamcheck.targets._browser import BrowserAdapter

# one_browser: one Chromium for all of a worker's browser tests (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_browser")]

USERS = 10  # more than the 6 connections Chromium opens to one host


@pytest.fixture
def lane() -> Iterator[LoopThread]:
    need_chromium()
    thread = LoopThread()
    yield thread
    thread.close()


def _open_many(lane: LoopThread, server: FakeServer, clients: list[str], wait: float) -> int:
    """Open one held stream per entry of ``clients``; how many reached the server."""
    server.script("/v1/stream", Stream(events=0, stall=Stall(after=0, seconds=None)))
    adapter = BrowserAdapter(PAGES / "tiny.html")
    log = DeliveryLog()
    try:
        lane.run(adapter.start())
        lane.run(adapter.reset())
        for i, client in enumerate(clients):
            request, sink = open_stream(server.url, log, stream=f"s{i}", client=client)
            asyncio.run_coroutine_threadsafe(adapter.stream(request, sink), lane.loop)
        deadline = time.monotonic() + wait
        while len(server.ledger.attempts()) < len(clients) and time.monotonic() < deadline:
            time.sleep(0.05)
        return len(server.ledger.attempts())
    finally:
        lane.run(adapter.aclose())


def test_each_user_has_its_own_connection_limit(lane: LoopThread) -> None:
    with FakeServer() as server:
        opened = _open_many(lane, server, [f"user-{i}" for i in range(USERS)], 10.0)
        hosts = {a.header("host") or "" for a in server.ledger.attempts()}
    assert opened == USERS
    assert len(hosts) == USERS
    assert all(h.startswith("client-") and ".streamcheck.test:" in h for h in hosts), hosts


def test_one_user_stays_capped_at_six(lane: LoopThread) -> None:
    """The default client keeps the page's own host: the browser's real limit holds."""
    with FakeServer() as server:
        opened = _open_many(lane, server, ["default"] * USERS, 1.5)
        hosts = {a.header("host") or "" for a in server.ledger.attempts()}
    assert opened == 6
    (host,) = hosts
    assert host.startswith("127.0.0.1:")
