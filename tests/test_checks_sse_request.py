"""SC-SSE-19..40 (the request, redirects, 204) on hand-built records: a correct client
passes, each mistake fails with what was expected and what was seen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from _records import request_record

from conformance import Delivery, Evidence, get_case
from conformance._profiles import get_profile
from fake_servers import Attempt, SentEvent

POLICY = get_profile("seed-eventsource").at("test")
SSE_HEADERS = (
    ("accept", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("pragma", "no-cache"),
    ("authorization", "Bearer sk-streamcheck"),
    ("x-streamcheck-user", "u-17"),
)


def attempt(
    seq: int,
    status: int = 200,
    *,
    path: str = "/v1/stream",
    method: str = "GET",
    headers: tuple[tuple[str, str], ...] = SSE_HEADERS,
    events: int = 0,
    body: tuple[int, str] = (0, ""),
) -> Attempt:
    sent = tuple(
        SentEvent(i, "data", str(i), f"tok{i}", seq + 0.001 * i) for i in range(1, events + 1)
    )
    return request_record(
        seq,
        method=method,
        path=path,
        headers=headers,
        body=body,
        arrived_at=float(seq),
        status=status,
        events=sent,
        ended_at=seq + 0.5,
        end="completed",
    )


def answered(n: int, stream: str = "s1", first: int = 1) -> list[Delivery]:
    got = [
        Delivery(stream, "chunk", 10.0 + i, data=f"tok{i}", id=str(i)) for i in range(first, n + 1)
    ]
    return [*got, Delivery(stream, "done", 20.0)]


def error(stream: str = "s1", kind: str = "non_retryable_status", status: int | None = None):  # type: ignore[no-untyped-def]
    return Delivery(stream, "error", 20.0, error=kind, status=status)  # type: ignore[arg-type]


def judge(case_id: str, attempts: Sequence[Attempt], deliveries: Sequence[Delivery]):  # type: ignore[no-untyped-def]
    return get_case(case_id).check(Evidence(tuple(attempts), (), tuple(deliveries)), POLICY)


def without(name: str, value: str | None = None) -> tuple[tuple[str, str], ...]:
    kept = tuple(h for h in SSE_HEADERS if h[0] != name)
    return kept if value is None else (*kept, (name, value))


# -- the request's headers --------------------------------------------------------------
@pytest.mark.parametrize("case_id", [f"SC-SSE-{n}" for n in range(19, 29)])
def test_the_header_cases_pass_a_correct_client(case_id: str) -> None:
    assert judge(case_id, [attempt(1, 503), attempt(2, events=4)], answered(4)).ok


@pytest.mark.parametrize(
    ("case_id", "name", "value"),
    [
        ("SC-SSE-19", "accept", "*/*"),
        ("SC-SSE-21", "cache-control", "no-store"),
        ("SC-SSE-23", "pragma", None),
        ("SC-SSE-25", "last-event-id", ""),
        ("SC-SSE-27", "authorization", None),
    ],
)
def test_a_wrong_header_on_the_retry_fails(case_id: str, name: str, value: str | None) -> None:
    """Only the retry is wrong: the case names that request and the header it sent."""
    retry = attempt(2, events=4, headers=without(name, value))
    outcome = judge(case_id, [attempt(1, 503), retry], answered(4))
    assert not outcome.ok
    assert f"request 2: {name}: {value!r}" in outcome.observed


def test_accept_may_list_more_types() -> None:
    both = without("accept", "text/event-stream; q=1, application/json")
    assert judge("SC-SSE-19", [attempt(1, 503, headers=both), attempt(2, events=4)], answered(4)).ok


def test_a_header_case_without_a_retry_fails() -> None:
    outcome = judge("SC-SSE-21", [attempt(1, events=4)], answered(4))
    assert not outcome.ok
    assert "no retry to judge" in outcome.observed


def test_the_callers_last_event_id_is_judged_on_the_first_request() -> None:
    resumed = (*SSE_HEADERS, ("last-event-id", "2"))
    sent = tuple(SentEvent(i, "data", str(i), f"tok{i}", 1.0) for i in (3, 4))
    first = replace(attempt(1, headers=resumed), events=sent)  # the server resumed after 2
    assert judge("SC-SSE-29", [first], answered(4, first=3)).ok
    outcome = judge("SC-SSE-29", [attempt(1, events=4)], answered(4))
    assert (outcome.ok, outcome.observed) == (False, "no Last-Event-ID")


# -- redirects --------------------------------------------------------------------------
def redirected(
    status: int, method: str, then: str, body: tuple[int, str], seq: int = 1
) -> list[Attempt]:
    origin = f"/v1/r{status}"
    return [
        attempt(seq, status, path=origin, method=method, body=(52, "ab" * 32)),
        attempt(seq + 1, path=origin + "/moved", method=then, body=body, events=4),
    ]


def test_a_post_that_a_303_turns_into_a_get_passes() -> None:
    attempts = [
        a
        for i, s in enumerate((301, 302, 303))
        for a in redirected(s, "POST", "GET", (0, ""), 2 * i + 1)
    ]
    deliveries = [d for s in (301, 302, 303) for d in answered(4, f"r{s}")]
    assert judge("SC-SSE-32", attempts, deliveries).ok


def test_a_post_sent_again_after_a_303_fails() -> None:
    attempts = [
        a
        for i, s in enumerate((301, 302, 303))
        for a in redirected(s, "POST", "GET", (0, ""), 2 * i + 1)
    ]
    attempts[-1] = redirected(303, "POST", "POST", (52, "ab" * 32), 5)[1]
    deliveries = [d for s in (301, 302, 303) for d in answered(4, f"r{s}")]
    outcome = judge("SC-SSE-32", attempts, deliveries)
    assert not outcome.ok
    assert "as a GET without the POST's body" in outcome.expected
    assert outcome.observed == "POST with a 52-byte body"


def test_a_307_that_changes_the_body_fails() -> None:
    attempts = [
        *redirected(307, "POST", "POST", (52, "ab" * 32)),
        *redirected(308, "POST", "POST", (52, "cd" * 32), 3),
    ]
    deliveries = [d for s in (307, 308) for d in answered(4, f"r{s}")]
    outcome = judge("SC-SSE-34", attempts, deliveries)
    assert not outcome.ok
    assert "the same method and body" in outcome.expected


def test_a_retry_back_to_the_original_request_fails() -> None:
    good = [
        attempt(1, 303),
        attempt(2, 503, path="/v1/moved"),
        attempt(3, path="/v1/moved", events=4),
    ]
    assert judge("SC-SSE-35", good, answered(4)).ok
    back = [
        attempt(1, 303),
        attempt(2, 503, path="/v1/moved"),
        attempt(3, 303),
        attempt(4, path="/v1/moved", events=4),
    ]
    outcome = judge("SC-SSE-35", back, answered(4))
    assert not outcome.ok
    assert "GET /v1/stream -> 303" in outcome.observed


def broken(loop_requests: int, none_requests: int = 1) -> list[Attempt]:
    none = [attempt(i, 302, path="/v1/none") for i in range(1, none_requests + 1)]
    loop = [attempt(10 + i, 307, path=f"/v1/loop/{'ab'[i % 2]}") for i in range(loop_requests)]
    return [*none, attempt(5, 302, path="/v1/empty"), *loop]


def test_broken_redirects_that_end_in_errors_pass() -> None:
    errors = [error("none", status=302), error("empty", status=302), error("loop", status=307)]
    assert judge("SC-SSE-37", broken(21), errors).ok


def test_a_loop_past_20_redirects_fails() -> None:
    errors = [error("none", status=302), error("empty", status=302), error("loop", status=307)]
    outcome = judge("SC-SSE-37", broken(22), errors)
    assert not outcome.ok
    assert outcome.expected.startswith("stream loop (a loop): at most 21 request(s)")


def test_a_302_without_a_location_retried_fails() -> None:
    errors = [error("none", status=302), error("empty", status=302), error("loop", status=307)]
    outcome = judge("SC-SSE-37", broken(3, none_requests=2), errors)
    assert not outcome.ok
    assert "2 requests" in outcome.observed


# -- 204 ----------------------------------------------------------------------------------
def test_a_204_that_stops_the_retries_passes() -> None:
    assert judge("SC-SSE-39", [attempt(1, 503), attempt(2, 204)], [error(status=204)]).ok


def test_a_retried_204_fails() -> None:
    outcome = judge(
        "SC-SSE-39", [attempt(1, 503), attempt(2, 204), attempt(3, events=4)], answered(4)
    )
    assert not outcome.ok
    assert "-> 204, GET /v1/stream -> 200" in outcome.observed


def test_a_204_reported_as_done_fails() -> None:
    outcome = judge("SC-SSE-40", [attempt(1, 503), attempt(2, 204)], [Delivery("s1", "done", 20.0)])
    assert not outcome.ok
    assert "status 204" in outcome.expected
