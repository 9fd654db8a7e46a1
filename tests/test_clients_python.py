"""The shipped Python adapters (issue 9): each loads by name and is judged as its library
really behaves, at its profile's real timing.

openai-python and anthropic-sdk-python retry 5xx and 429, honour Retry-After, never
retry a stream once it started and take a stream that ends without its terminal event
as complete; httpx-sse never retries. Each test runs a few chosen cases through
``conformance.run_suite``; the deliveries the kit compares are the SDKs' parsed events
dumped again, which must round-trip to the server's JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import entry_points

import pytest

from conformance import Verdict, run_suite
from conformance._adapter import AdapterRequest, ClientAdapter, StreamSink
from conformance._case import JsonBody, StreamRequest
from conformance._evidence import Delivery, DeliveryLog
from fake_servers import FakeServer, reply, respond
from fake_servers._noise import Source

PASS, FAIL = Verdict.PASS, Verdict.FAIL

TARGETS = {  # entry point -> (library, AdapterInfo.name, profile, capabilities)
    "openai": ("openai", "openai-python", "openai-python@1", {"post"}),
    "openai-async": ("openai", "openai-python-async", "openai-python@1", {"post"}),
    "anthropic": ("anthropic", "anthropic-python", "anthropic-python@1", {"post"}),
    "anthropic-async": ("anthropic", "anthropic-python-async", "anthropic-python@1", {"post"}),
    "httpx-sse": (
        "httpx_sse",
        "httpx-sse",
        "httpx-sse@1",
        {"get", "post", "multipart", "raw_data", "event_fields"},
    ),
}


def _factory(name: str) -> type[ClientAdapter]:
    (point,) = entry_points(group="streamcheck.clients", name=name)
    factory = point.load()
    assert callable(factory)
    return factory  # type: ignore[no-any-return]


def _verdicts(name: str, cases: list[str]) -> dict[str, Verdict]:
    results = run_suite(_factory(name), select=cases)
    return {r.case.id: r.verdict for r in results}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_each_target_loads_by_name_and_names_its_profile(name):
    library, title, profile, capabilities = TARGETS[name]
    module = pytest.importorskip(library)
    adapter = _factory(name)()
    assert adapter.info.name == title
    assert adapter.info.version == module.__version__
    assert adapter.info.profile == profile
    assert adapter.info.capabilities == frozenset(capabilities)  # never "configurable"


def test_openai_retries_503_honours_retry_after_and_accepts_a_truncation():
    pytest.importorskip("openai")
    verdicts = _verdicts("openai", ["SC-RETRY-14", "SC-RETRY-30", "SC-RETRY-2", "SC-COMMIT-12"])
    assert verdicts == {
        "SC-RETRY-14": PASS,  # 503 twice, then the answer: retried, delivered exactly
        "SC-RETRY-30": PASS,  # Retry-After: 1 on a 429 waited out
        "SC-RETRY-2": PASS,  # 400: once, non_retryable_status 400
        "SC-COMMIT-12": FAIL,  # a stream cut before [DONE] ends the iteration quietly
    }


def test_openai_async_cancels_promptly_and_never_retries_a_started_stream():
    pytest.importorskip("openai")
    verdicts = _verdicts("openai-async", ["SC-CANCEL-6", "SC-COMMIT-4", "SC-RETRY-36"])
    assert verdicts == {
        "SC-CANCEL-6": PASS,  # cancelling the task closes the connection at once
        "SC-COMMIT-4": FAIL,  # a failure after the headers reaches the application
        "SC-RETRY-36": PASS,  # three attempts, then gave_up with the last status
    }


def test_anthropic_retries_429_and_resends_a_non_idempotent_post():
    pytest.importorskip("anthropic")
    verdicts = _verdicts("anthropic", ["SC-RETRY-12", "SC-POST-3", "SC-COMMIT-6"])
    assert verdicts == {
        "SC-RETRY-12": PASS,  # 429 twice, then the answer
        "SC-POST-3": FAIL,  # the SDK retries a 503 whatever the request
        "SC-COMMIT-6": PASS,  # a break after chunk 2 is surfaced (truncated), not retried
    }


def test_anthropic_async_does_not_retry_a_401():
    pytest.importorskip("anthropic")
    assert _verdicts("anthropic-async", ["SC-RETRY-4", "SC-RETRY-38"]) == {
        "SC-RETRY-4": PASS,
        "SC-RETRY-38": PASS,  # the server's message reaches the consumer
    }


@pytest.mark.parametrize("name", ["openai-async", "anthropic-async", "httpx-sse"])
def test_an_async_library_adapters_loop_is_probed_as_a_queueing_host(name):
    """The runner's loop runs the library's fifty instances: its probe records as
    ``sdk-loop`` (a queueing hosting loop, docs/timing.md), not as the kit's ``client``."""
    pytest.importorskip(TARGETS[name][0])
    (result,) = run_suite(_factory(name), select=["SC-RETRY-2"], timing="real")
    assert result.evidence is not None
    summary = result.evidence.noise.summary()
    assert summary[Source.SDK_LOOP]["samples"] > 3, summary
    assert Source.CLIENT not in summary


