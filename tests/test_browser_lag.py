"""The page's own event-loop lag (docs/browser.md, "Page lag"): a probe in the page
records how late its timer wakes, and the kit records that into the case's ledger as
the lag series ``page``, mapped onto the kit's clock, so a case's noise counts it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from browser_support import PAGES, LoopThread, need_chromium

from conformance._suite import run_suite
from conformance.timing import Noise
from fake_servers import FakeServer, Ledger, now
from fake_servers._noise import Source
from pytest_streamcheck.targets import _browser
from pytest_streamcheck.targets._browser import BrowserAdapter

# one_browser: one Chromium for all of a worker's browser tests (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_browser")]

BLOCK = 0.3  # seconds the page blocks its own loop


@pytest.fixture
def lane() -> Iterator[LoopThread]:
    need_chromium()
    thread = LoopThread()
    yield thread
    thread.close()


def test_a_page_that_blocks_its_loop_shows_it_on_the_kits_clock(
    lane: LoopThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_browser, "LAG_BATCH", 0.1)  # batches within the test's sleep
    server = FakeServer()  # only its ledger: nothing is served
    ledger = server.ledger
    adapter = BrowserAdapter(PAGES / "tiny.html")
    try:
        lane.run(adapter.start())
        adapter.measure_lag(ledger)
        lane.run(adapter.reset())  # the probe starts on the page a reset opens
        deadline = time.monotonic() + 5  # the batches come through the binding meanwhile
        while len(ledger.lags().get(Source.PAGE, ())) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(ledger.lags().get(Source.PAGE, ())) >= 20
        before = now()
        block = f"const t = performance.now() + {BLOCK * 1000}; while (performance.now() < t);"
        lane.run(adapter.evaluate(f"(() => {{ {block} return 0; }})()"))
        after = now()
        time.sleep(0.05)
        lane.run(adapter.collect_lag())
        rows = ledger.lags()[Source.PAGE]
        late = [(due, woke) for due, woke in rows if woke - due >= BLOCK - 0.03]
        assert late, Noise.from_ledger(ledger.lags()).summary()
        due, woke = late[0]
        # Due as the block began, woken as it ended: both on the kit's clock.
        assert before - 0.02 <= due <= after - BLOCK + 0.01, (before, due, after)
        assert woke <= after + 0.1, (after, woke)  # the timer runs once the block returns
        summary = Noise.from_ledger(ledger.lags()).summary()[Source.PAGE]
        assert summary["max"] >= BLOCK - 0.03
        # Stopped: no more rows, and the page's probe is gone.
        adapter.measure_lag(None)
        time.sleep(0.1)
        count = len(ledger.lags()[Source.PAGE])
        assert lane.run(adapter.evaluate("window.__streamcheckLag.take()")) is None
        time.sleep(0.15)
        assert len(ledger.lags()[Source.PAGE]) == count
    finally:
        lane.run(adapter.aclose())


def test_no_probe_runs_outside_a_case(lane: LoopThread) -> None:
    adapter = BrowserAdapter(PAGES / "tiny.html")
    try:
        lane.run(adapter.start())
        lane.run(adapter.reset())
        assert lane.run(adapter.evaluate("window.__streamcheckLag.take()")) is None
    finally:
        lane.run(adapter.aclose())


def test_a_cases_evidence_carries_the_page_lag_series() -> None:
    need_chromium()
    (result,) = run_suite(lambda: BrowserAdapter(PAGES / "tiny.html"), select=["SC-SSE-1"], lanes=1)
    assert result.evidence is not None, result.reason
    summary = result.evidence.noise.summary()
    # The series is there; how many samples a starved page takes varies (4 in CI).
    assert summary[Source.PAGE]["samples"] >= 1, summary
    assert "client" in summary  # the adapter's own Python loop, beside it
    assert "page loop p99" in result.evidence.noise.headline()


def test_the_pages_lag_never_makes_the_kit_overloaded() -> None:
    """A page that blocks its own loop must not excuse itself: its lag widens the slack
    of the moments it covers, as the client loop's does, but only the kit's loops
    (server, proxy) can make a case too noisy for a sure FAIL."""
    blocked = Noise.from_ledger({Source.PAGE: [(t / 200, t / 200 + 0.5) for t in range(200)]})
    assert blocked.overloaded() is None
    assert blocked.lag(0.5) >= 0.5


@pytest.fixture
def probed_page(
    lane: LoopThread, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[BrowserAdapter, Ledger]]:
    """A page whose lag the kit measures into a ledger, with no probe rows of its own:
    the ledger's page rows are the timed signals alone."""
    monkeypatch.setattr(_browser, "PROBE_INTERVAL", 1000.0)
    ledger = FakeServer().ledger
    adapter = BrowserAdapter(PAGES / "tiny.html")
    try:
        lane.run(adapter.start())
        adapter.measure_lag(ledger)
        lane.run(adapter.reset())
        yield adapter, ledger
    finally:
        lane.run(adapter.aclose())


def test_the_kits_commands_and_network_switches_are_timed_to_the_page(
    lane: LoopThread, probed_page: tuple[BrowserAdapter, Ledger]
) -> None:
    """A cancel or a network switch reaches the page through Playwright's driver and
    the browser process: how late it got there is a row of the page's series."""
    adapter, ledger = probed_page
    assert Source.PAGE not in ledger.lags()  # reset is not a timed command
    before = now()
    lane.run(adapter.offline())
    lane.run(adapter.online())
    adapter._send_nowait({"cmd": "cancel", "stream": "none"})  # as a cancelled stream's
    deadline = time.monotonic() + 3
    while len(ledger.lags().get(Source.PAGE, ())) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    rows = ledger.lags()[Source.PAGE]
    assert len(rows) == 3, rows
    for due, woke in rows:
        assert before <= due <= woke <= now()


def test_a_case_that_ends_right_after_a_switch_keeps_its_note(
    lane: LoopThread, probed_page: tuple[BrowserAdapter, Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The note of when the page heard ``online()`` is in the ledger once ``collect_lag``
    returns, however soon after the switch the case ended: it is the one measure of the
    trip from the kit to the page, and a reconnect timed from the signal needs it."""
    adapter, ledger = probed_page
    # The note's answer held back 0.3 s, as a loaded driver or renderer can.
    slow = "(a) => new Promise((r) => setTimeout(() => r(window.__streamcheckLag.seen(...a)), 300))"
    monkeypatch.setattr(_browser, "_SEEN", slow)
    lane.run(adapter.offline())
    lane.run(adapter.online())
    lane.run(adapter.collect_lag())
    assert len(ledger.lags().get(Source.PAGE, ())) == 2  # each switch's
