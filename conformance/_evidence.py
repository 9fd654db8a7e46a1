"""Client-side truth (deliveries) and the evidence a check judges.

A delivery is something the adapter saw the client hand its consumer: a chunk,
a state change, an error, the end of the stream. The adapter records them as
they happen, on the kit's clock, so they line up with the ledger's records.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from conformance.timing._noise import Noise
from fake_servers import Attempt, Connection, now

__all__ = [
    "ERROR_KINDS",
    "REPORT_TEXT_LIMIT",
    "Delivery",
    "DeliveryKind",
    "DeliveryLog",
    "ErrorKind",
    "Evidence",
    "without_ports",
]

# Where the OS's choices show in serialised evidence: the proxy's port in a Host header
# or a URL, a connection's peer. Two runs with one seed in virtual time differ in these
# alone (tests/test_virtual_runs.py, benchmarks/virtual_suite.py).
_PORTS = re.compile(r"127\.0\.0\.1:\d+|\[\"127\.0\.0\.1\", \d+\]|\"(?:peer|upstream)_port\": \d+")


def without_ports(text: str) -> str:
    """``text`` (evidence as JSON) with every OS-chosen port replaced by ``PORT``."""
    return _PORTS.sub("PORT", text)


DeliveryKind = Literal["chunk", "comment", "state", "error", "done", "log"]
ErrorKind = Literal[
    "non_retryable_status", "gave_up", "circuit_open", "stalled", "truncated", "offline", "other"
]
ERROR_KINDS: tuple[ErrorKind, ...] = (
    "non_retryable_status",
    "gave_up",
    "circuit_open",
    "stalled",
    "truncated",
    "offline",
    "other",
)


@dataclass(frozen=True)
class Delivery:
    """One thing the client handed its consumer, stamped when the adapter saw it."""

    stream: str
    kind: DeliveryKind
    at: float
    data: str = ""  # chunk data, comment text (after the colon), or log text
    id: str | None = None  # chunk's event id, when the stream carries ids
    event: str | None = None  # chunk's event name
    state: str | None = None  # state changes
    delay: float | None = None  # "retrying" states: the announced delay
    error: ErrorKind | None = None
    status: int | None = None  # non_retryable_status / gave_up: the last HTTP status
    detail: str = ""

    def describe(self) -> str:
        if self.kind == "chunk":
            read = f" ({self.detail})" if self.detail else ""  # a text client's: its mark
            return f"chunk {self.data[:40]!r}" + (f" id={self.id}" if self.id else "") + read
        if self.kind == "comment":
            return f"comment {self.data[:40]!r}"
        if self.kind == "state":
            extra = f" delay={self.delay:.3f}s" if self.delay is not None else ""
            return f"state {self.state}{extra}"
        if self.kind == "error":
            status = f" status={self.status}" if self.status is not None else ""
            return f"error {self.error}{status} {self.detail}".rstrip()
        return self.kind if self.kind == "done" else f"log {self.data}"


class DeliveryLog:
    """Append-only, thread-safe record of deliveries, with deadline waits."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: list[Delivery] = []
        self.on_change: Callable[[], None] | None = None  # as ``Ledger.on_change``
        # Told each stream that ends (done or an error), by name: a run of many streams
        # waits on each without scanning every delivery (a weather run's users).
        self.on_end: Callable[[str, bool], None] | None = None  # (stream, ended in error)

    def record(self, delivery: Delivery) -> None:
        with self._cond:
            self._items.append(delivery)
            self._cond.notify_all()
            if self.on_change is not None:
                self.on_change()
            if self.on_end is not None and delivery.kind in ("done", "error"):
                self.on_end(delivery.stream, delivery.kind == "error")

    def add(
        self, stream: str, kind: DeliveryKind, *, at: float | None = None, **fields: Any
    ) -> Delivery:
        """Record a delivery stamped ``at`` (default: now, on the kit's clock)."""
        delivery = Delivery(stream=stream, kind=kind, at=now() if at is None else at, **fields)
        self.record(delivery)
        return delivery

    def all(self) -> tuple[Delivery, ...]:
        with self._cond:
            return tuple(self._items)

    def by_instant(self) -> tuple[Delivery, ...]:
        """Every delivery in time order, those of one instant by stream name.

        In virtual time many streams act at one instant, and the order in which the
        kernel hands over their sockets then is no part of what the client did (two runs
        with one seed recorded SC-OFFLINE-7's five streams in different orders). Each
        stream's own deliveries keep their order: its stamps never go back.
        """
        return tuple(sorted(self.all(), key=lambda d: (d.at, d.stream)))

    def ended(self, stream: str) -> bool:
        """True once the stream delivered ``done`` or an ``error``."""
        with self._cond:
            return any(d.stream == stream and d.kind in ("done", "error") for d in self._items)

    def wait_for(self, predicate: Callable[[DeliveryLog], bool], timeout: float) -> bool:
        """Block until ``predicate(self)`` holds or ``timeout`` passes; return whether it held."""
        deadline = now() + timeout
        with self._cond:
            while not predicate(self):
                left = deadline - now()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def clear(self) -> None:
        with self._cond:
            self._items.clear()


