"""The shipped Node adapters (issue 9): each target loads by name, says who it is, and
is judged on a few cases as the real library behaves (docs/clients-node.md).

Needs Node and ``python -m pytest_streamcheck.clients.node install``; skipped without.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from conformance import Verdict, run_suite
from fake_servers._noise import Source
from pytest_streamcheck.clients import node
from pytest_streamcheck.targets import TargetError, load_target
from pytest_streamcheck.targets._exec import ExecAdapter

try:
    INSTALLED = node.ready_dir()
    MISSING = ""
except TargetError as exc:
    MISSING = str(exc)

pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"Node adapters unavailable: {MISSING}")

PASS, FAIL, UNSUPPORTED = Verdict.PASS, Verdict.FAIL, Verdict.UNSUPPORTED

# What each library really does on a few chosen cases (the full runs: docs/clients-node.md).
# Chosen to be quick as well as telling: a library's retries run at its real delays
# (EventSource's 3 s reconnection time made SC-COMMIT-1 alone take 9 s), and a PASS for
# a status not retried waits out a window with no retry in it (SC-RETRY-1: 6.6 s for
# eventsource; fetch-event-source's retried 400, SC-RETRY-2: 4.8 s). The whole catalog
# runs for each library in CI (.ci/clients, the compatibility matrix).
EXPECTED: dict[str, dict[str, Verdict]] = {
    "node-openai": {
        "SC-RETRY-2": PASS,  # a 400 is not retried and reaches the app with its status
        "SC-RETRY-12": PASS,  # a 429 is retried (0.5 s, then 1 s) until the stream comes
        "SC-COMMIT-12": FAIL,  # a clean end without [DONE] ends the iteration as if complete
        "SC-RETRY-1": UNSUPPORTED,  # the SDK makes no GET stream
    },
    "node-anthropic": {
        "SC-RETRY-2": PASS,
        "SC-RETRY-14": PASS,  # a 503 is retried until the stream comes
        "SC-COMMIT-12": FAIL,  # a body that ends without message_stop is accepted
    },
    "fetch-event-source": {
        "SC-SSE-3": PASS,  # each event type reaches the app
        "SC-SSE-5": PASS,  # a leading BOM is stripped, also when its bytes arrive apart
        "SC-SSE-9": FAIL,  # a comment-only block reaches onmessage as an empty message
        "SC-RETRY-24": PASS,  # a reset before the headers is retried (a fresh pool a case)
    },
    "eventsource": {
        "SC-SSE-3": PASS,  # each event type reaches the app
        "SC-RETRY-11": FAIL,  # a 429 fails the connection for good: WHATWG retries no status
        "SC-SSE-11": PASS,  # a character cut between reads is delivered intact
        "SC-RETRY-2": UNSUPPORTED,  # EventSource sends no POST
    },
}


def _installed_version(package: str) -> str:
    manifest = INSTALLED / "node_modules" / package / "package.json"
    return str(json.loads(manifest.read_text())["version"])


@pytest.mark.parametrize("target", sorted(node.ADAPTERS))
def test_each_target_loads_by_name_and_says_who_it_is(target: str) -> None:
    spec = node.ADAPTERS[target]
    adapter = load_target(target)()
    assert isinstance(adapter, ExecAdapter)

    async def handshake() -> None:
        try:
            await adapter.start()
            info = adapter.info
            assert info.name == spec.name
            assert info.profile == spec.profile
            assert info.version == _installed_version(spec.package)
            assert info.capabilities == node.known_capabilities(spec)
            assert info.wire_format == spec.wire_format
            assert "configurable" not in info.capabilities
        finally:
            await adapter.aclose()

    asyncio.run(handshake())


def test_the_pinned_versions() -> None:
    assert _installed_version("@microsoft/fetch-event-source") == "2.0.1"
    assert _installed_version("eventsource").startswith("4.1.")


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_judged_as_the_library_behaves(target: str) -> None:
    expected = EXPECTED[target]
    results = run_suite(load_target(target), select=list(expected), lanes=2)
    got = {r.case.id: r.verdict for r in results}
    if got != expected:
        # A timing verdict can move under load; a behaviour verdict cannot: say which.
        detail = {
            r.case.id: f"{r.verdict.value}: {r.reason or (r.outcome.observed if r.outcome else '')}"
            for r in results
            if r.verdict != expected[r.case.id]
        }
        pytest.fail(f"{target}: {detail}")


def test_the_node_process_lag_is_in_every_case_noise() -> None:
    """The adapters' process probes its own loop (exec "lag"): a judged case's noise has
    a ``process`` series beside the kit's loops, so fifty users in one Node loop that
    runs late are the harness's noise, not the library's delay."""
    (result,) = run_suite(load_target("node-openai"), select=["SC-RETRY-12"])
    assert result.evidence is not None
    summary = result.evidence.noise.summary()
    assert summary[Source.PROCESS]["samples"] > 10, summary
    assert {"server", "proxy", "client", Source.PROCESS} <= set(summary)


def test_without_the_install_the_target_says_what_to_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv(node.ENV_DIR, str(tmp_path))
    with pytest.raises(TargetError, match=r"pytest_streamcheck\.clients\.node install"):
        load_target("node-openai")()
