"""Code in the docs runs: the profile file in adapters.md, the script in fake-servers.md."""

from __future__ import annotations

import re
from pathlib import Path

from conformance import load_profile

DOCS = Path(__file__).resolve().parents[1] / "docs"


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
