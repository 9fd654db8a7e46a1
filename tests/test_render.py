"""The pure parts of the server: content, formats, the stream planner, body checks."""

from __future__ import annotations

import email.utils
import itertools
import json
from dataclasses import replace

import pytest

from fake_servers._app import check_json, check_multipart
from fake_servers._formats import (
    _REGISTRY,
    Answer,
    OpenAIFormat,
    format_names,
    get_format,
    register_format,
    token,
)
from fake_servers._render import (
    Abort,
    Action,
    Hold,
    Send,
    StreamPlan,
    plan_respond,
    plan_stream,
    retry_hint,
)
from fake_servers._script import Framing, Gap, Respond, Stall, Stream

PATH = "/v1/chat"
TICK = Gap(seconds=0.01)  # any gap keeps writes apart (without one they are merged)


def plan(step: Stream, *, attempt: int = 1, last_event_id: str | None = None) -> StreamPlan:
    return plan_stream(step, seed=7, path=PATH, attempt=attempt, last_event_id=last_event_id)


def body(actions: tuple[Action, ...]) -> bytes:
    return b"".join(a.data for a in actions if isinstance(a, Send))


def data_indexes(actions: tuple[Action, ...]) -> list[int]:
    return [e.index for a in actions if isinstance(a, Send) for e in a.events if e.kind == "data"]


def kinds(actions: tuple[Action, ...]) -> list[str]:
    return [type(a).__name__ for a in actions]


# -- content --------------------------------------------------------------------------


def test_tokens_are_a_pure_function_of_seed_path_and_index():
    """The same (seed, path, i) always gives the same token; seed and path change the answer."""
    answer = [token(7, PATH, i) for i in range(1, 65)]
    assert answer == [token(7, PATH, i) for i in range(1, 65)]
    assert answer != [token(8, PATH, i) for i in range(1, 65)]
    assert answer != [token(7, "/other", i) for i in range(1, 65)]
    assert all(t.startswith(" ") and len(t) > 1 for t in answer)


def test_a_token_is_the_same_however_the_answer_was_drawn():
    """Tokens kept in batches (doubling from a few) are the tokens drawn one by one, in
    any order of asking, across batch boundaries and past the kept ones."""
    indices = [3, 1, 17, 16, 40, 2000, 33, 1500, 9, 300_000, 5000]
    kept = Answer(5, PATH)
    assert [kept.token(i) for i in indices] == [Answer(5, PATH)._draw_token(i) for i in indices]


def test_a_short_answer_draws_few_tokens():
    """Asking for the first tokens draws two blocks of eight, not a thousand."""
    answer = Answer(5, PATH)
    answer.token(6)
    assert len(answer._kept) == 1 + 16


def test_one_token_in_eight_is_multibyte():
    """Each block of eight tokens holds exactly one multi-byte token."""
    for block in range(20):
        tokens = [token(3, PATH, block * 8 + i) for i in range(1, 9)]
        wide = [t for t in tokens if len(t.encode()) != len(t)]
        assert len(wide) == 1, tokens


