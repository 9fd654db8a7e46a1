"""A client judged from the text its application sees (issue 28): ``reports="text"``.

The kit marks the answer (``fake_servers._marks``) and reads the marks back out of the
text (``conformance._text``). A text adapter of the reference client, and one over the
shipped ``openai-async`` adapter, get the verdicts their event adapters get on every case
of RETRY, COMMIT, POST, CANCEL and the SSE resume cases; text clients with the zoo's
delivery mistakes are caught as the event clients are; and the reading itself is
checked on hand-built records (pieces cut anywhere, joined, made up).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from zoo import MUTANTS
from zoo.retry import duplicates_on_resume, restarts_after_commit, truncation_is_done

from conformance import all_cases, run_suite
from conformance._adapter import AdapterRequest, StreamSink
from conformance._case import Verdict
from conformance._evidence import Delivery, Evidence
from conformance._result import CaseResult
from conformance._text import from_text
from fake_servers import Attempt, SentEvent
from fake_servers._marks import mark
from pytest_streamcheck.clients._py_stainless import OpenAIAsyncAdapter
from pytest_streamcheck.targets._reference import ReferenceAdapter

AREAS = ("RETRY", "COMMIT", "POST", "CANCEL")
JUDGED = [c.id for c in all_cases() if c.area in AREAS or (c.area == "SSE" and "resume" in c.needs)]
TEXT_ONLY = frozenset({"raw_data", "event_fields", "comments"})  # what text cannot carry


def text_of(data: str) -> str:
    """The text an application takes from one event's data, in any of the formats."""
    try:
        value: Any = json.loads(data)
    except ValueError:
        return data
    if not isinstance(value, dict):
        return data
    for choice in value.get("choices") or []:
        return str((choice.get("delta") or {}).get("content") or "")
    delta = value.get("delta")
    if isinstance(delta, dict):
        return str(delta.get("text") or "")
    return delta if isinstance(delta, str) else ""


def as_text(sink: StreamSink) -> None:
    """From now on, ``sink`` gets only the text each chunk carries (none: nothing)."""
    given = sink.chunk

    def chunk(data: str, **_: object) -> None:
        text = text_of(data)
        if text:
            given(text)

    sink.chunk = chunk  # type: ignore[method-assign]


def _text_info(info: Any, name: str) -> Any:
    return replace(info, name=name, reports="text", capabilities=info.capabilities - TEXT_ONLY)


class TextReference(ReferenceAdapter):
    """The reference client, as an application that reads its text deltas sees it."""

    info = _text_info(ReferenceAdapter.info, "reference-text")

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        as_text(sink)
        await super().stream(request, sink)


class TextOpenAI(OpenAIAsyncAdapter):
    """``openai.AsyncOpenAI``, as an application that reads ``delta.content`` sees it."""

    info = _text_info(OpenAIAsyncAdapter.info, "openai-async-text")

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        as_text(sink)
        await super().stream(request, sink)


def _verdicts(factory: Any, select: list[str]) -> dict[str, CaseResult]:
    return {r.case.id: r for r in run_suite(factory, select=select, timing="virtual")}


@pytest.mark.parametrize(
    ("events", "text"), [(ReferenceAdapter, TextReference), (OpenAIAsyncAdapter, TextOpenAI)]
)
def test_text_alone_gets_the_verdicts_events_get(events: Any, text: Any) -> None:
    raw, read = _verdicts(events, JUDGED), _verdicts(text, JUDGED)
    differ = {
        i: (raw[i].verdict.value, read[i].verdict.value, read[i].reason)
        for i in JUDGED
        if raw[i].verdict is not read[i].verdict
    }
    assert not differ
    assert sum(r.verdict is Verdict.PASS for r in read.values()) >= 20


def _not_for_text(result: CaseResult) -> bool:
    """UNSUPPORTED for a reason of its own: a rule its profile excludes, or a capability
    text cannot carry."""
    return result.skip == "profile" or bool(result.case.needs & TEXT_ONLY)


