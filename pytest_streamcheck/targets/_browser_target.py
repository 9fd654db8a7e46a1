"""``--streamcheck=browser:PAGE``: check what can be checked before any case runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conformance._adapter import ClientAdapter
from pytest_streamcheck.targets._browser_host import BrowserMissing, find_chromium
from pytest_streamcheck.targets._exec_protocol import HELLO_TIMEOUT
from pytest_streamcheck.targets._preflight import TargetError

__all__ = ["browser_factory"]


def browser_factory(spec: str, hello_timeout: float = HELLO_TIMEOUT) -> Callable[[], ClientAdapter]:
    """A factory of browser adapters for ``browser:SPEC`` (``hello_timeout``: seconds
    to open the page and hear its hello).

    Raises:
        TargetError: no page at SPEC, or no Playwright or Chromium (saying how to get them).
    """
    from pytest_streamcheck.targets._browser import NATIVE_PAGES, BrowserAdapter

    spec = spec.strip()
    if not spec:
        names = ", ".join(f"browser:{n}" for n in NATIVE_PAGES)
        raise TargetError(
            f"browser: needs an HTML page, e.g. browser:client/index.html, or {names}"
        )
    page: Path | None = None
    native = spec
    if spec not in NATIVE_PAGES:
        page = Path(spec).expanduser()
        if not page.is_file():
            shipped = ", ".join(NATIVE_PAGES)
            raise TargetError(
                f"browser:{spec}: no such page ({page.resolve()} is not a file); "
                f"the kit's own pages are {shipped}"
            )
    try:
        executable = find_chromium()
    except BrowserMissing as exc:
        raise TargetError(f"browser:{spec}: {exc}") from None
    if page is not None:
        return lambda: BrowserAdapter(page, executable=executable, hello_timeout=hello_timeout)
    return lambda: BrowserAdapter(
        None, executable=executable, native=native, hello_timeout=hello_timeout
    )
