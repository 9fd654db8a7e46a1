"""The cases' breaks come ``BREAK_HOLD`` after the data before them (``broken``), over a
real socket: the chunks are on the wire that long before the connection breaks, so a
client that reads as data comes has them (a browser's fetch loses chunks a reset
overtakes), and the ledger shows the hold as the stall it is."""

from __future__ import annotations

import pytest

from conformance.cases._common import BREAK_HOLD, PATH, broken


@pytest.mark.parametrize("end", ["abort", "abort_mid_line"])
def test_a_break_comes_the_hold_after_the_data(fake_server, raw_connect, end) -> None:
    fake_server.script(PATH, broken(2, end, ids=True))
    conn = raw_connect(fake_server.port)
    conn.request(PATH)
    conn.read_head()
    payload, terminated = conn.read_chunked()
    assert not terminated
    assert payload.count(b"\n\n") == 2  # two whole events (and, mid line, a part)
    (attempt,) = fake_server.ledger.wait_finished(10.0, PATH)
    assert attempt.end == "aborted"
    assert attempt.ended_at is not None
    assert attempt.ended_at - attempt.data_events[-1].at >= BREAK_HOLD
    assert attempt.stall is not None
