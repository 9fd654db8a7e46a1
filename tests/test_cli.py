"""The ``serve`` command, run as a real subprocess on 127.0.0.1."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from fake_servers import FakeServer, FaultProxy
from fake_servers._cli import _is_loopback, describe

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


# -- no arguments: the built-in scenario ----------------------------------------------------


def _sse_data(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


@pytest.mark.slow
def test_serve_with_no_arguments_plays_a_scenario_a_newcomer_can_hit() -> None:
    """`serve` alone: a base URL whose endpoints stream SSE to plain httpx and curl.

    stderr lists every endpoint with its URL; the failure paths fail as named.
    """
    with serving() as served:
        url = served.line()
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=url, timeout=EXIT_TIMEOUT) as client:
            with client.stream("GET", "/v1/stream") as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                got = _sse_data(response.read().decode())
            assert (len(got), got[-1]) == (21, "[DONE]")
            posted = client.post("/v1/chat/completions", json={"stream": True})
            assert posted.headers["content-type"].startswith("text/event-stream")
            assert _sse_data(posted.text)[-1] == "[DONE]"
            unavailable = client.get("/fail/503")
            assert (unavailable.status_code, unavailable.headers["retry-after"]) == (503, "1")
            assert client.get("/fail/503").status_code == 200  # the retry gets through
            assert client.get("/fail/401").status_code == 401
            with pytest.raises(httpx.RemoteProtocolError):
                client.get("/fail/drop")
            truncated = _sse_data(client.get("/fail/truncate").text)
            assert len(truncated) == 3  # and no [DONE]
        curl = shutil.which("curl")
        if curl is not None:
            result = run(curl, "-sN", "--max-time", "20", f"{url}/v1/stream")
            assert _sse_data(result.stdout)[-1] == "[DONE]", result.stderr
        code, stderr = served.stop()
    assert code == 0, stderr
    for path in ("/v1/stream", "/v1/chat/completions", "/fail/503", "/fail/401", "/fail/drop",
                 "/fail/stall", "/fail/truncate"):  # fmt: skip
        assert f"{url}{path}" in stderr
    assert f"curl -N {url}/v1/stream" in stderr


def test_the_built_in_scenario_has_the_named_failures() -> None:
    """A 503 with Retry-After, a 401, a drop, a stall and a truncation, beside GET and POST."""
    from fake_servers._default import DEFAULT_SCENARIO

    by_path = {e.path: e for e in DEFAULT_SCENARIO.endpoints}
    assert (by_path["/v1/stream"].method, by_path["/v1/chat/completions"].method) == (
        "GET",
        "POST",
    )
    assert (
        describe(by_path["/fail/503"]) == "503 (Retry-After: 1) -> a stream of 10 events (in turn)"
    )
    assert describe(by_path["/fail/401"]) == "401"
    assert describe(by_path["/fail/drop"]).startswith("3 events, then the connection drops")
    assert describe(by_path["/fail/stall"]).startswith("2 events, then silent until the client")
    assert describe(by_path["/fail/truncate"]).startswith("3 events, then a clean end without")


def test_describe_a_raw_step() -> None:
    """A raw step is its size and writes, and how it ends."""
    from fake_servers import endpoint, raw

    assert describe(endpoint("/r", raw(["ab", "c"], end="abort"), raw(["d"]))) == (
        "3 raw bytes in 2 write(s), then the connection drops -> 1 raw bytes in 1 write(s)"
    )


# -- bad arguments are usage errors (exit 2), never tracebacks -------------------------------

PORT_ERROR = "argument --port: expected a port 0..65535 (0: a free one)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--port", "70000"), f"{PORT_ERROR}, got '70000'"),
        (("--port", "-1"), f"{PORT_ERROR}, got '-1'"),
        (("--port", "http"), f"{PORT_ERROR}, got 'http'"),
        (("--host", ""), "argument --host: expected an address, e.g. 127.0.0.1, ::1, or 0.0.0.0"),
        (("--host", "", "--proxy"), "argument --host: expected an address"),
    ],
    ids=["port-70000", "port-minus-1", "port-word", "empty-host", "empty-host-proxy"],
)  # fmt: skip
def test_bad_arguments_exit_2_with_a_usage_error(args: tuple[str, ...], message: str) -> None:
    """Out-of-range ports and an empty host are argparse errors, not OverflowError/ValueError."""
    result = run(sys.executable, "-m", "fake_servers", "serve", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_deeply_nested_scenario_exits_2(tmp_path: Path) -> None:
    """A scenario nested past the limit is a ScenarioError (exit 2), not a RecursionError (1)."""
    deep = tmp_path / "deep.json"
    deep.write_text('{"endpoint": ' + "[" * 100_000 + "]" * 100_000 + "}")
    result = run(sys.executable, "-m", "fake_servers", "serve", "--scenario", str(deep))
    assert result.returncode == 2
    assert result.stderr == f"fake-servers: {deep}: not valid JSON: nested deeper than 64 levels\n"


@pytest.mark.slow
def test_an_ipv6_host_prints_urls_in_brackets() -> None:
    """--host ::1 --proxy: both URLs put the address in brackets, and both work."""
    with serving("--host", "::1", "--proxy") as served:
        url = served.line()
        label, proxy_url = served.line().split(" ", 1)
        assert url.startswith("http://[::1]:")
        assert (label, proxy_url[: len("http://[::1]:")]) == ("proxy:", "http://[::1]:")
        for base in (url, proxy_url):
            with httpx.Client(base_url=base, timeout=EXIT_TIMEOUT) as client:
                assert _sse_data(client.get("/v1/stream").text)[-1] == "[DONE]"
        code, stderr = served.stop()
    assert code == 0, stderr


def test_urls_of_any_ipv6_address_use_brackets() -> None:
    """`::` (every interface) too: http://[::]:PORT, for the server and for the proxy."""
    assert FakeServer(host="::", port=8123).url == "http://[::]:8123"
    assert FaultProxy("http://[::1]:1", host="::", port=8124).url == "http://[::]:8124"
    assert FaultProxy("http://127.0.0.1:1", port=8125).url == "http://127.0.0.1:8125"
