"""Per-event overhead of the reference client against raw httpx streaming.

The fake server runs in a child process (so its rendering does not share our GIL)
and plays one stream of ``--events`` OpenAI-style events with gap 0, buffered so the
whole body arrives as fast as the socket allows. Each run reads it with:

- raw: httpx ``aiter_bytes`` plus a trivial ``split(b"\\n\\n")``: the floor;
- httpx-sse: ``aconnect_sse`` / ``aiter_sse`` (a decoder, no resilience);
- client: ``StreamingClient.stream`` (decoder, reader task, stall watch, breaker, ...).

Reported per variant: the read phase (first event to end of stream, wall clock) and
the client process's CPU time for the whole request, both per event, as medians over
``--runs`` runs (variants interleaved). The ratio is client / raw.

Run: python benchmarks/bench_client.py [--runs 7] [--events 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

import httpx
from httpx_sse import aconnect_sse

from conformance.reference import ClientPolicy, StreamingClient
from fake_servers import Endpoint, FakeServer, Framing, Scenario, Stream

PATH = "/bench"


def _serve(events: int, pipe: Connection) -> None:
    stream = Stream(events=events, framing=Framing(buffered=True))
    server = FakeServer(Scenario(endpoints=(Endpoint(PATH, (stream,)),))).start()
    pipe.send(server.url)
    pipe.recv()  # until the parent says stop
    server.stop()


@dataclass(frozen=True)
class Sample:
    events: int
    read: float  # first event to the end of the stream, seconds
    cpu: float  # process CPU seconds for the whole request


class _Meter:
    def __init__(self) -> None:
        self.cpu0 = time.process_time()
        self.first: float | None = None
        self.events = 0

    def event(self) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        self.events += 1

    def sample(self) -> Sample:
        end = time.perf_counter()
        return Sample(self.events, end - (self.first or end), time.process_time() - self.cpu0)


async def read_raw(http: httpx.AsyncClient, url: str) -> Sample:
    meter = _Meter()
    async with http.stream("GET", url) as response:
        rest = b""
        async for chunk in response.aiter_bytes():
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


async def bench(url: str, runs: int, events: int) -> dict[str, list[Sample]]:
    results: dict[str, list[Sample]] = {"raw": [], "httpx-sse": [], "client": []}
    async with httpx.AsyncClient(timeout=None) as http:
        client = StreamingClient(ClientPolicy(), http=http)
        variants: dict[str, Callable[[], Awaitable[Sample]]] = {
            "raw": lambda: read_raw(http, url),
            "httpx-sse": lambda: read_httpx_sse(http, url),
            "client": lambda: read_client(client, url),
        }
        for run in variants.values():  # warm-up: imports, vocabulary, connections
            await run()
        for _ in range(runs):
            for name, run in variants.items():
                sample = await run()
                assert sample.events == events, (name, sample.events)
                results[name].append(sample)
        await client.aclose()
    return results


def report(results: dict[str, list[Sample]], events: int) -> None:
    print(f"{events} events per run, {len(results['raw'])} runs, medians (per event):")
    read = {k: statistics.median(s.read for s in v) / events * 1e6 for k, v in results.items()}
    cpu = {k: statistics.median(s.cpu for s in v) / events * 1e6 for k, v in results.items()}
    for name in results:
        print(
            f"  {name:10s} read {read[name]:6.2f} us/event ({1e6 / read[name]:9,.0f} ev/s)   "
            f"cpu {cpu[name]:6.2f} us/event"
        )
    print(
        f"  client/raw: read x{read['client'] / read['raw']:.2f}, "
        f"cpu x{cpu['client'] / cpu['raw']:.2f}; "
        f"overhead {read['client'] - read['raw']:.2f} us/event (read), "
        f"{cpu['client'] - cpu['raw']:.2f} us/event (cpu)"
    )
    print(f"  client/httpx-sse: read x{read['client'] / read['httpx-sse']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(args.events, child), daemon=True)
    server.start()
    try:
        url = parent.recv() + PATH
        results = asyncio.run(bench(url, args.runs, args.events))
    finally:
        parent.send("stop")
        server.join(5)
    report(results, args.events)


if __name__ == "__main__":
    main()
