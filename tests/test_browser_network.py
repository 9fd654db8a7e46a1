"""The browser's network hop (docs/browser.md, "The network hop"): the page's Resource
Timing entries paired with the server's records, as each attempt's hop out and back,
and each wait between two attempts less their own hops. The pairing and the waits are
pure and tested here; the last test runs it in Chromium."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from _records import request_record
from browser_support import PAGES, need_chromium

from conformance._suite import run_suite
from conformance.timing import Noise, wait_between
from fake_servers import Attempt, Ledger, Respond
from fake_servers._noise import Source
from pytest_streamcheck.targets._browser import BrowserAdapter
from pytest_streamcheck.targets._browser_network import (
    Entry,
    heads_seen,
    network_hops,
    parse_entries,
)

HOST = "127.0.0.1:8123"
URL = f"http://{HOST}/v1/stream"
OFFSET = 100.0  # the page's clock minus the kit's


def attempt(seq: int, arrived: float, ended: float | None, **fields: object) -> Attempt:
    """A served GET of URL: a 200 the server completed, unless ``fields`` say otherwise."""
    record = request_record(seq, headers=(("host", HOST),), arrived_at=arrived)
    base: dict[str, object] = {"status": 200, "ended_at": ended, "end": "completed"}
    return dataclasses.replace(record, **(base | fields))


def entry(start: float, end: float, url: str = URL) -> Entry:
    """An entry at kit times ``start`` and ``end``, on the page's clock."""
    return Entry(url, start + OFFSET, end + OFFSET)


def test_one_request_gives_its_way_out_and_its_way_in() -> None:
    (hop,) = network_hops([entry(1.0, 1.5)], [attempt(7, 1.06, 1.4)], OFFSET, 0.002)
    assert hop == (7, pytest.approx(0.058), pytest.approx(0.098))


def test_the_clock_error_is_taken_off_so_a_hop_is_never_overstated() -> None:
    """Within the error, the hop may be nothing: it is measured as none."""
    hops = network_hops([entry(1.0, 1.5)], [attempt(1, 1.001, 1.499)], OFFSET, 0.005)
    assert hops == [(1, 0.0, 0.0)]


def test_a_redirect_or_a_stream_the_client_left_has_no_way_in() -> None:
    for fields in ({"status": 307}, {"end": "client_closed"}, {"ended_at": None}):
        hops = network_hops([entry(1.0, 1.5)], [attempt(1, 1.05, 1.4, **fields)], OFFSET, 0.0)
        assert hops == [(1, pytest.approx(0.05), 0.0)], fields


def test_overlapping_requests_to_one_url_are_not_paired() -> None:
    """Two requests at once to one URL: which entry is which attempt is unknown, so
    neither has a way in; each has a way out from the latest fetch begun by its arrival."""
    entries = [entry(1.0, 1.5), entry(1.2, 1.8), entry(3.0, 3.5)]
    attempts = [attempt(1, 1.05, 1.4), attempt(2, 1.25, 1.7), attempt(3, 3.05, 3.4)]
    hops = network_hops(entries, attempts, OFFSET, 0.0)
    assert hops == [
        (3, pytest.approx(0.05), pytest.approx(0.1)),
        (1, pytest.approx(0.05), 0.0),
        (2, pytest.approx(0.05), 0.0),
    ]


def test_a_blinks_reconnects_left_the_page_at_once() -> None:
    """CI: a page sent five reconnects within 4 ms of a blink, and Chromium's network
    process delivered them 38-62 ms later. Each way out runs from the latest fetch begun
    by its arrival (never overstated: its own began no later), so all five left by the
    fifth fetch's start."""
    starts = [1.0, 1.001, 1.002, 1.003, 1.004]
    arrivals = [1.038, 1.043, 1.044, 1.048, 1.062]
    entries = [entry(t, 1.3) for t in starts]
    attempts = [attempt(i, a, 1.25) for i, a in enumerate(arrivals, start=1)]
    hops = network_hops(entries, attempts, OFFSET, 0.002)
    left = sorted(a - out for (_, out, _), a in zip(hops, arrivals, strict=True))
    assert left == [pytest.approx(1.004 + 0.002)] * 5
    assert all(back == 0.0 for _, _, back in hops)


