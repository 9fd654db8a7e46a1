"""Streams over real sockets: every Stream field and ending, byte for byte, and the ledger."""

from __future__ import annotations

import itertools

import httpx
import pytest

from fake_servers._builders import raw
from fake_servers._clock import now
from fake_servers._formats import token
from fake_servers._ledger import Attempt
from fake_servers._render import Send, plan_stream
from fake_servers._script import Framing, Gap, Raw, Stall, Stream

PATH = "/v1/stream"
WAIT = 10.0  # generous deadline for ledger waits on a shared machine


def expected(step: Stream, attempt: int = 1, last_event_id: str | None = None) -> bytes:
    plan = plan_stream(step, seed=0, path=PATH, attempt=attempt, last_event_id=last_event_id)
    return b"".join(a.data for a in plan.actions if isinstance(a, Send))


def fetch(server, headers: dict[str, str] | None = None) -> tuple[httpx.Response, bytes]:
    with (
        httpx.Client(base_url=server.url, timeout=WAIT) as client,
        client.stream("GET", PATH, headers=headers) as response,
    ):
        raw = b"".join(response.iter_raw())
    return response, raw


def finished(server) -> Attempt:
    (attempt,) = server.ledger.wait_finished(WAIT, PATH)
    return attempt


def assert_ledger_matches_plan(attempt: Attempt, step: Stream) -> None:
    plan = plan_stream(step, seed=0, path=PATH, attempt=attempt.number, last_event_id=None)
    planned = [e for a in plan.actions if isinstance(a, Send) for e in a.events]
    assert [(e.index, e.kind, e.id, e.data) for e in attempt.events] == [
        (e.index, e.kind, e.id, e.data) for e in planned
    ]
    times = [e.at for e in attempt.events]
    assert times == sorted(times)
    assert attempt.headers_at is not None
    assert attempt.first_byte_at is not None
    assert attempt.arrived_at <= attempt.headers_at <= attempt.first_byte_at <= times[0]
    assert attempt.ended_at is not None
    assert times[-1] <= attempt.ended_at


FRAMINGS = {
    "plain": Stream(events=4),
    "named-ids": Stream(events=4, format="named", ids=True),
    "crlf": Stream(events=3, framing=Framing(line_ending="crlf")),
    "cr": Stream(events=3, ids=True, framing=Framing(line_ending="cr")),
    "bom-retry-comments": Stream(
        events=6, framing=Framing(bom=True, retry_ms=2500, comment_every=2)
    ),
    "split": Stream(events=9, framing=Framing(split=3)),
    "split-random-paused": Stream(
        events=9, framing=Framing(split=7, split_random=True, split_pause=0.002)
    ),
    "uniform-gap": Stream(events=5, gap=Gap(kind="uniform", low=0.001, high=0.02)),
    "exponential-gap": Stream(events=5, gap=Gap(kind="exponential", seconds=0.01)),
    "buffered": Stream(events=5, gap=Gap(seconds=0.02), framing=Framing(buffered=True)),
    "wrong-content-type": Stream(events=2, framing=Framing(content_type="text/html")),
    "custom-status-and-headers": Stream(events=2, status=201, headers=(("x-trace", "t1"),)),
    "stall-with-seconds": Stream(events=3, stall=Stall(after=1, seconds=0.05)),
    "truncate": Stream(events=3, end="truncate"),
}


@pytest.mark.parametrize("name", FRAMINGS)
def test_stream_bytes_and_ledger(fake_server, name):
    """The body arrives exactly as planned and the ledger records every event in order."""
    step = FRAMINGS[name]
    fake_server.script(PATH, step)
    response, raw = fetch(fake_server)
    assert response.status_code == step.status
    assert response.headers["content-type"] == step.framing.content_type
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    for header, value in step.headers:
        assert response.headers[header] == value
    assert raw == expected(step)
    attempt = finished(fake_server)
    assert (attempt.status, attempt.end, attempt.step) == (step.status, "completed", 0)
    assert attempt.note == ("truncated" if step.end == "truncate" else "done")
    assert (attempt.ending, attempt.response_header("content-type")) == (
        step.end,
        step.framing.content_type,
    )
    assert (attempt.stall is None) == (step.stall is None)
    assert_ledger_matches_plan(attempt, step)


