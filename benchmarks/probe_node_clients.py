"""Measure the real Node client libraries against the plain fake server (issue 9).

Independent of the conformance cases: each library (openai, @anthropic-ai/sdk,
@microsoft/fetch-event-source, eventsource) is driven through its shipped adapter
(``pytest_streamcheck/clients/node/*.mjs``, speaking exec protocol v1 on a pipe; the
adapter only calls the library's public API), against endpoints scripted here, and
everything is read off the server's ledger:

- the retry delays after 503 x N (several samples), against the envelope of the
  library's profile row in ``conformance/_client_profiles.py``;
- whether a Retry-After of 2.5 s is honoured;
- which statuses are retried (400, 401, 408, 409, 429, 500, 503);
- whether a stream dropped after 3 events (with ids) is retried, with which
  Last-Event-ID, and after how long (the reconnection time); the same after a clean end
  without the terminal event.

Run: ``python benchmarks/probe_node_clients.py [--samples N] [target ...]`` (after
``python -m pytest_streamcheck.clients.node install``). Takes about a minute: every
probe of a library runs at once, each on an endpoint and client instance of its own.
"""

from __future__ import annotations

import argparse
import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance._client_profiles import CLIENT_POLICIES
from fake_servers import FakeServer, abort, now, respond, stream, truncate
from fake_servers._ledger import Attempt
from pytest_streamcheck.clients.node import ADAPTERS, ready_dir

STATUSES = (400, 401, 408, 409, 429, 500, 503)
HINT = 2.5  # the Retry-After probe's hint, seconds
LONG_HINT = 90.0  # a hint past the Stainless SDKs' 60 s limit


@dataclass(frozen=True)
class Library:
    target: str
    method: str  # the transport the probes use
    failures: int  # 503s in a row for the backoff probe
    window: float  # seconds to wait for a retry that may come


LIBRARIES = {
    "node-openai": Library("node-openai", "POST", 2, 4.0),
    "node-anthropic": Library("node-anthropic", "POST", 2, 4.0),
    "fetch-event-source": Library("fetch-event-source", "POST", 4, 3.0),
    "eventsource": Library("eventsource", "GET", 4, 5.0),
}