def test_overlapping_entries_and_attempts_that_do_not_match_give_no_way_out() -> None:
    """An entry without its attempt (a fetch that never reached the server) or an attempt
    without its entry: which fetch began which request is not bounded, so none is given."""
    entries = [entry(1.0, 1.5), entry(1.2, 1.8)]
    assert network_hops(entries, [attempt(1, 1.25, 1.7)], OFFSET, 0.0) == []
    three = [attempt(1, 1.05, 1.4), attempt(2, 1.25, 1.7), attempt(3, 1.3, 1.6)]
    assert network_hops(entries, three, OFFSET, 0.0) == []


def test_an_entry_needs_exactly_one_attempt_inside_it() -> None:
    none_inside = network_hops([entry(1.0, 1.5)], [attempt(1, 2.0, 2.1)], OFFSET, 0.0)
    two_inside = network_hops(
        [entry(1.0, 1.5)], [attempt(1, 1.1, 1.2), attempt(2, 1.3, 1.4)], OFFSET, 0.0
    )
    assert none_inside == two_inside == []


def test_other_urls_and_hosts_are_other_requests() -> None:
    entries = [entry(1.0, 1.5, f"http://{HOST}/other"), entry(1.0, 1.5, "http://x:1/v1/stream")]
    assert network_hops(entries, [attempt(1, 1.05, 1.4)], OFFSET, 0.0) == []
    query = dataclasses.replace(attempt(1, 1.05, 1.4), query="a=1")
    assert len(network_hops([entry(1.0, 1.5, URL + "?a=1")], [query], OFFSET, 0.0)) == 1


def test_an_early_arrival_is_no_hop() -> None:
    """Clocks a little apart can put the arrival before the fetch: the hop is zero."""
    assert network_hops([entry(1.0, 1.5)], [attempt(1, 0.999, 1.6)], OFFSET, 0.002) == [
        (1, 0.0, 0.0)
    ]


def test_a_wait_is_less_its_own_hops_and_no_one_elses() -> None:
    """The failure's way back and the retry's way out come off the client's least wait,
    the way out off its most too; another attempt's hop (a herd's queue) changes nothing."""
    failed, retry = attempt(1, 1.0, 1.01, status=503), attempt(2, 1.31, 1.32)
    loops = {"server": [(t / 100, t / 100) for t in range(200)]}
    plain = wait_between(failed, retry, Noise.from_ledger(loops))
    hops = {1: (0.0, 0.1), 2: (0.05, 0.0), 9: (0.4, 0.4)}
    hopped = wait_between(failed, retry, Noise.from_ledger(loops, hops=hops))
    assert hopped.measured == plain.measured
    assert hopped.least == pytest.approx(plain.least - 0.15)
    assert hopped.most == pytest.approx(plain.most - 0.05)
    others = wait_between(failed, retry, Noise.from_ledger(loops, hops={9: (0.4, 0.4)}))
    assert others == plain


def test_hops_are_reported_beside_the_loops_but_are_not_a_loop() -> None:
    ledger = Ledger()
    ledger.record_lag("server", 1.0, 1.002)
    ledger.record_hop(3, out=0.02)
    ledger.record_hop(3, out=0.01, back=0.03)  # the largest of each way is kept
    assert ledger.hops() == {3: (0.02, 0.03)}
    noise = Noise.from_ledger(ledger.lags(), hops=ledger.hops())
    assert Source.NETWORK not in noise.summary()  # what decides overload and noisy herds
    assert noise.worst_p99() == pytest.approx(0.002)
    assert noise.report()[Source.NETWORK]["samples"] == 2
    assert "network hop p99 30.0 ms" in noise.headline()
    assert noise.to_json()["hops"] == {"3": [0.02, 0.03]}


def test_parsing_keeps_whole_entries_and_drops_the_rest() -> None:
    flat = [URL, 1000, 1500, "u", "x", 2, 7, 1, 2, URL, 0, 5, URL, 3000, 2000, URL, True, 9]
    assert parse_entries(flat) == [Entry(URL, 1.0, 1.5)]
    assert parse_entries([URL, 1000.0, 1500.5, URL]) == [Entry(URL, 1.0, 1.5005)]
    for bad in (None, "x", {}, [URL, 1]):
        assert parse_entries(bad) == []


