"""The ``serve`` command: play a scenario file on a real socket until stopped.

``python -m fake_servers serve [--scenario FILE]`` (or ``fake-servers serve ...``)
prints the server's base URL as the first stdout line, and with ``--proxy`` a
``proxy: URL`` line for a fault proxy in front of it, so a script can read them
and point a client of any language at the server; stderr lists every endpoint
with its URL. Without ``--scenario`` it plays a built-in scenario (``_default``):
healthy GET and POST streams and one endpoint per common failure. SIGINT or
SIGTERM stops it cleanly (exit 0); ``--ledger-json`` then writes what every
attempt got. Bad arguments and a broken scenario file exit 2.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TextIO

from fake_servers._builders import ScenarioError
from fake_servers._files import FileRefused, check_output_path, shown_path
from fake_servers._loader import load_scenario
from fake_servers._script import Endpoint, Raw, Respond, Scenario, Step

__all__ = ["main"]

EXIT_OK = 0
EXIT_CANNOT_SERVE = 1
EXIT_CANNOT_WRITE = 1
EXIT_BAD_SCENARIO = 2  # argparse uses 2 for bad arguments too
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# How often the main thread looks up from waiting: a signal delivered to another
# thread only sets a flag, which the main thread sees when it next wakes.
_POLL_SECONDS = 0.2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        played = _scenario(args.scenario)
    except ScenarioError as error:
        print(f"fake-servers: {error}", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    if not _is_loopback(args.host):
        print(
            f"fake-servers: warning: serving on {args.host}, which other machines can reach; "
            "the fake server has no authentication",
            file=sys.stderr,
        )
    return _serve(played, args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fake-servers", description="Fake streaming servers with scripted failures."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve a scenario file until Ctrl-C / SIGTERM",
        description="Serve a scenario file; the first stdout line is the base URL.",
    )
    serve.add_argument(
        "--scenario",
        type=Path,
        metavar="FILE",
        help="a .toml or .json scenario (default: a built-in one of healthy and failing paths)",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", type=_host, help="interface (default 127.0.0.1)"
    )
    serve.add_argument("--port", default=0, type=_port, help="port (default 0: a free one)")
    serve.add_argument("--ledger-json", type=_output, help="write the ledger here as JSON on exit")
    serve.add_argument(
        "--proxy", action="store_true", help="also start a fault proxy; prints 'proxy: URL'"
    )
    return parser


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535 (0: a free one), got {text!r}")
    return port


def _host(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "expected an address, e.g. 127.0.0.1, ::1, or 0.0.0.0 for every IPv4 interface; "
            "got an empty one"
        )
    return text.strip()


def _output(text: str) -> Path:
    """A path the ledger can be written to, checked now: at exit, the run would be lost."""
    path = Path(text)
    try:
        check_output_path(path)
    except FileRefused as error:
        raise argparse.ArgumentTypeError(f"{shown_path(text)}: {error}") from None
    return path


def _scenario(path: Path | None) -> Scenario:
    if path is not None:
        return load_scenario(path)
    from fake_servers._default import DEFAULT_SCENARIO

    return DEFAULT_SCENARIO


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def _serve(played: Scenario, args: argparse.Namespace) -> int:
    # Imported here so that --help and scenario errors never start the server stack.
    from fake_servers._proxy import FaultProxy
    from fake_servers._server import FakeServer, ServerError

    stop = threading.Event()
    _on_stop_signals(stop)
    server = FakeServer(played, host=args.host, port=args.port)
    try:
        server.start()
    except (OSError, ServerError) as error:
        print(f"fake-servers: cannot serve on {args.host}:{args.port}: {error}", file=sys.stderr)
        return EXIT_CANNOT_SERVE
    proxy: FaultProxy | None = None
    try:
        _announce(sys.stdout, server.url)
        if args.proxy:
            proxy = FaultProxy(server.url, host=args.host, ledger=server.ledger).start()
            _announce(sys.stdout, f"proxy: {proxy.url}")
        _print_listing(sys.stderr, played, server.url, default=args.scenario is None)
        while not stop.wait(_POLL_SECONDS):
            pass
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()
    if args.ledger_json is not None:
        try:
            _write_json(args.ledger_json, server.ledger.to_json())
        except OSError as error:
            print(f"fake-servers: cannot write the ledger: {error}", file=sys.stderr)
            return EXIT_CANNOT_WRITE
    return EXIT_OK


def _print_listing(stream: TextIO, played: Scenario, url: str, *, default: bool) -> None:
    """Every endpoint with its URL and what it plays; for the default scenario, what to try."""
    what = "the built-in scenario" if default else f"{len(played.endpoints)} endpoint(s)"
    lines = [f"fake-servers: serving {what}; Ctrl-C to stop"]
    if not played.endpoints:
        lines.append("  no endpoints: every path answers 404")
    width = max((len(e.path) for e in played.endpoints), default=0)
    lines += [f"  {e.method:<4} {url}{e.path:<{width}}  {describe(e)}" for e in played.endpoints]
    if default:
        from fake_servers._default import TRY

        lines += ["try:", *(f"  {command.format(url=url)}" for command in TRY)]
    stream.write("\n".join(lines) + "\n")
    stream.flush()


def describe(item: Endpoint) -> str:
    """What an endpoint's attempts get, in a line: ``503 (Retry-After: 1) -> ...``."""
    text = " -> ".join(_describe_step(step) for step in item.steps)
    return text + (" (in turn)" if item.then == "cycle" and len(item.steps) > 1 else "")


def _describe_step(step: Step) -> str:
    if isinstance(step, Respond):
        after = next((v for k, v in step.headers if k.lower() == "retry-after"), None)
        if step.retry_after_date is not None:
            after = f"a date {step.retry_after_date:g} s ahead"
        return f"{step.status}" + (f" (Retry-After: {after})" if after is not None else "")
    if isinstance(step, Raw):
        drop = ", then the connection drops" if step.end == "abort" else ""
        return f"{step.size} raw bytes in {len(step.pieces)} write(s){drop}"
    events = f"{step.events} event{'' if step.events == 1 else 's'}"
    if step.stall is not None and step.stall.seconds is None:
        return f"{step.stall.after} events, then silent until the client leaves"
    if step.stall is not None:
        return f"a stream of {events}, silent for {step.stall.seconds:g} s after {step.stall.after}"
    return {
        "done": f"a stream of {events}",
        "truncate": f"{events}, then a clean end without the terminal event",
        "abort": f"{events}, then the connection drops",
        "abort_mid_line": f"{events}, then the connection drops mid-line",
        "error": f"{events}, then an in-band error event",
    }[step.end]


def _on_stop_signals(stop: threading.Event) -> None:
    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for number in _STOP_SIGNALS:
        signal.signal(number, handle)


def _announce(stream: TextIO, line: str) -> None:
    stream.write(line + "\n")
    stream.flush()  # a reader is waiting on this line, and stdout may be a pipe


def _write_json(path: Path, tree: object) -> None:
    path.write_text(json.dumps(tree, indent=2) + "\n", encoding="utf-8")