class Adapter:
    """One adapter process; its events, stamped with the kit's clock as they arrive."""

    def __init__(self, script: Path) -> None:
        self.proc = subprocess.Popen(
            ["node", str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.events: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self.by_stream: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        threading.Thread(target=self._read, daemon=True).start()
        self.send({"cmd": "hello", "protocol": 1})
        self.hello = self._next("hello")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                event = json.loads(line)
                self.events.put((now(), event))
                if "stream" in event:
                    self.by_stream.setdefault(event["stream"], []).append((now(), event))

    def _next(self, kind: str, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            _, event = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            if event.get("type") == kind:
                return event

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def stream(self, sid: str, url: str, method: str) -> None:
        body = {"json": {"prompt": "Probe.", "stream": True}} if method == "POST" else None
        self.send(
            {
                "cmd": "stream",
                "stream": sid,
                "url": url,
                "method": method,
                "headers": {},
                "body": body,
                "idempotent": True,
                "cancel_after": None,
                "client": sid,  # an instance of its own
                "comments": False,
                "last_event_id": None,
            }
        )

    def outcome(self, sid: str) -> str:
        for _, event in self.by_stream.get(sid, []):
            if event["type"] == "done":
                return "done"
            if event["type"] == "error":
                status = f" {event['status']}" if "status" in event else ""
                return f"{event['kind']}{status}"
        return "(still running)"

    def told_retrying(self, sid: str) -> bool:
        return any(
            e["type"] == "state" and e["state"] == "retrying"
            for _, e in self.by_stream.get(sid, [])
        )

    def close(self) -> None:
        try:
            self.send({"cmd": "shutdown"})
            self.proc.wait(3)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


@dataclass
class Probe:
    path: str
    steps: tuple[Any, ...]
    wait: Callable[[list[Attempt]], bool]  # done when this holds of the path's attempts
    attempts: list[Attempt] = field(default_factory=list)


def _gaps(attempts: list[Attempt]) -> list[float]:
    """From each failed response's end (or its headers) to the next request's arrival."""
    out = []
    for a, b in itertools.pairwise(attempts):
        end = a.ended_at or a.headers_at or a.arrived_at
        out.append(b.arrived_at - end)
    return out


def probe(lib: Library, samples: int) -> dict[str, Any]:
    where = ready_dir()
    adapter = Adapter(where / ADAPTERS[lib.target].script)
    probes: dict[str, Probe] = {}
    for i in range(samples):
        probes[f"backoff{i}"] = Probe(
            f"/backoff{i}",
            (*[respond(503)] * lib.failures, stream(events=2)),
            lambda a, n=lib.failures: len(a) > n,
        )
    for i in range(2):  # network errors in a row: a stream broken before its first event
        probes[f"net{i}"] = Probe(
            f"/net{i}", (*[abort(after=0)] * 3, stream(events=2)), lambda a: len(a) > 3
        )
    probes["longhint"] = Probe(  # past the SDKs' 60 s limit on hints
        "/longhint", (respond(503, retry_after=LONG_HINT), stream(events=2)), lambda a: len(a) > 1
    )
    probes["hint"] = Probe(
        "/hint", (respond(503, retry_after=HINT), stream(events=2)), lambda a: len(a) > 1
    )
    for status in STATUSES:
        probes[f"s{status}"] = Probe(
            f"/s{status}", (respond(status), stream(events=2)), lambda a: len(a) > 1
        )
    probes["drop"] = Probe(
        "/drop", (abort(after=3, ids=True), stream(events=5, ids=True)), lambda a: len(a) > 1
    )
    probes["cut"] = Probe(
        "/cut", (truncate(after=3, ids=True), stream(events=5, ids=True)), lambda a: len(a) > 1
    )
    started = time.monotonic()
    with FakeServer() as server:
        for p in probes.values():
            server.script(p.path, *p.steps)
        for sid, p in probes.items():
            adapter.stream(sid, server.url + p.path, lib.method)
        # Long enough for every retry the library may make (openai's two: 0.5 + 1 s; the
        # 2.5 s hint; eventsource's 3 s), then the window for one that never comes.
        limit = max(HINT, 3.0) + lib.failures * 1.2 + lib.window
        while time.monotonic() - started < limit:
            snapshot = server.ledger.attempts()
            if all(p.wait([a for a in snapshot if a.path == p.path]) for p in probes.values()):
                break
            time.sleep(0.1)
        time.sleep(0.3)
        snapshot = server.ledger.attempts()
        for p in probes.values():
            p.attempts = sorted(
                (a for a in snapshot if a.path == p.path), key=lambda a: a.arrived_at
            )
    result: dict[str, Any] = {
        "target": lib.target,
        "waited": time.monotonic() - started,
        "version": adapter.hello.get("version"),
        "profile": adapter.hello.get("profile"),
        "backoff": [_gaps(probes[f"backoff{i}"].attempts) for i in range(samples)],
        "backoff_outcome": [adapter.outcome(f"backoff{i}") for i in range(samples)],
        "told_retrying": adapter.told_retrying("backoff0"),
        "network": [_gaps(probes[f"net{i}"].attempts) for i in range(2)],
        "network_outcome": adapter.outcome("net0"),
        "hint": _gaps(probes["hint"].attempts),
        "long_hint": _gaps(probes["longhint"].attempts),
        "statuses": {
            s: {
                "attempts": len(probes[f"s{s}"].attempts),
                "outcome": adapter.outcome(f"s{s}"),
            }
            for s in STATUSES
        },
    }
    for name in ("drop", "cut"):
        attempts = probes[name].attempts
        result[name] = {
            "attempts": len(attempts),
            "last_event_id": attempts[1].last_event_id if len(attempts) > 1 else None,
            "delay": _gaps(attempts)[0] if len(attempts) > 1 else None,
            "outcome": adapter.outcome(name),
        }
    adapter.close()
    return result


def _ms(values: list[float]) -> str:
    return "/".join(f"{v * 1000:.0f}" for v in values) or "-"


def table(results: list[dict[str, Any]]) -> str:
    rows = [
        "| library (version) | 503 retry delays, ms (samples) | profile envelope, ms | "
        "Retry-After 2.5 s (and 90 s) | statuses retried | 503 x N ends | 3 drops before the first "
        "event: delays, ms | drop after 3 (ids) | clean end without terminal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        policy = CLIENT_POLICIES[r["profile"]]
        counts = [len(g) for g in r["backoff"]]
        envelope = "; ".join(
            f"{lo * 1000:.0f}-{hi * 1000:.0f}"
            for lo, hi in (policy.backoff.envelope(k) for k in range(1, max(counts, default=0) + 1))
        )
        inside = all(
            lo - 0.005 <= d <= hi + 0.15
            for gaps in r["backoff"]
            for k, d in enumerate(gaps, 1)
            for lo, hi in [policy.backoff.envelope(k)]
        )
        delays = "; ".join(_ms(g) for g in r["backoff"]) + (
            " (inside)"
            if inside and any(r["backoff"])
            else (" (OUTSIDE)" if any(r["backoff"]) else "")
        )
        hint = r["hint"]
        if not hint:
            hinted = "no retry"
        else:
            honoured = abs(hint[0] - HINT) < 0.25
            hinted = f"{hint[0] * 1000:.0f} ms ({'honoured' if honoured else 'ignored'})"
        long_hint = r["long_hint"]
        if long_hint:
            hinted += f"; a {LONG_HINT:.0f} s hint: retried after {long_hint[0] * 1000:.0f} ms"
        elif hint:
            hinted += (
                f"; a {LONG_HINT:.0f} s hint: no retry within {r['waited']:.0f} s (waited out)"
            )
        retried = [s for s, v in r["statuses"].items() if v["attempts"] > 1]
        ends = ", ".join(sorted(set(r["backoff_outcome"])))
        if r["told_retrying"]:
            ends += "; tells the app (retrying)"

        network = "; ".join(_ms(g) for g in r["network"])
        if not any(r["network"]):
            network = f"not retried: {r['network_outcome']}"

        def drop(d: dict[str, Any]) -> str:
            if d["attempts"] < 2:
                return f"not retried: {d['outcome']}"
            return (
                f"retried after {d['delay'] * 1000:.0f} ms, Last-Event-ID "
                f"{d['last_event_id']!r}; {d['outcome']}"
            )

        rows.append(
            f"| {r['target']} ({r['version']}) | {delays} | {envelope or '-'} | {hinted} | "
            f"{', '.join(map(str, retried)) or 'none'} | {ends} | {network} | {drop(r['drop'])} | "
            f"{drop(r['cut'])} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", default=list(LIBRARIES))
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args()
    results = []
    for target in args.targets:
        started = time.monotonic()
        results.append(probe(LIBRARIES[target], args.samples))
        print(f"{target}: probed in {time.monotonic() - started:.1f} s", file=sys.stderr)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
