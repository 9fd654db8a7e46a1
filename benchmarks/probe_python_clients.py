"""Measure what the shipped Python clients really do, independently of the catalog.

    python benchmarks/probe_python_clients.py [--samples N] [--client NAME ...]

Drives openai-python, anthropic-sdk-python and httpx-sse (each as an application
would: their defaults, ``trust_env=False``) against the plain fake server
(``fake_servers.FakeServer``), and prints one table per client: the retry delays after
a run of 503s (min / median / max of ``--samples`` calls against the profile's
envelope), whether a 2.5 s Retry-After is honoured, which statuses are retried and how
many attempts a call makes, whether a drop mid-stream is retried, and how long a
silent stream lasts (httpx-sse: httpx's default 5 s read timeout). Every delay is read
off the server's ledger: from a failed attempt's arrival to the next arrival.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from conformance._profiles import get_profile
from fake_servers import FakeServer, drop_after, outage, reply, respond, stall_after

PATH = "/v1/probe"
STATUSES = (400, 401, 408, 409, 429, 500, 503)
HINT = 2.5  # seconds: the Retry-After hint probed
LONG_HINT = 150.0  # seconds: beyond openai's 120 s cap, below anthropic's (none)
WATCH = 3.0  # seconds the long hint is watched
STALL = 8.0  # seconds a stream goes silent after its second chunk

Call = Callable[[str], str]  # base URL -> "ok" or the exception's type name


def _openai_call(base: str) -> str:
    import openai

    with openai.OpenAI(
        base_url=base, api_key="sk-probe", http_client=openai.DefaultHttpxClient(trust_env=False)
    ) as client:
        try:
            stream = client.chat.completions.create(
                model="streamcheck-fake-1",
                messages=[{"role": "user", "content": "probe"}],
                stream=True,
            )
            with stream:
                for _ in stream:
                    pass
        except Exception as exc:
            return type(exc).__name__
    return "ok"


def _anthropic_call(base: str) -> str:
    import anthropic

    with anthropic.Anthropic(
        base_url=base,
        api_key="sk-ant-probe",
        http_client=anthropic.DefaultHttpxClient(trust_env=False),
    ) as client:
        try:
            stream = client.messages.create(
                model="streamcheck-fake-1",
                max_tokens=64,
                messages=[{"role": "user", "content": "probe"}],
                stream=True,
            )
            with stream:
                for _ in stream:
                    pass
        except Exception as exc:
            return type(exc).__name__
    return "ok"


def _httpx_sse_call(base: str) -> str:
    from httpx_sse import connect_sse

    with httpx.Client(trust_env=False) as client:
        try:
            with connect_sse(client, "POST", base, json={"prompt": "probe"}) as source:
                source.response.raise_for_status()
                for _ in source.iter_sse():
                    pass
        except Exception as exc:
            return type(exc).__name__
    return "ok"


@dataclass(frozen=True)
class Client:
    name: str  # its profile's name
    call: Call


CLIENTS = {
    "openai-python": Client("openai-python", _openai_call),
    "anthropic-python": Client("anthropic-python", _anthropic_call),
    "httpx-sse": Client("httpx-sse", _httpx_sse_call),
}


def _gaps(server: FakeServer) -> list[float]:
    attempts = server.ledger.wait_finished(5, path=PATH)
    return [b.arrived_at - a.arrived_at for a, b in itertools.pairwise(attempts)]


def _play(server: FakeServer, client: Client, *steps: object) -> tuple[str, list[float], int]:
    server.script(PATH, *steps)  # type: ignore[arg-type]
    result = client.call(server.url + PATH)
    gaps = _gaps(server)
    return result, gaps, len(server.ledger.attempts(PATH))


def probe(client: Client, samples: int) -> list[tuple[str, str, str]]:
    """Rows of (what, measured, the profile's claim)."""
    policy = get_profile(client.name).policy
    rows: list[tuple[str, str, str]] = []
    with FakeServer() as server:
        # Backoff after 503 x N (N = the retries the profile allows; at least 1).
        retries = max(1, (policy.max_attempts or 3) - 1)
        per_retry: list[list[float]] = [[] for _ in range(retries)]
        results = set()
        for _ in range(samples):
            result, gaps, _count = _play(
                server, client, *outage(times=retries, status=503), reply(chunks=3)
            )
            results.add(result)
            for i, gap in enumerate(gaps[:retries]):
                per_retry[i].append(gap)
        for i, gaps in enumerate(per_retry, start=1):
            low, high = policy.backoff.envelope(i)
            if not gaps:
                seen = "no retry"
            else:
                seen = (
                    f"min {min(gaps):.3f} / median {statistics.median(gaps):.3f} / "
                    f"max {max(gaps):.3f} s (n={len(gaps)})"
                )
            claim = "no retry" if policy.max_attempts == 1 else f"[{low:.3f}, {high:.3f}] s"
            rows.append((f"503 x{retries}: delay before retry {i}", seen, claim))
        rows.append((f"503 x{retries}, then a stream", ", ".join(sorted(results)), ""))

        # Retry-After honoured.
        for status in (429, 503):
            result, gaps, count = _play(
                server, client, respond(status, retry_after=HINT), reply(chunks=3)
            )
            seen = f"{count} attempt(s), gap {gaps[0]:.3f} s" if gaps else f"{count} attempt(s)"
            claim = (
                f"waits {min(HINT, policy.retry_after_cap):.3f} s"
                if policy.retry_after and policy.matrix.is_retryable(status)
                else "not retried"
            )
            rows.append((f"{status} with Retry-After: {HINT}", f"{seen}; {result}", claim))

        # Which statuses are retried, and how many attempts a call makes.
        for status in STATUSES:
            # A 1 ms hint keeps the probe quick where it is honoured (the SDKs read it).
            steps = [respond(status, retry_after_ms=1)] * 3
            result, _, count = _play(server, client, *steps, reply(chunks=3))
            retried = policy.matrix.is_retryable(status) and policy.max_attempts != 1
            limit = policy.max_attempts or "no limit"
            claim = f"retried, {limit} attempts" if retried else "not retried, 1 attempt"
            rows.append((f"{status} (every attempt)", f"{count} attempt(s); {result}", claim))

        # A drop mid-stream.
        result, _, count = _play(server, client, drop_after(3), reply(chunks=3))
        rows.append(("drop after 3 chunks", f"{count} attempt(s); {result}", "not retried"))

        # A silent stream: httpx-sse's silence timer is httpx's default 5 s read timeout.
        server.script(PATH, stall_after(2, seconds=STALL))
        started = time.monotonic()
        result = client.call(server.url + PATH)
        took = time.monotonic() - started
        claim = f"{policy.stall_timeout:g} s read timeout"
        rows.append((f"silent {STALL:g} s after 2 chunks", f"{result} after {took:.3f} s", claim))

        # A Retry-After beyond the SDKs' caps (openai: 120 s): given up at once, or waited?
        # Last on this server: a client that waits sleeps on in its daemon thread.
        server.script(PATH, respond(429, retry_after=LONG_HINT), reply(chunks=3))
        box: list[str] = []
        waiter = threading.Thread(
            target=lambda: box.append(client.call(server.url + PATH)), daemon=True
        )
        waiter.start()
        waiter.join(WATCH)
        count = len(server.ledger.attempts(PATH))
        seen = (
            f"{box[0]} at once, {count} attempt(s)"
            if box
            else f"still waiting after {WATCH:g} s, {count} attempt(s)"
        )
        cap = policy.retry_after_cap
        if not policy.retry_after or policy.max_attempts == 1:
            claim = "not retried"
        elif cap < LONG_HINT:
            claim = f"gives up (cap {cap:g} s)"
        else:
            claim = f"waits (cap {cap:g} s)"
        rows.append((f"429 with Retry-After: {LONG_HINT:g}", seen, claim))

        # A refused connection: the attempts the client makes show as time spent.
        with FakeServer() as dead:
            url = dead.url + PATH
        started = time.monotonic()
        result = client.call(url)
        took = time.monotonic() - started
        rows.append(("connection refused", f"{result} after {took:.3f} s", _refused_claim(policy)))
    return rows


def _refused_claim(policy: object) -> str:
    from conformance.reference import ClientPolicy

    assert isinstance(policy, ClientPolicy)
    if not policy.matrix.retry_network or policy.max_attempts == 1:
        return "one attempt"
    waits = [policy.backoff.envelope(i) for i in range(1, (policy.max_attempts or 3))]
    return f"retried: {sum(w[0] for w in waits):.3f}..{sum(w[1] for w in waits):.3f} s of waits"


def table(name: str, rows: list[tuple[str, str, str]]) -> str:
    head = ("probe", "measured", "profile")
    widths = [max(len(r[i]) for r in (*rows, head)) for i in range(3)]
    lines = [f"## {name}", ""]
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |")
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        cells = (c.ljust(w) for c, w in zip(row, widths, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5, help="calls per backoff sample")
    parser.add_argument("--client", action="append", choices=sorted(CLIENTS))
    args = parser.parse_args(argv)
    for name in args.client or list(CLIENTS):
        started = time.monotonic()
        rows = probe(CLIENTS[name], args.samples)
        print(table(name, rows))
        print(f"\n({time.monotonic() - started:.1f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
