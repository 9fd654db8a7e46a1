"""The verdict's rules (RULES): each rule's id, level, title, source and advice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "AREA_ADVICE",
    "BACKOFF",
    "BREAKER",
    "COMMIT",
    "MATRIX",
    "RULES",
    "STALL",
    "UNSAFE",
    "FindingLevel",
    "Rule",
    "advice_for",
]

FindingLevel = Literal["MUST", "SHOULD"]

MATRIX = "seeds/000 §The Retryable-Error Matrix"
BACKOFF = "seeds/000 §Exponential Backoff Is Table Stakes. Jitter Is What Saves You."
BREAKER = "seeds/000 §Circuit Breakers, Not Just Retries"
STALL = 'seeds/000 §"Connection Open" Is Not "Data Flowing" (the silent-stream timeout)'
COMMIT = "seeds/002 §Streaming responses (after the first chunk the stream is committed)"
UNSAFE = 'seeds/002 §Streaming responses (idempotent: false: "must not run twice"); RFC 9110 §9.2.2'


@dataclass(frozen=True)
class Rule:
    """One thing the verdict judges: its id, default level, title, source and advice."""

    id: str
    level: FindingLevel
    title: str
    source: str
    advice: str


_RULE_LIST = (
    Rule(
        "V-RETRY-NON-RETRYABLE",
        "MUST",
        "Retried a non-retryable status",
        MATRIX,
        "Do not retry 400/401/403/404/422 (nor, by the seed matrix, other 4xx but 408 and "
        "429): the next attempt sends the same input and fails the same way. Surface the "
        "error so the user can sign in again or fix the input. A retry loop around the SDK "
        "should catch only rate limits, 5xx and connection errors (openai.RateLimitError, "
        "openai.InternalServerError, openai.APIConnectionError, and their anthropic twins).",
    ),
    Rule(
        "V-RETRY-AFTER-IGNORED",
        "MUST",
        "Ignored Retry-After",
        "RFC 9110 §10.2.3; " + MATRIX + " (429 and 503 mean: try again later)",
        "Wait at least what Retry-After (seconds or an HTTP date) or retry-after-ms asks "
        "for, up to a documented cap (the seed profiles cap it at 60 s), before retrying. "
        "The SDKs honour it; a retry loop of your own, or a retry decorator, must too.",
    ),
    Rule(
        "V-RETRY-NONE",
        "SHOULD",
        "Gave up on a retryable failure without retrying",
        MATRIX + ' ("429 and 503: always retry"; "retry on network errors by default")',
        "Retry 429, 5xx and network failures that happen before the first chunk, with "
        "jittered exponential backoff (the SDKs do: check max_retries is not 0).",
    ),
    Rule(
        "V-RETRY-STORM",
        "MUST",
        "Retry storm",
        BREAKER + ' ("our retry loop would fire forever")',
        "Bound the attempts per call (max_retries, or a limit in your own loop) and let a "
        "circuit breaker stop retries while the backend keeps failing.",
    ),
    Rule(
        "V-BACKOFF-NONE",
        "MUST",
        "Retried without backing off",
        BACKOFF,
        "Wait before each retry, exponentially longer each time (e.g. 0.2 s, 0.4 s, 0.8 s, "
        "capped), with random jitter; never retry in a tight loop.",
    ),
    Rule(
        "V-BACKOFF-NO-JITTER",
        "MUST",
        "Retried on a fixed schedule, without jitter",
        BACKOFF,
        "Add random jitter to every delay (the seed adds 0-50 %; AWS's full jitter draws "
        "uniformly up to the delay), and grow the delay exponentially: many clients that "
        "failed together must not come back together.",
    ),
    Rule(
        "V-BACKOFF-ENVELOPE",
        "MUST",
        "A retry delay outside the profile's envelope",
        "the profile's backoff; " + BACKOFF,
        "Compute each delay as the profile says for that retry number (base * 2^(n-1), "
        "capped, plus its jitter), or claim the profile your client actually follows.",
    ),
    Rule(
        "V-BREAKER-NO-PAUSE",
        "SHOULD",
        "Kept hammering a failing backend with no breaker-like pause",
        BREAKER + " (5 consecutive failures, then 60 s without requests, then one try)",
        "After a run of consecutive failures stop sending for a cooldown (the seed: 5 "
        "failures, 60 s), then let one probe through; its success closes the breaker.",
    ),
    Rule(
        "V-POST-RESENT",
        "MUST",
        "Re-sent a non-idempotent request",
        UNSAFE,
        "Once the server may have seen a non-idempotent request, never send it again: "
        "surface the failure. Retry only attempts that never started (refused "
        "connections). If the server deduplicates by Idempotency-Key, the call is "
        "idempotent: say so (idempotent=True) and keep the key and body on every retry.",
    ),
    Rule(
        "V-POST-BODY-CHANGED",
        "MUST",
        "Changed the request body on retry",
        "RFC 9110 §9.2.2; draft-ietf-httpapi-idempotency-key-header (one key, one payload)",
        "Build the request once and re-send the same bytes: no timestamps, nonces, retry "
        "counters or new multipart boundaries in the body of a retry.",
    ),
    Rule(
        "V-COMMIT-RESTART",
        "MUST",
        "Restarted a stream that had already delivered chunks",
        COMMIT,
        "After the first chunk reached the user, surface a failure instead of starting "
        "over (the user would see the answer twice, or two answers spliced together). "
        "Resume only a stream that carries ids, with Last-Event-ID. A for loop around the "
        "SDK call restarts from the first token: retry only if nothing was yielded yet.",
    ),
    Rule(
        "V-STALL-SAT-THROUGH",
        "MUST",
        "Sat through a stall without abandoning it",
        STALL,
        "Abandon a stream that stays silent longer than your slowest legitimate gap (an "
        "idle timer reset on every byte: httpx.Timeout(read=...), the SDK's timeout=), "
        "surface the stalled state, and retry only if nothing was delivered yet.",
    ),
    Rule(
        "V-CANCEL-NOT-CLOSED",
        "MUST",
        "Did not close the connection when the app stopped reading",
        'seeds/002 §Streaming responses ("breaking out of the loop closes the underlying stream")',
        "Close the response when you stop reading: use the stream as a context manager "
        "(`with client.chat.completions.create(..., stream=True) as stream:`) or call "
        "stream.close() / response.close(); otherwise the server keeps generating into a "
        "socket nobody reads.",
    ),
    Rule(
        "V-TRUNCATED-ACCEPTED",
        "MUST",
        "Accepted a truncated stream as complete",
        COMMIT + "; the provider's terminal event (data: [DONE], message_stop, response.completed)",
        "Treat a stream that ends without its terminal event as failed: check that "
        "[DONE] / message_stop / a finish reason arrived and raise otherwise. The openai "
        "and anthropic SDKs end the iteration silently when the body ends early.",
    ),
    Rule(
        "V-MIDSTREAM-SWALLOWED",
        "MUST",
        "Swallowed a mid-stream error",
        COMMIT + " (mid-stream errors reach the consumer)",
        "Let an error after the first chunk reach the caller (or the user: show the "
        "partial answer as incomplete); do not return a partial answer as if it were whole.",
    ),
)
RULES: dict[str, Rule] = {rule.id: rule for rule in _RULE_LIST}

# How a client fixes a failure in each conformance area: the rules of the app-level
# verdict that judge the same behaviour (their advice is the one text of it), and, for
# the areas no app-level rule covers, the advice itself.
AREA_RULES: dict[str, tuple[str, ...]] = {
    "RETRY": (
        "V-RETRY-NON-RETRYABLE",
        "V-RETRY-AFTER-IGNORED",
        "V-RETRY-NONE",
        "V-RETRY-STORM",
    ),
    "BACKOFF": ("V-BACKOFF-NONE", "V-BACKOFF-NO-JITTER", "V-BACKOFF-ENVELOPE"),
    "BREAKER": ("V-BREAKER-NO-PAUSE",),
    "POST": ("V-POST-RESENT", "V-POST-BODY-CHANGED"),
    "COMMIT": ("V-COMMIT-RESTART", "V-TRUNCATED-ACCEPTED", "V-MIDSTREAM-SWALLOWED"),
    "STALL": ("V-STALL-SAT-THROUGH",),
    "CANCEL": ("V-CANCEL-NOT-CLOSED",),
}
AREA_ADVICE: dict[str, tuple[tuple[str, str], ...]] = {
    "OFFLINE": (
        (
            "Wait for the network instead of retrying into it",
            "While the browser or OS says offline, hold retries (no attempt leaves) and "
            "pause the backoff; on online, retry at once with a fresh connection rather "
            "than waiting out a long delay that began while offline.",
        ),
    ),
    "SSE": (
        (
            "Parse the stream as the HTML standard's event-stream grammar",
            "Accept CRLF, LF and lone CR line endings split anywhere, strip one leading "
            "BOM, ignore comment lines, join multi-line data with newlines, keep the last "
            "event id for Last-Event-ID, and honour retry: fields. A vetted SSE parser "
            "(eventsource-parser, httpx-sse) does this; a split('\\n\\n') does not.",
        ),
    ),
}


def advice_for(area: str) -> tuple[tuple[str, str], ...]:
    """(title, advice) pairs for a failure in a conformance area; () for an unknown one."""
    rules = tuple((RULES[r].title, RULES[r].advice) for r in AREA_RULES.get(area, ()))
    return rules or AREA_ADVICE.get(area, ())
