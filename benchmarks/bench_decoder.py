"""Decoder throughput: ours (bytes in, events out) against httpx-sse's, on the same bytes.

httpx-sse is driven the way ``EventSource.aiter_sse`` drives it: httpx's incremental
UTF-8 ``TextDecoder`` (what ``Response.aiter_text`` uses), then ``SSELineDecoder``,
then ``SSEDecoder.decode`` per line after ``rstrip("\\n")``, through generators as in
``_aiter_sse_lines`` (synchronous generators here: no event loop in either path). A
second httpx-sse figure uses plain loops instead of generators, its best case.

Run: python benchmarks/bench_decoder.py [--runs 7] [--events 20000]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Iterator

from httpx._decoders import TextDecoder
from httpx_sse._decoders import SSEDecoder as HttpxSSEDecoder
from httpx_sse._decoders import SSELineDecoder

from conformance.reference._sse import SSEDecoder


def make_stream(events: int, seed: int = 7) -> bytes:
    """An LLM-like stream: JSON token chunks, some ids, comments, CRLF and multi-line data."""
    rng = random.Random(seed)
    words = ["hello", "world", "stream", "caf\u00e9", "\u4e16\u754c", "token", "\U0001f600", "ok"]
    out: list[str] = [": connected\n\n", "retry: 3000\n\n"]
    for i in range(events):
        delta = json.dumps(
            {"choices": [{"index": 0, "delta": {"content": " " + rng.choice(words)}}]},
            ensure_ascii=False,
        )
        end = "\r\n" if i % 10 == 0 else "\n"
        if i % 50 == 0:
            out.append(f": ping{end}")
        if i % 5 == 0:
            out.append(f"id: {i}{end}")
        if i % 25 == 0:
            out.append(f"event: chunk{end}data: line one{end}data: line two{end}{end}")
        out.append(f"data: {delta}{end}{end}")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def chunked(stream: bytes, sizes: tuple[int, ...], seed: int = 11) -> list[bytes]:
    """Cuts the stream at pseudo-random sizes drawn from ``sizes`` (network-like chunks)."""
    rng = random.Random(seed)
    chunks, i = [], 0
    while i < len(stream):
        n = rng.choice(sizes)
        chunks.append(stream[i : i + n])
        i += n
    return chunks


def ours(chunks: list[bytes]) -> list[str]:
    decoder = SSEDecoder()
    data: list[str] = []
    for chunk in chunks:
        for event in decoder.feed(chunk):
            data.append(event.data)
    decoder.close()
    return data


def _httpx_sse_lines(chunks: list[bytes]) -> Iterator[str]:
    # as httpx_sse._api._aiter_sse_lines over Response.aiter_text (TextDecoder + TextChunker)
    text_decoder = TextDecoder(encoding="utf-8")
    line_decoder = SSELineDecoder()
    for chunk in chunks:
        text = text_decoder.decode(chunk)
        if text:
            yield from line_decoder.decode(text)
    tail = text_decoder.flush()
    if tail:
        yield from line_decoder.decode(tail)
    yield from line_decoder.flush()


def _httpx_sse_events(chunks: list[bytes]) -> Iterator[str]:
    # as EventSource.aiter_sse
    decoder = HttpxSSEDecoder()
    for line in _httpx_sse_lines(chunks):
        line = line.rstrip("\n")
        sse = decoder.decode(line)
        if sse is not None:
            yield sse.data


def httpx_sse(chunks: list[bytes]) -> list[str]:
    return list(_httpx_sse_events(chunks))


def httpx_sse_loops(chunks: list[bytes]) -> list[str]:
    """httpx-sse's decoders with no generator layers at all (its best case)."""
    text_decoder = TextDecoder(encoding="utf-8")
    line_decoder = SSELineDecoder()
    decoder = HttpxSSEDecoder()
    data: list[str] = []
    for chunk in chunks:
        text = text_decoder.decode(chunk)
        if not text:
            continue
        for line in line_decoder.decode(text):
            sse = decoder.decode(line.rstrip("\n"))
            if sse is not None:
                data.append(sse.data)
    return data


def median_seconds(fn: Callable[[list[bytes]], list[str]], chunks: list[bytes], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn(chunks)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    stream = make_stream(args.events)
    workloads = {
        "network chunks 1-16 KiB": chunked(stream, (1024, 4096, 16384)),
        "small chunks 20-200 B": chunked(stream, (20, 64, 100, 200)),
        "one event per chunk": [part + b"\n\n" for part in stream.split(b"\n\n") if part],
    }
    contenders = {
        "ours": ours,
        "httpx-sse (as aiter_sse)": httpx_sse,
        "httpx-sse (plain loops)": httpx_sse_loops,
    }
    print(f"{len(stream) / 1e6:.2f} MB, {args.events} events, median of {args.runs} runs\n")
    for name, chunks in workloads.items():
        # Same input, same events. httpx-sse also dispatches the data-less "retry:" block
        # (the spec dispatches no event without data), so that one is left out here.
        theirs = [data for data in httpx_sse(chunks) if data]
        assert ours(chunks) == theirs == [d for d in httpx_sse_loops(chunks) if d], name
        results = {label: median_seconds(fn, chunks, args.runs) for label, fn in contenders.items()}
        base = results["ours"]
        print(f"{name} ({len(chunks)} chunks)")
        for label, seconds in results.items():
            rate = args.events / seconds / 1e6
            print(
                f"  {label:26} {seconds * 1e3:8.2f} ms  {rate:5.2f} M events/s  "
                f"x{seconds / base:4.2f} vs ours"
            )
        print()


if __name__ == "__main__":
    main()
