"""Code in the docs runs: the profile file in adapters.md, the script in fake-servers.md,
the reference client's example in the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance import load_profile
from fake_servers import FakeServer, respond, stream

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README_CLIENT = "## The reference client in your application"
README_URL = "https://llm.example/v1/stream"


def _block(doc: str, language: str) -> str:
    match = re.search(rf"```{language}\n(.*?)```", (DOCS / doc).read_text(encoding="utf-8"), re.S)
    assert match, f"no {language} block in {doc}"
    return match.group(1)


def test_the_profile_file_example_loads(tmp_path: Path) -> None:
    """The TOML profile in adapters.md is a valid profile with the numbers it shows."""
    path = tmp_path / "acme.toml"
    path.write_text(_block("adapters.md", "toml"), encoding="utf-8")
    profile = load_profile(path)
    assert profile.key == "acme-streaming@1"
    assert profile.policy.max_attempts == 6
    assert profile.policy.backoff.family == "full"
    assert profile.policy.breaker.threshold == 3


def test_the_fake_servers_script_example_runs() -> None:
    """The script in fake-servers.md builds and loads into a running server."""
    code = _block("fake-servers.md", "python")
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/fake-servers.md", "exec"), namespace)


def _readme_client_example(url: str) -> str:
    """The README's reference-client example, sending to ``url``."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split(README_CLIENT)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "no python block in the README's reference-client section"
    code = match.group(1)
    assert README_URL in code
    return code.replace(README_URL, url)


def test_the_readme_client_example_retries_and_prints_the_answer(
    fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's client example survives a 503 and prints every data event."""
    fake_server.script("/v1/stream", respond(503), stream(events=3))
    code = _readme_client_example(fake_server.url + "/v1/stream")
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    second = fake_server.ledger.attempts("/v1/stream")[1]
    printed = capsys.readouterr().out.splitlines()
    assert printed == [ev.data for ev in second.data_events if ev.data != "[DONE]"]
    assert second.method == "POST"


def test_the_readme_client_example_reports_a_stream_error(
    fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A status the client never retries reaches the example's ``except StreamError``."""
    fake_server.script("/v1/stream", respond(401))
    exec(compile(_readme_client_example(fake_server.url + "/v1/stream"), "README.md", "exec"), {})
    assert capsys.readouterr().out.startswith("the answer broke off: HTTP 401")
    assert len(fake_server.ledger.attempts("/v1/stream")) == 1