def test_gaps_space_the_events_out(fake_server):
    """A fixed gap separates consecutive events' send times by at least the gap."""
    step = Stream(events=4, gap=Gap(seconds=0.05))
    fake_server.script(PATH, step)
    fetch(fake_server)
    times = [e.at for e in finished(fake_server).events]
    assert all(b - a >= 0.045 for a, b in itertools.pairwise(times))


def test_delay_holds_back_the_headers(fake_server):
    """delay: the headers leave no sooner than ``delay`` after the request arrived."""
    fake_server.script(PATH, Stream(events=1, delay=0.2))
    started = now()
    fetch(fake_server)
    attempt = finished(fake_server)
    assert attempt.headers_at is not None
    assert attempt.headers_at - attempt.arrived_at >= 0.2
    assert attempt.headers_at - started >= 0.2


def test_buffered_sends_the_whole_body_in_one_write(fake_server):
    """buffered: every event is recorded at the same instant, after the summed gaps."""
    fake_server.script(
        PATH, Stream(events=4, gap=Gap(seconds=0.03), framing=Framing(buffered=True))
    )
    fetch(fake_server)
    attempt = finished(fake_server)
    assert len({e.at for e in attempt.events}) == 1
    assert attempt.headers_at is not None
    assert attempt.first_byte_at is not None
    assert attempt.first_byte_at - attempt.headers_at >= 0.09  # the three gaps, summed


def test_keepalive_stall_sends_comments_but_no_data(fake_server, raw_connect):
    """A keepalive stall sends a comment every interval and no events until it ends."""
    step = Stream(events=2, stall=Stall(after=1, seconds=0.35, keepalive=0.1))
    fake_server.script(PATH, step)
    conn = raw_connect(fake_server.port)
    conn.request(PATH)
    conn.read_head()
    payload, terminated = conn.read_chunked()
    assert terminated
    first, second, done = (expected(Stream(events=2)).split(b"\n\n"))[:3]
    assert payload == first + b"\n\n" + b": keepalive\n" * 3 + second + b"\n\n" + done + b"\n\n"
    attempt = finished(fake_server)
    assert [e.kind for e in attempt.events] == [
        "data",
        "comment",
        "comment",
        "comment",
        "data",
        "terminal",
    ]
    # The beats keep to their schedule from the stall's start (no drift): each comes no
    # sooner than its slot, though one stamped late (a loaded loop) leaves the next gap
    # short; the stamps come after each write, so a beat is never stamped early.
    start = attempt.events[0].at
    beats = [e.at for e in attempt.events[1:4]]
    assert all(at - start >= 0.1 * (k + 1) - 0.01 for k, at in enumerate(beats))
    assert attempt.stall is not None
    assert (attempt.stall.after, attempt.stall.keepalive) == (1, 0.1)
    assert attempt.events[0].at <= attempt.stall.at <= attempt.events[1].at


def test_abort_leaves_the_chunked_body_unterminated(fake_server, raw_connect):
    """abort: every event arrives, then the connection closes without the final chunk."""
    step = Stream(events=3, end="abort")
    fake_server.script(PATH, step)
    conn = raw_connect(fake_server.port)
    conn.request(PATH)
    status, headers = conn.read_head()
    assert status == 200
    assert headers["transfer-encoding"] == "chunked"
    payload, terminated = conn.read_chunked()
    assert not terminated
    assert payload == expected(step)
    attempt = finished(fake_server)
    assert (attempt.end, attempt.note) == ("aborted", "aborted")
    assert [e.index for e in attempt.events] == [1, 2, 3]


def test_abort_is_a_protocol_error_for_httpx(fake_server):
    """httpx sees an aborted stream as an incomplete chunked read."""
    fake_server.script(PATH, Stream(events=2, end="abort"))
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        fetch(fake_server)


def test_abort_mid_line_ends_inside_a_character(fake_server, raw_connect):
    """abort_mid_line: the body stops inside the next data line, mid UTF-8 character."""
    wide = next(i for i in range(2, 40) if not token(0, PATH, i).isascii())
    step = Stream(events=wide - 1, end="abort_mid_line")
    fake_server.script(PATH, step)
    conn = raw_connect(fake_server.port)
    conn.request(PATH)
    conn.read_head()
    payload, terminated = conn.read_chunked()
    assert not terminated
    assert payload == expected(step)
    last_line = payload.rsplit(b"\n", 1)[1]
    assert last_line.startswith(b"data: {")
    with pytest.raises(UnicodeDecodeError):
        last_line.decode()
    attempt = finished(fake_server)
    assert (attempt.end, attempt.note) == ("aborted", "aborted mid-line")
    assert len(attempt.data_events) == wide - 1


