"""SC-POST: POST streams with a body (the seed article's fetch + ReadableStream client).

Two families of rules. A retried POST sends the very same request: the same body
bytes (a multipart boundary is chosen once) and the same headers, so that an
idempotency key means what it says. A non-idempotent POST (the seed library's
``idempotent: false``) runs at most once: once its bytes may have reached the
server it is never re-sent, whatever the failure.

What a client cannot know decides the line. A request whose bytes were written
may have been seen even if the connection then broke before any answer (the
proxy's ``Fault.reset(0, "upstream")`` cuts it before the server, but the client
cannot tell that from a reset after it): never re-sent (MUST). A refused connection
sent nothing, so re-sending cannot run it twice: retrying it is the seed article's
default for network errors (SHOULD), while the seed library's narrower reading (it
repeats only attempts that never started) keeps giving up conformant.

Every row runs on POST only, registered with its id where it is written.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from collections.abc import Callable, Sequence

from conformance._case import (
    CaseContext,
    JsonBody,
    Level,
    MultipartBody,
    Outcome,
    Play,
    StreamRequest,
)
from conformance._checks import all_of, delivered_exactly, ended_with_done, ended_with_error
from conformance._evidence import Evidence
from conformance.cases._common import (
    PATH,
    Row,
    one_stream,
    refused_applies,
    refused_then_online,
    register_row,
    retry_budget,
    settle_time,
)
from conformance.cases.sse import server_sequence
from conformance.reference import ClientPolicy
from fake_servers import Attempt, Fault, Respond, Step, Stream

__all__ = ["image_bytes", "multipart_request", "unsafe_request"]

ARTICLE = "seeds/000 §Why We Run Two Streaming Clients (fetch POST with a prompt and images)"
UNSAFE = 'seeds/002 §Streaming responses (idempotent: false: "must not run twice"); RFC 9110 §9.2.2'
EVENTS = 5
IMAGE_SIZE = 1_500_000  # the article allows 5 MB images; 1.5 MB keeps the case fast
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@functools.cache
def image_bytes() -> bytes:
    """A deterministic 1.5 MB stand-in for a PNG screenshot (random bytes do not compress)."""
    return PNG_SIGNATURE + random.Random(20240501).randbytes(IMAGE_SIZE - len(PNG_SIGNATURE))


def multipart_request() -> StreamRequest:
    """A prompt and an image as multipart/form-data, as the article's chat edits send."""
    body = MultipartBody(
        fields=(("prompt", "Make the headline bigger, add a testimonial section."),),
        files=(("image", "hero.png", "image/png", image_bytes()),),
    )
    return StreamRequest(
        PATH,
        "POST",
        headers=(("idempotency-key", "streamcheck-multipart"),),
        body=body,
        idempotent=True,
    )


# -- checks ------------------------------------------------------------------------


# A header that counts attempts (the openai and anthropic SDKs' x-stainless-retry-count:
# 0, 1, 2) describes the attempt, not the request: a retry that counts on is still the
# same request. It counts when its name says so and, on every attempt, it is a whole
# number one above the previous attempt's.
_COUNTER_NAME = re.compile(r"retry|attempt")


def _counters(attempts: Sequence[Attempt]) -> frozenset[str]:
    """The names of the headers that count ``attempts`` one by one."""
    counting = set()
    for name, _ in attempts[0].headers:
        values = [a.header(name) for a in attempts]
        if _COUNTER_NAME.search(name) and all(v is not None and v.isdecimal() for v in values):
            numbers = [int(str(v)) for v in values]
            if all(b == a + 1 for a, b in itertools.pairwise(numbers)):
                counting.add(name)
    return frozenset(counting)


def _headers(attempt: Attempt, counters: frozenset[str]) -> list[tuple[str, str]]:
    # order carries no meaning; names and values do (but for an attempt counter's value)
    return sorted((k, v) for k, v in attempt.headers if k not in counters)


