"""The ``llm_server`` fixture: the environment it sets and restores, the reset between
tests, the network it breaks, and the ``--streamcheck-verdicts`` report."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import httpx
import pytest
from plugin_targets._pytester import PLAIN, only, prepare

from fake_servers import Respond, Stall, Stream, error_after, fixed, now, reply
from pytest_streamcheck._llm import DUMMY_KEY, provider_environment


def test_the_sdks_are_pointed_at_the_proxy_with_dummy_keys(llm_server: Any) -> None:
    """Base URLs lead to the fault proxy; keys are dummies; bearer tokens are gone."""
    import anthropic
    import openai

    assert os.environ["OPENAI_BASE_URL"] == llm_server.url + "/v1"
    assert os.environ["ANTHROPIC_BASE_URL"] == llm_server.url
    assert os.environ["GOOGLE_GEMINI_BASE_URL"] == llm_server.url
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        assert os.environ[name] == DUMMY_KEY
    assert "ANTHROPIC_AUTH_TOKEN" not in os.environ
    assert "127.0.0.1" in os.environ["NO_PROXY"].split(",")
    with openai.OpenAI() as oa, anthropic.Anthropic() as an:
        assert str(oa.base_url).rstrip("/") == llm_server.url + "/v1"
        assert str(an.base_url).rstrip("/") == llm_server.url


def test_no_proxy_keeps_what_was_there() -> None:
    """Local hosts are added to NO_PROXY, after the user's own entries, once."""
    env = provider_environment("http://127.0.0.1:1", {"NO_PROXY": "corp.example,localhost"})
    assert env["NO_PROXY"] == "corp.example,localhost,127.0.0.1,::1"


def test_an_sdk_reaches_the_scripted_endpoint_through_the_proxy(llm_server: Any) -> None:
    """The openai SDK, configured by nothing but the environment, streams the answer."""
    import openai

    llm_server.openai.script(Stream(events=3))
    with openai.OpenAI(max_retries=0) as client:
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with stream:
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text
    assert [a.path for a in llm_server.ledger.attempts()] == ["/v1/chat/completions"]
    assert len(llm_server.ledger.connections()) == 1  # through the proxy
    llm_server.verdict(app_output=text).assert_ok(strict=True)


def test_the_responses_endpoint_streams_to_the_sdk(llm_server: Any) -> None:
    """llm_server.responses speaks the Responses API's typed events to the openai SDK."""
    import openai

    llm_server.responses.script(reply(chunks=4))
    with (
        openai.OpenAI() as client,
        client.responses.create(model="m", input="hi", stream=True) as stream,
    ):
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    assert text
    llm_server.verdict(app_output=text).assert_ok(strict=True)


@pytest.mark.parametrize("swallow", [False, True])
def test_an_in_band_error_is_judged_by_what_the_app_did(llm_server: Any, swallow: bool) -> None:
    """Anthropic's mid-stream error event: raised to the caller is clean; swallowed is not."""
    import anthropic

    llm_server.anthropic.script(error_after(2))
    text, error = "", None
    try:
        with (
            anthropic.Anthropic() as client,
            client.messages.stream(
                model="claude-sonnet-5-5",
                max_tokens=64,
                messages=[{"role": "user", "content": "x"}],
            ) as stream,
        ):
            for piece in stream.text_stream:
                text += piece
    except anthropic.APIStatusError as raised:
        error = None if swallow else raised
    verdict = llm_server.verdict(app_output=text, error=error)
    assert verdict.rules() == (("V-MIDSTREAM-SWALLOWED",) if swallow else ())


def test_provider_endpoints_know_their_paths(llm_server: Any) -> None:
    """Each endpoint scripts its path; Gemini's covers any model and both methods."""
    assert llm_server.anthropic.url == llm_server.url + "/v1/messages"
    llm_server.gemini.script(Respond(status=404))
    with httpx.Client() as http:
        for path in (
            "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
            "/v1beta/models/gemini-y:generateContent",
        ):
            assert http.post(llm_server.url + path, json={}).status_code == 404
    notes = [a.note for a in llm_server.ledger.attempts()]
    assert not any("no scripted endpoint" in n for n in notes)


def test_offline_refuses_and_cuts_then_online_restores(llm_server: Any) -> None:
    """offline() cuts an open stream and refuses connects; online() serves again."""
    llm_server.openai.script(Stream(events=4, stall=Stall(after=1, seconds=None)))
    with httpx.Client(timeout=5.0) as http:
        with http.stream("POST", llm_server.openai.url, json={}) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")
            llm_server.offline()
            with pytest.raises(httpx.TransportError):
                list(lines)
        llm_server.ledger.wait_finished(5.0)
        with pytest.raises(httpx.ConnectError):
            http.post(llm_server.openai.url, json={})
        llm_server.online()
        llm_server.openai.script(Respond(status=204))
        assert http.post(llm_server.openai.url, json={}).status_code == 204


def test_offline_for_a_while_comes_back_by_itself(llm_server: Any) -> None:
    """offline(seconds) refuses connections for that long, then the proxy listens again."""
    llm_server.openai.script(Respond(status=204))
    started = now()
    llm_server.offline(0.3)
    with httpx.Client(timeout=5.0) as http:
        with pytest.raises(httpx.ConnectError):
            http.post(llm_server.openai.url, json={})
        deadline = started + 5.0
        while True:  # a client's reconnect loop, bounded by a deadline
            try:
                assert http.post(llm_server.openai.url, json={}).status_code == 204
                break
            except httpx.ConnectError:
                assert now() < deadline, "the proxy did not come back online"
                threading.Event().wait(0.02)
    assert now() - started >= 0.3


