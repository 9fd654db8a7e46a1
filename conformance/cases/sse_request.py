"""SC-SSE, the request and the connection: headers, redirects, HTTP 204.

Ids SC-SSE-19 to SC-SSE-40, 81 and 82 belong to this module, each written where its case is made:
every row is registered for GET (the odd id) and POST (the even id).

The request rows judge the ledger's headers on every request, a retry included (the
first attempt gets a 503). EventSource's constructor sets ``Accept`` (a MAY in HTML,
so a SHOULD here: servers negotiate on it) and the cache mode "no-store", which
Fetch sends as ``Cache-Control: no-cache`` (MUST: the header HTTP/1.1 caches obey)
and ``Pragma: no-cache`` (SHOULD: RFC 9111 §5.4 deprecates Pragma, which only
HTTP/1.0 caches read). Redirects follow Fetch's "follow" mode; reconnections use the
request as the redirects left it (HTML re-fetches "the EventSource object's
request"). A 204 is a server's way to say "stop reconnecting".
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace

from conformance._case import CaseContext, Check, Level, Outcome, Play
from conformance._checks import (
    all_of,
    delivered_exactly,
    ended_with_done,
    ended_with_error,
    unread_at_the_break,
)
from conformance._evidence import Evidence
from conformance.cases._common import (
    BREAK_HOLD,
    PATH,
    RESUME,
    Row,
    one_stream,
    register_row,
    request_for,
    resumed_row,
    retry_budget,
    settle_time,
)
from conformance.cases.sse import server_sequence
from conformance.reference import ClientPolicy
from fake_servers import Attempt, Raw, Respond, Step, Stream

__all__: list[str] = []

NO_STORE = 'WHATWG HTML §9.2.2 (cache mode "no-store"); WHATWG Fetch, HTTP-network-or-cache fetch'
REDIRECT = "WHATWG Fetch §4.4 HTTP-redirect fetch"
EVENTS = 4
MAX_REQUESTS = 21  # Fetch §4.4: a 21st redirect is a network error (1 request + 20 redirects)
MOVED = "/v1/moved"
CALLER_HEADERS = (("authorization", "Bearer sk-streamcheck"), ("x-streamcheck-user", "u-17"))


def _retries_503(policy: ClientPolicy, transport: str) -> str | None:
    """The header rows judge a retry: the profile must retry the first attempt's 503."""
    if not policy.matrix.is_retryable(503):
        return "the profile does not retry a 503"
    if policy.max_attempts is not None and policy.max_attempts < 2:
        return "the profile allows no retry"
    return None


def _cache_rule(policy: ClientPolicy, transport: str) -> str | None:
    """The cache headers come from EventSource's cache mode "no-store": a rule of the
    EventSource transport (GET). A POST is a fetch the caller makes, whose default cache
    mode sends neither header, and caches do not answer a POST with a stored response."""
    if transport == "post":
        return "an EventSource rule (its no-store cache mode); Fetch sends no such header on a POST"
    return _retries_503(policy, transport)


def _answered(ev: Evidence, stream: str = "s1", path: str | None = None) -> Outcome:
    """The stream completed with exactly what the server sent (on ``path``, if given)."""
    if path is not None:
        ev = replace(ev, attempts=tuple(_on(ev, path)))
    return all_of(ended_with_done(ev, stream), delivered_exactly(ev, server_sequence(ev), stream))


def _on(ev: Evidence, path: str) -> list[Attempt]:
    return [a for a in ev.attempts if a.path == path]


def _trail(attempts: Sequence[Attempt]) -> str:
    return ", ".join(f"{a.method} {a.path} -> {a.status}" for a in attempts) or "no request"


# -- the request ---------------------------------------------------------------------


def _retried(policy: ClientPolicy) -> list[Step]:
    """A 503, then the stream (with ids, so a wrongful Last-Event-ID has one to send)."""
    return [Respond(status=503), Stream(events=EVENTS, ids=True)]


