"""The fake server against a bare Starlette streaming app on the same Hypercorn.

Run: ``python benchmarks/bench_vs_bare.py [--runs 5] [--hold 1000,2500,5000,10000]``
(``--only writes,gapless,hold,stop`` picks figures; ``--profile PATH`` writes a cProfile of
the kit's server thread during one one-write-per-event load).

Each server runs in a fresh process of its own (``--serve kit|bare``), one run per
process, so memory figures start from the same state; the load is one process (the
load generator of ``bench_server.py``, raw HTTP/1.1 on asyncio sockets). Runs are
interleaved (kit, bare, bare, kit, ...) and figures are medians. The bare app streams
the very bytes the kit sends (the kit's planner makes them once, at start-up, and the
harness checks both bodies are identical); it sleeps the same gap before each event,
through ``StreamingResponse``, so it does no work for content, planning or a ledger.
Both get the kit's Hypercorn settings (``fake_servers._server.hypercorn_config``) and
its listen backlog.

Figures: events/s as the clients saw them (first event to last), server CPU (user +
system, all threads) per event over the whole load, memory kept after the load (RSS
after a full garbage collection, minus before) per event, the peak RSS per open stream,
how many of N concurrent streams completed, and how long ``stop()`` takes with N streams
open (and whether it logged any traceback). Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_server import raise_nofile, run_load

from fake_servers._script import Endpoint, Gap, Scenario, Stream

WRITES = "/writes"  # one write per event: a 1 us gap before each event
GAPLESS = "/gapless"  # back-to-back events: the kit merges them into one write
HOLD = "/hold"  # slow streams, to hold many at once: 10 events 1 s apart
HOLD_LONG = "/hold-long"  # slower still, to be open when the server stops
STREAMS = {WRITES: 100, GAPLESS: 100}
EVENTS = {WRITES: 200, GAPLESS: 2000, HOLD: 10, HOLD_LONG: 120}
GAPS = {WRITES: 1e-6, GAPLESS: 0.0, HOLD: 1.0, HOLD_LONG: 1.0}
SEED = 0


def scenario() -> Scenario:
    return Scenario(
        tuple(
            Endpoint(path, (Stream(events=EVENTS[path], gap=Gap(seconds=GAPS[path])),))
            for path in EVENTS
        ),
        seed=SEED,
    )


# -- the server process ---------------------------------------------------------------------


def trim_heap() -> None:
    """Give the heap's free memory back to the system (glibc), so RSS is what is in use."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Peak:
    """The highest RSS since the last reset, sampled every 50 ms by a daemon thread."""

    def __init__(self) -> None:
        self.value = rss()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            self.value = max(self.value, rss())
            time.sleep(0.05)

    def reset(self) -> int:
        value, self.value = max(self.value, rss()), rss()
        return value


class Kit:
    def __init__(self) -> None:
        from fake_servers._server import FakeServer

        self.server = FakeServer(scenario()).start()
        self.port = self.server.port

    def open_streams(self) -> int:
        return sum(
            1 for a in self.server.ledger.attempts() if a.headers_at is not None and not a.finished
        )

    def settle(self, timeout: float) -> dict[str, Any]:
        attempts = self.server.ledger.wait_finished(timeout)  # their events are not read
        ends: dict[str, int] = {}
        for a in attempts:
            ends[str(a.end)] = ends.get(str(a.end), 0) + 1
        del attempts
        error = ""
        try:
            self.server.check()
        except Exception as failure:  # reported, not raised: the figure says it
            error = repr(failure.__cause__ or failure)
        return {"ends": ends, "error": error}

    def read(self) -> dict[str, Any]:
        """Every event the ledger recorded, read as a check would (after the memory figure)."""
        began = time.perf_counter()
        events = sum(len(a.events) for a in self.server.ledger.attempts())
        read_s = time.perf_counter() - began
        store = self.server.ledger._store
        kept = sum(live.log.nbytes() for live in store.attempts)
        return {"ledger_events": events, "read_s": read_s, "log_bytes": kept}

    def stop(self) -> str:
        try:
            self.server.stop()
        except Exception as failure:
            return repr(failure)
        return ""

    def in_loop(self, action: Callable[[], None]) -> None:
        loop = self.server._loop
        assert loop is not None
        done = threading.Event()
        loop.call_soon_threadsafe(lambda: (action(), done.set()))
        done.wait(5)


