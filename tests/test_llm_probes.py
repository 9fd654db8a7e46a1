"""An app-level verdict judges an open stream only once every probed loop has turned
since: a probe records a stall when it wakes, so a loop stalled at the judging moment
would show no lag while the close it holds back waits behind it."""

from __future__ import annotations

import threading
import time

from fake_servers import Ledger, now
from fake_servers._noise import Source
from pytest_streamcheck._llm import PROBES_POLL, _probes_past


def test_loops_that_turned_since_are_not_waited_for() -> None:
    ledger = Ledger()
    moment = now()
    ledger.record_lag(Source.SERVER, moment, moment + 0.001)
    ledger.record_lag(Source.PROXY, moment, moment + 0.002)
    started = time.monotonic()
    _probes_past(ledger, moment, 2.0)
    assert time.monotonic() - started < 0.5  # tolerance: one call, no wait


def test_a_loop_that_has_not_turned_is_waited_for_until_it_does() -> None:
    """The proxy's probe wakes 0.2 s late (a stall): the wait ends once it has."""
    ledger = Ledger()
    moment = now()
    ledger.record_lag(Source.SERVER, moment, moment + 0.001)
    ledger.record_lag(Source.PROXY, moment - 0.01, moment - 0.005)

    def wake_late() -> None:
        time.sleep(0.2)
        ledger.record_lag(Source.PROXY, moment - 0.005, now())

    waker = threading.Thread(target=wake_late)
    # Read before the start: the waker may sleep out part of its 0.2 s before this thread
    # runs again (beside 2 burners: 0.190 s waited, counted from after the start).
    started = time.monotonic()
    waker.start()
    _probes_past(ledger, moment, 5.0)
    waited = time.monotonic() - started
    waker.join()
    assert 0.2 - PROBES_POLL <= waited < 4.0  # tolerance: the waker's own scheduling


def test_a_loop_that_never_turns_is_waited_for_at_most_the_patience() -> None:
    ledger = Ledger()
    moment = now()
    ledger.record_lag(Source.SERVER, moment - 0.01, moment - 0.005)
    started = time.monotonic()
    _probes_past(ledger, moment, 0.1)
    assert 0.1 - PROBES_POLL <= time.monotonic() - started < 2.0  # tolerance: scheduling