def _every_request(what: str, name: str, ok: Callable[[str | None], bool]) -> Check:
    """Each request, the retry included, has header ``name`` as ``ok`` wants it."""

    def check(ev: Evidence, policy: ClientPolicy) -> Outcome:
        want = f"every request, the retry after the 503 included, {what}"
        if len(ev.attempts) < 2:
            return Outcome.failed(want, f"{len(ev.attempts)} request(s): no retry to judge")
        bad = [a for a in ev.attempts if not ok(a.header(name))]
        if bad:
            seen = [f"request {a.number}: {name}: {a.header(name)!r}" for a in bad]
            return Outcome.failed(want, "; ".join(seen))
        return all_of(Outcome.passed(want, f"{len(ev.attempts)} requests do"), _answered(ev))

    return check


def _tokens(value: str | None) -> list[str]:
    """The comma-separated items of a header, lower-cased, without parameters."""
    return [part.split(";")[0].split("=")[0].strip().lower() for part in (value or "").split(",")]


# The header rows: a 503, then the stream, so each check (``_every_request``) judges the
# retry too; a profile that does not retry a 503 has no retry to judge.
_header_row = functools.partial(Row, play=one_stream(_retried, retries=1), applies=_retries_503)


register_row(
    _header_row(
        title="Every request accepts text/event-stream",
        level=Level.SHOULD,
        requirement="A client SHOULD send Accept: text/event-stream on every request of a "
        "stream, a retry included, so a server that negotiates answers with the stream.",
        source="WHATWG HTML §9.2.2 (the EventSource constructor: user agents may set Accept: "
        "text/event-stream); RFC 9110 §12.5.1 (proactive negotiation)",
        check=_every_request(
            "sends Accept: text/event-stream", "accept", lambda v: "text/event-stream" in _tokens(v)
        ),
    ),
    get_id="SC-SSE-19",
    post_id="SC-SSE-20",
)
register_row(
    _header_row(
        title="Every request asks caches for a fresh answer (Cache-Control: no-cache)",
        level=Level.MUST,
        requirement="A client MUST send Cache-Control: no-cache on every request of a stream, "
        "a retry included, so no cache answers with a stored stream (no-store alone does not "
        "stop a cache from serving one).",
        source=f"{NO_STORE} (no-store sends Cache-Control: no-cache); RFC 9111 §5.2.1.4",
        check=_every_request(
            "sends Cache-Control: no-cache", "cache-control", lambda v: "no-cache" in _tokens(v)
        ),
        applies=_cache_rule,
    ),
    get_id="SC-SSE-21",
    post_id="SC-SSE-22",
)
register_row(
    _header_row(
        title="Every request sends Pragma: no-cache for HTTP/1.0 caches",
        level=Level.SHOULD,
        requirement="A client SHOULD also send Pragma: no-cache on every request of a stream, "
        "as Fetch does for the no-store cache mode (only HTTP/1.0 caches read it).",
        source=f"{NO_STORE} (no-store sends Pragma: no-cache); RFC 9111 §5.4 (deprecated)",
        check=_every_request(
            "sends Pragma: no-cache", "pragma", lambda v: "no-cache" in _tokens(v)
        ),
        applies=_cache_rule,
    ),
    get_id="SC-SSE-23",
    post_id="SC-SSE-24",
)
register_row(
    _header_row(
        title="No Last-Event-ID before the stream has set an id",
        level=Level.MUST,
        requirement="A client MUST NOT send Last-Event-ID (not even an empty or placeholder "
        "one) until an event set an id: neither on the first request nor on a retry before "
        "any event arrived.",
        source="WHATWG HTML §9.2.2 (the last event ID string starts empty), §9.2.3 "
        "(reestablish the connection: Last-Event-ID only when that string is not empty)",
        check=_every_request("carries no Last-Event-ID", "last-event-id", lambda v: v is None),
    ),
    get_id="SC-SSE-25",
    post_id="SC-SSE-26",
)


def _equals(value: str) -> Callable[[str | None], bool]:
    return lambda got: got == value


async def _caller_headers_play(ctx: CaseContext) -> None:
    ctx.server.script(PATH, *_retried(ctx.policy))
    base = request_for(ctx.transport)
    ctx.start(replace(base, headers=(*base.headers, *CALLER_HEADERS)))
    await ctx.wait_ended("s1", retry_budget(ctx.policy, 1))


def _caller_headers(ev: Evidence, policy: ClientPolicy) -> Outcome:
    checks = [
        _every_request(f"sends {name}: {value}", name, _equals(value))
        for name, value in CALLER_HEADERS
    ]
    return all_of(*(check(ev, policy) for check in checks))


