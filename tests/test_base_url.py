"""A scripted endpoint works as an SDK's base URL: the SDK's own path appended to it is
served by the endpoint's script, in that provider's format (issue 9)."""

from __future__ import annotations

import json

import httpx
import pytest

from conformance._checks import same_data
from fake_servers import FakeServer, Respond, Stream

BASE = "/v1/stream"


def _events(body: str) -> list[dict[str, object]]:
    out = []
    for line in body.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[len("data: ") :]))
    return out


@pytest.mark.parametrize(
    ("suffix", "kind"),
    [
        ("/chat/completions", "chat.completion.chunk"),
        ("/v1/chat/completions", "chat.completion.chunk"),
        ("/v1/messages", "message_start"),
        ("/responses", "response.created"),
        ("/v1beta/models/m:streamGenerateContent", "candidates"),
    ],
)
def test_sdk_path_under_the_endpoint_is_served_in_its_format(suffix: str, kind: str) -> None:
    with FakeServer() as server:
        server.script(BASE, Stream(events=3))
        reply = httpx.post(server.url + BASE + suffix, json={"stream": True}, trust_env=False)
        attempt = server.ledger.attempts()[-1]
    assert reply.status_code == 200
    first = _events(reply.text)[0]
    assert kind in (first.get("object"), first.get("type")) or kind in first
    assert attempt.path == BASE  # counted against the endpoint it was served by
    assert len(attempt.data_events) == 3


def test_steps_advance_across_the_sdk_path_and_errors_take_its_shape() -> None:
    with FakeServer() as server:
        server.script(BASE, Respond(status=429), Stream(events=2))
        url = server.url + BASE + "/v1/messages"
        first = httpx.post(url, json={"stream": True}, trust_env=False)
        second = httpx.post(url, json={"stream": True}, trust_env=False)
        numbers = [a.number for a in server.ledger.attempts()]
    assert first.status_code == 429
    assert first.json()["type"] == "error"  # Anthropic's error shape
    assert second.status_code == 200
    assert numbers == [1, 2]


def test_a_path_no_provider_uses_is_not_served() -> None:
    with FakeServer() as server:
        server.script(BASE, Stream(events=2))
        reply = httpx.get(server.url + BASE + "/other", trust_env=False)
    assert reply.status_code == 404


def test_a_chunk_matches_the_sent_event_by_json_value() -> None:
    sent = '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" a"}}'
    dumped = json.dumps(json.loads(sent), sort_keys=True)
    assert same_data(dumped, sent)
    assert not same_data(dumped.replace(" a", " b"), sent)
    assert same_data("plain", "plain")  # text that is not JSON compares as text
    assert not same_data("plain", "plain ")
    assert not same_data("{not json", "{not json either")


def test_a_default_format_answers_plain_paths_as_that_provider() -> None:
    with FakeServer(wire_format="anthropic") as server:
        server.script(BASE, Stream(events=2))
        reply = httpx.get(server.url + BASE, trust_env=False)
        kinds = [e.kind for e in server.ledger.attempts()[-1].events]
    assert "event: message_start" in reply.text
    # the format's own events are kept (kind frame), so a client handing them over
    # is not counted as delivering extra chunks
    assert kinds == ["frame", "frame", "frame", "data", "data", "frame", "frame", "terminal"]


def test_an_unknown_default_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown wire format 'xml'"):
        FakeServer(wire_format="xml")


@pytest.mark.parametrize("wire_format", ["anthropic", "responses", "gemini"])
def test_the_reference_passes_in_each_provider_format(wire_format: str) -> None:
    from conformance import run_suite
    from pytest_streamcheck.targets._reference import ReferenceAdapter

    ids = ["SC-RETRY-13", "SC-RETRY-39", "SC-COMMIT-3", "SC-POST-1", "SC-STALL-1"]
    results = run_suite(ReferenceAdapter, select=ids, wire_format=wire_format)
    assert {r.case.id: r.verdict.value for r in results} == dict.fromkeys(ids, "PASS")


def test_the_format_option_is_checked(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--streamcheck=reference", "--streamcheck-format=xml"
    )
    result.stderr.fnmatch_lines(["*--streamcheck-format: 'xml' is not valid; valid: auto*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
