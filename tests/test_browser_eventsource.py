"""The native EventSource target and its profile, html-eventsource@1: the numbers the
profile states are Chromium's, measured here against a FakeServer; the page listens
for every event type the kit's streams send."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest
from browser_support import LoopThread, need_chromium, open_stream

from conformance._evidence import DeliveryLog
from conformance._profiles import HTML_EVENTSOURCE, get_profile
from conformance.timing import Noise
from fake_servers import FakeServer, stream
from fake_servers._formats import _REGISTRY
from pytest_streamcheck.targets._browser import BrowserAdapter
from pytest_streamcheck.targets._browser_serve import KIT_DIR

# one_browser: one Chromium for all of a worker's browser tests (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_browser")]
SHORT_MS = 400  # a reconnection time for a retry: field: a fraction of the default's 3 s


@pytest.fixture
def native() -> Iterator[tuple[LoopThread, BrowserAdapter]]:
    need_chromium()
    lane = LoopThread()
    adapter = BrowserAdapter(None)
    lane.run(adapter.start())
    yield lane, adapter
    lane.run(adapter.aclose())
    lane.close()


def _gaps(server: FakeServer) -> list[float]:
    """Seconds from each attempt's end (the server cut it) to the next one's arrival."""
    attempts = server.ledger.attempts()
    return [
        b.arrived_at - a.ended_at for a, b in itertools.pairwise(attempts) if a.ended_at is not None
    ]


def test_the_reconnection_time_is_the_profiles(native) -> None:
    """Chromium's default reconnection time is the profile's base, and a reconnection
    waits the same each time (no growth, no jitter). The default is waited out once;
    "the same each time" is shown on two reconnections after a retry: field, which waits
    SHORT_MS instead of 3 s: Chromium's EventSource keeps one delay, set or default, for
    every reconnection (a backoff that doubled would fail the bound below)."""
    lane, adapter = native
    with FakeServer() as server:
        server.script(
            "/v1/stream",
            stream(events=1, end="abort"),  # at the default
            # The retry: line before a clean end, not an abort (see the test below); then
            # an abort again, now at the field's time.
            stream(events=1, end="truncate", retry_ms=SHORT_MS),
            stream(events=1, end="abort"),
            stream(events=1),
        )
        server.measure_lag()
        lane.run(adapter.reset())
        lane.run(adapter.stream(*open_stream(server.url, DeliveryLog())), timeout=20)
        gaps = _gaps(server)
        ends = [a.ended_at for a in server.ledger.attempts()[1:3]]
        noise = Noise.from_ledger(server.ledger.lags())
    assert len(gaps) == 3, gaps  # one per cut: every cut attempt has its end stamp
    default, *short = gaps
    early = [noise.lower_slack(end) for end in ends if end is not None]
    base = HTML_EVENTSOURCE.backoff.base
    # Chromium's default of 3 s, plus how long the drop takes to reach the page and its
    # reconnect the server (0.3 s: the same allowance for every gap here).
    assert base <= default < base + 0.3, gaps
    # Each the field's time, within the same 0.3 s above, and below it by the server
    # loop's lag at the end stamp (the kit's own lower-bound slack, as in the test below).
    limit = SHORT_MS / 1000
    assert all(limit - e <= gap < limit + 0.3 for gap, e in zip(short, early, strict=True)), (
        gaps,
        early,
    )
    assert HTML_EVENTSOURCE.backoff.envelope(1) == HTML_EVENTSOURCE.backoff.envelope(9)


def test_a_retry_field_sets_the_reconnection_time(native) -> None:
    lane, adapter = native
    with FakeServer() as server:
        # A clean end, not an abort: a connection that fails at once can lose the bytes before
        # it, the retry: line among them, before Chromium parsed them (seen under load).
        server.script(
            "/v1/stream", stream(events=1, end="truncate", retry_ms=400), stream(events=1)
        )
        server.measure_lag()
        lane.run(adapter.reset())
        lane.run(adapter.stream(*open_stream(server.url, DeliveryLog())), timeout=20)
        (gap,) = _gaps(server)
        first = server.ledger.attempts()[0]
        assert first.ended_at is not None
        # The end stamp trails the close it records by the server loop's lag (0.3996 s
        # quiet, 0.3878 s beside 2 burners): the kit's own lower-bound slack.
        early = Noise.from_ledger(server.ledger.lags()).lower_slack(first.ended_at)
    assert 0.4 - early <= gap < 0.7, (gap, early)


def test_a_status_fails_the_connection_for_good(native) -> None:
    lane, adapter = native
    log = DeliveryLog()
    with FakeServer() as server:
        server.script("/v1/stream", stream(events=1, status=503))
        lane.run(adapter.reset())
        lane.run(adapter.stream(*open_stream(server.url, log)), timeout=20)
        attempts = server.ledger.attempts()
    assert len(attempts) == 1
    (error,) = [d for d in log.all() if d.kind == "error"]
    assert error.error == "non_retryable_status"
    assert error.status is None  # EventSource does not let the page see it


def test_the_profile_is_built_in_and_get_only() -> None:
    profile = get_profile("html-eventsource")
    assert profile.key == "html-eventsource@1"
    assert profile.transports == {"get"}
    matrix = profile.policy.matrix
    assert not any(matrix.is_retryable(s) for s in (400, 404, 429, 500, 503, 504))
    assert matrix.is_retryable(None)
    assert profile.policy.breaker.kind == "none"
    assert profile.policy.retry_after is False


def test_the_page_listens_for_every_event_type_the_kit_sends() -> None:
    script = (KIT_DIR / "eventsource.js").read_text(encoding="utf-8")
    listed = script[script.index("const NAMED_EVENTS") : script.index("];")]
    named = set(re.findall(r'"([^"]*)"', listed))
    terminal = script[script.index("const TERMINAL_EVENTS") :].split("\n", 1)[0]
    named |= set(re.findall(r'"([^"]*)"', terminal))
    for name, fmt in _REGISTRY.items():
        kinds = {fmt.data_event(i, "x")[0] for i in range(3)} | {fmt.terminal_event()[0]}
        missing = {k for k in kinds if k is not None} - named
        assert not missing, f"the {name} format sends {missing}, which the page never hears"