register_row(
    Row(
        title="The caller's headers go on every request, the retry included",
        level=Level.MUST,
        requirement="A client MUST send the headers its caller set (credentials, ids) on "
        "every request of a stream, a retry included: a retry is the same request.",
        source="WHATWG HTML §9.2.3 (reestablish the connection fetches the same request "
        "again); seeds/002 §Streaming responses (a retry repeats the call)",
        play=_caller_headers_play,
        check=_caller_headers,
        applies=_retries_503,
    ),
    get_id="SC-SSE-27",
    post_id="SC-SSE-28",
)


def _resumed_from_callers_id(ev: Evidence, policy: ClientPolicy) -> Outcome:
    want = "the first request carries the caller's Last-Event-ID: 2"
    if not ev.attempts:
        return Outcome.failed(want, "no request")
    got = ev.attempts[0].last_event_id
    if got != "2":
        return Outcome.failed(want, "no Last-Event-ID" if got is None else f"Last-Event-ID {got!r}")
    return all_of(Outcome.passed(want, "it does"), _answered(ev))


register_row(
    Row(
        title="A Last-Event-ID the caller sets goes on the first request",
        level=Level.MUST,
        requirement="A client that lets its caller resume a stream read earlier MUST send the "
        "caller's id as Last-Event-ID on the first request, and deliver what the server sends "
        "after it, exactly once.",
        source="WHATWG HTML §9.2.4 (the Last-Event-ID header); seeds/002 (never repeat "
        "delivered data)",
        play=one_stream(
            lambda p: [Stream(events=EVENTS, ids=True, resume=True)], last_event_id="2"
        ),
        check=_resumed_from_callers_id,
        needs=RESUME,
    ),
    get_id="SC-SSE-29",
    post_id="SC-SSE-30",
)


# Any character but CR, LF and NUL may stand in an id; this one is not ASCII.
WIDE_ID = "\u00e9t\u00e9-\u00b2"


def _resumed_with_wide_id(ev: Evidence, policy: ClientPolicy) -> Outcome:
    want = f"the resumed request carries Last-Event-ID {WIDE_ID!r}, UTF-8 encoded"
    if len(ev.attempts) < 2:
        return Outcome.failed(
            want, f"{len(ev.attempts)} request(s): the cut stream was not resumed"
        )
    got = ev.attempts[1].last_event_id
    if got != WIDE_ID:
        seen = "no Last-Event-ID" if got is None else f"Last-Event-ID {got!r}"
        return unread_at_the_break(ev, ev.attempts[0]) or Outcome.failed(want, seen)
    return all_of(Outcome.passed(want, "it does"), ended_with_done(ev))


register_row(
    resumed_row(
        title="An id that is not ASCII is sent back as Last-Event-ID, UTF-8 encoded",
        requirement="A client MUST resume with any id the server set, whatever characters "
        "it holds, sent UTF-8 encoded as Last-Event-ID (never dropped, mangled or fatal).",
        source="WHATWG HTML §9.2.4 (Last-Event-ID: the last event ID string, UTF-8 "
        "encoded); §9.2.6 (an id is any text without NUL)",
        # The id'd event, then a comment and the break BREAK_HOLD after it (as ``broken``).
        cut=Raw((f"id: {WIDE_ID}\ndata: a\n\n".encode(), b":\n"), pause=BREAK_HOLD, end="abort"),
        resumed=Stream(events=3),
        check=_resumed_with_wide_id,
    ),
    get_id="SC-SSE-81",
    post_id="SC-SSE-82",
)


# -- redirects -------------------------------------------------------------------------


def _paths(status: int) -> tuple[str, str]:
    """Where the stream of ``status`` starts, and where its redirect leads."""
    return f"/v1/r{status}", f"/v1/r{status}/moved"


def _redirect(status: int, location: str | None) -> Respond:
    return Respond(status=status, headers=() if location is None else (("location", location),))


def _redirected_streams(statuses: Sequence[int]) -> Play:
    """One stream per status, each redirected from its own path to its own answer."""

    async def play(ctx: CaseContext) -> None:
        for status in statuses:
            origin, target = _paths(status)
            ctx.server.script(target, Stream(events=EVENTS))
            ctx.server.script(origin, _redirect(status, target))
        for status in statuses:
            ctx.start(request_for(ctx.transport, path=_paths(status)[0], stream=f"r{status}"))
        for status in statuses:
            await ctx.wait_ended(f"r{status}", retry_budget(ctx.policy, 0))

    return play


