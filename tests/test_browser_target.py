"""The browser target: a client page in the distribution's headless Chromium, driven
through the adapter contract (docs/browser.md). Real parts only: Chromium, the kit's
page server, a FakeServer; without Chromium or Playwright every browser test skips."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import (
    PAGES,
    LoopThread,
    browser_processes,
    need_chromium,
    open_stream,
)

from conformance._evidence import DeliveryLog
from conformance._result import HarnessError
from conformance.reference import ClientPolicy
from fake_servers import FakeServer, now, stream
from fake_servers._script import Respond
from pytest_streamcheck.targets import TargetError, load_target
from pytest_streamcheck.targets._browser import CLOSE_GRACE, REOPEN_LIMITS, BrowserAdapter

# one_browser: one Chromium for all of a worker's browser tests (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_browser")]


@pytest.fixture
def lane() -> Iterator[LoopThread]:
    need_chromium()
    thread = LoopThread()
    yield thread
    thread.close()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        yield running


def _started(lane: LoopThread, page: str | None, **options: float) -> BrowserAdapter:
    adapter = BrowserAdapter(PAGES / page if page else None, **options)
    lane.run(adapter.start())
    return adapter


# -- resolving the target ---------------------------------------------------------------


def test_the_target_resolves_a_page_and_the_native_eventsource() -> None:
    need_chromium()
    assert callable(load_target(f"browser:{PAGES / 'tiny.html'}"))
    adapter = load_target("browser:eventsource")()
    assert isinstance(adapter, BrowserAdapter)
    assert adapter.page_path is None


def test_a_missing_page_is_a_usage_error_naming_it(tmp_path) -> None:
    missing = tmp_path / "nope.html"
    with pytest.raises(TargetError, match=r"no such page .*nope\.html"):
        load_target(f"browser:{missing}")
    with pytest.raises(TargetError, match="needs an HTML page"):
        load_target("browser:")


def test_no_chromium_says_how_to_get_one(monkeypatch) -> None:
    monkeypatch.setenv("STREAMCHECK_CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(TargetError, match="STREAMCHECK_CHROMIUM"):
        load_target("browser:eventsource")
    monkeypatch.delenv("STREAMCHECK_CHROMIUM")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(TargetError, match="apt-get install chromium"):
        load_target("browser:eventsource")


# -- the handshake and commands -------------------------------------------------------------


def test_hello_configure_and_reset_round_trip(lane) -> None:
    adapter = _started(lane, "tiny.html")
    try:
        assert adapter.info.name == "tiny"
        assert adapter.info.capabilities == {"get"}
        lane.run(adapter.configure(ClientPolicy()))
        lane.run(adapter.reset())
        lane.run(adapter.reset())
    finally:
        lane.run(adapter.aclose())


def test_the_native_page_declares_its_profile(lane) -> None:
    adapter = _started(lane, None)
    try:
        info = adapter.info
        assert info.name == "chromium-eventsource"
        assert info.profile == "html-eventsource"
        assert info.capabilities == {"get", "resume", "raw_data", "event_fields"}
        assert info.version[0].isdigit()
    finally:
        lane.run(adapter.aclose())


@pytest.mark.parametrize("page", ["tiny.html", None], ids=["tiny", "native"])
def test_a_stream_against_a_fake_server(lane, server, page) -> None:
    server.script("/v1/stream", stream(events=4))
    adapter = _started(lane, page)
    log = DeliveryLog()
    try:
        lane.run(adapter.reset())
        lane.run(adapter.stream(*open_stream(server.url, log)), timeout=10)
    finally:
        lane.run(adapter.aclose())
    (attempt,) = server.ledger.attempts()
    chunks = [d for d in log.all() if d.kind == "chunk"]
    sent = [e for e in attempt.events if e.kind == "data"]
    assert [c.data for c in chunks] == [e.data for e in sent]
    assert log.all()[-1].kind == "done"
    assert attempt.header("accept") == "text/event-stream"


def test_cancel_closes_the_stream(lane, server) -> None:
    server.script("/v1/stream", stream(events=50, gap=0.05))
    adapter = _started(lane, None)
    log = DeliveryLog()
    try:
        lane.run(adapter.reset())
        lane.run(adapter.stream(*open_stream(server.url, log, cancel_after=2)), timeout=10)
        deadline = time.monotonic() + 5
        while not all(a.finished for a in server.ledger.attempts()):
            assert time.monotonic() < deadline, "the server still streams after the cancel"
            time.sleep(0.05)
    finally:
        lane.run(adapter.aclose())
    (attempt,) = server.ledger.attempts()
    assert attempt.end == "client_closed"
    assert sum(d.kind == "chunk" for d in log.all()) == 2


# -- offline and online are the browser's own ----------------------------------------------


def test_offline_fires_the_real_events_and_no_request_leaves(lane, server) -> None:
    server.script("/v1/stream", stream(events=3))
    adapter = _started(lane, "tiny.html")
    log = DeliveryLog()
    try:
        lane.run(adapter.reset())
        lane.run(adapter.offline())
        assert lane.run(adapter.evaluate("navigator.onLine")) is False
        request, sink = open_stream(server.url, log)
        future = asyncio.run_coroutine_threadsafe(adapter.stream(request, sink), lane.loop)
        deadline = time.monotonic() + 10
        while not any(d.state == "retrying" for d in log.all()):  # it tried, and failed
            assert time.monotonic() < deadline, "the page never tried while offline"
            time.sleep(0.05)
        assert server.ledger.attempts() == ()  # the page's EventSource failed offline
        back = now()
        lane.run(adapter.online())
        future.result(10)  # EventSource reconnects (3 s) and completes
        network = lane.run(adapter.evaluate("window.network"))
        assert network == [["offline", False], ["online", True]]
    finally:
        lane.run(adapter.aclose())
    assert [a.arrived_at >= back for a in server.ledger.attempts()] == [True]
    assert log.all()[-1].kind == "done"


def test_offline_is_per_adapter(server) -> None:
    need_chromium()
    lanes = [LoopThread(), LoopThread()]
    adapters = [_started(lane, "tiny.html") for lane in lanes]
    try:
        lanes[0].run(adapters[0].offline())
        assert lanes[0].run(adapters[0].evaluate("navigator.onLine")) is False
        assert lanes[1].run(adapters[1].evaluate("navigator.onLine")) is True
        # One browser serves both lanes.
        browsers = [p for p in browser_processes() if "--type=" not in _cmdline(p)]
        assert len([p for p in browsers if "chrom" in _cmdline(p)]) == 1, browsers
    finally:
        for lane, adapter in zip(lanes, adapters, strict=True):
            lane.run(adapter.aclose())
            lane.close()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# -- pages that break ------------------------------------------------------------------------


LIMIT = 4.0  # seconds to open a page: a page that loads takes under 1 s, even loaded


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ("none.html", r"gave up waiting for the page to define window\.streamcheck"),
        ("throws.html", r"(?s)gave up waiting .*boom while loading"),
        ("hangs.html", r"gave up loading http://127\.0\.0\.1:\d+/hangs\.html"),
        ("old_protocol.html", r"protocol 2; the kit speaks protocol 1"),
    ],
)
def test_a_broken_page_is_a_clear_error_in_bounded_time(lane, page, message) -> None:
    adapter = BrowserAdapter(PAGES / page, hello_timeout=LIMIT)
    started = time.monotonic()
    with pytest.raises(HarnessError, match=message):
        lane.run(adapter.start())
    assert time.monotonic() - started < LIMIT + 10.0  # its limit, and a loaded machine's slack
    lane.run(adapter.aclose())


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ("bad_command.html", r"threw from streamcheck\.command\(\{cmd: 'reset'\}\).*cannot reset"),
        ("bad_emit.html", r"unknown type 'bogus'"),
    ],
)
def test_a_page_that_breaks_the_protocol_is_a_harness_error(lane, page, message) -> None:
    adapter = _started(lane, page, command_timeout=2.0)
    try:
        with pytest.raises(HarnessError, match=message):
            lane.run(adapter.reset())
        with pytest.raises(HarnessError, match=message):  # and stays broken
            lane.run(adapter.reset())
    finally:
        lane.run(adapter.aclose())


RESET_LIMIT = 2.0  # hello_timeout below: a reset's first try, then twice that
SCRIPT = Respond(200, headers=(("content-type", "text/javascript"),), body=b"// held.js\n")
HELD = Respond(200, headers=(("content-type", "text/javascript"),), body=b"", delay=60)
HELD_PAGE = """<!doctype html>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>a page whose load waits for held.js</title>
<script>
window.streamcheck = {
  hello: () => ({ type: "hello", protocol: 1, name: "held", version: "0", capabilities: ["get"] }),
  command(cmd) {
    window.streamcheckEmit({ type: cmd.cmd === "configure" ? "configured" : "reset" });
  },
};
</script>
<script src="%s/held.js"></script>
"""


def _held_started(
    lane: LoopThread, where: Path, server: FakeServer, *steps: Respond
) -> BrowserAdapter:
    """A page whose every load fetches held.js from ``server`` (``steps``: the first
    answers, for the start), started within the default limit (a first load, maybe on a
    loaded machine), then given RESET_LIMIT for its resets."""
    server.script("/held.js", SCRIPT, *steps)
    page = where / "held.html"
    page.write_text(HELD_PAGE % server.url, encoding="utf-8")
    adapter = BrowserAdapter(page)
    lane.run(adapter.start())
    adapter.hello_timeout = RESET_LIMIT
    return adapter


def test_a_reopen_held_past_its_limit_is_tried_again(lane, tmp_path, server) -> None:
    """The page loaded once; its reopen is held (a machine that starves the renderer):
    the first try passes its limit; the second, from a fresh context, opens."""
    adapter = _held_started(lane, tmp_path, server, HELD, SCRIPT)
    try:
        started = time.monotonic()
        lane.run(adapter.reset())
        assert time.monotonic() - started >= RESET_LIMIT
        passed = [n for n in adapter.notes() if n.startswith("[kit] reopening passed")]
        assert passed == [f"[kit] reopening passed 2.0s loading {adapter.url} (try 1)"]
        # The page is open once the reopen returns; its stream's end may land a moment
        # later on a loaded machine.
        deadline = time.monotonic() + 5.0
        while server.ledger.attempts()[-1].end is None and time.monotonic() < deadline:
            time.sleep(0.01)
        ends = [a.end for a in server.ledger.attempts()]
        assert ends == ["completed", "client_closed", "completed"]  # start, held, again
        lane.run(adapter.reset())  # and it goes on as any page
    finally:
        lane.run(adapter.aclose())


def test_a_reopen_that_never_finishes_is_a_clear_error_in_bounded_time(
    lane, tmp_path, server
) -> None:
    adapter = _held_started(lane, tmp_path, server, HELD)
    try:
        started = time.monotonic()
        with pytest.raises(HarnessError, match=r"within 2\.0s, then 4\.0s .*later cases not"):
            lane.run(adapter.reset())
        tries = sum(REOPEN_LIMITS) * RESET_LIMIT
        bound = tries + len(REOPEN_LIMITS) * CLOSE_GRACE + 10.0  # a loaded machine's slack
        assert tries <= time.monotonic() - started < bound
        # The start's load, then one per try that the browser got as far as the script
        # in: beside 2 CPU burners and a second suite (load 11) a 2 s try once ran out
        # before it did, so a try may leave no request (never more than one).
        assert 2 <= len(server.ledger.attempts()) <= 1 + len(REOPEN_LIMITS)
        started = time.monotonic()
        with pytest.raises(HarnessError, match=r"within 2\.0s, then 4\.0s"):
            lane.run(adapter.reset())  # the next case: at once, no third wait
        assert time.monotonic() - started < 1.0
    finally:
        lane.run(adapter.aclose())


def test_a_page_that_does_not_answer_as_the_case_ends_leaves_a_stall_row(lane) -> None:
    """The page's loop blocked past the kit's collect (CLOSE_GRACE): the kit records one
    wake-up due when the probe started and not seen by now, so the case's noise says the
    page stood still (``Noise.page_stalled``) instead of holding no page rows at all."""
    from conformance.timing import PAGE_STALL
    from fake_servers._ledger import Ledger
    from fake_servers._noise import Source

    adapter = _started(lane, "tiny.html")
    ledger = Ledger()
    try:
        adapter.measure_lag(ledger)
        lane.run(adapter.reset())  # the probe starts on the fresh page
        block = "() => { setTimeout(() => { const t = performance.now();"
        block += " while (performance.now() - t < 6000) {} }, 0); }"
        lane.run(adapter.evaluate(block))
        started = now()
        lane.run(adapter.collect_lag())
        assert now() - started < CLOSE_GRACE + 2.0
        rows = ledger.lags()[Source.PAGE]
        assert max(woke - due for due, woke in rows) >= CLOSE_GRACE
        assert CLOSE_GRACE >= PAGE_STALL  # so the row makes the stall count
    finally:
        adapter.measure_lag(None)
        lane.run(adapter.aclose())


# -- processes -----------------------------------------------------------------------------


def _in_a_child(body: str) -> subprocess.Popen[str]:
    """A Python process with the tests' helpers importable, running ``body``."""
    script = "import asyncio, sys, time\nsys.path.insert(0, sys.argv[1])\n" + body
    tests = os.path.dirname(__file__)
    return subprocess.Popen(
        [sys.executable, "-c", script, tests], stdout=subprocess.PIPE, text=True
    )