def test_formats_are_registered_by_name():
    """openai and named are built in; new formats register by name; unknown names fail."""
    assert {"openai", "named"} <= set(format_names())
    assert get_format("named").data_event(3, " hi") == ("token", '{"text":" hi","index":3}')
    assert get_format("named").terminal_event() == ("done", "{}")
    with pytest.raises(KeyError, match="unknown event format 'nope'"):
        get_format("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_format("openai", OpenAIFormat())
    register_format("test-custom", OpenAIFormat(model="custom-model"), replace=True)
    try:
        assert "custom-model" in get_format("test-custom").data_event(1, " x")[1]
    finally:  # the registry is global: other tests list its names
        _REGISTRY.pop("test-custom")


def test_openai_chunks_look_like_chat_completion_chunks():
    """An openai data event is a chat.completion.chunk carrying the token as delta content."""
    name, data = get_format("openai").data_event(1, " café")
    chunk = json.loads(data)
    assert name is None
    assert "café" in data  # raw UTF-8, not \\u escapes, so bytes can be split mid-character
    assert chunk["object"] == "chat.completion.chunk"
    assert {"id", "created", "model"} <= set(chunk)
    assert chunk["choices"][0]["delta"]["content"] == " café"
    assert get_format("openai").terminal_event() == (None, "[DONE]")


# -- plan_stream: events and endings ------------------------------------------------------


def test_plain_stream_sends_each_event_then_the_terminal_event():
    """events=3 with a gap: three data writes then [DONE], each completing its own event."""
    p = plan(Stream(events=3, gap=TICK))
    assert p.status == 200
    assert p.delay == 0.0
    assert kinds(p.actions) == ["Send"] * 4
    assert data_indexes(p.actions) == [1, 2, 3]
    lines = body(p.actions).decode().split("\n\n")
    assert lines[3] == "data: [DONE]"
    assert lines[4] == ""
    first = json.loads(lines[0].removeprefix("data: "))
    assert first["choices"][0]["delta"]["content"] == token(7, PATH, 1)


def test_named_events_with_ids_are_byte_exact():
    """Named format with ids: id, event and data lines, blank line after each event."""
    p = plan(Stream(events=2, format="named", ids=True))
    t1, t2 = token(7, PATH, 1), token(7, PATH, 2)
    expected = (
        f'id: 1\nevent: token\ndata: {{"text":"{t1}","index":1}}\n\n'
        f'id: 2\nevent: token\ndata: {{"text":"{t2}","index":2}}\n\n'
        "event: done\ndata: {}\n\n"
    )
    assert body(p.actions) == expected.encode()


def test_headers_carry_content_type_and_no_buffering_hints():
    """Content type from framing, cache-control and x-accel-buffering, then the script's own."""
    step = Stream(headers=(("x-extra", "1"),), framing=Framing(content_type="text/plain"))
    assert plan(step).headers == (
        ("content-type", "text/plain"),
        ("cache-control", "no-cache"),
        ("x-accel-buffering", "no"),
        ("x-extra", "1"),
    )


@pytest.mark.parametrize(
    ("end", "last_kind", "terminal"),
    [("done", "Send", True), ("truncate", "Send", False), ("abort", "Abort", False)],
)
def test_endings(end, last_kind, terminal):
    """done ends with the terminal event, truncate without it, abort with an Abort."""
    p = plan(Stream(events=2, end=end))
    assert kinds(p.actions)[-1] == last_kind
    assert (b"[DONE]" in body(p.actions)) is terminal
    assert data_indexes(p.actions) == [1, 2]


def test_abort_mid_line_cuts_the_next_data_line_inside_a_character():
    """abort_mid_line sends part of event N+1's data line, ending inside a UTF-8 character."""
    wide = next(i for i in range(2, 40) if len(token(7, PATH, i).encode()) > len(token(7, PATH, i)))
    p = plan(Stream(events=wide - 1, end="abort_mid_line", ids=True, gap=TICK))
    assert kinds(p.actions)[-2:] == ["Send", "Abort"]
    partial = p.actions[-2]
    assert isinstance(partial, Send)
    assert partial.events == ()
    assert partial.data.startswith(f"id: {wide}\ndata: ".encode())
    assert b"\n" not in partial.data.split(b"data: ")[1]
    with pytest.raises(UnicodeDecodeError):
        partial.data.decode()
    assert data_indexes(p.actions) == list(range(1, wide))


def test_abort_mid_line_without_multibyte_cuts_the_line_in_half():
    """With an ASCII-only next token the cut falls in the middle of the data line."""
    ascii_index = next(i for i in range(2, 40) if token(7, PATH, i).isascii())
    p = plan(Stream(events=ascii_index - 1, end="abort_mid_line", gap=TICK))
    partial = p.actions[-2]
    assert isinstance(partial, Send)
    _, full = get_format("openai").data_event(ascii_index, token(7, PATH, ascii_index))
    line = partial.data.split(b"data: ")[1]
    assert 0 < len(line) < len(full.encode())
    assert full.encode().startswith(line)


# -- plan_stream: resume, gaps, stalls -----------------------------------------------------


def test_resume_continues_after_a_numeric_last_event_id():
    """With ids and resume, Last-Event-ID k sends k+1..N of the same answer."""
    full = plan(Stream(events=6, ids=True))
    resumed = plan(Stream(events=6, ids=True), last_event_id="4", attempt=2)
    assert data_indexes(resumed.actions) == [5, 6]
    assert body(full.actions).endswith(body(resumed.actions))


@pytest.mark.parametrize(
    ("step", "last_id"),
    [
        (Stream(events=3, ids=True, resume=False), "2"),
        (Stream(events=3, ids=False), "2"),
        (Stream(events=3, ids=True), "abc"),
        (Stream(events=3, ids=True), "-1"),
    ],
)
def test_last_event_id_is_ignored_unless_resumable_and_numeric(step, last_id):
    """Without ids+resume, or with a non-numeric id, the answer starts again at 1."""
    assert data_indexes(plan(step, last_event_id=last_id).actions) == [1, 2, 3]


def test_resume_past_the_end_sends_only_the_ending():
    """A Last-Event-ID at or past N sends no data events, just the terminal event."""
    p = plan(Stream(events=3, ids=True), last_event_id="3")
    assert data_indexes(p.actions) == []
    assert body(p.actions) == b"data: [DONE]\n\n"


def test_writes_without_a_pause_between_them_are_merged():
    """Gapless events go out as one write; a stall still separates the writes around it."""
    p = plan(Stream(events=4, stall=Stall(after=2, seconds=1), framing=Framing(retry_ms=10)))
    assert kinds(p.actions) == ["Send", "Hold", "Send"]
    first, _, second = p.actions
    assert isinstance(first, Send)
    assert isinstance(second, Send)
    assert [e.kind for e in first.events] == ["retry", "data", "data"]
    assert [e.kind for e in second.events] == ["data", "data", "terminal"]
    assert body(p.actions) == body(plan(Stream(events=4, framing=Framing(retry_ms=10))).actions)


def test_fixed_gap_goes_between_events_not_before_the_first():
    """A fixed gap is the pause before every write but the first."""
    p = plan(Stream(events=3, gap=Gap(seconds=0.25)))
    assert [a.pause for a in p.actions if isinstance(a, Send)] == [0.0, 0.25, 0.25, 0.25]


@pytest.mark.parametrize(
    ("gap", "low", "high"),
    [
        (Gap(kind="uniform", low=0.1, high=0.3), 0.1, 0.3),
        (Gap(kind="exponential", seconds=0.05), 0.0, 5.0),
    ],
)
def test_random_gaps_are_seeded_by_attempt(gap, low, high):
    """Random gaps stay in bounds, repeat for the same attempt and differ for another."""
    step = Stream(events=20, gap=gap)
    pauses = [a.pause for a in plan(step).actions if isinstance(a, Send)][1:]
    assert all(low <= p <= high for p in pauses)
    assert pauses == [a.pause for a in plan(step).actions if isinstance(a, Send)][1:]
    assert pauses != [a.pause for a in plan(step, attempt=2).actions if isinstance(a, Send)][1:]


@pytest.mark.parametrize(
    ("after", "last_event_id", "position"), [(0, None, 0), (2, None, 2), (3, None, 3), (3, "2", 1)]
)
def test_stall_goes_after_the_given_number_of_events(after, last_event_id, position):
    """Stall(after=k) holds after k events; 0 before the first, past those sent before the end."""
    stall = Stall(after=after, seconds=1.5)
    step = Stream(events=3, stall=stall, gap=Gap(seconds=0.1), ids=True)
    p = plan(step, last_event_id=last_event_id)
    assert isinstance(p.actions[position], Hold)
    assert p.actions[position] == Hold(1.5, None, b": keepalive\n")
    following = p.actions[position + 1]
    assert isinstance(following, Send)
    assert following.pause == 0.0


def test_keepalive_stall_forever_then_abort():
    """A keepalive stall forever keeps its comment bytes; abort still comes last."""
    step = Stream(events=1, end="abort", stall=Stall(after=1, seconds=None, keepalive=0.5))
    assert plan(step).actions[1:] == (Hold(None, 0.5, b": keepalive\n"), Abort())


# -- plan_stream: framing -------------------------------------------------------------------


@pytest.mark.parametrize(("ending", "eol"), [("lf", b"\n"), ("cr", b"\r"), ("crlf", b"\r\n")])
def test_line_endings_apply_to_every_line(ending, eol):
    """Every line, blank lines included, ends with the chosen line ending."""
    step = Stream(events=2, ids=True, format="named", framing=Framing(line_ending=ending))
    raw = body(plan(step).actions)
    assert raw.count(eol) == 2 * 4 + 3  # per event: id, event, data, blank; done: 2 + blank
    bare = raw.replace(eol, b"")
    assert b"\r" not in bare
    assert b"\n" not in bare


def test_bom_retry_and_comments():
    """BOM first, then the retry field, and a comment before every k-th event."""
    framing = Framing(bom=True, retry_ms=1500, comment_every=2)
    p = plan(Stream(events=4, framing=framing))
    raw = body(p.actions)
    assert raw.startswith(b"\xef\xbb\xbfretry: 1500\n\n")
    assert raw.count(b": ping\n") == 2
    events = [e for a in p.actions if isinstance(a, Send) for e in a.events]
    assert [e.kind for e in events] == [
        "retry", "data", "comment", "data", "data", "comment", "data", "terminal",
    ]  # fmt: skip
    assert events[0].data == "1500"
    assert events[0].index == 0


def test_bom_precedes_a_stall_at_the_start():
    """With a stall before any event, the BOM is still the very first byte."""
    p = plan(Stream(events=1, stall=Stall(after=0, seconds=1), framing=Framing(bom=True)))
    assert p.actions[0] == Send(b"\xef\xbb\xbf")
    assert isinstance(p.actions[1], Hold)


def test_split_cuts_every_write_and_completes_events_on_the_last_piece():
    """split=5: pieces of at most 5 bytes; the events ride on each write's last piece."""
    whole = plan(Stream(events=3, gap=Gap(seconds=0.2)))
    step = Stream(events=3, gap=Gap(seconds=0.2), framing=Framing(split=5, split_pause=0.01))
    split = plan(step)
    sends = [a for a in split.actions if isinstance(a, Send)]
    assert body(split.actions) == body(whole.actions)
    assert all(1 <= len(s.data) <= 5 for s in sends)
    assert data_indexes(split.actions) == [1, 2, 3]
    assert sorted({s.pause for s in sends}) == [0.0, 0.01, 0.2]
    continued = [s for s, nxt in itertools.pairwise(sends) if nxt.pause == 0.01]
    assert continued
    assert all(s.events == () for s in continued)


def test_split_random_is_seeded_and_can_cut_inside_characters():
    """Random piece sizes are reproducible per attempt, and some cut inside a character."""
    step = Stream(events=24, framing=Framing(split=3, split_random=True))
    pieces = [a.data for a in plan(step).actions if isinstance(a, Send)]
    assert pieces == [a.data for a in plan(step).actions if isinstance(a, Send)]
    assert {len(p) for p in pieces} == {1, 2, 3}
    assert any(_cuts_a_character(p) for p in pieces)


def _cuts_a_character(piece: bytes) -> bool:
    try:
        piece.decode()
    except UnicodeDecodeError:
        return True
    return False


def test_buffered_sends_everything_at_once_after_the_gaps():
    """buffered: one write whose pause is the sum of the gaps; a stall still comes first."""
    step = Stream(events=3, gap=Gap(seconds=0.1), stall=Stall(after=2, seconds=2))
    unbuffered = plan(step)
    p = plan(replace(step, framing=Framing(buffered=True)))
    assert kinds(p.actions) == ["Hold", "Send"]
    send = p.actions[1]
    assert isinstance(send, Send)
    assert send.data == body(unbuffered.actions)
    assert send.pause == pytest.approx(0.1 * 2)  # the stall took the gap before event 3
    assert [e.index for e in send.events] == [1, 2, 3, 4]


def test_plans_are_deterministic():
    """The same inputs always give the same plan."""
    step = Stream(
        events=10,
        gap=Gap(kind="exponential", seconds=0.01),
        framing=Framing(split=7, split_random=True),
    )
    assert plan(step, attempt=3) == plan(step, attempt=3)


# -- plan_respond -------------------------------------------------------------------------


def test_respond_default_body_is_a_json_error_naming_the_status():
    """body=None gives a JSON error with the status, plus content type and length."""
    status, headers, raw = plan_respond(Respond(status=429), sent_at_epoch=0.0)
    error = json.loads(raw)["error"]
    assert status == 429
    assert error["status"] == 429
    assert error["type"] == "rate_limit_error"
    assert "429" in error["message"]
    assert dict(headers) == {"content-type": "application/json", "content-length": str(len(raw))}


def test_respond_keeps_script_headers_and_body():
    """A scripted body and headers go out as given, with a content-length added."""
    step = Respond(status=200, headers=(("Content-Type", "text/plain"),), body=b"hello")
    assert plan_respond(step, sent_at_epoch=0.0) == (
        200,
        (("Content-Type", "text/plain"), ("content-length", "5")),
        b"hello",
    )


def test_no_content_has_no_body():
    """A 204 has an empty body and no content-length."""
    assert plan_respond(Respond(status=204), sent_at_epoch=0.0) == (204, (), b"")


def test_retry_after_date_rounds_up_to_a_whole_second():
    """Retry-After as an HTTP date at least that many seconds after sending."""
    _, headers, _ = plan_respond(
        Respond(status=503, retry_after_date=3), sent_at_epoch=1_700_000_000.2
    )
    value = dict(headers)["retry-after"]
    assert value.endswith(" GMT")
    assert email.utils.parsedate_to_datetime(value).timestamp() == 1_700_000_004


@pytest.mark.parametrize(
    ("headers", "date_offset", "hint"),
    [
        ((("Retry-After", "7"),), None, 7.0),
        ((("retry-after", "7"), ("retry-after-ms", "800")), None, 0.8),
        ((("retry-after-ms", "soon"), ("retry-after", "2")), None, 2.0),
        ((("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),), None, None),
        ((("retry-after", "-1"),), None, None),
        ((("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),), 3.0, 3.0),
        ((), None, None),
    ],
)
def test_the_retry_hint_the_ledger_records(headers, date_offset, hint):
    """ms over seconds; a scripted date by its offset; a literal date or junk is no hint."""
    assert retry_hint(headers, date_offset) == hint


# -- body checks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "status"),
    [(b'{"prompt": "hi"}', None), (b"{nope", 400), (b"\xff", 400), (b"[1]", 422), (b"3", 422)],
)
def test_json_bodies(raw, status):
    """JSON must parse (400) and be an object (422)."""
    rejection = check_json(raw)
    assert (rejection.status if rejection else None) == status


def multipart(*parts: tuple[str, str | None, bytes], boundary: str = "XyZ") -> bytes:
    out = b""
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"'
        if filename:
            disposition += f'; filename="{filename}"'
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        out += data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def test_multipart_checks():
    """Multipart needs a prompt (422), files within the limit (413), and valid framing (400)."""
    ok = multipart(("prompt", None, b"hi"), ("image", "a.png", b"x" * 10))
    assert check_multipart(ok, b"XyZ", 10) is None
    big = check_multipart(ok, b"XyZ", 9)
    assert big is not None
    assert big.status == 413
    assert big.extra["file"] == "a.png"
    assert big.extra["limit"] == 9
    no_prompt = check_multipart(multipart(("image", "a.png", b"x")), b"XyZ", 10)
    assert no_prompt is not None
    assert no_prompt.status == 422
    for broken in (b"garbage", ok[:-10], ok.replace(b"form-data; ", b"")):
        rejection = check_multipart(broken, b"XyZ", 10)
        assert rejection is not None, broken[-40:]
        assert rejection.status == 400


def test_no_content_drops_a_scripted_body():
    """A 204 never carries a body, even a scripted one."""
    assert plan_respond(Respond(status=204, body=b"x"), sent_at_epoch=0.0) == (204, (), b"")