def _same_request(ev: Evidence, at_least: int) -> Outcome:
    want = f"at least {at_least} attempts, each with the first one's body and headers"
    attempts = ev.attempts
    if len(attempts) < at_least:
        return Outcome.failed(want, f"{len(attempts)} attempt(s)")
    first = attempts[0]
    counters = _counters(attempts)
    for a in attempts[1:]:
        if (a.body_size, a.body_sha256) != (first.body_size, first.body_sha256):
            return Outcome.failed(
                want,
                f"attempt {a.seq} sent a different body",
                f"attempt {first.seq}: {first.body_size} B sha256 {first.body_sha256[:16]}",
                f"attempt {a.seq}: {a.body_size} B sha256 {a.body_sha256[:16]}",
            )
        if _headers(a, counters) != _headers(first, counters):
            changed = sorted(set(_headers(a, counters)) ^ set(_headers(first, counters)))
            return Outcome.failed(
                want,
                f"attempt {a.seq} sent different headers",
                *(f"{name}: {value}" for name, value in changed),
            )
    return Outcome.passed(want, f"{len(attempts)} identical attempts")


def _completed(ev: Evidence) -> Outcome:
    return all_of(ended_with_done(ev), delivered_exactly(ev, server_sequence(ev)))


def _json_identical(ev: Evidence, policy: ClientPolicy) -> Outcome:
    return all_of(_same_request(ev, 3), _completed(ev))


def _carries_image(ev: Evidence) -> Outcome:
    want = f"a multipart/form-data body larger than the {IMAGE_SIZE} B image"
    first = ev.attempts[0] if ev.attempts else None
    if first is None:
        return Outcome.failed(want, "no attempt reached the server")
    kind = first.header("content-type") or ""
    if kind.startswith("multipart/form-data") and first.body_size > IMAGE_SIZE:
        return Outcome.passed(want, f"{first.body_size} B")
    return Outcome.failed(want, f"{kind or 'no content-type'}, {first.body_size} B")


def _multipart_identical(ev: Evidence, policy: ClientPolicy) -> Outcome:
    return all_of(_carries_image(ev), _same_request(ev, 2), _completed(ev))


def _seen_once(ev: Evidence) -> Outcome:
    want = "the server sees the non-idempotent request exactly once"
    if len(ev.attempts) == 1:
        return Outcome.passed(want, "once")
    return Outcome.failed(
        want,
        f"{len(ev.attempts)} times",
        *(f"attempt {a.seq}: status {a.status}, end {a.end}" for a in ev.attempts),
    )


def _surfaced_once(ev: Evidence, policy: ClientPolicy) -> Outcome:
    return all_of(_seen_once(ev), delivered_exactly(ev, []), ended_with_error(ev))


def _written_once(ev: Evidence, policy: ClientPolicy) -> Outcome:
    """The request's bytes went out on one connection only (the proxy counted them)."""
    written = [c for c in ev.connections if c.bytes_up > 0]
    want = "the request is written once: never re-sent after its bytes went out"
    once = (
        Outcome.passed(want, "one connection carried it")
        if len(written) == 1
        else Outcome.failed(
            want,
            f"{len(written)} connections carried request bytes",
            *(f"connection {c.seq}: {c.bytes_up} B up, fault {c.fault or '-'}" for c in written),
        )
    )
    return all_of(once, delivered_exactly(ev, []), ended_with_error(ev))


def _refused_then_sent(ev: Evidence, policy: ClientPolicy) -> Outcome:
    return all_of(_seen_once(ev), _completed(ev))


# -- plays ---------------------------------------------------------------------------


def unsafe_request() -> StreamRequest:
    """A non-idempotent POST (it starts a job): no idempotency key, ``idempotent=False``."""
    return StreamRequest(
        PATH,
        "POST",
        body=JsonBody({"prompt": "Generate my landing page.", "stream": True}),
        idempotent=False,
    )


def _unsafe(steps: Callable[[ClientPolicy], Sequence[Step]], faults: Sequence[Fault] = ()) -> Play:
    """One non-idempotent stream; then a settle window in which a wrongful re-send shows."""

    async def play(ctx: CaseContext) -> None:
        ctx.server.script(PATH, *steps(ctx.policy))
        if faults:
            ctx.proxy.next_connections(*faults)
        ctx.start(unsafe_request())
        await ctx.wait_ended("s1", retry_budget(ctx.policy, 0))
        await ctx.hold(settle_time(ctx.policy))

    return play