def test_no_browser_is_left_after_a_close_or_a_killed_python() -> None:
    """In a child process: the last adapter's close ends the browser; then a second
    browser, and the child is SIGKILLed: Playwright's driver takes it down."""
    need_chromium()
    child = _in_a_child(
        textwrap.dedent(
            """
            from browser_support import browser_processes
            from pytest_streamcheck.targets._browser import (
                CLOSE_GRACE, REOPEN_LIMITS, BrowserAdapter,
            )

            async def main():
                adapter = BrowserAdapter(None)
                await adapter.start()
                print(len(browser_processes()), flush=True)
                await adapter.aclose()
                deadline = time.monotonic() + 10
                while browser_processes() and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                print(sorted(browser_processes()), flush=True)
                await BrowserAdapter(None).start()
                print(" ".join(map(str, sorted(browser_processes()))), flush=True)
                await asyncio.sleep(60)

            asyncio.run(main())
            """
        )
    )
    try:
        assert child.stdout is not None
        running, left, second = (child.stdout.readline() for _ in range(3))
        assert int(running) >= 2  # the driver and Chromium, at least
        assert left.strip() == "[]"
        pids = [int(p) for p in second.split()]
        assert pids, "the child started no second browser"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
    deadline = time.monotonic() + 15
    while alive := [p for p in pids if _alive(p)]:
        assert time.monotonic() < deadline, f"left running after SIGKILL: {alive}"
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def test_a_page_that_stops_answering_is_given_up_once_per_run() -> None:
    """It says hello, then answers no command: its first case waits out one command
    limit and is an ERROR saying so; the later cases are ERRORs at once, not one limit
    apiece (issue 29: an exec client that did this cost 38 minutes a catalog)."""
    need_chromium()
    from conformance._case import Verdict
    from conformance._suite import run_suite

    started = time.monotonic()
    results = run_suite(
        lambda: BrowserAdapter(PAGES / "deaf.html", command_timeout=1.0),
        select=["SC-RETRY-1", "SC-RETRY-3", "SC-RETRY-5"],
        lanes=1,
    )
    took = time.monotonic() - started
    assert [r.verdict for r in results] == [Verdict.ERROR] * 3
    assert "did not answer `reset` within 1.0s" in results[0].reason  # no configure: no profile
    assert all("stopped answering" in r.reason for r in results[1:]), [r.reason for r in results]
    assert took < 20.0  # one limit, a browser's start and close; three limits and restarts: more
