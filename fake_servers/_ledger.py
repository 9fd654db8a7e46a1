"""The ledger: the only server-side truth about what a client did.

Append-only and thread-safe: the server's event loop thread and the fault
proxy's thread write it, test code reads it. Readers get frozen snapshots; the
live records stay private to the writers. Every timestamp is on ``now()``.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

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
    "EventLog",
    "Ledger",
    "LedgerTimeout",
    "Link",
    "Rejected",
    "SentEvent",
    "Stalled",
    "link_attempts",
]

# "frame": a provider format's own event around the answer (message_start, an in-band
# error, the finish chunk), kept so a client that hands them over is not miscounted.
EventKind = Literal["data", "terminal", "comment", "retry", "frame"]
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
    headers_at: float | None = None  # once the status line and headers were written
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
    # The port the request came from, as the server saw it (ASGI ``scope["client"]``):
    # through the fault proxy, its connection's ``upstream_port`` (``link_attempts``).
    peer_port: int | None = None

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

    # A ledger snapshot makes its events on first read (``EventLog``): waits and counts
    # that never look at them cost nothing per event. Hand-built attempts hold them.
    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            lazy = self.__dict__.get("_lazy_events") if name == "events" else None
            if lazy is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            log, count = lazy
            events = log.events(count)
            object.__setattr__(self, "events", events)
            return events

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if state.pop("_lazy_events", None) is not None:  # a copy or a pickle holds its events
            state["events"] = self.events
        return state


del Attempt.events  # the default lives in __init__; a snapshot's events come from __getattr__


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
    # The local port of the proxy's socket to the server, once connected (None: not
    # connected, e.g. a blackhole): the server sees it as the peer of every request
    # forwarded on this connection (``Attempt.peer_port``, ``link_attempts``).
    upstream_port: int | None = None
    # When the proxy read the first byte from the client (None: none yet). A pool can
    # open a connection before it has a request for it, so the accept alone does not
    # say when the client acted; its first byte up does (``Noise.sent_at``).
    first_up_at: float | None = None


@dataclass(frozen=True)
class Link:
    """Which proxied connection an attempt came on, as the records say exactly."""

    attempt: int  # the attempt's ``seq``
    connection: int  # the connection's ``seq``
    first: bool  # the first attempt on it: the client opened the connection for this one


def link_attempts(
    attempts: Sequence[Attempt], connections: Sequence[Connection]
) -> dict[int, Link]:
    """Each attempt that came through the fault proxy, by its ``seq``: the connection it
    came on. The server's peer port of the request is the proxy connection's upstream
    port; a port the system handed out again later belongs to the latest connection
    accepted by the attempt's arrival (the proxy records the port before it forwards a
    byte, and the server stamps the arrival after reading them). An attempt whose peer
    is no proxy connection's (a client that connected to the server directly, a record
    from before ports were kept) has no link.
    """
    by_port: dict[int, list[Connection]] = {}
    for c in sorted(connections, key=lambda c: (c.opened_at, c.seq)):
        if c.upstream_port is not None:
            by_port.setdefault(c.upstream_port, []).append(c)
    links: dict[int, Link] = {}
    taken: set[int] = set()
    for a in sorted(attempts, key=lambda a: (a.arrived_at, a.seq)):
        if a.peer_port is None:
            continue
        owner = None
        for c in by_port.get(a.peer_port, ()):
            if c.opened_at > a.arrived_at:
                break
            owner = c
        if owner is None:
            continue
        links[a.seq] = Link(a.seq, owner.seq, owner.seq not in taken)
        taken.add(owner.seq)
    return links


_KINDS: tuple[EventKind, ...] = ("data", "terminal", "comment", "retry", "frame")
_KIND_CODES: dict[str, int] = {kind: code for code, kind in enumerate(_KINDS)}
_DATA = _KIND_CODES["data"]
_KIND_BITS = 7  # the low bits of a code: the kind
_MADE = 8  # flag: the data is the source's for the index (not kept)
_ID_IS_INDEX = 16  # flag, with _MADE: the id is the index in decimal (else None)
_MADE_ID = _MADE | _ID_IS_INDEX


class Planned(Protocol):
    """An event as the server plans it (``_render.PlannedEvent``): what a write completes."""

    @property
    def index(self) -> int: ...
    @property
    def kind(self) -> EventKind: ...
    @property
    def id(self) -> str | None: ...
    @property
    def data(self) -> str: ...


def _sent_event(index: int, kind: EventKind, id: str | None, data: str, at: float) -> SentEvent:
    """``SentEvent(...)`` without the frozen dataclass's per-field checks (a read makes many)."""
    event = object.__new__(SentEvent)
    event.__dict__.update(index=index, kind=kind, id=id, data=data, at=at)
    return event


