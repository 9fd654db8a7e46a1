"""Benchmark the fake server: concurrent streams, events per second, ledger timestamp error.

Run: ``python benchmarks/bench_server.py [--runs 3] [--streams 1200] [--profile]``

The server runs in this process (its own thread, as in tests); the clients run in a
separate process speaking raw HTTP/1.1 over asyncio sockets, so client work does not
share the server's GIL. Both read the same system-wide monotonic clock (``now()``), so
the client's arrival times compare directly with the ledger's ``SentEvent.at``.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import pstats
import resource
import statistics
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fake_servers._clock import now
from fake_servers._script import Endpoint, Gap, Scenario, Stream
from fake_servers._server import FakeServer

HOLD_PATH = "/hold"  # long, slow streams: how many can be open at once
RATE_PATH = "/rate"  # gapless streams: how many events per second reach clients
# The same with a 1 us gap: the server then makes one write (one syscall) per event
# instead of merging back-to-back events into one write.
WRITES_PATH = "/rate-one-write-per-event"
TIMING_PATH = "/timing"  # a paced stream: ledger time vs client arrival time


# -- client process ---------------------------------------------------------------------------


async def _one_stream(port: int, path: str, number: int) -> tuple[list[float], str]:
    """When (on now()) each event of one stream was complete at this client, and how it ended.

    The ending is ``complete`` (the terminating chunk came), ``closed`` (the server closed
    first) or the name of the error that ended it (``ConnectionResetError``, ...).
    """
    arrivals: list[float] = []
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as error:
        return arrivals, type(error).__name__
    # The query names the stream, so its ledger attempt can be found.
    writer.write(f"GET {path}?client={number} HTTP/1.1\r\nhost: bench\r\n\r\n".encode())
    recent = b""  # the last bytes seen, for matches across reads
    ending = "closed"
    try:
        while chunk := await reader.read(65536):
            at = now()
            # Chunk framing uses \r\n, so only event ends contain \n\n.
            arrivals.extend([at] * (recent[-1:] + chunk).count(b"\n\n"))
            recent = (recent + chunk)[-5:]
            if recent == b"0\r\n\r\n":  # the terminating chunk
                ending = "complete"
                break
    except OSError as error:
        ending = type(error).__name__
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return arrivals, ending


async def _client(port: int, path: str, streams: int, keep_arrivals: bool) -> dict[str, object]:
    results = await asyncio.gather(*(_one_stream(port, path, i) for i in range(streams)))
    per_stream = [arrivals for arrivals, _ in results]
    endings: dict[str, int] = {}
    for _, ending in results:
        endings[ending] = endings.get(ending, 0) + 1
    report: dict[str, object] = {
        "events": [len(a) for a in per_stream],
        "first": [a[0] if a else None for a in per_stream],
        "last": [a[-1] if a else None for a in per_stream],
        "endings": endings,
    }
    if keep_arrivals:
        report["arrivals"] = per_stream
    return report


def client_main(argv: list[str]) -> None:
    port, path, streams, keep = int(argv[0]), argv[1], int(argv[2]), argv[3] == "1"
    raise_nofile(streams + 100)
    print(json.dumps(asyncio.run(_client(port, path, streams, keep))))


def raise_nofile(need: int) -> int:
    """Raise this process's soft limit on open files to ``need`` (up to the hard limit).

    One stream is one socket on each side, so holding N streams needs N descriptors in the
    server process and N in the client's. Raising the soft limit needs no privilege; past
    the hard limit (``ulimit -Hn``) only the administrator can help. Returns the new limit.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        soft = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft != resource.RLIM_INFINITY and soft < need:
        print(f"warning: open-file limit {soft} < {need} needed (raise `ulimit -Hn`)", flush=True)
    return int(soft)


def run_clients(server: FakeServer, path: str, streams: int, keep: bool = False) -> dict[str, Any]:
    return run_load(server.port, path, streams, keep)


