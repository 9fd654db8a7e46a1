"""The ``serve`` command, run as a real subprocess on 127.0.0.1."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from fake_servers._cli import _is_loopback

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "scenarios"
# Generous: the subprocess imports hypercorn and starlette on a shared 2-core machine.
STARTUP_TIMEOUT = 60.0
EXIT_TIMEOUT = 30.0


class Served:
    """A running ``serve`` subprocess and the lines it printed on stdout."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def line(self) -> str:
        """The next stdout line; fails the test if none comes in time."""
        try:
            line = self._lines.get(timeout=STARTUP_TIMEOUT)
        except queue.Empty:
            pytest.fail(f"no stdout line within {STARTUP_TIMEOUT}s")
        if line is None:
            stderr = self.process.stderr.read() if self.process.stderr else ""
            pytest.fail(f"serve exited early: {stderr}")
        return line

    def stop(self, signum: int = signal.SIGINT) -> tuple[int, str]:
        """Send ``signum``; return the exit status and everything on stderr."""
        self.process.send_signal(signum)
        _, stderr = self.process.communicate(timeout=EXIT_TIMEOUT)
        self._reader.join(EXIT_TIMEOUT)
        return self.process.returncode, stderr


@contextmanager
def serving(*args: str) -> Iterator[Served]:
    command = [sys.executable, "-m", "fake_servers", "serve", *args]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            yield Served(process)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate(timeout=EXIT_TIMEOUT)


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=EXIT_TIMEOUT)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_plays_the_file_and_writes_the_ledger(tmp_path: Path, signum: int) -> None:
    """serve prints its URL, plays the scenario, stops on a signal with 0 and writes the ledger."""
    ledger = tmp_path / "ledger.json"
    scenario = EXAMPLES / "rate-limited-then-ok.toml"
    with serving("--scenario", str(scenario), "--ledger-json", str(ledger)) as served:
        url = served.line()
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=url, timeout=EXIT_TIMEOUT) as client:
            first = client.post("/v1/chat/completions", json={"stream": True})
            assert (first.status_code, first.headers["retry-after"]) == (429, "1")
        code, stderr = served.stop(signum)
    assert code == 0, stderr
    attempts = json.loads(ledger.read_text())["attempts"]
    assert [(a["method"], a["path"], a["status"], a["step"]) for a in attempts] == [
        ("POST", "/v1/chat/completions", 429, 0)
    ]


@pytest.mark.slow
def test_serve_with_a_proxy(tmp_path: Path) -> None:
    """--proxy prints a second line with a proxy URL that forwards to the server."""
    ledger = tmp_path / "ledger.json"
    args = ("--scenario", str(EXAMPLES / "stall.json"), "--proxy", "--ledger-json", str(ledger))
    with serving(*args) as served:
        url = served.line()
        label, proxy_url = served.line().split(" ", 1)
        assert label == "proxy:"
        assert proxy_url.startswith("http://127.0.0.1:")
        assert proxy_url != url
        with httpx.Client(base_url=proxy_url, timeout=EXIT_TIMEOUT) as client:
            # The stall.json example stalls its first attempt; the second streams to the end.
            with client.stream("GET", "/v1/stream") as first:
                assert first.status_code == 200
            second = client.get("/v1/stream")
            assert second.status_code == 200
            assert second.text.rstrip().endswith("data: [DONE]")
        code, stderr = served.stop()
    assert code == 0, stderr
    record = json.loads(ledger.read_text())
    assert [a["path"] for a in record["attempts"]] == ["/v1/stream", "/v1/stream"]
    assert record["connections"], "the proxy's connections share the server's ledger"


def test_a_broken_scenario_exits_2_with_the_error(tmp_path: Path) -> None:
    """An invalid scenario file exits 2 and prints the ScenarioError on stderr."""
    broken = tmp_path / "broken.toml"
    broken.write_text(
        '[[endpoint]]\npath = "/a"\n[[endpoint.step]]\nkind = "stream"\ngap = "fast"\n'
    )
    result = run(sys.executable, "-m", "fake_servers", "serve", "--scenario", str(broken))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"fake-servers: {broken}: endpoint[0].step[0].gap: "
        'expected a number >= 0 or a table, got "fast"\n'
    )


def test_the_console_script_does_the_same(tmp_path: Path) -> None:
    """The installed fake-servers script runs the same command line."""
    script = Path(sys.executable).parent / "fake-servers"
    if not script.exists():
        pytest.skip("the fake-servers console script is not installed in this environment")
    result = run(str(script), "serve", "--scenario", str(tmp_path / "missing.json"))
    assert result.returncode == 2
    assert "missing.json: cannot read the file" in result.stderr


def test_a_non_loopback_host_is_warned_about() -> None:
    """A host other machines can reach gets a warning (here the bind then fails: exit 1)."""
    # 192.0.2.1 (TEST-NET-1) is on no interface, so nothing is ever exposed.
    scenario = str(EXAMPLES / "stall.json")
    result = run(
        sys.executable, "-m", "fake_servers", "serve", "--scenario", scenario, "--host", "192.0.2.1"
    )
    assert result.returncode == 1
    assert "warning: serving on 192.0.2.1, which other machines can reach" in result.stderr
    assert "cannot serve on 192.0.2.1:0" in result.stderr


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("example.com", False)],
)  # fmt: skip
def test_loopback_hosts(host: str, loopback: bool) -> None:
    """Only loopback addresses and localhost count as private to this machine."""
    assert _is_loopback(host) is loopback


@pytest.mark.slow
def test_an_unwritable_ledger_path_exits_1(tmp_path: Path) -> None:
    """A ledger file that cannot be written is reported on stderr, with exit status 1."""
    ledger = tmp_path / "no-such-dir" / "ledger.json"
    with serving(
        "--scenario", str(EXAMPLES / "stall.json"), "--ledger-json", str(ledger)
    ) as served:
        served.line()
        code, stderr = served.stop()
    assert code == 1
    assert "fake-servers: cannot write the ledger: " in stderr