class EventLog:
    """One attempt's events, in columns: 17 bytes an event the source can make again.

    The time (8 bytes), the index (8) and a code (1: the kind, and whether the data and
    the id are the source's) of every event; the id and data only of events whose data
    the source does not make (terminal events, comments, retry fields, and every event
    of a format that is not the kit's), shared between repeats. Append-only: a reader
    that saw ``count`` events reads the same ``count`` events ever after.
    """

    __slots__ = ("_at", "_codes", "_index", "_kept", "_shared", "source")

    def __init__(self) -> None:
        self._at = array("d")
        self._index = array("q")
        self._codes = bytearray()
        self._kept: dict[int, tuple[str | None, str]] = {}  # position -> (id, data)
        self._shared: dict[tuple[str | None, str], tuple[str | None, str]] = {}
        # Makes data event i's data again; set before any data event is recorded.
        self.source: Callable[[int], str] | None = None

    def __len__(self) -> int:
        return len(self._codes)

    def count(self, kind: EventKind) -> int:
        code = _KIND_CODES[kind]
        return sum(1 for c in self._codes if c & _KIND_BITS == code)

    def add(self, index: int, kind: EventKind, id: str | None, data: str, at: float) -> None:
        """Record one event, keeping its id and data."""
        position = len(self._codes)
        if kind == "data":
            self._kept[position] = (id, data)
        else:  # a comment or a terminal event repeats: keep one copy
            self._kept[position] = self._shared.setdefault((id, data), (id, data))
        self._at.append(at)
        self._index.append(index)
        self._codes.append(_KIND_CODES[kind])  # last: the event is whole once counted

    def extend(self, events: Sequence[Planned], at: float) -> int:
        """Record events one write completed at ``at``; return how many were data events.

        A data event's data is the source's for its index and its id that index or none,
        as the planner makes them (``_render.StreamPlan.data_source``): only its flags stay.
        """
        made = self.source is not None
        at_column, index_column, codes = self._at, self._index, self._codes
        data_events = 0
        for event in events:
            if event.kind == "data":
                data_events += 1
                if made:
                    at_column.append(at)
                    index_column.append(event.index)
                    codes.append(_MADE_ID if event.id is not None else _MADE)
                    continue
            self.add(event.index, event.kind, event.id, event.data, at)
        return data_events

    def events(self, count: int) -> tuple[SentEvent, ...]:
        """The first ``count`` events, made as ``SentEvent`` objects."""
        at, index, codes, kept, source = self._at, self._index, self._codes, self._kept, self.source
        out: list[SentEvent] = []
        for position in range(count):
            code = codes[position]
            number = index[position]
            if code & _MADE:
                assert source is not None
                event_id = str(number) if code & _ID_IS_INDEX else None
                data = source(number)
            else:
                event_id, data = kept[position]
            out.append(_sent_event(number, _KINDS[code & _KIND_BITS], event_id, data, at[position]))
        return tuple(out)

    def nbytes(self) -> int:
        """Roughly what the log keeps, in bytes (its columns and the texts it holds)."""
        import sys

        size = sum(sys.getsizeof(c) for c in (self._at, self._index, self._codes, self._kept))
        texts = {id(t): t for pair in self._kept.values() for t in pair if t is not None}
        return size + sum(sys.getsizeof(t) for t in texts.values())


_ATTEMPT_FIELDS = frozenset(f.name for f in fields(Attempt))


def _changed(record: Attempt, changes: dict[str, Any]) -> Attempt:
    """``replace(record, **changes)`` without the frozen dataclass's per-field checks.

    A stream's record changes five or six times (step, headers, first byte, end, ...);
    ``replace`` costs a check of each of its 25 fields every time.
    """
    unknown = changes.keys() - _ATTEMPT_FIELDS
    if unknown:
        raise TypeError(f"Attempt has no field(s) {sorted(unknown)}")
    new = object.__new__(Attempt)
    state = new.__dict__
    state.update(record.__dict__)
    state.update(changes)
    return new


class LedgerTimeout(AssertionError):
    """A wait on the ledger passed its deadline; the message says what was awaited."""


class _Writer:
    def __init__(self, ledger: Ledger, key: int) -> None:
        self._ledger = ledger
        self._key = key