def _follows(status: int, ev: Evidence) -> Outcome:
    """The stream of ``status`` went on to its target as Fetch says, and got its answer."""
    origin, target = _paths(status)
    sent, moved = _on(ev, origin), _on(ev, target)
    want = f"the {status} from {origin} followed to {target}, once"
    if len(sent) != 1 or not moved:
        return Outcome.failed(want, _trail(sent + moved))
    first, then = sent[0], moved[0]
    to_get = first.method == "POST" and status in (301, 302, 303)
    if to_get and (then.method, then.body_size) != ("GET", 0):
        got = f"{then.method} with a {then.body_size}-byte body"
        return Outcome.failed(f"{want}, as a GET without the POST's body", got)
    same = (then.method, then.body_size, then.body_sha256)
    if not to_get and same != (first.method, first.body_size, first.body_sha256):
        got = f"{then.method}, {then.body_size} bytes (sha256 {then.body_sha256[:12]})"
        return Outcome.failed(
            f"{want} with the same method and body: {first.method}, {first.body_size} bytes "
            f"(sha256 {first.body_sha256[:12]})",
            got,
        )
    return all_of(Outcome.passed(want, _trail(sent + moved)), _answered(ev, f"r{status}", target))


def _all_follow(statuses: Sequence[int]) -> Check:
    return lambda ev, policy: all_of(*(_follows(status, ev) for status in statuses))


register_row(
    Row(
        title="A 301, 302 or 303 is followed (a POST goes on as a GET without its body)",
        level=Level.MUST,
        requirement="A client MUST follow a 301, 302 or 303 to its Location and deliver the "
        "stream found there; a POST goes on as a GET without its body, as Fetch turns it.",
        source=f"{REDIRECT} (301/302 after a POST, and 303, become a GET without a body)",
        play=_redirected_streams((301, 302, 303)),
        check=_all_follow((301, 302, 303)),
    ),
    get_id="SC-SSE-31",
    post_id="SC-SSE-32",
)
register_row(
    Row(
        title="A 307 or 308 is followed with the same method and the same body bytes",
        level=Level.MUST,
        requirement="A client MUST follow a 307 or 308 to its Location with the same method "
        "and byte-identical body (a multipart boundary included), and deliver the stream "
        "found there.",
        source=f"{REDIRECT} (307 and 308 keep the method and the body)",
        play=_redirected_streams((307, 308)),
        check=_all_follow((307, 308)),
    ),
    get_id="SC-SSE-33",
    post_id="SC-SSE-34",
)


async def _retry_after_303_play(ctx: CaseContext) -> None:
    ctx.server.script(MOVED, Respond(status=503), Stream(events=EVENTS))
    ctx.server.script(PATH, _redirect(303, MOVED))
    ctx.start(request_for(ctx.transport))
    await ctx.wait_ended("s1", retry_budget(ctx.policy, 1))


def _retried_where_led(ev: Evidence, policy: ClientPolicy) -> Outcome:
    want = f"one request to {PATH}, then every request a GET to {MOVED}"
    first, later = ev.attempts[:1], ev.attempts[1:]
    went = [(a.method, a.path) for a in later]
    if [a.path for a in first] != [PATH] or len(later) < 2 or set(went) != {("GET", MOVED)}:
        return Outcome.failed(want, _trail(ev.attempts))
    return all_of(Outcome.passed(want, _trail(ev.attempts)), _answered(ev, path=MOVED))


register_row(
    Row(
        title="After a 303, a retry goes where it led, never back to the original request",
        level=Level.MUST,
        requirement="A client that followed a redirect MUST send its later attempts (a retry, "
        "a resume) as the redirect left the request: after a 303, a GET to its Location, "
        "never the original POST again (that would start a new answer).",
        source="WHATWG HTML §9.2.3 (reestablish the connection: let request be the "
        f"EventSource object's request); {REDIRECT} (which changed its URL, method and body)",
        play=_retry_after_303_play,
        check=_retried_where_led,
        applies=_retries_503,
    ),
    get_id="SC-SSE-35",
    post_id="SC-SSE-36",
)

