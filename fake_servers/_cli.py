"""The ``serve`` command: play a scenario file on a real socket until stopped.

``python -m fake_servers serve --scenario FILE`` (or ``fake-servers serve ...``)
prints the server's base URL as the first stdout line, and with ``--proxy`` a
``proxy: URL`` line for a fault proxy in front of it, so a script can read them
and point a client of any language at the server. SIGINT or SIGTERM stops it
cleanly (exit 0); ``--ledger-json`` then writes what every attempt got.
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
from fake_servers._loader import load_scenario
from fake_servers._script import Scenario

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
        played = load_scenario(args.scenario)
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
    serve.add_argument("--scenario", required=True, type=Path, help="a .toml or .json scenario")
    serve.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    serve.add_argument("--port", default=0, type=int, help="port (default 0: a free one)")
    serve.add_argument("--ledger-json", type=Path, help="write the ledger here as JSON on exit")
    serve.add_argument(
        "--proxy", action="store_true", help="also start a fault proxy; prints 'proxy: URL'"
    )
    return parser


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
        print(f"fake-servers: serving {_summary(played)}; Ctrl-C to stop", file=sys.stderr)
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


def _summary(played: Scenario) -> str:
    if not played.endpoints:
        return "no endpoints (every path answers 404)"
    return ", ".join(
        f"{e.method} {e.path} ({len(e.steps)} step{'s' if len(e.steps) > 1 else ''})"
        for e in played.endpoints
    )


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
