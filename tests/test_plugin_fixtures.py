"""The plugin in a user's ordinary run: it stays out of the way without --streamcheck,
and its ``fake_server`` and ``fault_proxy`` fixtures work in the user's tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from plugin_targets._pytester import PLAIN, prepare

README = Path(__file__).parents[1] / "README.md"


@pytest.fixture(autouse=True)
def _isolated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    prepare(pytester, monkeypatch)


def _readme_example() -> str:
    """The Python example under "Fake servers in your own tests", verbatim."""
    section = README.read_text(encoding="utf-8").split("## Fake servers in your own tests", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "README.md lost its fixture example"
    return match.group(1)


def test_a_plain_run_starts_and_imports_nothing_of_the_kit(pytester: pytest.Pytester) -> None:
    """Without --streamcheck a plain test runs as usual: no header, no summary, no kit
    modules imported, no server threads (a subprocess, so nothing else is loaded)."""
    pytester.makepyfile(
        test_plain="""
        import sys
        import threading

        KIT = ("fake_servers", "conformance", "hypercorn", "starlette")

        def test_plain():
            assert threading.active_count() == 1, threading.enumerate()
            assert [m for m in sys.modules if m.split(".")[0] in KIT] == []

        def test_failing_as_usual():
            assert 1 == 2
        """
    )
    result = pytester.runpytest_subprocess(*PLAIN)
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert not [line for line in result.outlines if line.startswith("streamcheck:")]
    assert "= streamcheck =" not in out
    assert "reproduce with" not in out
    result.stdout.fnmatch_lines(["*assert 1 == 2"])


def test_a_user_item_with_a_result_attribute_is_left_alone(pytester: pytest.Pytester) -> None:
    """The report hook touches only the suite's items, with or without --streamcheck."""
    pytester.makeconftest(
        """
        import pytest

        class Item(pytest.Item):
            def __init__(self, **kw):
                super().__init__(**kw)
                self.result = "the user's own attribute"

            def runtest(self):
                pass

        class File(pytest.File):
            def collect(self):
                yield Item.from_parent(self, name="custom")

        def pytest_collect_file(parent, file_path):
            if file_path.suffix == ".custom":
                return File.from_parent(parent, path=file_path)
        """
    )
    pytester.makefile(".custom", mine="")
    pytester.runpytest(*PLAIN).assert_outcomes(passed=1)
    suite = pytester.runpytest(*PLAIN, "--streamcheck=reference", "-k", "custom", "mine.custom")
    suite.assert_outcomes(passed=1)


def test_fake_server_and_fault_proxy_work_in_a_users_tests(pytester: pytest.Pytester) -> None:
    """A user scripts the fixture server, streams it with httpx, reads the ledger, and
    makes a request fail with the proxy's offline(); each test starts from a reset server."""
    pytester.makepyfile(
        test_user="""
        import httpx
        import pytest
        from fake_servers import respond, stream

        def test_stream_and_ledger(fake_server):
            fake_server.script("/v1/chat", stream(events=3))
            with httpx.Client() as client:
                with client.stream("GET", fake_server.url + "/v1/chat") as r:
                    assert r.headers["content-type"].startswith("text/event-stream")
                    body = r.read().decode()
            assert body.count("data: ") == 4
            (attempt,) = fake_server.ledger.attempts()
            assert (attempt.status, attempt.method, attempt.path) == (200, "GET", "/v1/chat")
            assert len(attempt.data_events) == 3

        def test_each_test_gets_a_reset_server(fake_server):
            assert fake_server.ledger.attempts() == ()
            with httpx.Client() as client:
                assert client.get(fake_server.url + "/v1/chat").status_code == 404

        def test_offline_proxy_fails_a_request(fake_server, fault_proxy):
            fake_server.script("/v1/chat", respond(200, body="hi"))
            with httpx.Client() as client:
                fault_proxy.offline()
                with pytest.raises(httpx.ConnectError):
                    client.get(fault_proxy.url + "/v1/chat")
                fault_proxy.online()
                assert client.get(fault_proxy.url + "/v1/chat").text == "hi"
            assert len(fake_server.ledger.attempts()) == 1
            assert len(fault_proxy.connections()) >= 1
        """
    )
    result = pytester.runpytest(*PLAIN)
    result.assert_outcomes(passed=3)


def test_a_conftest_configures_the_fixture_server(pytester: pytest.Pytester) -> None:
    """Overriding fake_server_options configures the session's server, for fake_server
    and llm_server alike; a keyword FakeServer does not take is named with the fixture."""
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def fake_server_options():
            return {"max_body_bytes": 100}
        """
    )
    pytester.makepyfile(
        test_user="""
        import httpx
        from fake_servers import stream

        def test_fake_server(fake_server):
            fake_server.script("/v1/chat", stream(events=1))
            response = httpx.post(fake_server.url + "/v1/chat", json={"prompt": "x" * 200})
            assert response.status_code == 413
            assert response.json()["error"]["limit"] == 100

        def test_llm_server(llm_server):
            llm_server.openai.script(stream(events=1))
            response = httpx.post(llm_server.openai.url, json={"prompt": "x" * 200})
            assert response.status_code == 413
        """
    )
    pytester.runpytest(*PLAIN).assert_outcomes(passed=2)
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def fake_server_options():
            return {"max_body_byte": 100}
        """
    )
    result = pytester.runpytest(*PLAIN, "-k", "test_fake_server")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*TypeError: fake_server_options: *max_body_byte*"])


def test_the_readme_fixture_example_passes_verbatim(pytester: pytest.Pytester) -> None:
    """The README's downstream example, copied from README.md at test time, passes."""
    pytester.makepyfile(test_readme=_readme_example())
    pytester.runpytest(*PLAIN).assert_outcomes(passed=1)
