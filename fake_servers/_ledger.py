"""The ledger: the only server-side truth about what a client did.

Append-only and thread-safe: the server's event loop thread and the fault
proxy's thread write it, test code reads it. Readers get frozen snapshots; the
live records stay private to the writers. Every timestamp is on ``now()``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from fake_servers._clock import now
from fake_servers._script import Ending

__all__ = [
    "Attempt",
    "AttemptEnd",
    "AttemptWriter",
    "Connection",
    "ConnectionEnd",
    "ConnectionWriter",
    "EventKind",
    "Ledger",
    "LedgerTimeout",
    "Rejected",
    "SentEvent",
    "Stalled",
]

EventKind = Literal["data", "terminal", "comment", "retry"]
AttemptEnd = Literal["completed", "client_closed", "aborted", "server_stopped"]
ConnectionEnd = Literal["client", "upstream", "proxy", "offline"]
# Why a request was refused before the script (the note says it in words):
Rejected = Literal[
    "client_left",  # the client left during the request body; no response was sent
    "body_timeout",  # 408: the body did not arrive within the body timeout
    "body_invalid",  # 400/413/415/422: the body is malformed, too large or of a wrong type
    "no_endpoint",  # 404: nothing scripted at the path
    "method",  # 405: the path is scripted for another method
    "server_error",  # 500: the kit itself failed while checking the request
]


@dataclass(frozen=True)
class SentEvent:
    """One SSE event (or comment / retry field) as the server sent it."""

    index: int  # 1-based position in the answer; 0 for comments and retry fields
    kind: EventKind
    id: str | None
    data: str
    at: float  # when its last byte was handed to the socket


@dataclass(frozen=True)
class Stalled:
    """The scripted stall of a streamed answer, as the server began it."""

    at: float  # when the silence (or the keepalive-only stretch) began
    after: int  # data events this attempt had sent before it
    keepalive: float | None  # seconds between keepalive comments; None: silent


@dataclass(frozen=True)
class Attempt:
    """One HTTP request that reached the server, and how it went."""

    seq: int  # arrival order across the whole server, 1-based
    number: int  # arrival order on this endpoint, 1-based
    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]  # as received, names lower-cased
    body_size: int
    body_sha256: str
    arrived_at: float
    step: int | None = None  # 0-based script step played; None if rejected before it
    status: int | None = None
    headers_at: float | None = None
    first_byte_at: float | None = None  # first body byte
    events: tuple[SentEvent, ...] = ()
    ended_at: float | None = None
    end: AttemptEnd | None = None
    note: str = ""  # why a request was rejected, or how the script ended it (for people)
    # What was sent, so that a reader never needs the script (the verdict reads these):
    response_headers: tuple[tuple[str, str], ...] = ()  # as sent, names lower-cased
    retry_after: float | None = None  # seconds the response asked the client to wait
    ending: Ending | None = None  # a streamed answer's scripted ending; None: plain response
    stall: Stalled | None = None  # the stall, once it began
    rejected: Rejected | None = None  # why it was refused before the script; None: played

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    def response_header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.response_headers if k == name), None)

    @property
    def last_event_id(self) -> str | None:
        """The header as the client meant it: EventSource sends the id UTF-8 encoded,
        and headers are kept as latin-1 text (one character a byte)."""
        value = self.header("last-event-id")
        return None if value is None else value.encode("latin-1").decode("utf-8", "replace")

    @property
    def idempotency_key(self) -> str | None:
        return self.header("idempotency-key")

    @property
    def authorization(self) -> bool:
        return self.header("authorization") is not None

    @property
    def data_events(self) -> tuple[SentEvent, ...]:
        return tuple(e for e in self.events if e.kind == "data")

    @property
    def finished(self) -> bool:
        return self.end is not None


@dataclass(frozen=True)
class Connection:
    """One TCP connection the fault proxy accepted."""

    seq: int
    opened_at: float
    peer: tuple[str, int]
    fault: str  # the fault applied to it, "" for none
    bytes_up: int = 0  # client -> server
    bytes_down: int = 0  # server -> client
    closed_at: float | None = None
    closed_by: ConnectionEnd | None = None


class LedgerTimeout(AssertionError):
    """A wait on the ledger passed its deadline; the message says what was awaited."""


class _Writer:
    def __init__(self, ledger: Ledger, key: int) -> None:
        self._ledger = ledger
        self._key = key


class AttemptWriter(_Writer):
    """The server's handle on one live attempt record."""

    @property
    def number(self) -> int:
        """The attempt's 1-based number on its endpoint (1 once the ledger was cleared)."""
        return self._ledger._number(self._key)

    def update(self, **changes: Any) -> None:
        self._ledger._update(self._key, changes)

    def event(self, event: SentEvent) -> None:
        self._ledger._append_event(self._key, event)

    def finish(self, end: AttemptEnd, note: str = "", at: float | None = None) -> None:
        """Record how the attempt ended; only the first call counts."""
        self._ledger._finish(self._key, end, note, now() if at is None else at)


