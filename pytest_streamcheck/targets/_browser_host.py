"""One headless Chromium per Python process, shared by every browser adapter.

A run plays up to four cases at once, each lane with its own adapter on its own event
loop. Four Chromium browser processes on a 2-core machine cost a launch (0.4 s quiet)
and some 200 MiB each and compete for the cores the timing checks need; one browser
with a ``BrowserContext`` per adapter isolates just as well (each context has its own
network emulation, so offline is per lane, its own cookies and its own connection
pool). Playwright objects belong to the loop that made them, so the browser lives on a
dedicated thread and loop, and an adapter calls into it with ``Host.call``.

The host is reference-counted: the first ``acquire`` launches Chromium, the last
``release`` closes it, and an ``atexit`` hook closes whatever is left. If the Python
process dies without either, the Playwright driver sees its pipe close and takes the
browser down with it (``tests/test_browser_target.py`` counts them).

Chromium is the distribution's (``apt-get install chromium``), never a download:
``STREAMCHECK_CHROMIUM`` names the binary, else ``chromium`` or ``chromium-browser``
on PATH.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import importlib.util
import os
import shutil
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from playwright.async_api import Browser, Playwright

__all__ = ["CHROMIUM_ENV", "HOW_TO_GET", "BrowserMissing", "Host", "acquire", "find_chromium"]

T = TypeVar("T")
CHROMIUM_ENV = "STREAMCHECK_CHROMIUM"
HOW_TO_GET = (
    "apt-get install chromium (Debian/Ubuntu) and pip install 'pytest-streamcheck[browser]' "
    f"(Playwright for Python; no browser download: the kit runs the installed Chromium, "
    f"or the one ${CHROMIUM_ENV} names)"
)
LAUNCH_TIMEOUT = 30.0  # seconds for Playwright's driver and Chromium to come up
CLOSE_TIMEOUT = 10.0
# The pages are served from 127.0.0.1 on one port and the fake servers listen on
# others: cross-origin. Web security off lets a page read them as if same-origin with
# no CORS preflight, which would otherwise reach the fault proxy and the ledger as an
# extra connection and attempt, and change the request headers the cases judge
# (docs/browser.md, "Cross-origin requests").
CLIENT_DOMAIN = "streamcheck.test"  # RFC 6761: never a real name
CHROMIUM_ARGS = (
    "--disable-web-security",
    # Every name under CLIENT_DOMAIN is the loopback address: the adapter sends each
    # ``client`` key's streams to a host name of its own, so each simulated user has its
    # own per-host connection limit, as separate browsers have (docs/browser.md).
    f"--host-resolver-rules=MAP *.{CLIENT_DOMAIN} 127.0.0.1",
)


class BrowserMissing(RuntimeError):
    """No Playwright or no Chromium: the message says how to get them."""


def find_chromium() -> str:
    """The Chromium binary to run.

    Raises:
        BrowserMissing: Playwright is not installed, or no Chromium was found.
    """
    if importlib.util.find_spec("playwright") is None:
        raise BrowserMissing(f"the browser target needs Playwright for Python: {HOW_TO_GET}")
    named = os.environ.get(CHROMIUM_ENV)
    if named:
        found = shutil.which(named)
        if found is None:
            raise BrowserMissing(f"${CHROMIUM_ENV}={named!r} is not an executable")
        return found
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise BrowserMissing(f"no Chromium on PATH: {HOW_TO_GET}")
    return found


class Host:
    """Playwright and one launched Chromium, on a thread and loop of their own."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="streamcheck-browser", daemon=True
        )
        self._thread.start()
        self._playwright: Playwright | None = None
        self.browser: Browser | None = None
        self._launched: Future[None] = asyncio.run_coroutine_threadsafe(self._launch(), self.loop)
        self.refs = 0

    async def _launch(self) -> None:
        from playwright.async_api import async_playwright

        self._playwright = await async_playwright().start()
        self.browser = await self._playwright.chromium.launch(
            executable_path=self.executable,
            args=list(CHROMIUM_ARGS),
            handle_sigint=False,  # pytest's Ctrl-C ends the run, which closes the browser
            timeout=LAUNCH_TIMEOUT * 1000,
        )

    async def ready(self) -> Browser:
        """The browser, once launched (from any loop).

        Raises:
            BrowserMissing: Chromium did not start.
        """
        try:
            await asyncio.wrap_future(self._launched)
        except Exception as exc:
            raise BrowserMissing(
                f"Chromium at {self.executable} does not start: {exc}; {HOW_TO_GET}"
            ) from exc
        assert self.browser is not None
        return self.browser

    def wait_launched(self, timeout: float = LAUNCH_TIMEOUT) -> None:
        """Block until the browser is up (from a thread other than the host's)."""
        self._launched.result(timeout)

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the host's loop and await it from the caller's loop;
        cancelling the caller cancels it there too."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the host's loop without waiting for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        """Close the browser and the driver, stop the thread (from any thread but its own)."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(CLOSE_TIMEOUT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(CLOSE_TIMEOUT)
        if not self._thread.is_alive():
            self.loop.close()

    async def _shutdown(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wrap_future(self._launched)
        if self.browser is not None:
            with contextlib.suppress(Exception):
                await self.browser.close()
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()


_lock = threading.Lock()
_host: Host | None = None


def acquire(executable: str) -> Host:
    """The process's host (launching it if none runs), with one more reference."""
    global _host
    with _lock:
        if _host is None or _host.executable != executable:
            if _host is not None and _host.refs == 0:
                _host.close()
            _host = Host(executable)
        _host.refs += 1
        return _host


def release(host: Host) -> None:
    """Drop one reference; the last closes the browser (in the caller's thread)."""
    global _host
    with _lock:
        host.refs -= 1
        if host.refs > 0:
            return
        if _host is host:
            _host = None
    host.close()


@atexit.register
def _close_at_exit() -> None:
    with _lock:
        host = _host
    if host is not None:
        host.close()
