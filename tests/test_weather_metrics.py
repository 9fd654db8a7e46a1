"""Weather metrics on hand-built records: no server, no client.

Each stream is made of ledger attempts (``request_record``) and the deliveries a client
would have handed its application: chunks whose data carries the marks of a marked
answer (``fake_servers._marks``), then ``done``, an ``error``, or nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import pytest
from _records import request_record

from conformance._evidence import Delivery
from conformance.weather import StreamOutcome, WeatherMetrics, outcome_of, stream_path, summarize
from conformance.weather._metrics import HERD_WINDOW, Herd, per_second, rate
from fake_servers import Attempt
from fake_servers._marks import mark

Marks = Sequence[tuple[int, int]]  # (attempt seq, token index) as the client delivered them


def run(seq: int, indices: Iterable[int]) -> list[tuple[int, int]]:
    """Tokens ``indices`` as attempt ``seq`` marked them."""
    return [(seq, index) for index in indices]


def chunks(stream: str, marks: Marks, at: float = 1.0) -> list[Delivery]:
    """One chunk a token, as a client that reports events hands them over."""
    return [
        Delivery(stream, "chunk", at + 0.01 * n, data=mark(s, i)) for n, (s, i) in enumerate(marks)
    ]


def attempts_of(number: int, count: int, first_seq: int = 1) -> list[Attempt]:
    path = stream_path(number)
    return [
        request_record(first_seq + n, number=n + 1, path=path, arrived_at=float(n))
        for n in range(count)
    ]


def stream(
    number: int,
    marks: Marks,
    end: str | None = "done",
    *,
    tokens: int = 10,
    attempts: int = 1,
    started: float = 0.0,
    ended: float = 10.0,
    fault_free: float = 5.0,
    stalls: int = 0,
) -> StreamOutcome:
    """The outcome of stream ``number``: ``marks`` delivered, ``stalls`` stalled states
    shown, then ``end`` (``done``, ``error`` or None: nothing) at ``ended``."""
    name = f"w{number}"
    deliveries = chunks(name, marks, at=started + 0.5)
    deliveries += [Delivery(name, "state", started + 0.2, state="stalled") for _ in range(stalls)]
    if end == "done":
        deliveries.append(Delivery(name, "done", ended))
    elif end == "error":
        deliveries.append(Delivery(name, "error", ended, error="gave_up", status=503))
    return outcome_of(
        number, tokens, fault_free, started, attempts_of(number, attempts), deliveries
    )


# -- one stream -------------------------------------------------------------------


def test_a_clean_stream_is_completed_intact_at_the_first_try() -> None:
    o = stream(1, run(1, range(1, 11)), started=2.0, ended=12.0)
    assert o.seen == tuple(range(1, 11))
    assert o.end == "done"
    assert (o.completed, o.intact, o.first_try, o.silent) == (True, True, True, False)
    assert (o.duplicated, o.lost, o.attempts, o.stalls) == (0, 0, 1, 0)
    assert o.ended_at == 12.0
    assert o.took == 10.0


def test_a_client_that_repeats_tokens_after_a_resume_completes_but_not_intact() -> None:
    o = stream(1, run(1, range(1, 6)) + run(2, range(4, 11)), attempts=2)
    assert o.seen == (1, 2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 10)
    assert o.duplicated == 2
    assert o.lost == 0
    assert o.completed
    assert not o.intact
    assert not o.first_try
    assert not o.silent


def test_a_clean_resume_is_intact_but_not_first_try() -> None:
    o = stream(1, run(1, range(1, 6)) + run(2, range(6, 11)), attempts=2)
    assert o.intact
    assert o.completed
    assert not o.first_try


def test_tokens_out_of_order_are_completed_but_not_intact() -> None:
    o = stream(1, run(1, [1, 2, 4, 3, 5, 6, 7, 8, 9, 10]))
    assert o.completed
    assert o.duplicated == 0
    assert not o.intact


def test_a_truncated_answer_reported_complete_is_a_silent_failure() -> None:
    o = stream(1, run(1, range(1, 7)))
    assert o.end == "done"
    assert o.lost == 4
    assert o.silent
    assert not o.completed
    assert not o.intact
    assert not o.first_try


def test_an_error_is_an_honest_failure() -> None:
    o = stream(1, run(1, range(1, 4)), "error", ended=7.5, attempts=3)
    assert o.end == "error"
    assert o.ended_at == 7.5
    assert o.lost == 7
    assert not o.silent
    assert not o.completed
    assert o.attempts == 3


def test_a_stream_with_no_end_is_unfinished() -> None:
    o = stream(1, run(1, range(1, 11)), None)
    assert o.end == "unfinished"
    assert o.ended_at is None
    assert o.took is None
    assert not o.completed  # every token came, but the client never said it was whole
    assert not o.silent


def test_the_last_end_the_client_reported_is_the_outcome() -> None:
    name = "w1"
    deliveries = [
        *chunks(name, run(1, range(1, 11))),
        Delivery(name, "error", 3.0, error="other"),
        Delivery(name, "done", 4.0),
    ]
    o = outcome_of(1, 10, 5.0, 0.0, attempts_of(1, 1), deliveries)
    assert o.end == "done"
    assert o.ended_at == 4.0


def test_marks_split_across_chunks_are_still_counted() -> None:
    # a text client: its deltas cut the text anywhere, inside a mark too
    text = "".join(mark(3, i) for i in range(1, 11))
    pieces = [text[n : n + 4] for n in range(0, len(text), 4)]
    assert pieces[:3] == [" [3.", "1] [", "3.2]"]  # no piece holds a whole mark
    deliveries = [Delivery("w1", "chunk", 1.0 + n, data=p) for n, p in enumerate(pieces)]
    deliveries.append(Delivery("w1", "done", 40.0))
    o = outcome_of(1, 10, 5.0, 0.0, attempts_of(1, 1, first_seq=3), deliveries)
    assert o.seen == tuple(range(1, 11))
    assert o.intact


def test_a_mark_cut_between_two_chunks_exactly_at_its_dot() -> None:
    deliveries = [
        Delivery("w1", "chunk", 1.0, data=mark(3, 1) + mark(3, 2) + " [3."),
        Delivery("w1", "chunk", 1.1, data="3]"),
        Delivery("w1", "done", 2.0),
    ]
    o = outcome_of(1, 3, 1.0, 0.0, attempts_of(1, 1, first_seq=3), deliveries)
    assert o.seen == (1, 2, 3)
    assert o.intact


def test_marks_inside_event_payloads_are_counted() -> None:
    # a client that reports the events' JSON rather than the text
    deliveries = [
        Delivery("w1", "chunk", 1.0 + i, data=f'{{"delta": {{"text": "{mark(5, i)}"}}}}')
        for i in range(1, 4)
    ]
    deliveries.append(Delivery("w1", "done", 9.0))
    o = outcome_of(1, 3, 1.0, 0.0, attempts_of(1, 1, first_seq=5), deliveries)
    assert o.seen == (1, 2, 3)
    assert o.completed


def test_only_chunks_count_as_tokens() -> None:
    deliveries = [
        *chunks("w1", run(1, range(1, 4))),
        Delivery("w1", "comment", 1.5, data=mark(1, 4)),
        Delivery("w1", "log", 1.6, data=mark(1, 5)),
        Delivery("w1", "done", 2.0),
    ]
    o = outcome_of(1, 5, 1.0, 0.0, attempts_of(1, 1), deliveries)
    assert o.seen == (1, 2, 3)
    assert o.silent
    assert o.lost == 2


def test_stalls_the_client_surfaced_are_counted() -> None:
    name = "w1"
    deliveries = [
        Delivery(name, "state", 0.1, state="connecting"),
        Delivery(name, "state", 0.2, state="stalled"),
        Delivery(name, "state", 0.3, state="retrying", delay=1.0),
        Delivery(name, "state", 0.4, state="stalled"),
        *chunks(name, run(1, range(1, 11))),
        Delivery(name, "done", 9.0),
    ]
    o = outcome_of(1, 10, 5.0, 0.0, attempts_of(1, 2), deliveries)
    assert o.stalls == 2
    assert o.completed


def test_tokens_past_the_answer_are_not_counted_as_lost_ones() -> None:
    o = stream(1, run(1, range(1, 12)), tokens=10)  # a stray token 11
    assert o.lost == 0
    assert o.completed
    assert not o.intact


# -- the run ----------------------------------------------------------------------


def _mixed() -> list[StreamOutcome]:
    return [
        stream(1, run(1, range(1, 11))),  # clean
        stream(2, run(2, range(1, 6)) + run(3, range(4, 11)), attempts=2),  # repeats 2
        stream(3, run(4, range(1, 7))),  # silent: 4 lost
        stream(4, run(5, range(1, 4)), "error", attempts=3),  # honest
        stream(5, run(8, range(1, 5)), None, attempts=2),  # unfinished
        stream(6, run(9, range(1, 11)), attempts=2, stalls=1),  # a stall shown, resumed
    ]


def test_summarize_counts_each_outcome() -> None:
    m = summarize(_mixed(), arrivals=[])
    assert m.streams == 6
    assert (m.completed.count, m.completed.total) == (3, 6)
    assert m.completion == 0.5
    assert m.first_try.count == 1
    assert m.intact.count == 2
    assert m.failed_honestly.count == 1
    assert m.failed_silently.count == 1
    assert m.unfinished.count == 1
    assert m.stalls_surfaced.count == 1
    assert m.duplicated_tokens == 2
    assert m.lost_tokens == 4  # only the streams reported whole: the error's 7 are not
    assert m.requests == 11
    assert m.requests_per_completed == pytest.approx(11 / 3)
    assert m.herd_peak is None
    assert m.herds == ()
    assert m.value("silent_failures") == pytest.approx(1 / 6)
    assert m.value("duplicated_tokens") == 2.0
    assert m.to_json()["completion"] == 0.5


def test_requests_per_completed_stream_is_infinite_when_none_completed() -> None:
    m = summarize([stream(1, run(1, range(1, 4)), "error", attempts=4)], arrivals=[])
    assert m.requests == 4
    assert m.requests_per_completed == math.inf
    assert m.slowdown_p50 is None
    assert m.extra_p95 is None


def test_slowdown_and_extra_time_of_completed_streams() -> None:
    took = (10.0, 12.0, 15.0, 20.0, 30.0)
    outcomes = [
        stream(n, run(n, range(1, 11)), ended=t, fault_free=10.0)
        for n, t in enumerate(took, start=1)
    ]
    # a failure that took far longer does not count: only completed streams are timed
    outcomes.append(stream(6, run(6, range(1, 4)), "error", ended=500.0, fault_free=10.0))
    outcomes.append(stream(7, run(7, range(1, 7)), ended=500.0, fault_free=10.0))  # silent
    m = summarize(outcomes, arrivals=[])
    assert m.slowdown_p50 == pytest.approx(1.5)
    assert m.slowdown_p95 == pytest.approx(2.8)  # between 2.0 and 3.0, inclusive method
    assert m.extra_p50 == pytest.approx(5.0)
    assert m.extra_p95 == pytest.approx(18.0)
    assert m.value("slowdown_p50") == pytest.approx(1.5)


def test_one_completed_stream_is_its_own_quantiles() -> None:
    m = summarize([stream(1, run(1, range(1, 11)), ended=15.0, fault_free=10.0)], [])
    assert m.slowdown_p50 == m.slowdown_p95 == pytest.approx(1.5)
    assert m.extra_p50 == m.extra_p95 == pytest.approx(5.0)


def test_the_herd_is_the_busiest_second_after_an_outage() -> None:
    outage = (100.0, 130.0)
    arrivals = [
        10.0,
        50.0,
        101.0,  # turned away during the outage: not the herd
        129.99,
        *[130.0 + 0.05 * i for i in range(12)],  # 12 in the first second after it
        *[131.5] * 5,
        159.9,
        130.0 + HERD_WINDOW,  # past the window
        170.0,
    ]
    outcomes = [
        stream(1, run(1, range(1, 11)), started=90.0, ended=140.0),  # waited it out
        stream(2, run(2, range(1, 11)), started=20.0, ended=60.0),  # over before it
        stream(3, run(3, range(1, 3)), "error", started=95.0, ended=120.0),  # gave up
        stream(4, run(4, range(1, 3)), None, started=125.0),  # still waiting
        stream(5, run(5, range(1, 11)), started=135.0, ended=150.0),  # came after
    ]
    m = summarize(outcomes, arrivals, [outage])
    assert m.herds == (Herd(130.0, 12, 2),)
    assert m.herd_peak == 12
    assert m.value("herd_peak") == 12.0


def test_the_herd_peak_is_the_highest_over_outages() -> None:
    arrivals = [10.0, 10.1, 10.2, 50.5, 50.6, 50.7, 50.8, 90.0]
    m = summarize([stream(1, run(1, range(1, 11)))], arrivals, [(5.0, 10.0), (40.0, 50.0)])
    assert [h.peak for h in m.herds] == [3, 4]
    assert m.herd_peak == 4


def test_an_outage_with_no_arrivals_after_it_has_a_peak_of_zero() -> None:
    m = summarize([stream(1, run(1, range(1, 11)))], [1.0, 2.0], [(5.0, 10.0)])
    assert m.herd_peak == 0


def test_requests_per_second() -> None:
    assert per_second([100.5, 101.2, 101.9, 103.0], 100.0) == [(0, 1), (1, 2), (2, 0), (3, 1)]
    assert per_second([], 0.0) == []


# -- Wilson intervals ---------------------------------------------------------------


def test_wilson_at_zero_of_many() -> None:
    r = rate(0, 500)
    assert r.value == 0.0
    assert r.low == pytest.approx(0.0, abs=1e-12)
    assert r.high == pytest.approx(0.0076, abs=5e-5)
    assert str(r) == "0.0% [0.0%, 0.8%] (0/500)"


def test_wilson_low_is_exactly_zero_at_zero() -> None:
    assert rate(0, 500).low == 0.0


def test_wilson_at_all_of_many() -> None:
    r = rate(500, 500)
    assert r.value == 1.0
    assert r.high == 1.0
    assert r.low == pytest.approx(0.9924, abs=5e-5)


def test_wilson_with_nothing_measured_is_the_whole_range() -> None:
    r = rate(0, 0)
    assert (r.count, r.total, r.value, r.low, r.high) == (0, 0, 0.0, 0.0, 1.0)


def test_wilson_known_values_and_symmetry() -> None:
    r = rate(10, 100)  # the textbook example: 0.0552 .. 0.1744
    assert r.low == pytest.approx(0.0552, abs=1e-4)
    assert r.high == pytest.approx(0.1744, abs=1e-4)
    for count, total in ((3, 40), (17, 23), (1, 2)):
        a, b = rate(count, total), rate(total - count, total)
        assert a.low == pytest.approx(1 - b.high)
        assert a.high == pytest.approx(1 - b.low)
        assert a.low <= a.value <= a.high


# -- thresholds ---------------------------------------------------------------------


def _metrics(completed: int, of: int, duplicated: bool = False) -> WeatherMetrics:
    outcomes = [stream(n, run(n, range(1, 11))) for n in range(1, completed + 1)]
    outcomes += [stream(n, run(n, range(1, 4)), "error") for n in range(completed + 1, of + 1)]
    if duplicated:
        outcomes.append(stream(of + 1, run(90, range(1, 6)) + run(91, range(4, 11))))
    return summarize(outcomes, arrivals=[])


def test_require_passes_when_every_condition_holds() -> None:
    m = _metrics(100, 100)
    m.require("completion >= 0.99", "duplicated_tokens == 0")
    m.require("completion >= 99%", "silent_failures == 0", "requests_per_completed<=1")
    m.require()  # nothing asked, nothing failed


def test_require_at_the_bound_exactly() -> None:
    m = _metrics(99, 100)
    m.require("completion >= 0.99", "completion >= 99%", "completed < 100%")
    with pytest.raises(AssertionError):
        m.require("completion > 99%")


def test_require_fails_with_the_figures_of_the_failed_conditions() -> None:
    m = _metrics(1, 2, duplicated=True)  # 2 of 3 complete, one with 2 tokens repeated
    with pytest.raises(AssertionError) as info:
        m.require("completion >= 0.99", "duplicated_tokens == 0", "failed_honestly <= 50%")
    message = str(info.value)
    assert message.startswith("weather thresholds not met: ")
    assert "completion >= 0.99 (is 66.7% [" in message
    assert "(2/3)" in message
    assert "duplicated_tokens == 0 (is 2)" in message
    assert "failed_honestly" not in message  # it held: 1 of 3


def test_require_percent_form() -> None:
    m = _metrics(1, 2)
    m.require("completion >= 50%", "completion <= 50.0%")
    with pytest.raises(AssertionError, match=r"completion >= 51% \(is 50\.0%"):
        m.require("completion >= 51%")


def test_a_metric_with_no_figure_never_meets_a_threshold() -> None:
    m = _metrics(0, 2)
    with pytest.raises(AssertionError, match=r"slowdown_p50 <= 100 \(is None\)"):
        m.require("slowdown_p50 <= 100")
    with pytest.raises(AssertionError, match="herd_peak"):
        m.require("herd_peak >= 0")


@pytest.mark.parametrize(
    "condition",
    [
        "completion about 0.99",
        "completion >= high",
        "completion",
        "",
        ">= 0.99",
        "completion >= 0.99 and more",
        "completion => 0.99",
        "Completion >= 0.99",
    ],
)
def test_require_refuses_nonsense(condition: str) -> None:
    with pytest.raises(ValueError, match="metric op number"):
        _metrics(2, 2).require(condition)


@pytest.mark.parametrize("condition", ["completeness >= 0.99", "duplicates == 0"])
def test_require_refuses_an_unknown_metric_and_lists_the_known(condition: str) -> None:
    with pytest.raises(ValueError, match=r"no weather metric .*; known: completion, "):
        _metrics(2, 2).require(condition)


def test_value_refuses_an_unknown_metric() -> None:
    with pytest.raises(KeyError, match="no weather metric"):
        _metrics(2, 2).value("speed")
