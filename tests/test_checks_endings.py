"""Every failure names how the client's streams ended (``name_endings``), once."""

from __future__ import annotations

from conformance import Delivery, Evidence, Outcome
from conformance._checks import ended_with_done, name_endings


def ev(*deliveries: Delivery) -> Evidence:
    return Evidence((), (), deliveries)


def circuit_open(stream: str, detail: str = "circuit open until 9.000") -> Delivery:
    return Delivery(stream, "error", 1.0, error="circuit_open", detail=detail)


FAILED = Outcome.failed("a probe after the cooldown", "5 request(s): no probe")


def test_one_stream_is_named_on_the_observed_line() -> None:
    """SC-BREAKER-1's "no probe" now says the stream ended circuit_open."""
    out = name_endings(FAILED, ev(circuit_open("s1")))
    assert out.observed == (
        "5 request(s): no probe; s1 ended: error circuit_open (circuit open until 9.000)"
    )
    assert out.expected == FAILED.expected
    assert out.details == ()


def test_a_stream_that_never_ended_says_so() -> None:
    out = name_endings(FAILED, ev(Delivery("s1", "state", 0.5, state="connecting")))
    assert out.observed.endswith("; s1 never ended")


def test_no_delivery_at_all_says_so() -> None:
    assert name_endings(FAILED, ev()).observed.endswith("; no stream delivered anything")


def test_an_ending_the_text_names_is_not_repeated() -> None:
    """ended_with_done already describes the ending; a "s2 ended" tail names s2."""
    e = ev(circuit_open("s1"))
    named = ended_with_done(e)
    assert name_endings(named, e) == named
    tail = Outcome.failed("exactly 0 requests", "1 request(s); s2 ended with error gave_up")
    assert name_endings(tail, ev(Delivery("s2", "done", 1.0))) == tail


def test_several_streams_go_in_one_detail_line_grouped() -> None:
    """Streams that ended alike are grouped (their detail kept when they share it);
    the line comes first among the details."""
    many = [circuit_open(f"n{i}", "circuit open until 9.5") for i in range(2, 6)]
    e = ev(Delivery("n1", "done", 1.0), *many, Delivery("s1", "state", 0.1, state="retrying"))
    out = name_endings(Outcome.failed("one probe", "5 requests", "noise line"), e)
    assert out.observed == "5 requests"
    assert out.details == (
        "n1 ended: done; n2, n3 and 2 more ended: error circuit_open (circuit open until 9.5); "
        "s1 never ended",
        "noise line",
    )


def test_differing_details_are_left_out_of_a_group() -> None:
    e = ev(circuit_open("a", "until 1"), circuit_open("b", "until 2"))
    out = name_endings(FAILED, e)
    assert out.details == ("a, b ended: error circuit_open",)


def test_passes_and_undecidable_outcomes_are_unchanged() -> None:
    e = ev(circuit_open("s1"))
    passed = Outcome.passed("x", "y")
    unsure = Outcome.unsure("x", "y (undecidable)")
    assert name_endings(passed, e) is passed
    assert name_endings(unsure, e) is unsure


def test_a_status_is_part_of_the_ending() -> None:
    end = Delivery("s1", "error", 1.0, error="gave_up", status=503, detail="HTTP 503")
    out = name_endings(FAILED, ev(end))
    assert out.observed.endswith("; s1 ended: error gave_up status=503 (HTTP 503)")