def test_the_text_reference_passes_every_case_it_can_play() -> None:
    """Across the whole catalog, not only the areas above: every case a text client can
    play is a PASS for the reference read from its text. (The redirect cases, SC-SSE-31
    to 34, play one stream per path: each stream's marks once read as the first path's
    answer, and a correct text client FAILed them.)"""
    results = run_suite(TextReference, timing="virtual")
    wrong = {
        r.case.id: (r.verdict.value, r.reason or (r.outcome and r.outcome.observed))
        for r in results
        if r.verdict is not Verdict.PASS
        and not (r.verdict is Verdict.UNSUPPORTED and _not_for_text(r))
    }
    assert not wrong
    assert sum(r.verdict is Verdict.PASS for r in results) >= 150


MISTAKES = (restarts_after_commit, duplicates_on_resume, truncation_is_done)


@pytest.mark.parametrize("mutant", MISTAKES, ids=lambda m: m.__name__)
def test_a_text_client_s_delivery_mistake_is_caught(mutant: Any) -> None:
    """The zoo's mistakes of what reaches the application, made by a text client."""

    class Text(mutant):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.info = _text_info(self.info, f"{mutant.__name__}-text")

        async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
            as_text(sink)
            await super().stream(request, sink)

    ids = list(MUTANTS[mutant.__name__].ids)
    results = run_suite(Text, select=ids, timing="virtual")
    assert any(r.verdict is Verdict.FAIL for r in results), [
        (r.case.id, r.verdict) for r in results
    ]


# -- the reading, on hand-built records ----------------------------------------------


def _attempt(seq: int, indices: range, ids: bool = False) -> Attempt:
    events = tuple(
        SentEvent(index=i, kind="data", id=str(i) if ids else None, data=f"<{i}>", at=0.0)
        for i in indices
    )
    return Attempt(
        seq=seq,
        number=seq,
        method="GET",
        path="/s",
        query="",
        headers=(),
        body_size=0,
        body_sha256="",
        arrived_at=0.0,
        events=events,
    )


def _read(attempts: tuple[Attempt, ...], *pieces: str) -> list[tuple[str, float, str | None]]:
    deliveries = [Delivery("s1", "chunk", float(n), data=p) for n, p in enumerate(pieces)]
    deliveries.append(Delivery("s1", "done", 99.0))
    ev = from_text(Evidence(attempts=attempts, deliveries=tuple(deliveries)))
    return [(d.data, d.at, d.id) for d in ev.chunks()]


def test_marks_cut_or_joined_anywhere_read_back_in_order_at_the_piece_that_ends_them() -> None:
    text = mark(1, 1) + mark(1, 2) + mark(1, 3)
    pieces = (text[:4], text[4:9], text[9:])  # " [1." | "1] [1" | ".2] [1.3]"
    got = _read((_attempt(1, range(1, 4), ids=True),), *pieces)
    assert got == [("<1>", 1.0, "1"), ("<2>", 2.0, "2"), ("<3>", 2.0, "3")]


def test_a_resume_reads_as_one_answer_and_a_replay_as_repeats() -> None:
    attempts = (_attempt(1, range(1, 3)), _attempt(2, range(3, 5)))
    resumed = _read(attempts, mark(1, 1) + mark(1, 2), mark(2, 3) + mark(2, 4))
    assert [d for d, _, _ in resumed] == ["<1>", "<2>", "<3>", "<4>"]
    restarted = (_attempt(1, range(1, 3)), _attempt(2, range(1, 5)))
    replayed = _read(restarted, mark(1, 1), mark(1, 2), mark(2, 1) + mark(2, 2))
    assert [d for d, _, _ in replayed] == ["<1>", "<2>", "<1>", "<2>"]  # the repeats show


def test_text_no_attempt_sent_is_the_client_s_own_and_stays_visible() -> None:
    got = _read((_attempt(1, range(1, 3)),), mark(1, 1) + " hello", mark(3, 9), " [1.2")
    assert [d for d, _, _ in got] == ["<1>", " hello", mark(3, 9), " [1.2"]


def test_how_an_adapter_reports_is_checked_where_it_is_declared() -> None:
    from pytest_streamcheck.targets._exec_protocol import ProtocolError, parse_hello

    info, _ = parse_hello({"protocol": 1, "api": 2, "reports": "text"}, "argv0")
    assert info.reports == "text"
    with pytest.raises(ProtocolError, match="'words' is not one of events, json, text"):
        parse_hello({"protocol": 1, "api": 2, "reports": "words"}, "argv0")
    with pytest.raises(ValueError, match=r"AdapterInfo\.reports"):
        replace(ReferenceAdapter.info, reports="words")  # type: ignore[arg-type]