class ConnectionWriter(_Writer):
    """The fault proxy's handle on one live connection record."""

    def add_bytes(self, up: int = 0, down: int = 0) -> None:
        self._ledger._add_bytes(self._key, up, down)

    def close(self, by: ConnectionEnd, at: float | None = None) -> None:
        self._ledger._close_connection(self._key, by, now() if at is None else at)


@dataclass
class _LiveAttempt:
    record: Attempt  # everything but the events
    events: list[SentEvent] = field(default_factory=list)

    def snapshot(self) -> Attempt:
        return replace(self.record, events=tuple(self.events))


@dataclass
class _Store:
    attempts: list[_LiveAttempt] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    per_endpoint: dict[str, int] = field(default_factory=dict)
    lags: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


class Ledger:
    """Everything the client did, as the server and the fault proxy saw it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._store = _Store()
        self._generation = 0  # bumped by clear(); stale writers stop writing

    # -- reading -----------------------------------------------------------
    def attempts(self, path: str | None = None) -> tuple[Attempt, ...]:
        with self._cond:
            return tuple(
                live.snapshot()
                for live in self._store.attempts
                if path is None or live.record.path == path
            )

    def connections(self) -> tuple[Connection, ...]:
        with self._cond:
            return tuple(self._store.connections)

    def lags(self) -> dict[str, tuple[tuple[float, float], ...]]:
        """Each lag probe's records, by source: (when a wake-up was due, when it came)."""
        with self._cond:
            return {source: tuple(rows) for source, rows in self._store.lags.items()}

    def wait_for(
        self,
        predicate: Callable[[Ledger], bool],
        timeout: float,
        what: str = "a condition on the ledger",
    ) -> None:
        """Block until ``predicate(self)`` holds; raise ``LedgerTimeout`` after ``timeout``."""
        deadline = now() + timeout
        with self._cond:
            while not predicate(self):
                left = deadline - now()
                if left <= 0:
                    raise LedgerTimeout(
                        f"waited {timeout:.3f}s for {what}; ledger: {self.summary()}"
                    )
                self._cond.wait(left)

    def wait_attempts(
        self, count: int, timeout: float, path: str | None = None
    ) -> tuple[Attempt, ...]:
        """Wait until at least ``count`` attempts arrived (on ``path``, if given)."""
        self.wait_for(
            lambda led: len(led.attempts(path)) >= count,
            timeout,
            f"{count} attempt(s)" + (f" on {path}" if path else ""),
        )
        return self.attempts(path)

    def wait_finished(self, timeout: float, path: str | None = None) -> tuple[Attempt, ...]:
        """Wait until every attempt so far (on ``path``) has ended."""
        self.wait_for(
            lambda led: all(a.finished for a in led.attempts(path)),
            timeout,
            "every attempt to end",
        )
        return self.attempts(path)

    def summary(self) -> str:
        parts = [
            f"#{a.seq} {a.method} {a.path} status={a.status} events={len(a.data_events)} "
            f"end={a.end}"
            for a in self.attempts()
        ]
        return "; ".join(parts) or "no attempts"

    def to_json(self) -> dict[str, Any]:
        with self._cond:
            return {
                "attempts": [asdict(a) for a in self.attempts()],
                "connections": [asdict(c) for c in self._store.connections],
            }

    def clear(self) -> None:
        with self._cond:
            self._store = _Store()
            self._generation += 1
            self._cond.notify_all()

    # -- writing (server and proxy) -----------------------------------------
    def open_attempt(
        self,
        *,
        method: str,
        path: str,
        query: str = "",
        headers: tuple[tuple[str, str], ...] = (),
        body_size: int = 0,
        body_sha256: str = "",
        arrived_at: float | None = None,
    ) -> AttemptWriter:
        with self._cond:
            store = self._store
            number = store.per_endpoint.get(path, 0) + 1
            store.per_endpoint[path] = number
            attempt = Attempt(
                seq=len(store.attempts) + 1,
                number=number,
                method=method,
                path=path,
                query=query,
                headers=headers,
                body_size=body_size,
                body_sha256=body_sha256,
                arrived_at=now() if arrived_at is None else arrived_at,
            )
            store.attempts.append(_LiveAttempt(attempt))
            self._cond.notify_all()
            return AttemptWriter(self, self._key(len(store.attempts) - 1))

    def open_connection(
        self, peer: tuple[str, int], fault: str = "", at: float | None = None
    ) -> ConnectionWriter:
        with self._cond:
            store = self._store
            conn = Connection(
                seq=len(store.connections) + 1,
                opened_at=now() if at is None else at,
                peer=peer,
                fault=fault,
            )
            store.connections.append(conn)
            self._cond.notify_all()
            return ConnectionWriter(self, self._key(len(store.connections) - 1))

    def record_lag(self, source: str, due: float, woke: float) -> None:
        """A lag probe's wake-up (``fake_servers._noise``); nobody waits on these."""
        with self._cond:
            self._store.lags.setdefault(source, []).append((due, woke))

    def _key(self, index: int) -> int:
        # The generation in the high bits lets a writer from before clear() go quiet.
        return (self._generation << 32) | index

    def _live_index(self, key: int) -> int | None:
        return key & 0xFFFFFFFF if key >> 32 == self._generation else None

    def _number(self, key: int) -> int:
        with self._cond:
            i = self._live_index(key)
            return 1 if i is None else self._store.attempts[i].record.number

    def _update(self, key: int, changes: dict[str, Any]) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None:
                return
            live = self._store.attempts[i]
            live.record = replace(live.record, **changes)
            self._cond.notify_all()

    def _append_event(self, key: int, event: SentEvent) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None:
                return
            live = self._store.attempts[i]
            live.events.append(event)
            if live.record.first_byte_at is None:
                live.record = replace(live.record, first_byte_at=event.at)
            self._cond.notify_all()

    def _finish(self, key: int, end: AttemptEnd, note: str, at: float) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None or self._store.attempts[i].record.end is not None:
                return
            live = self._store.attempts[i]
            live.record = replace(live.record, end=end, ended_at=at, note=note or live.record.note)
            self._cond.notify_all()

    def _add_bytes(self, key: int, up: int, down: int) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None:
                return
            c = self._store.connections[i]
            self._store.connections[i] = replace(
                c, bytes_up=c.bytes_up + up, bytes_down=c.bytes_down + down
            )
            # Byte counts change often and nobody waits on them: no notify.

    def _close_connection(self, key: int, by: ConnectionEnd, at: float) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None or self._store.connections[i].closed_by is not None:
                return
            self._store.connections[i] = replace(
                self._store.connections[i], closed_by=by, closed_at=at
            )
            self._cond.notify_all()