def test_the_verdict_waits_for_the_close_after_the_app_stopped_reading(llm_server: Any) -> None:
    """A client that closes promptly is clean (the close may precede the mark by a
    moment); the wait ends as soon as it has closed."""
    llm_server.openai.script(Stream(events=200, gap=fixed(0.02)))  # 4 s of stream
    with httpx.Client(timeout=5.0) as http:
        with http.stream("POST", llm_server.openai.url, json={}) as response:
            next(response.iter_lines())
        llm_server.app_stopped_reading()  # as an app's code says it: after the break
    before = now()
    verdict = llm_server.verdict(app_output="partial")
    assert now() - before < 0.5
    verdict.assert_ok(strict=True)
    assert llm_server.verdicts == [verdict]


# -- through pytester: the environment restored, the reset, the verdicts option ----------------


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    prepare(pytester, monkeypatch)
    return pytester


ENV_TESTS = """
import os

BEFORE = {k: os.environ.get(k) for k in
          ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN", "NO_PROXY")}

def test_1_uses_the_fixture(llm_server):
    llm_server.openai.script(llm_server_steps())
    assert os.environ["OPENAI_API_KEY"] != "outer-key"

def llm_server_steps():
    from fake_servers import Respond
    return Respond(status=503)

def test_2_sees_the_environment_restored():
    after = {k: os.environ.get(k) for k in BEFORE}
    assert after == BEFORE == {"OPENAI_BASE_URL": None, "OPENAI_API_KEY": "outer-key",
                               "ANTHROPIC_AUTH_TOKEN": "outer-token", "NO_PROXY": None}

def test_3_gets_a_reset_server(llm_server):
    assert llm_server.ledger.attempts() == ()
    assert llm_server.server.scenario.endpoints == ()
"""


def test_the_environment_is_restored_and_the_server_reset(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a test with the fixture, the variables are as before; the next test starts empty."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "outer-key")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "outer-token")
    inner.makepyfile(test_env=ENV_TESTS)
    inner.runpytest(*PLAIN, "-p", "no:randomly").assert_outcomes(passed=3)


APP_TESTS = """
import httpx

from fake_servers import Respond, Stream

def ask(url):
    with httpx.Client() as http:
        for _ in range(2):  # retries anything: a 401 too
            response = http.post(url, json={"q": "hi"})
            if response.status_code < 400:
                return response.text

def test_retries_a_401(llm_server):
    llm_server.openai.script(Respond(status=401), Respond(status=200, body=b"{}"))
    ask(llm_server.openai.url)  # no verdict taken: the teardown takes one

def test_surfaces_a_truncation(llm_server):
    llm_server.openai.script(Stream(events=2, end="truncate"))
    llm_server.verdict(error="truncated")  # the test's own verdict is the one kept

def test_plain():
    pass
"""


def test_the_verdicts_option_prints_and_reports_mishandled_faults(inner: pytest.Pytester) -> None:
    """Only the test whose client mishandled a fault is listed, and written to the report."""
    inner.makepyfile(test_app=APP_TESTS)
    report = inner.path / "out" / "report.json"
    result = inner.runpytest(*PLAIN, "--streamcheck-verdicts", f"--streamcheck-report={report}")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*= streamcheck verdicts =*",
            "test_app.py::test_retries_a_401",
            "*MUST V-RETRY-NON-RETRYABLE*",
            "1 test(s) whose client mishandled a fault (1 with a MUST finding)",
        ]
    )
    assert "test_surfaces_a_truncation" not in result.stdout.str().split("streamcheck verdicts")[1]
    data = json.loads(report.read_text())
    assert data["schema"] == "streamcheck-report/1"
    assert [row["test"] for row in data["verdicts"]] == ["test_app.py::test_retries_a_401"]
    assert data["verdicts"][0]["findings"][0]["rule"] == "V-RETRY-NON-RETRYABLE"


def test_without_the_option_nothing_is_printed_or_written(inner: pytest.Pytester) -> None:
    """The fixture alone judges nothing behind the test's back."""
    inner.makepyfile(test_app=APP_TESTS)
    result = inner.runpytest(*PLAIN, "--streamcheck-report=report.json")
    result.assert_outcomes(passed=3)
    assert "streamcheck verdicts" not in result.stdout.str()
    assert not (inner.path / "report.json").exists()


def test_a_streamcheck_run_report_carries_the_verdicts_too(inner: pytest.Pytester) -> None:
    """With --streamcheck, the suite's report gains a "verdicts" list."""
    inner.makepyfile(test_app=APP_TESTS)
    case = "SC-RETRY-1"
    result = inner.runpytest(
        *PLAIN,
        "test_app.py",
        "--streamcheck=reference",
        "--streamcheck-profile=seed-eventsource",
        "-k",
        f"({only(case)}) or test_retries_a_401",
        "--streamcheck-verdicts",
        "--streamcheck-report=report.json",
    )
    result.assert_outcomes(passed=2)
    data = json.loads((inner.path / "report.json").read_text())
    assert [c["id"] for c in data["cases"]] == [case]
    assert [row["test"] for row in data["verdicts"]] == ["test_app.py::test_retries_a_401"]
