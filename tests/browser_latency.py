"""How late the kit stamps a browser page's deliveries (docs/browser.md, "Timing").

Each chunk carries the page's performance.now() at its emit; the kit stamps it as the
binding call reaches Python. The page's clock is mapped onto the kit's by the ping
with the shortest round trip (``performance.now()`` evaluated between two kit stamps):
the figures are good to half that round trip, printed with them. Run with the kit's
venv: ``python tests/browser_latency.py [--events N] [--burners K]``; burners are
busy-looping processes (killed by their pid at the end).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from browser_support import PAGES, LoopThread, open_stream

from conformance._evidence import DeliveryLog
from fake_servers import now
from pytest_streamcheck._browser import BrowserAdapter


async def _offset(adapter: BrowserAdapter, pings: int = 200) -> tuple[float, float]:
    """(page clock - kit clock in seconds, the round trip it was measured with)."""
    best = (0.0, float("inf"))
    for _ in range(pings):
        before = now()
        page_ms = await adapter.evaluate("performance.now()")
        after = now()
        if after - before < best[1]:
            best = (page_ms / 1000 - (before + after) / 2, after - before)
    return best


def measure(events: int) -> dict[str, float]:
    lane = LoopThread()
    adapter = BrowserAdapter(PAGES / "bench.html")
    log = DeliveryLog()
    try:
        lane.run(adapter.start())
        lane.run(adapter.reset())
        offset, rtt = lane.run(_offset(adapter))
        request, sink = open_stream("http://127.0.0.1:9", log, cancel_after=events + 1)
        lane.run(adapter.stream(request, sink), timeout=events * 0.05 + 30)
        after, rtt_after = lane.run(_offset(adapter))
    finally:
        lane.run(adapter.aclose())
        lane.close()
    drift = after - offset
    late = sorted(
        (d.at - (float(d.data or 0) / 1000 - offset)) * 1000 for d in log.all() if d.kind == "chunk"
    )
    return {
        "events": len(late),
        "min_ms": late[0],
        "median_ms": statistics.median(late),
        "p99_ms": late[int(len(late) * 0.99) - 1],
        "max_ms": late[-1],
        "uncertainty_ms": max(rtt, rtt_after) / 2 * 1000,
        "drift_ms": drift * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--burners", type=int, default=0)
    args = parser.parse_args()
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)
    ]
    try:
        figures = measure(args.events)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print(f"burners={args.burners} " + " ".join(f"{k}={v:.3f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