@dataclass(frozen=True)
class Evidence:
    """Everything a check may look at: the ledger's records and the deliveries."""

    attempts: tuple[Attempt, ...]
    connections: tuple[Connection, ...] = ()
    deliveries: tuple[Delivery, ...] = ()
    started_at: float = 0.0
    # the harness's own lag while the case ran; hand-built evidence has none measured
    noise: Noise = field(default_factory=Noise)

    def of(self, stream: str) -> tuple[Delivery, ...]:
        return tuple(d for d in self.deliveries if d.stream == stream)

    def chunks(self, stream: str = "s1") -> tuple[Delivery, ...]:
        return tuple(d for d in self.of(stream) if d.kind == "chunk")

    def comments(self, stream: str = "s1") -> tuple[str, ...]:
        """The comment texts the client handed over (only when the request asked)."""
        return tuple(d.data for d in self.of(stream) if d.kind == "comment")

    def outcome(self, stream: str = "s1") -> Delivery | None:
        """The first ``done`` or ``error`` of the stream, if any."""
        return next((d for d in self.of(stream) if d.kind in ("done", "error")), None)

    @property
    def timer_fired(self) -> bool:
        """The client's own silence timer fired (a "stalled" state or error): what it
        then did may answer the kit's lateness, not the script."""
        return any(d.state == "stalled" or d.error == "stalled" for d in self.deliveries)

    def states(self, stream: str = "s1") -> tuple[str, ...]:
        return tuple(d.state or "" for d in self.of(stream) if d.kind == "state")

    def timeline(self) -> list[str]:
        """Attempts, connections and deliveries merged in time order, relative to the start."""
        rows: list[tuple[float, str]] = []
        for a in self.attempts:
            rows.append((a.arrived_at, _attempt_arrival(a)))
            rows.extend(
                (e.at, f"  server sent {e.kind} #{e.index}")
                for e in a.events
                if e.kind in ("data", "terminal")
            )
            if a.ended_at is not None:
                rows.append((a.ended_at, f"  attempt {a.seq} ended: {a.end} {a.note}".rstrip()))
        for c in self.connections:
            fault = f" fault={c.fault}" if c.fault else ""
            rows.append((c.opened_at, f"proxy: connection {c.seq} opened{fault}"))
            if c.closed_at is not None:
                rows.append((c.closed_at, f"proxy: connection {c.seq} closed by {c.closed_by}"))
        rows.extend((d.at, f"client[{d.stream}]: {d.describe()}") for d in self.deliveries)
        rows.sort(key=lambda r: r[0])
        return [f"{(t - self.started_at) * 1000:9.1f} ms  {text}" for t, text in _compact(rows)]

    def chart(self) -> dict[str, Any]:
        """The timeline's points, compact enough to keep for every case of a report."""
        return {
            "started_at": self.started_at,
            "attempts": [
                {
                    "seq": a.seq,
                    "status": a.status,
                    "end": a.end,
                    "arrived_at": a.arrived_at,
                    "ended_at": a.ended_at,
                    "events": [e.at for e in a.events if e.kind == "data"],
                }
                for a in self.attempts
            ],
            "deliveries": [
                {"at": d.at, "kind": d.kind, "label": (d.data or d.state or d.error or "")[:60]}
                for d in self.deliveries
            ],
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "attempts": [_capped(asdict(a)) for a in self.attempts],
            "connections": [asdict(c) for c in self.connections],
            "deliveries": [_capped(asdict(d)) for d in self.deliveries],
            "started_at": self.started_at,
            "noise": self.noise.to_json(),
        }


# A report keeps this much of any one text (chunk or event data); a 5 MiB event
# would otherwise be written whole, once per record that carries it.
REPORT_TEXT_LIMIT = 4096


def _capped(value: Any) -> Any:
    """``value`` with every string longer than REPORT_TEXT_LIMIT cut, saying how much."""
    if isinstance(value, str) and len(value) > REPORT_TEXT_LIMIT:
        cut = len(value) - REPORT_TEXT_LIMIT
        return f"{value[:REPORT_TEXT_LIMIT]}... ({cut} more characters)"
    if isinstance(value, dict):
        return {k: _capped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_capped(v) for v in value]
    return value


def _attempt_arrival(a: Attempt) -> str:
    extra = []
    if a.last_event_id is not None:
        extra.append(f"Last-Event-ID={a.last_event_id}")
    if a.body_size:
        extra.append(f"body={a.body_size}B sha256={a.body_sha256[:12]}")
    tail = (" " + " ".join(extra)) if extra else ""
    return f"attempt {a.seq}: {a.method} {a.path} -> {a.status}{tail}"


def _compact(rows: Iterable[tuple[float, str]], keep: int = 12) -> list[tuple[float, str]]:
    """Fold long runs of "server sent" rows so a timeline stays readable."""
    out: list[tuple[float, str]] = []
    run: list[tuple[float, str]] = []

    def flush() -> None:
        if len(run) > keep:
            out.extend(run[: keep // 2])
            out.append((run[keep // 2][0], f"  ... {len(run) - keep} more events ..."))
            out.extend(run[-keep // 2 :])
        else:
            out.extend(run)
        run.clear()

    for row in rows:
        if row[1].startswith("  server sent"):
            run.append(row)
        else:
            flush()
            out.append(row)
    flush()
    return out