class AttemptWriter(_Writer):
    """The server's handle on one live attempt record."""

    def __init__(self, ledger: Ledger, key: int, live: _LiveAttempt) -> None:
        super().__init__(ledger, key)
        self._live = live  # its events are this writer's alone to append

    @property
    def number(self) -> int:
        """The attempt's 1-based number on its endpoint (1 once the ledger was cleared)."""
        return self._ledger._number(self._key)

    @property
    def seq(self) -> int:
        """The attempt's ``seq`` in the ledger (``Attempt.seq``)."""
        return self._live.record.seq

    def update(self, **changes: Any) -> None:
        self._ledger._update(self._key, changes)

    def event(self, event: SentEvent) -> None:
        self._ledger._append_event(self._key, event)

    def events(self, events: Sequence[Planned], at: float) -> int:
        """Record the events one write completed at ``at``; return how many were data events.

        Without the ledger's lock: only this writer appends to the attempt's log, and a
        reader sees each event whole (``EventLog``). The lock is taken for the first
        byte's time, and to wake a waiter when there is one.
        """
        live, ledger = self._live, self._ledger
        data_events = live.log.extend(events, at)
        if events and (ledger._waiting or ledger.on_change or live.record.first_byte_at is None):
            ledger._events_added(self._key, at)
        return data_events

    def data_source(self, source: Callable[[int], str]) -> None:
        """From now on, a data event's data is ``source(index)`` and is not kept."""
        self._ledger._set_source(self._key, source)

    def finish(self, end: AttemptEnd, note: str = "", at: float | None = None) -> None:
        """Record how the attempt ended; only the first call counts."""
        self._ledger._finish(self._key, end, note, now() if at is None else at)


class ConnectionWriter(_Writer):
    """The fault proxy's handle on one live connection record."""

    def upstream(self, port: int) -> None:
        """The local port of the proxy's socket to the server (before a byte goes up)."""
        self._ledger._set_upstream(self._key, port)

    def add_bytes(self, up: int = 0, down: int = 0) -> None:
        self._ledger._add_bytes(self._key, up, down, now() if up else None)

    def close(self, by: ConnectionEnd, at: float | None = None) -> None:
        self._ledger._close_connection(self._key, by, now() if at is None else at)


@dataclass
class _LiveAttempt:
    record: Attempt  # everything but the events
    log: EventLog = field(default_factory=EventLog)

    def snapshot(self) -> Attempt:
        """The record with the events so far, made when read (``Attempt.__getattr__``)."""
        snap = object.__new__(Attempt)
        state = snap.__dict__
        state.update(self.record.__dict__)
        del state["events"]
        state["_lazy_events"] = (self.log, len(self.log))
        return snap


@dataclass
class _Store:
    attempts: list[_LiveAttempt] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    per_endpoint: dict[str, int] = field(default_factory=dict)
    lags: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    hops: dict[int, tuple[float, float]] = field(default_factory=dict)
    heads: dict[int, float] = field(default_factory=dict)


