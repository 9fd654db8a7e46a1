"""Per-event cost of the reference client against raw httpx and httpx-sse.

The figure that matters is the client's own CPU per event: ``time.process_time`` of
this process (every thread of it) over each request, with the server in a child
process so none of its work is counted. The server must not be what limits the
reading either, so it does not render anything while we read: the child asks a kit
``FakeServer`` once for the body of a stream of ``--events`` OpenAI-style events
(the bytes a case's client receives), then replays those bytes from memory from a
plain socket server, in two layouts:

- ``merged``: the whole response in one write (what the kit does with a gapless
  stream), so the client reads as fast as it can and the read time is its own;
- ``per-event``: one chunked-encoding chunk per event, each in its own write
  (``TCP_NODELAY``), ``--gap-us`` apart, so that each event arrives in a read of its
  own: the client pays its per-read costs for every event. Its read time is the
  pacing, not the client; only its CPU per event is a figure.

Readers: ``asyncio`` (asyncio streams and a count of blank lines, no HTTP: what a read
costs at all), ``raw`` (httpx ``aiter_bytes`` plus ``split(b"\\n\\n")``: the HTTP floor),
``httpx-sse`` (``aconnect_sse``/``aiter_sse``: a decoder, no resilience) and ``client``
(``StreamingClient.stream``: decoder, reader task, stall watch, breaker, ...). Medians
over ``--runs`` runs, readers interleaved; ``reads/ev`` is how many reads raw httpx
made per event, which shows what each layout delivered.

Run: python benchmarks/bench_client.py [--runs 7] [--events 20000] [--paced-events 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

import httpx
from httpx_sse import aconnect_sse

from conformance.reference import ClientPolicy, StreamingClient

LAYOUTS = ("merged", "per-event")
READERS = ("asyncio", "raw", "httpx-sse", "client")
HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _kit_events(events: int) -> list[bytes]:
    """The events of a kit stream of ``events`` events (and its terminal), as sent."""
    from fake_servers import Endpoint, FakeServer, Scenario, Stream

    server = FakeServer(Scenario(endpoints=(Endpoint("/s", (Stream(events=events),)),)))
    server.start()
    try:
        body = httpx.get(server.url + "/s", timeout=60).content
    finally:
        server.stop()
    parts = [part + b"\n\n" for part in body.split(b"\n\n")[:-1]]
    assert b"".join(parts) == body, "the body does not split into events at blank lines"
    assert len(parts) == events + 1, (len(parts), events)  # and the [DONE] terminal
    return parts


def _replay(conn: socket.socket, bodies: dict[str, list[bytes]], gap: float) -> None:
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request = b""
        while b"\r\n\r\n" not in request:
            data = conn.recv(65536)
            if not data:
                return
            request += data
        path = request.split(b" ", 2)[1].decode()
        layout, _, size = path.strip("/").partition("/")
        parts = bodies[size]
        if layout == "merged":
            conn.sendall(HEAD + _chunk(b"".join(parts)) + b"0\r\n\r\n")
            return
        conn.sendall(HEAD)
        for part in parts:
            conn.sendall(_chunk(part))
            time.sleep(gap)
        conn.sendall(b"0\r\n\r\n")


def _serve(sizes: list[int], gap: float, pipe: Connection) -> None:
    bodies = {str(n): _kit_events(n) for n in sizes}
    listener = socket.create_server(("127.0.0.1", 0))
    pipe.send(f"http://127.0.0.1:{listener.getsockname()[1]}")
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_replay, args=(conn, bodies, gap), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    pipe.recv()  # until the parent says stop
    stop.set()
    listener.close()


@dataclass(frozen=True)
class Sample:
    events: int
    reads: int  # how many chunks httpx handed over (raw reader only)
    read: float  # first event to the end of the stream, seconds
    cpu: float  # this process's CPU seconds for the whole request


class _Meter:
    def __init__(self) -> None:
        self.cpu0 = time.process_time()
        self.first: float | None = None
        self.events = 0
        self.reads = 0

    def event(self) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        self.events += 1

    def sample(self) -> Sample:
        end = time.perf_counter()
        cpu = time.process_time() - self.cpu0
        return Sample(self.events, self.reads, end - (self.first or end), cpu)


async def read_asyncio(url: str) -> Sample:
    host, port, path = url.removeprefix("http://").replace("/", ":", 1).split(":", 2)
    meter = _Meter()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET /{path} HTTP/1.1\r\nhost: {host}\r\n\r\n".encode())
    tail = b""
    while data := await reader.read(65536):
        meter.reads += 1
        for _ in range((tail + data).count(b"\n\n")):
            meter.event()
        tail = data[-1:]
    writer.close()
    await writer.wait_closed()
    meter.events -= 1  # the [DONE] terminal
    return meter.sample()


async def read_raw(http: httpx.AsyncClient, url: str) -> Sample:
    meter = _Meter()
    async with http.stream("GET", url) as response:
        rest = b""
        async for chunk in response.aiter_bytes():
            meter.reads += 1
            parts = (rest + chunk).split(b"\n\n")
            rest = parts.pop()
            for _ in parts:
                meter.event()
    meter.events -= 1  # the [DONE] terminal
    return meter.sample()


async def read_httpx_sse(http: httpx.AsyncClient, url: str) -> Sample:
    meter = _Meter()
    async with aconnect_sse(http, "GET", url) as source:
        async for sse in source.aiter_sse():
            if sse.data == "[DONE]":
                break
            meter.event()
    return meter.sample()


async def read_client(client: StreamingClient, url: str) -> Sample:
    meter = _Meter()
    async for _ in client.stream(url):
        meter.event()
    return meter.sample()


Results = dict[tuple[str, str], list[Sample]]


async def bench(base: str, runs: int, sizes: dict[str, int]) -> Results:
    results: Results = {(layout, reader): [] for layout in LAYOUTS for reader in READERS}
    async with httpx.AsyncClient(timeout=None) as http:
        client = StreamingClient(ClientPolicy(), http=http)
        readers: dict[str, Callable[[str], Awaitable[Sample]]] = {
            "asyncio": read_asyncio,
            "raw": lambda url: read_raw(http, url),
            "httpx-sse": lambda url: read_httpx_sse(http, url),
            "client": lambda url: read_client(client, url),
        }
        for layout in LAYOUTS:  # warm-up: imports, connections, the decoders' caches
            for read in readers.values():
                await read(f"{base}/{layout}/{sizes[layout]}")
        for _ in range(runs):
            for layout in LAYOUTS:
                url = f"{base}/{layout}/{sizes[layout]}"
                for name, read in readers.items():
                    sample = await read(url)
                    assert sample.events == sizes[layout], (layout, name, sample.events)
                    results[layout, name].append(sample)
        await client.aclose()
    return results


def report(results: Results, sizes: dict[str, int], runs: int, gap_us: float) -> None:
    load = os.getloadavg()
    print(f"{runs} runs, medians per event; load {load[0]:.2f} {load[1]:.2f}")
    print(f"  merged: {sizes['merged']} events in one write")
    print(f"  per-event: {sizes['per-event']} events, one write each, {gap_us:g} us apart")
    print(f"  {'layout':10s} {'reader':10s} {'cpu us/ev':>10s} {'read us/ev':>11s} {'ev/s':>10s}")
    cpu: dict[tuple[str, str], float] = {}
    for (layout, reader), samples in results.items():
        n = sizes[layout]
        cpu[layout, reader] = statistics.median(s.cpu for s in samples) / n * 1e6
        read = statistics.median(s.read for s in samples) / n * 1e6
        rate = f"{1e6 / read:10,.0f}" if layout == "merged" else f"{'(paced)':>10s}"
        print(f"  {layout:10s} {reader:10s} {cpu[layout, reader]:10.2f} {read:11.2f} {rate}")
    for layout in LAYOUTS:
        reads = statistics.median(s.reads for s in results[layout, "raw"]) / sizes[layout]
        c, r, s, a = (cpu[layout, name] for name in ("client", "raw", "httpx-sse", "asyncio"))
        print(
            f"  {layout}: cpu client/raw x{c / r:.2f} (+{c - r:.2f} us/ev), "
            f"client/httpx-sse x{c / s:.2f}, raw/asyncio x{r / a:.2f}; "
            f"raw httpx made {reads:.3f} reads/ev"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--events", type=int, default=20_000, help="merged layout")
    parser.add_argument("--paced-events", type=int, default=5_000, help="per-event layout")
    parser.add_argument("--gap-us", type=float, default=200.0, help="per-event layout")
    args = parser.parse_args()
    sizes = {"merged": args.events, "per-event": args.paced_events}
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(
        target=_serve, args=(sorted(set(sizes.values())), args.gap_us / 1e6, child), daemon=True
    )
    server.start()
    try:
        base = parent.recv()
        results = asyncio.run(bench(base, args.runs, sizes))
    finally:
        parent.send("stop")
        server.join(5)
    report(results, sizes, args.runs, args.gap_us)


if __name__ == "__main__":
    main()
