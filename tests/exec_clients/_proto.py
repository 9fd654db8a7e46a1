"""Shared bits of the test exec clients: JSON lines out, commands in, notes on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from conformance._case import CAPABILITIES  # all of them, as the reference client has


def emit(**event: Any) -> None:
    """Write one event line and flush it (the kit reads as lines arrive)."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def hello(name: str) -> None:
    emit(type="hello", protocol=1, name=name, version="0.0.1", capabilities=CAPABILITIES)


def answer(command: dict[str, Any], name: str) -> bool:
    """Answer ``hello``, ``configure`` and ``reset`` as a well-behaved client does;
    False for any other command (the caller's to handle)."""
    if command["cmd"] == "hello":
        hello(name)
    elif command["cmd"] in ("configure", "reset"):
        emit(type="configured" if command["cmd"] == "configure" else "reset")
    else:
        return False
    return True


def say(message: str) -> None:
    """A note on stderr, which the kit keeps and quotes when something breaks."""
    print(message, file=sys.stderr, flush=True)


def commands() -> Iterator[dict[str, Any]]:
    """The kit's commands, one per stdin line, until stdin closes."""
    for line in sys.stdin:
        if line.strip():
            yield json.loads(line)