class Ledger:
    """Everything the client did, as the server and the fault proxy saw it."""

    def __init__(self) -> None:
        # The lock guards the records; an attempt's events are appended by its writer
        # alone, without it (``AttemptWriter.events``).
        self._cond = threading.Condition()
        self._store = _Store()
        self._generation = 0  # bumped by clear(); stale writers stop writing
        self._waiting = 0  # threads in wait_for: events notify only when someone waits
        # Called (under the lock, so briefly) at every change a wait may be waiting on:
        # the kit's virtual-time runs wake a case's waits by it rather than polling.
        self.on_change: Callable[[], None] | None = None

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

    def links(self) -> dict[int, Link]:
        """Each attempt that came through the fault proxy, by its ``seq``: the connection
        it came on, and whether it was the first on it (``link_attempts``)."""
        with self._cond:
            return link_attempts(self.attempts(), self._store.connections)

    def connection_of(self, seq: int) -> int | None:
        """The ``seq`` of the proxied connection attempt ``seq`` came on; None: unknown."""
        link = self.links().get(seq)
        return None if link is None else link.connection

    def lags(self) -> dict[str, tuple[tuple[float, float], ...]]:
        """Each lag probe's records, by source: (when a wake-up was due, when it came)."""
        with self._cond:
            return {source: tuple(rows) for source, rows in self._store.lags.items()}

    def hops(self) -> dict[int, tuple[float, float]]:
        """Each attempt's network hop, by its ``seq``: (its request's way out, its
        response's way back), seconds measured outside every probed loop (0: unknown)."""
        with self._cond:
            return dict(self._store.hops)

    def wait_for(
        self,
        predicate: Callable[[Ledger], bool],
        timeout: float,
        what: str = "a condition on the ledger",
    ) -> None:
        """Block until ``predicate(self)`` holds; raise ``LedgerTimeout`` after ``timeout``."""
        deadline = now() + timeout
        with self._cond:
            # Counted before the predicate is read: a writer that appends without the
            # lock and then sees no waiter appended before the predicate looked.
            self._waiting += 1
            try:
                while not predicate(self):
                    left = deadline - now()
                    if left <= 0:
                        raise LedgerTimeout(
                            f"waited {timeout:.3f}s for {what}; ledger: {self.summary()}"
                        )
                    self._cond.wait(left)
            finally:
                self._waiting -= 1

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
        with self._cond:
            parts = [
                f"#{a.seq} {a.method} {a.path} status={a.status} events={live.log.count('data')} "
                f"end={a.end}"
                for live in self._store.attempts
                for a in (live.record,)
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
            self._changed()

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
        peer_port: int | None = None,
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
                peer_port=peer_port,
            )
            live = _LiveAttempt(attempt)
            store.attempts.append(live)
            self._changed()
            return AttemptWriter(self, self._key(len(store.attempts) - 1), live)

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
            self._changed()
            return ConnectionWriter(self, self._key(len(store.connections) - 1))

    def record_lag(self, source: str, due: float, woke: float) -> None:
        """A lag probe's wake-up (``fake_servers._noise``); nobody waits on these."""
        with self._cond:
            self._store.lags.setdefault(source, []).append((due, woke))

    def record_head(self, seq: int, at: float) -> None:
        """When attempt ``seq``'s response head reached the client's code at the latest
        (a browser page's ``fetch`` resolving: ``pytest_streamcheck.targets._browser_network``);
        the earliest such record is kept."""
        with self._cond:
            was = self._store.heads.get(seq)
            self._store.heads[seq] = at if was is None else min(was, at)

    def heads(self) -> dict[int, float]:
        """``record_head``'s moments by attempt ``seq``."""
        with self._cond:
            return dict(self._store.heads)

    def record_hop(self, seq: int, out: float = 0.0, back: float = 0.0) -> None:
        """What attempt ``seq`` spent between the client's code and the server, each way
        (a browser's network process: ``pytest_streamcheck.targets._browser_network``); the
        largest measurement of each way is kept."""
        with self._cond:
            was_out, was_back = self._store.hops.get(seq, (0.0, 0.0))
            self._store.hops[seq] = (max(was_out, out), max(was_back, back))

    def _changed(self) -> None:
        self._cond.notify_all()
        if self.on_change is not None:
            self.on_change()

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
            live.record = _changed(live.record, changes)
            self._changed()

    def _append_event(self, key: int, event: SentEvent) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None:
                return
            live = self._store.attempts[i]
            live.log.add(event.index, event.kind, event.id, event.data, event.at)
            if live.record.first_byte_at is None:
                live.record = _changed(live.record, {"first_byte_at": event.at})
            self._changed()

    def _events_added(self, key: int, at: float) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None:  # a writer from before clear(): its log is no longer read
                return
            live = self._store.attempts[i]
            if live.record.first_byte_at is None:
                live.record = _changed(live.record, {"first_byte_at": at})
            self._changed()

    def _set_source(self, key: int, source: Callable[[int], str]) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is not None:
                self._store.attempts[i].log.source = source

    def _finish(self, key: int, end: AttemptEnd, note: str, at: float) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None or self._store.attempts[i].record.end is not None:
                return
            live = self._store.attempts[i]
            changes = {"end": end, "ended_at": at, "note": note or live.record.note}
            live.record = _changed(live.record, changes)
            self._changed()

    def _add_bytes(self, key: int, up: int, down: int, at: float | None = None) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None:
                return
            c = self._store.connections[i]
            first = c.first_up_at if c.first_up_at is not None else at
            self._store.connections[i] = replace(
                c, bytes_up=c.bytes_up + up, bytes_down=c.bytes_down + down, first_up_at=first
            )
            # Byte counts change often and nobody waits on them: no notify.

    def _set_upstream(self, key: int, port: int) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None:
                return
            self._store.connections[i] = replace(self._store.connections[i], upstream_port=port)
            # Nobody waits on it: read with the attempts it links (``link_attempts``).

    def _close_connection(self, key: int, by: ConnectionEnd, at: float) -> None:
        with self._cond:
            i = self._live_index(key)
            if i is None or self._store.connections[i].closed_by is not None:
                return
            self._store.connections[i] = replace(
                self._store.connections[i], closed_by=by, closed_at=at
            )
            self._changed()