def test_split_pieces_cross_the_wire_apart(fake_server, raw_connect):
    """split with a pause: the body arrives in many separate TCP reads."""
    step = Stream(events=1, end="truncate", framing=Framing(split=16, split_pause=0.02))
    fake_server.script(PATH, step)
    conn = raw_connect(fake_server.port)
    conn.request(PATH)
    conn.read_head()
    reads = 0
    while b"0\r\n\r\n" not in conn.buffer:
        conn.read_more()
        reads += 1
    payload, _ = conn.decode_chunked(conn.buffer)
    assert payload == expected(step)
    assert reads >= len(payload) // 16 // 2  # pauses of 20 ms keep most pieces apart


def test_last_event_id_resumes_the_same_answer(fake_server):
    """A request with Last-Event-ID k gets events k+1..N of the same answer."""
    step = Stream(events=5, ids=True)
    fake_server.script(PATH, step)
    _, full = fetch(fake_server)
    _, resumed = fetch(fake_server, headers={"Last-Event-ID": "3"})
    assert resumed == expected(step, attempt=2, last_event_id="3")
    assert full.endswith(resumed)
    assert resumed.startswith(b"id: 4\n")
    first, second = fake_server.ledger.wait_finished(WAIT, PATH)
    assert (first.last_event_id, second.last_event_id) == (None, "3")
    assert [e.index for e in second.data_events] == [4, 5]


# -- raw steps: exact bytes -------------------------------------------------------------

RAW = (b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n", b"id: 1\x00\ndata: \xff\r\n\r", b"\ndata")


def test_raw_step_sends_its_pieces_byte_for_byte(fake_server, raw_connect):
    """Each piece goes out as it is (a BOM twice, NUL, invalid UTF-8, a cut CRLF), one
    write each, and the ledger records the attempt with no events: nothing was parsed."""
    fake_server.script(PATH, Raw(RAW, headers=(("x-raw", "1"),)))
    conn = raw_connect(fake_server.port)
    conn.request(PATH)
    status, headers = conn.read_head()
    assert (status, headers["content-type"], headers["x-raw"]) == (
        200,
        "text/event-stream; charset=utf-8",
        "1",
    )
    payload, terminated = conn.read_chunked()
    assert (payload, terminated) == (b"".join(RAW), True)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in RAW)
    assert conn.buffer.startswith(chunks)  # one chunk per piece
    attempt = finished(fake_server)
    assert (attempt.end, attempt.note, attempt.events) == (
        "completed",
        f"raw: 3 write(s), {len(payload)} bytes",
        (),
    )
    assert attempt.ending is None  # not a scripted stream: the bytes are all it sent
    assert attempt.arrived_at <= attempt.headers_at <= attempt.first_byte_at <= attempt.ended_at


def test_raw_step_pauses_between_pieces_and_can_abort(fake_server, raw_connect):
    """``pause`` separates the writes (never less on a busy machine); ``abort`` leaves
    the body unterminated, as a stream's abort does."""
    fake_server.script(
        PATH, raw(["data: a\n\n", "data: b\n\n", "data: c"], pause=0.05, end="abort")
    )
    conn = raw_connect(fake_server.port)
    conn.request(PATH)
    conn.read_head()
    payload, terminated = conn.read_chunked()
    assert (payload, terminated) == (b"data: a\n\ndata: b\n\ndata: c", False)
    attempt = finished(fake_server)
    assert attempt.end == "aborted"
    assert attempt.ended_at - attempt.first_byte_at >= 2 * 0.05 - 0.005  # clock granularity


def test_raw_step_carries_a_5_mib_event(fake_server):
    """A body far larger than one write arrives whole (the limit is the scripted body's)."""
    line = b"data: " + bytes(range(48, 112)) * (5 * 1024 * 1024 // 64) + b"\n\n"
    fake_server.script(PATH, Raw(tuple(line[i : i + 65536] for i in range(0, len(line), 65536))))
    response, body = fetch(fake_server)
    assert (response.status_code, body) == (200, line)
