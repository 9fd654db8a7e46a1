"""The server at scale: a compact ledger that reads as before, cheap pauses, a quiet stop.

Real sockets throughout, with modest numbers (hundreds of streams) so the file stays
fast; ``benchmarks/bench_vs_bare.py`` measures the same at 10,000 streams. Nothing here
asserts a duration: a bound that the kit enforces itself (``stop()`` raising
``ServerError``) is checked by its not raising.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import itertools
import json
import logging
import pickle
import resource
import socket
import threading
from collections.abc import Iterator
from dataclasses import asdict, replace

import httpx
import pytest

from fake_servers._formats import (
    _GROW,
    _MULTIBYTE_EVERY,
    _REGISTRY,
    Answer,
    register_format,
    token,
    vocabulary,
)
from fake_servers._ledger import Attempt, EventLog, Ledger, SentEvent
from fake_servers._render import Send, plan_stream
from fake_servers._script import Endpoint, Framing, Gap, Scenario, Stall, Stream
from fake_servers._server import KEEP_ALIVE, FakeServer, hypercorn_config

WAIT = 20.0  # generous deadline for ledger waits on a shared machine
PATH = "/v1/scale"


def planned_events(
    step: Stream, path: str, attempt: int, last_event_id: str | None = None
) -> list[tuple[int, str, str | None, str]]:
    plan = plan_stream(step, seed=0, path=path, attempt=attempt, last_event_id=last_event_id)
    return [
        (e.index, e.kind, e.id, e.data)
        for a in plan.actions
        if isinstance(a, Send)
        for e in a.events
    ]


def recorded(attempt: Attempt) -> list[tuple[int, str, str | None, str]]:
    return [(e.index, e.kind, e.id, e.data) for e in attempt.events]


# -- the compact ledger reads as the plan sent ------------------------------------------


PATHS = {  # every kit format, on its provider's path (auto) or by name
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/m:streamGenerateContent",
    "named": "/v1/named",
}


@pytest.mark.parametrize("ids", [False, True], ids=["no-ids", "ids"])
@pytest.mark.parametrize("name", PATHS)
def test_every_kit_format_reads_back_what_was_sent(fake_server, name, ids):
    """The ledger keeps no data of a kit format's data events, yet reads them as sent:
    each (index, kind, id, data) equals the plan's, also after a Last-Event-ID resume."""
    path = PATHS[name]
    step = Stream(
        events=40,
        ids=ids,
        format="named" if name == "named" else "auto",
        framing=Framing(comment_every=7, retry_ms=1500),
    )
    fake_server.script(path, step)
    with httpx.Client(base_url=fake_server.url, timeout=WAIT) as client:
        client.get(path)
        client.get(path, headers={"last-event-id": "25"})
    first, resumed = fake_server.ledger.wait_finished(WAIT, path)
    assert recorded(first) == planned_events(step, path, 1)
    resume_id = "25" if ids else None  # resuming needs ids
    assert recorded(resumed) == planned_events(step, path, 2, resume_id)
    assert len(first.data_events) == 40


def test_a_reply_reads_back_its_tokens(fake_server):
    """A request that did not ask to stream gets one JSON reply; its data events (the
    tokens) read back as sent, though the ledger keeps none of them."""
    path = PATHS["openai"]
    fake_server.script(path, Stream(events=12))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    with httpx.Client(base_url=fake_server.url, timeout=WAIT) as client:
        reply = client.post(path, json=body).json()
    (attempt,) = fake_server.ledger.wait_finished(WAIT, path)
    tokens = [e.data for e in attempt.data_events]
    assert tokens == [token(0, path, i) for i in range(1, 13)]
    assert reply["choices"][0]["message"]["content"] == "".join(tokens)
    assert [e.kind for e in attempt.events][-1] == "terminal"


