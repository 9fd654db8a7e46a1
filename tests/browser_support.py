"""What the browser tests share: the skip without a browser, an adapter on a loop of its
own (as a lane has it), and a look at the processes a test leaves behind."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from conformance._adapter import AdapterRequest, StreamSink
from conformance._case import StreamRequest
from conformance._evidence import DeliveryLog
from pytest_streamcheck.targets._browser_host import BrowserMissing, find_chromium

__all__ = [
    "PAGES",
    "LoopThread",
    "browser_processes",
    "descendants",
    "need_chromium",
    "open_stream",
]

T = TypeVar("T")
PAGES = Path(__file__).parent / "browser_pages"


def need_chromium() -> str:
    """The Chromium to run, or skip the test saying how to get one."""
    try:
        return find_chromium()
    except BrowserMissing as exc:
        pytest.skip(str(exc))


class LoopThread:
    """An event loop in a thread of its own: where a lane's adapter lives."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)
        self.loop.close()


def open_stream(
    url: str, log: DeliveryLog, stream: str = "s1", **changes: Any
) -> tuple[AdapterRequest, StreamSink]:
    request = StreamRequest("/v1/stream", "GET", stream=stream, **changes)
    return AdapterRequest(url + "/v1/stream", request), StreamSink(log, stream)


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return None if fields[0] == b"Z" else int(fields[1])


def descendants(root: int) -> set[int]:
    """Live processes under ``root`` (zombies excluded), read from /proc."""
    parents = {
        pid: parent
        for pid in (int(n) for n in os.listdir("/proc") if n.isdigit())
        if (parent := _parent(pid)) is not None
    }
    found: set[int] = set()
    grew = {root}
    while grew:
        grew = {pid for pid, parent in parents.items() if parent in grew} - found
        found |= grew
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def browser_processes(root: int | None = None) -> set[int]:
    """Chromium's and Playwright's driver processes under ``root`` (default: this one)."""
    pids = descendants(os.getpid() if root is None else root)
    return {p for p in pids if "chrom" in _command(p) or "playwright" in _command(p)}