def test_a_timer_failure_behind_a_held_request_is_undecidable() -> None:
    """SC-RETRY-4 on a loaded machine: the page's POST took 2.1 s to reach the server, the
    page's own stall timer gave up and retried (a 401 twice). With the kit's loops quiet,
    that hop makes the FAIL undecidable; without a timer that fired, the FAIL stands."""
    from conformance import Delivery, Evidence, Outcome
    from conformance.timing import sure

    held = Noise.from_ledger({"server": [(1.0, 1.001)]}, hops={1: (2.1, 0.0)})
    assert held.held_in_transit() is not None
    assert Noise.from_ledger({}, hops={1: (0.05, 0.02)}).held_in_transit() is None
    failed = Outcome.failed("exactly 1 request for a 401", "2 requests")
    stalled = (Delivery("s1", "state", 1.5, state="stalled"),)
    timed = Evidence((attempt(1, 2.1, 2.2),), (), stalled, noise=held)
    assert sure(failed, timed, ran_out=False).undecidable
    untimed = Evidence((attempt(1, 2.1, 2.2),), (), (), noise=held)
    assert not sure(failed, untimed, ran_out=False).undecidable


@pytest.mark.usefixtures("one_browser")
def test_a_browser_cases_evidence_carries_its_attempts_hops() -> None:
    need_chromium()
    (result,) = run_suite(lambda: BrowserAdapter(PAGES / "tiny.html"), select=["SC-SSE-1"], lanes=1)
    assert result.evidence is not None, result.reason
    seqs = {a.seq for a in result.evidence.attempts}
    hops = result.evidence.noise.hops
    assert hops, result.evidence.noise.to_json()
    assert set(hops) <= seqs, (hops, seqs)
    # The report counts the hops' positive ways. A loopback hop is a millisecond, and the
    # page's clock is read to within half a round trip: beside 2 CPU burners every way
    # of a case once came out 0, and the report rightly had no network line.
    ways = [way for pair in hops.values() for way in pair if way > 0]
    network = result.evidence.noise.report().get(Source.NETWORK)
    assert (network or {}).get("samples", 0) == len(ways), (network, hops)


@pytest.mark.usefixtures("one_browser")
def test_the_page_notes_when_each_fetch_reached_its_code(fake_server) -> None:
    """The kit's wrapper of ``fetch`` (while a case plays) notes the call and the moment
    the response reached the page's code, for the hop back; the page gets fetch's own
    answer, and its own files are left out."""
    need_chromium()
    fake_server.script("/v1/x", Respond(status=503))
    adapter = BrowserAdapter(PAGES / "tiny.html")
    url = f"{fake_server.url}/v1/x"

    async def play() -> tuple[object, object]:
        try:
            await adapter.start()
            await adapter.evaluate("window.__streamcheckLag.start(1, 5, 100000)")
            status = await adapter.evaluate(f"fetch({url!r}).then((r) => r.status)")
            await adapter.evaluate("fetch(location.href).then((r) => r.status)")
            return status, await adapter.evaluate("window.__streamcheckLag.stop()")
        finally:
            await adapter.aclose()

    status, batch = asyncio.run(play())
    assert status == 503
    assert isinstance(batch, list)
    token, _rows, _net, got = batch
    assert token == 1
    assert got[0] == url
    assert len(got) == 3  # the page's own file is not noted
    assert 0 < got[1] <= got[2]


def test_a_fetch_resolution_says_by_when_the_page_had_the_head() -> None:
    """A fetch resolved 90 ms after the server sent the head of a stream the page later
    left: the head reached the page's code by then (the offset's error added: never
    early); an attempt that never sent a head gives nothing."""
    stream = attempt(4, 1.01, 1.5, headers_at=1.02, end="client_closed")
    (seen,) = heads_seen([entry(1.0, 1.11)], [stream], OFFSET, 0.002)
    assert seen == (4, pytest.approx(1.112))
    refused = attempt(5, 2.01, 2.02, headers_at=None, status=None, end="reset")
    assert heads_seen([entry(2.0, 2.05)], [refused], OFFSET, 0.002) == []