def test_httpx_sse_never_retries():
    pytest.importorskip("httpx_sse")
    cases = ["SC-RETRY-1", "SC-COMMIT-1", "SC-COMMIT-2", "SC-SSE-1", "SC-SSE-5"]
    verdicts = _verdicts("httpx-sse", cases)
    assert verdicts == {
        "SC-RETRY-1": PASS,  # a 400 on GET: one request, non_retryable_status 400
        "SC-COMMIT-1": FAIL,  # a failure before the headers is never retried (GET)
        "SC-COMMIT-2": FAIL,  # nor on POST
        "SC-SSE-1": PASS,  # its parser: LF line endings at random read boundaries
        "SC-SSE-5": FAIL,  # a leading BOM is not stripped: the first event is lost
    }


def _outcome(log: DeliveryLog) -> Delivery | None:
    return next((d for d in log.all() if d.kind in ("done", "error")), None)


def _deliver(name: str, path: str) -> tuple[list[dict[str, object]], list[object], str | None]:
    """One stream through the adapter: the chunks' JSON, the events the server sent
    (parsed), and how the stream ended."""
    log = DeliveryLog()

    async def play(server: FakeServer) -> None:
        adapter = _factory(name)()
        request = StreamRequest(path=path, method="POST", body=JsonBody({"prompt": "Hi"}))
        try:
            await adapter.stream(AdapterRequest(server.url + path, request), StreamSink(log, "s1"))
        finally:
            await adapter.aclose()

    with FakeServer() as server:
        server.script(path, reply(chunks=4))
        asyncio.run(play(server))
        (attempt,) = server.ledger.wait_finished(5)
    sent = [json.loads(e.data) for e in attempt.data_events]
    chunks = [json.loads(d.data) for d in log.all() if d.kind == "chunk"]
    outcome = _outcome(log)
    return chunks, sent, None if outcome is None else outcome.kind


@pytest.mark.parametrize(
    ("name", "library"),
    [("openai-async", "openai"), ("anthropic-async", "anthropic"), ("anthropic", "anthropic")],
)
def test_a_delivered_chunk_is_the_servers_event_by_json_value(name, library):
    """The SDK's parsed event, dumped with to_dict(mode="json"), is the event as sent:
    no null dropped, no default added; framing events are not chunks."""
    pytest.importorskip(library)
    chunks, sent, ended = _deliver(name, "/v1/stream")
    assert chunks == sent
    assert len(chunks) == 4
    assert ended == "done"


def test_a_status_the_sdk_does_not_retry_is_non_retryable_with_its_status():
    pytest.importorskip("openai")
    log = DeliveryLog()

    async def play(url: str) -> None:
        adapter = _factory("openai")()
        request = StreamRequest(path="/v1/stream", method="POST", body=JsonBody({"prompt": "x"}))
        try:
            await adapter.stream(AdapterRequest(url, request), StreamSink(log, "s1"))
        finally:
            await adapter.aclose()

    with FakeServer() as server:
        server.script("/v1/stream", respond(403))
        asyncio.run(play(server.url + "/v1/stream"))
        assert len(server.ledger.wait_finished(5)) == 1
    outcome = _outcome(log)
    assert outcome is not None
    assert (outcome.error, outcome.status) == ("non_retryable_status", 403)
    assert "PermissionDeniedError" in outcome.detail


def test_a_missing_library_names_the_extra_to_install(monkeypatch):
    """A target whose library is not installed stops with the pip line that installs it."""
    from pytest_streamcheck.clients import python

    monkeypatch.setitem(sys.modules, "httpx_sse", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "pytest_streamcheck.clients._py_httpx_sse", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'pytest-streamcheck\[httpx-sse\]'"):
        python.httpx_sse_adapter()