class Bare:
    """A Starlette app streaming precomputed events, served by Hypercorn's own worker_serve."""

    def __init__(self) -> None:
        from hypercorn.asyncio.run import worker_serve
        from hypercorn.config import Sockets
        from hypercorn.utils import wrap_app
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import StreamingResponse
        from starlette.routing import Route

        from fake_servers._server import BACKLOG, hypercorn_config

        table = {path: bare_body(path) for path in EVENTS}
        self.open = 0
        headers = dict(table[WRITES][0])

        async def endpoint(request: Request) -> StreamingResponse:
            _, chunks, gap = table[request.url.path]

            async def body() -> AsyncIterator[bytes]:
                self.open += 1
                try:
                    for n, chunk in enumerate(chunks):
                        if gap and n:
                            await asyncio.sleep(gap)
                        yield chunk
                finally:
                    self.open -= 1

            return StreamingResponse(body(), headers=headers)

        app = Starlette(routes=[Route("/{path:path}", endpoint)])
        config = hypercorn_config()
        config.backlog = BACKLOG
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(BACKLOG)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopping = asyncio.Event()
            ready.set()
            wrapped = wrap_app(app, config.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]
            sockets = Sockets([], [sock], [])
            await worker_serve(
                wrapped, config, sockets=sockets, shutdown_trigger=self._stopping.wait
            )

        self._thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
        self._thread.start()
        ready.wait(5)

    def open_streams(self) -> int:
        return self.open

    def in_loop(self, action: Callable[[], None]) -> None:
        assert self._loop is not None
        done = threading.Event()
        self._loop.call_soon_threadsafe(lambda: (action(), done.set()))
        done.wait(5)

    def settle(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while self.open and time.monotonic() < deadline:
            time.sleep(0.01)
        return {"ends": {}, "error": "" if not self.open else "streams open"}

    def read(self) -> dict[str, Any]:
        return {"ledger_events": 0, "read_s": 0.0, "log_bytes": 0}

    def stop(self) -> str:
        assert self._loop is not None
        assert self._stopping is not None
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(30)
        return "" if not self._thread.is_alive() else "did not stop within 30 s"


def bare_body(path: str) -> tuple[tuple[tuple[str, str], ...], tuple[bytes, ...], float]:
    """The kit's headers and body for ``path``, one event a chunk, and the gap between them."""
    from fake_servers._render import Send, plan_stream

    # Planned with a gap, so that each event is its own write (the same bytes as gapless).
    step = Stream(events=EVENTS[path], gap=Gap(seconds=1e-6))
    plan = plan_stream(step, seed=SEED, path=path, attempt=1, last_event_id=None)
    chunks = tuple(a.data for a in plan.actions if isinstance(a, Send))
    headers = tuple((k, v) for k, v in plan.headers if k != "content-length")
    return headers, chunks, GAPS[path]


GC_TIME = [0.0, 0.0]  # seconds in collections; collections


def _gc_timer(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        GC_TIME.append(time.thread_time())
    else:
        GC_TIME[0] += time.thread_time() - GC_TIME.pop()
        GC_TIME[1] += 1


def serve_main(kind: str, need_files: int) -> None:
    raise_nofile(need_files)
    gc.callbacks.append(_gc_timer)
    gc.collect()
    server: Kit | Bare = Kit() if kind == "kit" else Bare()
    peak = Peak()
    gc.collect()
    profiler: Any = None
    print(json.dumps({"port": server.port}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        name = command["cmd"]
        reply: dict[str, Any] = {}
        if name == "mark":
            if command.get("collect"):  # what is still referenced, not what malloc kept
                gc.collect()
                trim_heap()
            times = os.times()
            loop_cpu: list[float] = []
            server.in_loop(lambda out=loop_cpu: out.append(time.thread_time()))
            reply = {
                "cpu": times.user + times.system,
                "sys": times.system,
                "loop_cpu": loop_cpu[0],
                "rss": rss(),
                "peak": peak.reset(),
                "gc_s": GC_TIME[0],
                "gcs": GC_TIME[1],
            }
        elif name == "open":
            reply = {"open": server.open_streams()}
        elif name == "settle":
            reply = server.settle(command.get("timeout", 120))
        elif name == "read":
            reply = server.read()
        elif name == "profile":
            import cProfile

            if profiler is None:
                profiler = cProfile.Profile()
                server.in_loop(profiler.enable)
            else:
                server.in_loop(profiler.disable)
                profiler.dump_stats(command["path"])
        elif name == "stop":
            began = time.perf_counter()
            error = server.stop()
            reply = {"seconds": time.perf_counter() - began, "error": error}
            print(json.dumps(reply), flush=True)
            return
        print(json.dumps(reply), flush=True)


# -- the harness ------------------------------------------------------------------------------


class ServerProcess:
    def __init__(self, kind: str, need_files: int) -> None:
        self.kind = kind
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", kind, str(need_files)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )
        self.port = int(self._read()["port"])

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.stderr.seek(0)
            raise RuntimeError(f"{self.kind} server process ended: {self.stderr.read()[-2000:]}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def ask(self, cmd: str, **fields: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, **fields}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def stop(self) -> dict[str, Any]:
        reply = self.ask("stop")
        self.proc.wait(30)
        self.stderr.seek(0)
        log = self.stderr.read()
        reply["tracebacks"] = log.count("Traceback")
        reply["callback_errors"] = log.count("Exception in callback")
        reply["log_lines"] = len(log.splitlines())
        if log.strip():  # kept for a look: nothing is logged when all goes well
            path = Path(tempfile.gettempdir()) / f"bench_vs_bare-{self.kind}-{self.proc.pid}.log"
            path.write_text(log)
            reply["log"] = str(path)
        self.stderr.close()
        return reply


def verify_identical() -> None:
    """Fetch every short path from each server; their bodies must be the same bytes."""
    import httpx

    digests: dict[str, dict[str, str]] = {}
    for kind in ("kit", "bare"):
        server = ServerProcess(kind, 1000)
        try:
            with httpx.Client(timeout=30) as client:
                for path in (WRITES, GAPLESS):
                    response = client.get(f"http://127.0.0.1:{server.port}{path}")
                    heads = tuple(
                        (k, v)
                        for k, v in response.headers.items()
                        if k not in ("date", "transfer-encoding")
                    )
                    body = hashlib.sha256(response.content).hexdigest()
                    digests.setdefault(path, {})[kind] = f"{body} {heads}"
        finally:
            server.stop()
    for path, by_kind in digests.items():
        if by_kind["kit"] != by_kind["bare"]:
            raise SystemExit(f"{path}: the kit and the bare app send different bytes: {by_kind}")
    print(f"identical bytes and headers from both servers on {', '.join(digests)}", flush=True)


def one_run(
    kind: str, path: str, streams: int, profile: str | None = None, again: bool = False
) -> dict[str, Any]:
    """One load on a fresh server process: the load's figures and the server's.

    With ``again``, the same load once more on the same server, the ledger kept: what
    the second adds is the steady state (the first also grows the allocator's pools to
    the load's peak, once).
    """
    server = ServerProcess(kind, streams + 200)
    steady = 0.0
    try:
        before = server.ask("mark", collect=True)
        if profile:
            server.ask("profile")
        load = run_load(server.port, path, streams)
        if profile:
            server.ask("profile", path=profile)
        settled = server.ask("settle")
        after = server.ask("mark", collect=True)
        if again:
            second = run_load(server.port, path, streams)
            server.ask("settle")
            steady = (server.ask("mark", collect=True)["rss"] - after["rss"]) / max(
                1, sum(second["events"])
            )
        read = server.ask("read")
    finally:
        stopped = server.stop()
    firsts = [f for f in load["first"] if f is not None]
    lasts = [x for x in load["last"] if x is not None]
    events = sum(load["events"])
    complete = load["endings"].get("complete", 0)
    return {
        "events": events,
        "events_per_s": events / (max(lasts) - min(firsts)) if events else 0.0,
        "cpu_us_per_event": (after["cpu"] - before["cpu"]) / max(1, events) * 1e6,
        "loop_us_per_event": (after["loop_cpu"] - before["loop_cpu"]) / max(1, events) * 1e6,
        "gc_us_per_event": (after["gc_s"] - before["gc_s"]) / max(1, events) * 1e6,
        "sys_us_per_event": (after["sys"] - before["sys"]) / max(1, events) * 1e6,
        "gcs": after["gcs"] - before["gcs"],
        "kept_per_event": (after["rss"] - before["rss"]) / max(1, events),
        "steady_per_event": steady,
        "peak_kib_per_stream": (after["peak"] - before["rss"]) / streams / 1024,
        "complete": complete,
        "endings": load["endings"],
        "error": settled["error"],
        "ledger_events": read["ledger_events"],
        "read_s": read["read_s"],
        "log_per_event": read["log_bytes"] / max(1, read["ledger_events"]),
        "stop_s": stopped["seconds"],
        "stop_error": stopped["error"],
        "tracebacks": stopped["tracebacks"] + stopped["callback_errors"],
    }


def stop_run(kind: str, streams: int) -> dict[str, Any]:
    """Open ``streams`` long streams, then stop the server with all of them open."""
    server = ServerProcess(kind, streams + 200)
    stopped: dict[str, Any] = {}
    opened = 0
    with contextlib.ExitStack() as stack:
        loader = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("bench_server.py")),
                "--client",
                str(server.port),
                HOLD_LONG,
                str(streams),
                "0",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        stack.callback(loader.wait, 120)
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                opened = int(server.ask("open")["open"])
                if opened >= streams:
                    break
                time.sleep(0.25)
        finally:
            stopped = server.stop()
        out, _ = loader.communicate(timeout=120)
    load = json.loads(out.splitlines()[-1])
    return {
        "opened": opened,
        "stop_s": stopped["seconds"],
        "stop_error": stopped["error"],
        "tracebacks": stopped["tracebacks"] + stopped["callback_errors"],
        "endings": load["endings"],
    }


def median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r[key]) for r in rows)


def load_now() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str, str]] = []

    def add(self, metric: str, kit: float, bare: float, fmt: str, runs: int, load: str) -> None:
        ratio = f"{kit / bare:.2f}" if bare else "-"
        self.rows.append((metric, format(kit, fmt), format(bare, fmt), ratio, str(runs), load))
        print(f"  {metric}: kit {kit:{fmt}}, bare {bare:{fmt}} (x{ratio})", flush=True)

    def medians(
        self,
        results: dict[str, list[dict[str, Any]]],
        figures: list[tuple[str, str, str]],
        load: str,
    ) -> None:
        """One row per (metric, key, format): the medians of each server's runs."""
        runs = len(results["kit"])
        for metric, key, fmt in figures:
            self.add(
                metric, median(results["kit"], key), median(results["bare"], key), fmt, runs, load
            )

    def note(self, metric: str, kit: str, bare: str, runs: int, load: str) -> None:
        self.rows.append((metric, kit, bare, "-", str(runs), load))
        print(f"  {metric}: kit {kit}, bare {bare}", flush=True)

    def print(self) -> None:
        head = ("metric", "kit", "bare", "kit/bare", "runs", "load 1/5 min")
        widths = [max(len(r[i]) for r in (*self.rows, head)) for i in range(6)]
        for row in (head, tuple("-" * w for w in widths), *self.rows):
            print(" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


def interleaved(runs: int, run: Callable[[str], dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """``runs`` runs of each server, in the order kit, bare, bare, kit, kit, bare, ..."""
    results: dict[str, list[dict[str, Any]]] = {"kit": [], "bare": []}
    for n in range(runs):
        for kind in ("kit", "bare") if n % 2 == 0 else ("bare", "kit"):
            results[kind].append(run(kind))
    return results


def rate_figures(table: Table, path: str, runs: int, label: str) -> None:
    load0 = load_now()
    streams = STREAMS[path]
    results = interleaved(runs, lambda kind: one_run(kind, path, streams, again=True))
    load = f"{load0} .. {load_now()}"
    kit = results["kit"]
    expected = streams * (EVENTS[path] + 1)
    for kind, rows in results.items():
        for row in rows:
            bad = row["events"] != expected or row["error"] or row["stop_error"]
            if bad or (kind == "kit" and row["ledger_events"] != 2 * expected):
                print(f"  WARNING {kind}: {row}", flush=True)
    table.medians(
        results,
        [
            (f"{label}: events/s", "events_per_s", ",.0f"),
            (f"{label}: server CPU us/event", "cpu_us_per_event", ".2f"),
            (f"{label}: server loop thread CPU us/event", "loop_us_per_event", ".2f"),
            (f"{label}: of which system (kernel) us/event", "sys_us_per_event", ".2f"),
            (f"{label}: of which garbage collection us/event", "gc_us_per_event", ".2f"),
            (f"{label}: memory kept B/event, 1st load", "kept_per_event", ".0f"),
            (f"{label}: memory kept B/event, 2nd load", "steady_per_event", ".0f"),
        ],
        load,
    )
    table.note(
        f"{label}: ledger event log B/event; read all s",
        f"{median(kit, 'log_per_event'):.1f}; {median(kit, 'read_s'):.2f}",
        "-",
        runs,
        load,
    )


def hold_figures(table: Table, counts: list[int], runs: int) -> None:
    for streams in counts:
        load0 = load_now()
        results = interleaved(runs, lambda kind, n=streams: one_run(kind, HOLD, n))
        load = f"{load0} .. {load_now()}"
        done = {k: ", ".join(str(r["complete"]) for r in rows) for k, rows in results.items()}
        table.note(
            f"{streams:,} streams: completed (each run)", done["kit"], done["bare"], runs, load
        )
        for kind, rows in results.items():
            for row in rows:
                if row["complete"] != streams or row["error"] or row["tracebacks"]:
                    print(f"  WARNING {kind}: {row}", flush=True)
        table.medians(
            results,
            [
                (f"{streams:,} streams: peak KiB/stream", "peak_kib_per_stream", ".1f"),
                (f"{streams:,} streams: server CPU us/event", "cpu_us_per_event", ".1f"),
            ],
            load,
        )


def stop_figures(table: Table, counts: list[int], runs: int) -> None:
    for streams in counts:
        load0 = load_now()
        results = interleaved(runs, lambda kind, n=streams: stop_run(kind, n))
        load = f"{load0} .. {load_now()}"
        kit, bare = results["kit"], results["bare"]
        for kind, rows in results.items():
            for row in rows:
                if row["opened"] < streams or row["stop_error"] or row["tracebacks"]:
                    print(f"  WARNING {kind}: {row}", flush=True)
        table.medians(results, [(f"stop() with {streams:,} open: s", "stop_s", ".2f")], load)
        table.note(
            f"stop() with {streams:,} open: max s; tracebacks; errors",
            f"{max(r['stop_s'] for r in kit):.2f}; {sum(r['tracebacks'] for r in kit)}; "
            f"{sum(1 for r in kit if r['stop_error'])}",
            f"{max(r['stop_s'] for r in bare):.2f}; {sum(r['tracebacks'] for r in bare)}; "
            f"{sum(1 for r in bare if r['stop_error'])}",
            runs,
            load,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hold-runs", type=int, default=3)
    parser.add_argument("--hold", default="1000,2500,5000,10000", help="concurrent stream counts")
    parser.add_argument("--stop", default="1000,5000,10000", help="streams open at stop()")
    parser.add_argument("--only", default="writes,gapless,hold,stop")
    parser.add_argument("--profile", metavar="PATH", help="cProfile a server under /writes")
    parser.add_argument("--profile-server", choices=("kit", "bare"), default="kit")
    parser.add_argument("--profile-path", choices=(WRITES, GAPLESS), default=WRITES)
    args = parser.parse_args()
    raise_nofile(max(int(n) for n in args.hold.split(",")) + 200)
    if args.profile:
        kind, path = args.profile_server, args.profile_path
        row = one_run(kind, path, STREAMS[path], profile=args.profile)
        print(f"profiled one {kind} run ({row['events_per_s']:,.0f} events/s): {args.profile}")
        return
    only = set(args.only.split(","))
    print(f"load average at start: {load_now()} (1/5 min); {os.cpu_count()} cores", flush=True)
    verify_identical()
    table = Table()
    if "writes" in only:
        rate_figures(table, WRITES, args.runs, "one write/event 100x200")
    if "gapless" in only:
        rate_figures(table, GAPLESS, args.runs, "gapless 100x2000")
    if "hold" in only:
        hold_figures(table, [int(n) for n in args.hold.split(",")], args.hold_runs)
    if "stop" in only:
        stop_figures(table, [int(n) for n in args.stop.split(",")], args.hold_runs)
    print()
    table.print()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve_main(sys.argv[2], int(sys.argv[3]))
    else:
        main()
