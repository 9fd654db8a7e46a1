"""What a browser page's binding costs in timing accuracy (docs/browser.md, "Timing").

Each chunk carries the page's performance.now() at its emit as its data. Printed: how
late the binding call reaches Python (``arrival``: what a stamp on arrival would be
off by), and how far the kit's delivery stamp (the page's own time, mapped onto the
kit's clock) is from the page's time mapped by a reading taken after the run
(``stamp``: the offset's error and drift). The page's clock is read by the ping with
the shortest round trip; ``uncertainty`` is half of it. Run with the kit's
venv: ``python benchmarks/browser_latency.py [--events N] [--burners K]``; burners are
busy-looping processes (killed by their pid at the end).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))  # its test pages and helpers

from browser_support import PAGES, LoopThread, open_stream

from conformance._adapter import StreamSink
from conformance._evidence import DeliveryLog
from fake_servers import now
from pytest_streamcheck.targets._browser import BrowserAdapter


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


class ArrivalSink(StreamSink):
    """Notes when each chunk's binding call reached Python."""

    arrivals: list[float]

    def chunk(self, data: str, **fields: Any) -> None:
        self.arrivals.append(now())
        super().chunk(data, **fields)


def _ms(stamps: list[float], emitted: list[float], *, absolute: bool = False) -> list[float]:
    late = [(s - e) * 1000 for s, e in zip(stamps, emitted, strict=True)]
    return [abs(x) for x in late] if absolute else late


def _figures(name: str, late: list[float]) -> dict[str, float]:
    late = sorted(late)
    return {
        f"{name}_min_ms": late[0],
        f"{name}_median_ms": statistics.median(late),
        f"{name}_p99_ms": late[int(len(late) * 0.99) - 1],
        f"{name}_max_ms": late[-1],
    }


def measure(events: int) -> dict[str, float]:
    lane = LoopThread()
    adapter = BrowserAdapter(PAGES / "bench.html")
    log = DeliveryLog()
    try:
        lane.run(adapter.start())
        lane.run(adapter.reset())
        offset, rtt = lane.run(_offset(adapter))
        request, _ = open_stream("http://127.0.0.1:9", log, cancel_after=events)
        sink = ArrivalSink(log, request.stream)
        sink.arrivals = []
        lane.run(adapter.stream(request, sink), timeout=events * 0.05 + 30)
        after, rtt_after = lane.run(_offset(adapter))
    finally:
        lane.run(adapter.aclose())
        lane.close()
    chunks = [d for d in log.all() if d.kind == "chunk"]
    emitted = [float(d.data or 0) / 1000 - after for d in chunks]
    return {
        "events": len(chunks),
        **_figures(
            "arrival", [(a - e) * 1000 for a, e in zip(sink.arrivals, emitted, strict=True)]
        ),
        **_figures("stamp", [abs(d.at - e) * 1000 for d, e in zip(chunks, emitted, strict=True)]),
        "uncertainty_ms": max(rtt, rtt_after) / 2 * 1000,
        "drift_ms": (after - offset) * 1000,
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