def run_load(port: int, path: str, streams: int, keep: bool = False) -> dict[str, Any]:
    """Run the load generator (one process) against ``port``; its report."""
    out = subprocess.run(
        [sys.executable, __file__, "--client", str(port), path, str(streams), str(int(keep))],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    report: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return report


# -- measurements -----------------------------------------------------------------------------


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = current = 0
    for _, delta in edges:
        current += delta
        best = max(best, current)
    return best


def bench_concurrent(server: FakeServer, streams: int) -> tuple[int, int, int]:
    """(streams open at once per the ledger, per the clients, streams fully received)."""
    server.ledger.clear()
    report = run_clients(server, HOLD_PATH, streams)
    attempts = server.ledger.wait_finished(60, HOLD_PATH)
    ledger_overlap = max_overlap(
        [(a.headers_at, a.ended_at) for a in attempts if a.headers_at and a.ended_at]
    )
    client_overlap = max_overlap(
        [(f, last) for f, last in zip(report["first"], report["last"], strict=True) if f]
    )
    complete = sum(1 for n in report["events"] if n == HOLD_EVENTS + 1)
    return ledger_overlap, client_overlap, complete


def bench_rate(server: FakeServer, path: str, streams: int) -> tuple[float, int]:
    """(events per second received by all clients together, events received)."""
    server.ledger.clear()
    report = run_clients(server, path, streams)
    firsts = [f for f in report["first"] if f is not None]
    lasts = [x for x in report["last"] if x is not None]
    total = sum(report["events"])
    return total / (max(lasts) - min(firsts)), total


def bench_timing(server: FakeServer, streams: int) -> list[float]:
    """|client arrival - SentEvent.at| for every event of ``streams`` paced streams."""
    server.ledger.clear()
    report = run_clients(server, TIMING_PATH, streams, keep=True)
    attempts = {a.query: a for a in server.ledger.wait_finished(60, TIMING_PATH)}
    errors: list[float] = []
    for number, times in enumerate(report["arrivals"]):
        sent = attempts[f"client={number}"].events
        errors.extend(abs(t - e.at) for t, e in zip(times, sent, strict=True))
    return errors


HOLD_EVENTS = 10  # a stream lasts ~HOLD_EVENTS * 1 s, long enough for all to be open at once
RATE_EVENTS = 2000
TIMING_EVENTS = 200


def scenario() -> Scenario:
    return Scenario(
        (
            Endpoint(HOLD_PATH, (Stream(events=HOLD_EVENTS, gap=Gap(seconds=1.0)),)),
            Endpoint(RATE_PATH, (Stream(events=RATE_EVENTS),)),
            Endpoint(WRITES_PATH, (Stream(events=RATE_EVENTS, gap=Gap(seconds=1e-6)),)),
            Endpoint(TIMING_PATH, (Stream(events=TIMING_EVENTS, gap=Gap(seconds=0.005)),)),
        )
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--streams", type=int, default=1200, help="concurrent streams to hold")
    parser.add_argument("--rate-streams", type=int, default=50)
    parser.add_argument("--timing-streams", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="cProfile the server thread")
    args = parser.parse_args()
    raise_nofile(args.streams + 100)

    with FakeServer(scenario()) as server:
        if args.profile:
            _in_server_thread(server, PROFILER.enable)
        held, rates, write_rates, errors = [], [], [], []
        for run in range(1, args.runs + 1):
            ledger_open, client_open, complete = bench_concurrent(server, args.streams)
            rate, total = bench_rate(server, RATE_PATH, args.rate_streams)
            write_rate, _ = bench_rate(server, WRITES_PATH, args.rate_streams)
            run_errors = bench_timing(server, args.timing_streams)
            held.append(ledger_open)
            rates.append(rate)
            write_rates.append(write_rate)
            errors.extend(run_errors)
            print(
                f"run {run}: {ledger_open} streams open at once (clients saw {client_open}; "
                f"{complete}/{args.streams} complete) | {rate:,.0f} events/s gapless, "
                f"{write_rate:,.0f} events/s one write each "
                f"({total:,} events over {args.rate_streams} streams) | ledger error "
                f"median {statistics.median(run_errors) * 1e3:.3f} ms, "
                f"p99 {percentile(run_errors, 0.99) * 1e3:.3f} ms",
                flush=True,
            )
        if args.profile:
            _in_server_thread(server, PROFILER.disable)
    print(
        f"median of {args.runs} runs: {statistics.median(held)} concurrent streams, "
        f"{statistics.median(rates):,.0f} events/s gapless, "
        f"{statistics.median(write_rates):,.0f} events/s one write per event; "
        f"ledger timestamp error over "
        f"{len(errors)} events: median {statistics.median(errors) * 1e3:.3f} ms, "
        f"p99 {percentile(errors, 0.99) * 1e3:.3f} ms, max {max(errors) * 1e3:.3f} ms"
    )
    if args.profile:
        pstats.Stats(PROFILER).sort_stats("tottime").print_stats(30)


PROFILER = cProfile.Profile()


def _in_server_thread(server: FakeServer, action: Callable[[], None]) -> None:
    """Run ``action`` on the server's event loop thread (cProfile profiles one thread)."""
    loop = server._loop
    assert loop is not None
    done = threading.Event()

    def run() -> None:
        action()
        done.set()

    loop.call_soon_threadsafe(run)
    done.wait(5)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        client_main(sys.argv[2:])
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        main()