async def _play_multipart(ctx: CaseContext) -> None:
    ctx.server.script(PATH, Respond(status=503), Stream(events=EVENTS))
    ctx.start(multipart_request())
    await ctx.wait_ended("s1", retry_budget(ctx.policy, 1))


# -- the catalog -------------------------------------------------------------------------


register_row(
    Row(
        title="A retried JSON POST sends the same body and headers",
        requirement="A client MUST send a retried POST with exactly the body bytes and the "
        "headers of the first attempt (the idempotency key included); a header that only "
        "counts the attempts (x-stainless-retry-count: 0, 1, 2) may count on.",
        source=f"{ARTICLE}; seeds/000 §The Retryable-Error Matrix (503 retried)",
        play=one_stream(
            lambda p: [Respond(status=503), Respond(status=503), Stream(events=EVENTS)], retries=2
        ),
        check=_json_identical,
    ),
    post_id="SC-POST-1",
)
register_row(
    Row(
        title="A retried multipart POST with an image sends the same bytes",
        requirement="A client MUST send a retried multipart POST (a prompt and a 1.5 MB image) "
        "with the same bytes: one boundary, chosen once, and the whole file every time.",
        source=f"{ARTICLE}; RFC 9110 §9.2.2 (a repeated request must be the same request)",
        play=_play_multipart,
        check=_multipart_identical,
        needs=frozenset({"multipart"}),  # most SDKs send JSON alone: UNSUPPORTED, no flaw
    ),
    post_id="SC-POST-2",
)
register_row(
    Row(
        title="A non-idempotent POST answered 503 is not re-sent",
        requirement="A client MUST NOT re-send a non-idempotent request the server has "
        "answered, even with a retryable status such as 503, and MUST surface the error.",
        source=UNSAFE,
        play=_unsafe(lambda p: [Respond(status=503), Stream(events=EVENTS)]),
        check=_surfaced_once,
    ),
    post_id="SC-POST-3",
)
register_row(
    Row(
        title="A non-idempotent POST reset after the server saw it is not re-sent",
        requirement="A client MUST NOT re-send a non-idempotent request whose connection was "
        "reset after the server received it, before any response byte, and MUST surface the "
        "error.",
        source=UNSAFE,
        play=_unsafe(lambda p: [Stream(events=EVENTS)], faults=[Fault.reset(0)]),
        check=_surfaced_once,
    ),
    post_id="SC-POST-4",
)
register_row(
    Row(
        title="A non-idempotent POST that breaks after the headers is not re-sent",
        requirement="A client MUST NOT re-send a non-idempotent request whose response broke "
        "after the headers, before the first chunk, and MUST surface the error.",
        source=UNSAFE,
        play=_unsafe(lambda p: [Stream(events=0, end="abort"), Stream(events=EVENTS)]),
        check=_surfaced_once,
    ),
    post_id="SC-POST-5",
)
register_row(
    Row(
        title="A non-idempotent POST whose bytes went out is not re-sent, seen or not",
        requirement="A client MUST NOT re-send a non-idempotent request once its bytes were "
        "written, even if the connection broke before the server got them: the client cannot "
        "tell.",
        source=UNSAFE,
        play=_unsafe(lambda p: [Stream(events=EVENTS)], faults=[Fault.reset(0, "upstream")]),
        check=_written_once,
    ),
    post_id="SC-POST-6",
)
register_row(
    Row(
        title="A non-idempotent POST refused at connect is retried",
        level=Level.SHOULD,
        requirement="A client SHOULD retry a non-idempotent request whose connection was "
        "refused: no byte was sent, so it cannot run twice.",
        source=f"seeds/000 §The Retryable-Error Matrix (retry network errors); {UNSAFE}",
        play=refused_then_online(lambda ctx: unsafe_request(), events=EVENTS),
        check=_refused_then_sent,
        applies=refused_applies,
    ),
    post_id="SC-POST-7",
)