class _Counting:
    """A format whose events are not a function of (index, token): the ledger must keep them."""

    def __init__(self) -> None:
        self.calls = 0

    def data_event(self, index: int, token: str) -> tuple[str | None, str]:
        self.calls += 1
        return None, json.dumps({"call": self.calls, "text": token})

    def terminal_event(self) -> tuple[str | None, str]:
        return None, "[END]"


def test_a_format_not_the_kits_keeps_its_data_as_sent(fake_server):
    """Data the ledger could not make again (a registered format's) is kept as sent."""
    register_format("test-counting", _Counting(), replace=True)
    try:
        fake_server.script(PATH, Stream(events=5, format="test-counting"))
        with httpx.Client(base_url=fake_server.url, timeout=WAIT) as client:
            body = client.get(PATH).text
        (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    finally:
        _REGISTRY.pop("test-counting")
    sent = [json.loads(line.removeprefix("data: ")) for line in body.split("\n\n")[:5]]
    assert [json.loads(e.data) for e in attempt.data_events] == sent
    assert [e["call"] for e in sent] == [1, 2, 3, 4, 5]


def test_a_long_gapless_stream_keeps_few_bytes_an_event(fake_server):
    """20,000 gapless events: the attempt's log keeps under 32 bytes an event (time,
    index, code), and every event still reads back as planned."""
    step = Stream(events=20_000)
    fake_server.script(PATH, step)
    with httpx.Client(base_url=fake_server.url, timeout=WAIT) as client:
        client.get(PATH)
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    (live,) = fake_server.ledger._store.attempts
    assert len(live.log) == 20_001
    assert live.log.nbytes() / len(live.log) < 32
    assert recorded(attempt) == planned_events(step, PATH, 1)


def test_keepalive_comments_are_recorded_once_each(fake_server, raw_connect):
    """A keepalive stall's comments (kept, not made again) read back in order."""
    fake_server.script(PATH, Stream(events=2, stall=Stall(after=1, seconds=0.25, keepalive=0.05)))
    conn = raw_connect(fake_server.port)
    conn.request(PATH)
    conn.read_head()
    conn.read_chunked()
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    kinds = [e.kind for e in attempt.events]
    assert kinds[0] == "data"
    assert kinds[-2:] == ["data", "terminal"]
    comments = [e for e in attempt.events if e.kind == "comment"]
    assert comments
    assert all((e.index, e.id, e.data) == (0, None, "keepalive") for e in comments)


# -- snapshots: made on read, and plain values once read ------------------------------


def test_a_snapshot_is_fixed_when_taken_and_behaves_as_a_plain_attempt(fake_server, raw_connect):
    """A snapshot taken mid-stream keeps the events it saw; once read it compares, copies,
    pickles and converts like a hand-built Attempt."""
    fake_server.script(PATH, Stream(events=3, stall=Stall(after=2)))  # stalls forever
    conn = raw_connect(fake_server.port)
    conn.request(PATH)
    conn.read_head()
    fake_server.ledger.wait_for(
        lambda led: len(led.attempts(PATH)[0].data_events) == 2, WAIT, "two events"
    )
    (early,) = fake_server.ledger.attempts(PATH)
    conn.close()
    (late,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert len(early.events) == 2
    assert late.end == "client_closed"
    hand_built = Attempt(**{f: getattr(late, f) for f in late.__dataclass_fields__})
    assert hand_built == late
    assert hash(hand_built) == hash(late)
    assert replace(late, note="x").events == late.events
    assert copy.deepcopy(late) == late
    assert pickle.loads(pickle.dumps(late)) == late
    assert asdict(late) == asdict(hand_built)
    assert all(type(e) is SentEvent for e in late.events)
    assert repr(late) == repr(hand_built)


def test_a_snapshot_read_after_clear_still_reads_its_events(fake_server):
    fake_server.script(PATH, Stream(events=4))
    with httpx.Client(base_url=fake_server.url, timeout=WAIT) as client:
        client.get(PATH)
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    fake_server.ledger.clear()
    assert [e.index for e in attempt.data_events] == [1, 2, 3, 4]
    assert fake_server.ledger.attempts() == ()


def test_a_waiter_wakes_for_events_written_without_the_lock(fake_server):
    """wait_for sees events as they are appended (the writer takes the lock only to wake it)."""
    fake_server.script(PATH, Stream(events=50, gap=Gap(seconds=0.002)))
    seen: list[int] = []

    def waiter() -> None:
        for count in (1, 10, 50):
            fake_server.ledger.wait_for(
                lambda led, n=count: (
                    bool(led.attempts(PATH)) and len(led.attempts(PATH)[0].data_events) >= n
                ),
                WAIT,
                f"{count} events",
            )
            seen.append(count)

    thread = threading.Thread(target=waiter)
    thread.start()
    with httpx.Client(base_url=fake_server.url, timeout=WAIT) as client:
        client.get(PATH)
    thread.join(WAIT)
    assert seen == [1, 10, 50]


def test_an_event_log_reads_what_it_was_given():
    """EventLog on its own: kept events (any data) and made ones (the source's) in order."""
    log = EventLog()
    log.add(0, "retry", None, "1500", 1.0)
    log.source = lambda i: f"made {i}"

    class Planned:
        def __init__(self, index: int, kind: str, id: str | None, data: str) -> None:
            self.index, self.kind, self.id, self.data = index, kind, id, data

    data = log.extend([Planned(1, "data", "1", "x"), Planned(0, "comment", None, "ping")], 2.0)
    data += log.extend([Planned(2, "data", None, "y"), Planned(3, "terminal", None, "end")], 3.0)
    assert data == 2
    assert [(e.index, e.kind, e.id, e.data, e.at) for e in log.events(len(log))] == [
        (0, "retry", None, "1500", 1.0),
        (1, "data", "1", "made 1", 2.0),
        (0, "comment", None, "ping", 2.0),
        (2, "data", None, "made 2", 3.0),
        (3, "terminal", None, "end", 3.0),
    ]
    assert log.count("data") == 2


def test_the_ledger_summary_counts_without_reading_events():
    ledger = Ledger()
    writer = ledger.open_attempt(method="GET", path="/p")
    writer.event(SentEvent(index=1, kind="data", id=None, data="a", at=1.0))
    assert "events=1" in ledger.summary()


# -- tokens: each drawn once, the same as the draw defines ----------------------------


def _drawn(seed: int, path: str, index: int) -> str:
    """Token ``index`` straight from its definition: two blake2b draws."""

    def draw(label: str, n: int) -> int:
        key = f"{seed}|{path}|{label}|{n}".encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")

    words = vocabulary(seed)
    block, position = divmod(index - 1, _MULTIBYTE_EVERY)
    pick = draw("token", index)
    if draw("block", block) % _MULTIBYTE_EVERY == position:
        return " " + words.multibyte[pick % len(words.multibyte)]
    return " " + words.plain[pick % len(words.plain)]


def test_kept_tokens_are_the_drawn_ones():
    """The kept answer gives the tokens the draws define, in any order of asking, past
    the number kept too."""
    indexes = [*range(1, 300), 131_071, 131_072, 131_073, 999_999, 17, 3, 0]
    for seed, path in itertools.product((0, 7, -3), ("/a", "/v1/chat/completions")):
        assert [token(seed, path, i) for i in indexes] == [_drawn(seed, path, i) for i in indexes]


def test_tokens_are_kept_in_order_a_bounded_number_at_a_time():
    """A token far past the kept ones is drawn alone; the kept ones grow in order, by at
    most _GROW a call, so no call holds a server's loop for long."""
    kept = Answer(0, "/grow")
    assert kept.token(50_000) == _drawn(0, "/grow", 50_000)
    assert len(kept._kept) == 1  # nothing kept for it
    for index in range(1, 3_000):
        before = len(kept._kept)
        assert kept.token(index) == _drawn(0, "/grow", index)
        assert len(kept._kept) - before <= _GROW


# -- pauses shorter than a timer --------------------------------------------------------


def test_a_pause_below_a_timer_still_spaces_the_writes(fake_server):
    """A 50 us gap is waited by yielding to the loop: still one write per event, each at
    least the gap after the one before."""
    step = Stream(events=30, gap=Gap(seconds=50e-6))
    fake_server.script(PATH, step)
    with httpx.Client(base_url=fake_server.url, timeout=WAIT) as client:
        client.get(PATH)
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    times = [e.at for e in attempt.events]
    assert len(set(times)) == len(times)  # no two events in one write
    assert all(b - a >= 50e-6 for a, b in itertools.pairwise(times))


# -- many streams at once, and a quiet stop --------------------------------------------


@pytest.fixture
def many_files() -> Iterator[None]:
    """Room for 500 streams: a socket on each side of each, in this one process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2048
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"needs {need} open files; the hard limit is {hard}")
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


STREAMS = 500


async def _open_streams(port: int, path: str, count: int) -> list[asyncio.StreamWriter]:
    async def one(n: int) -> asyncio.StreamWriter:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path}?n={n} HTTP/1.1\r\nhost: t\r\n\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")  # the head: the stream is open
        writer.transport.pause_reading()  # and then the client reads no more
        return writer

    return list(await asyncio.gather(*(one(n) for n in range(count))))


@pytest.mark.parametrize("clients", ["open", "gone"])
def test_stop_with_many_streams_is_within_its_bound_and_logs_nothing(many_files, caplog, clients):
    """500 streams stalled forever, their clients still there or all gone: stop() ends
    within its bound (it raises ServerError past it), every stream ends server_stopped
    or client_closed, and nothing is logged (no "Exception in callback ... CancelledError")."""
    scenario = Scenario((Endpoint(PATH, (Stream(events=5, stall=Stall(after=1)),)),))
    server = FakeServer(scenario).start()
    loop = asyncio.new_event_loop()
    writers: list[asyncio.StreamWriter] = []
    caplog.set_level(logging.WARNING)
    try:
        writers = loop.run_until_complete(_open_streams(server.port, PATH, STREAMS))
        server.ledger.wait_for(
            lambda led: sum(1 for a in led.attempts() if a.headers_at) == STREAMS,
            WAIT,
            "every stream open",
        )
        if clients == "gone":
            for writer in writers:
                writer.transport.abort()
            loop.run_until_complete(asyncio.sleep(0))
    finally:
        server.stop()  # raises ServerError if it passes its bound
        for writer in writers:
            writer.transport.abort()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
    ends = {a.end for a in server.ledger.attempts()}
    assert len(server.ledger.attempts()) == STREAMS
    assert ends <= {"server_stopped", "client_closed"}
    if clients == "open":
        assert ends == {"server_stopped"}
    assert [r.getMessage() for r in caplog.records] == []
    server.check()


def test_a_connection_may_wait_long_before_its_request_is_read():
    """Hypercorn's idle timer runs from the accept: the kit gives it a minute, not 5 s,
    so requests queued behind 10,000 others are still answered."""
    assert hypercorn_config().keep_alive_timeout == KEEP_ALIVE >= 60


def test_a_late_request_on_an_early_connection_is_served(fake_server):
    """A connection opened well before its request (here 0.3 s) is answered normally."""
    fake_server.script(PATH, Stream(events=2))
    with socket.create_connection(("127.0.0.1", fake_server.port), timeout=WAIT) as sock:
        threading.Event().wait(0.3)
        sock.sendall(f"GET {PATH} HTTP/1.1\r\nhost: t\r\n\r\n".encode())
        received = b""
        while not received.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
    assert received.startswith(b"HTTP/1.1 200")
