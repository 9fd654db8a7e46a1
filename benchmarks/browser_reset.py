"""What a browser adapter's ``reset`` costs, and where the time goes (docs/browser.md).

Before every case the adapter closes its context and opens a fresh one with the page
loaded again, so that no idle keep-alive connection of an earlier case is reused: most
of a case's own set-up, though not of a catalog run (lanes overlap it, and the cases'
real delays dominate). This script resets the example client page (or ``--page``)
``--resets`` times and prints the median and p90 of the whole reset, and of each
Playwright call inside it: a new context, a new page (a renderer process starting),
the page's load, and the ``evaluate`` round trips (the wait for ``window.streamcheck``,
hello, clock readings, the lag probe). Run with the kit's venv:
``python benchmarks/browser_reset.py [--resets N] [--burners K]``; burners are
busy-looping processes, stopped by PID at the end (``_load.Load``).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))  # its loop thread

from _load import Load, stop_signals
from browser_support import LoopThread
from playwright.async_api import Browser, BrowserContext, Page

from pytest_streamcheck.targets._browser import BrowserAdapter

EXAMPLE = Path(__file__).parent.parent / "examples" / "browser-client" / "index.html"
CALLS = (
    (Browser, "new_context"),
    (BrowserContext, "new_page"),
    (BrowserContext, "close"),
    (Page, "goto"),
    (Page, "evaluate"),
)


def _timed(spent: dict[str, list[float]], name: str, call: Callable[..., Any]) -> Any:
    @functools.wraps(call)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await call(*args, **kwargs)
        finally:
            spent[name].append(time.perf_counter() - start)

    return timed


def measure(page: Path, resets: int) -> dict[str, list[float]]:
    """Seconds each reset took (``reset``) and each Playwright call in them took."""
    spent: dict[str, list[float]] = defaultdict(list)
    lane = LoopThread()
    adapter = BrowserAdapter(page)
    try:
        lane.run(adapter.start())
        for cls, method in CALLS:
            setattr(cls, method, _timed(spent, f"{cls.__name__}.{method}", getattr(cls, method)))
        for _ in range(resets):
            start = time.perf_counter()
            lane.run(adapter.reset())
            spent["reset"].append(time.perf_counter() - start)
    finally:
        lane.run(adapter.aclose())
        lane.close()
    return spent


def _line(name: str, seconds: list[float], resets: int) -> str:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (
        f"{name:28s} calls/reset={len(ordered) / resets:5.1f} "
        f"median={statistics.median(ordered) * 1000:7.1f} ms p90={p90 * 1000:7.1f} ms "
        f"per reset={sum(ordered) / resets * 1000:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--page", type=Path, default=EXAMPLE)
    parser.add_argument("--resets", type=int, default=30)
    parser.add_argument("--burners", type=int, default=0)
    args = parser.parse_args()
    with stop_signals():
        load = Load(burners=args.burners)
        try:
            load.start()
            spent = measure(args.page, args.resets)
        finally:
            load.stop()
    print(f"page={args.page.name} resets={args.resets} burners={args.burners}")
    for name in ("reset", *(f"{cls.__name__}.{method}" for cls, method in CALLS)):
        if spent.get(name):
            print(_line(name, spent[name], args.resets))


if __name__ == "__main__":
    main()