# The broken redirects, one stream each: a 302 without a Location (then a stream, so a
# retry shows), one with an empty Location, and a 307 loop between two paths.
_BROKEN: tuple[tuple[str, str, tuple[Step, ...]], ...] = (
    ("none", "/v1/none", (_redirect(302, None), Stream(events=EVENTS))),
    ("empty", "/v1/empty", (_redirect(302, ""),)),
    ("loop", "/v1/loop/a", (_redirect(307, "/v1/loop/b"),)),
)
_WHAT = {"none": "a 302 without a Location", "empty": "an empty Location", "loop": "a loop"}


async def _broken_play(ctx: CaseContext) -> None:
    ctx.server.script("/v1/loop/b", _redirect(307, "/v1/loop/a"))
    for _, path, steps in _BROKEN:
        ctx.server.script(path, *steps)
    for stream, path, _ in _BROKEN:
        ctx.start(request_for(ctx.transport, path=path, stream=stream))
    for stream, _, _ in _BROKEN:
        await ctx.wait_ended(stream, retry_budget(ctx.policy, 0))
    await ctx.hold(settle_time(ctx.policy))


def _fails_within(ev: Evidence, stream: str, paths: tuple[str, ...], limit: int) -> Outcome:
    sent = [a for a in ev.attempts if a.path in paths]
    want = f"stream {stream} ({_WHAT[stream]}): at most {limit} request(s), then an error"
    if len(sent) > limit:
        return Outcome.failed(want, f"{len(sent)} requests: {_trail(sent[:3])}, ...")
    return all_of(
        Outcome.passed(want, f"{len(sent)} request(s)"),
        ended_with_error(ev, stream=stream),
        delivered_exactly(ev, [], stream),
    )


def _broken_fail(ev: Evidence, policy: ClientPolicy) -> Outcome:
    return all_of(
        # No Location: the 302 is the answer (Fetch), a status that fails the stream (HTML).
        _fails_within(ev, "none", ("/v1/none",), 1),
        # Empty: no Location to Chromium (1 request); Fetch's letter resolves it to the
        # request's own URL, a loop that ends after 20 redirects. Both end in an error.
        _fails_within(ev, "empty", ("/v1/empty",), MAX_REQUESTS),
        _fails_within(ev, "loop", ("/v1/loop/a", "/v1/loop/b"), MAX_REQUESTS),
    )


register_row(
    Row(
        title="A redirect without a usable Location, or a loop, ends in an error",
        level=Level.MUST,
        requirement="A client MUST surface an error, deliver nothing and stop for a redirect "
        "that leads nowhere: without a Location (one request: the 3xx is the answer), with an "
        "empty one, or in a loop (at most 20 redirects, never retried: it is futile).",
        source=f"{REDIRECT} (a null location URL returns the response; a 21st redirect is a "
        "network error); WHATWG HTML §9.2.3 (a status other than 200 fails the connection; a "
        'reconnection known to be "futile" may fail it)',
        play=_broken_play,
        check=_broken_fail,
    ),
    get_id="SC-SSE-37",
    post_id="SC-SSE-38",
)


# -- HTTP 204 ------------------------------------------------------------------------------


def _stopped_by_204(ev: Evidence, policy: ClientPolicy) -> Outcome:
    want = "no request after the 204 (the 503, the retry that got the 204, nothing more)"
    if len(ev.attempts) != 2:
        return Outcome.failed(want, _trail(ev.attempts))
    return all_of(
        Outcome.passed(want, _trail(ev.attempts)),
        ended_with_error(ev, ["non_retryable_status"], status=204),
        delivered_exactly(ev, []),
    )


register_row(
    Row(
        title="A 204 No Content stops the retries and is surfaced",
        level=Level.MUST,
        requirement="A client MUST stop at a 204 No Content, the server's sign to stop "
        "reconnecting, even while it is retrying: no further request, and a non-retryable "
        "error carrying status 204 for the consumer.",
        source="WHATWG HTML §9.2.1 (a 204 tells a client to stop reconnecting), §9.2.3 "
        "(processing model: a status other than 200 fails the connection)",
        play=one_stream(
            lambda p: [Respond(status=503), Respond(status=204), Stream(events=EVENTS)],
            retries=1,
            settle=True,
        ),
        check=_stopped_by_204,
        applies=_retries_503,
    ),
    get_id="SC-SSE-39",
    post_id="SC-SSE-40",
)
