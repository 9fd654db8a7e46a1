"""The app-level verdict: what a client did with the faults, judged from the ledger.

Pure: a function of the ledger's attempts, the script that answered them, what the
app produced (its text or the exception it raised, when the test hands them over)
and, optionally, the profile the client claims. No clock, no IO: the fixture takes
the snapshot and the time; tests judge hand-built records in microseconds.

Attempts are grouped into logical calls without trusting SDK headers: the same
request (method, path, query and body fingerprint, or the same Idempotency-Key)
arriving after the previous attempt of that request failed is a retry of it,
whoever retried (the SDK or a loop around it). Rules that the server cannot see
(a truncated stream accepted, a mid-stream error swallowed) are judged only from
what the app produced, never guessed from retries: a client that surfaces a
mid-stream failure instead of restarting gets no finding.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from conformance._checks import LOWER_BOUND_SLACK, UPPER_BOUND_SLACK
from conformance._profiles import Profile, Timing
from conformance.reference._config import ClientPolicy
from fake_servers._ledger import Attempt
from fake_servers._script import Respond, Scenario, Step, Stream

__all__ = [
    "RULES",
    "Call",
    "Finding",
    "FindingLevel",
    "Rule",
    "Verdict",
    "judge",
]

FindingLevel = Literal["MUST", "SHOULD"]
_State = Literal["ok", "failed", "open", "cancelled"]

# A retry arrives after its predecessor ended; the server may notice the old
# connection's close a few milliseconds after the new request (two sockets), so
# "ended before it arrived" allows this much disorder. It never joins overlapping
# streams: those are concurrent calls, not retries.
JOIN_SLACK = 0.25
CANCEL_LEAD = 0.1  # a close this long before "the app stopped reading" was that stop
# Three or more retries averaging under 20 ms did not back off. The mean absorbs one
# scheduling hiccup; a full-jitter client (delays drawn from 0) with a base of 0.1 s
# draws three such retries with probability about 0.06**3 / 6 / (0.1 * 0.2 * 0.4) < 0.5 %.
NO_BACKOFF = 0.02
NO_BACKOFF_RETRIES = 3
# Delays within 25 ms (or 2 %) of their median are one fixed delay: scheduling noise
# on a loaded machine stays under it, while jittered exponential delays of retries 1-3
# fall in disjoint ranges (the seed: 0.2-0.3, 0.4-0.6, 0.8-1.2 s) and cannot all fit.
FIXED_TOLERANCE = 0.025
FIXED_MIN_DELAYS = 3  # at least this many, and 3/4 of the delays, at one fixed delay
FIXED_SHARE = 0.75
MIN_FIXED_DELAY = 0.1  # shorter fixed delays are V-BACKOFF-NONE's business
JITTER_MIN_DELAYS = 5  # delays judged inside a profile's envelope before judging jitter
JITTER_BAND = 0.02  # all at one relative position in the envelope: no jitter
JITTER_MIN_SPAN = 0.05  # envelopes narrower than this (s) are not judged for jitter
STORM_ATTEMPTS = 10  # without a profile's limit: more than this in STORM_WINDOW is a storm
STORM_WINDOW = 60.0
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SEED = ClientPolicy()  # the seed article's numbers, used when no profile is given

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


@dataclass(frozen=True)
class Finding:
    """One way the client mishandled a fault, with the attempts that show it."""

    rule: str
    level: FindingLevel
    title: str
    source: str
    attempts: tuple[int, ...]  # ledger seq numbers
    observed: str
    advice: str
    call: int | None = None  # the logical call's number, when the finding is about one

    def render(self) -> str:
        seqs = ", ".join(f"#{s}" for s in self.attempts) or "none"
        where = f"call {self.call}, " if self.call is not None else ""
        return (
            f"{self.level} {self.rule}: {self.title} ({where}attempts {seqs})\n"
            f"    observed: {self.observed}\n"
            f"    source:   {self.source}\n"
            f"    advice:   {self.advice}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "level": self.level,
            "title": self.title,
            "source": self.source,
            "attempts": list(self.attempts),
            "call": self.call,
            "observed": self.observed,
            "advice": self.advice,
        }


@dataclass(frozen=True)
class Call:
    """One logical call: the attempts that carried the same request, retries included."""

    number: int
    method: str
    path: str
    key: str  # what grouped them: the body fingerprint or the Idempotency-Key
    attempts: tuple[int, ...]
    outcomes: tuple[str, ...]  # per attempt, e.g. "429", "200, 5 chunks, done"

    def render(self) -> str:
        steps = " -> ".join(f"#{s} {o}" for s, o in zip(self.attempts, self.outcomes, strict=True))
        return f"call {self.number}: {self.method} {self.path} ({self.key}): {steps}"

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "method": self.method,
            "path": self.path,
            "key": self.key,
            "attempts": list(self.attempts),
            "outcomes": list(self.outcomes),
        }


@dataclass(frozen=True)
class Verdict:
    """Everything judged about one test's client: findings, the calls, what was not judged."""

    findings: tuple[Finding, ...]
    calls: tuple[Call, ...]
    not_judged: tuple[str, ...] = ()  # "RULE-ID: what the test would have to pass"
    profile: str | None = None
    app_output: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """No MUST finding."""
        return not any(f.level == "MUST" for f in self.findings)

    @property
    def clean(self) -> bool:
        """No finding at all."""
        return not self.findings

    def rules(self) -> tuple[str, ...]:
        """The rule ids found, in order."""
        return tuple(f.rule for f in self.findings)

    def assert_ok(self, strict: bool = False) -> None:
        """Raise AssertionError with the rendered verdict on a MUST finding (any, if strict)."""
        failed = not self.clean if strict else not self.ok
        if failed:
            raise AssertionError(self.render())

    def render(self) -> str:
        must = sum(f.level == "MUST" for f in self.findings)
        head = (
            f"streamcheck verdict: {len(self.findings)} finding(s) ({must} MUST, "
            f"{len(self.findings) - must} SHOULD)"
            if self.findings
            else "streamcheck verdict: clean"
        )
        attempts = sum(len(c.attempts) for c in self.calls)
        produced = (
            "no app output given"
            if self.app_output is None
            else (f"app output {len(self.app_output)} chars")
        )
        lines = [
            head,
            f"judged {attempts} attempt(s) in {len(self.calls)} call(s); profile "
            f"{self.profile or 'none (seed defaults)'}; {produced}; error "
            f"{self.error if self.error is not None else 'none given'}",
            *(c.render() for c in self.calls),
            *(f.render() for f in self.findings),
        ]
        if self.not_judged:
            lines.append("not judged: " + "; ".join(self.not_judged))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "findings": [f.to_json() for f in self.findings],
            "calls": [c.to_json() for c in self.calls],
            "not_judged": list(self.not_judged),
            "profile": self.profile,
            "app_output": _clip(self.app_output),
            "error": self.error,
        }


def _clip(text: str | None, limit: int = 2000) -> str | None:
    """Long outputs stay readable in a report: the head, and how much was left out."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more chars)"


# -- what each attempt amounted to ------------------------------------------------------


@dataclass(frozen=True)
class _Look:
    """One attempt as the rules see it."""

    a: Attempt
    step: Step | None
    state: _State
    chunks: int  # data events the server sent
    terminal: bool
    hint: float | None  # seconds the response's Retry-After asked for
    outcome: str

    @property
    def seq(self) -> int:
        return self.a.seq

    @property
    def status(self) -> int | None:
        return self.a.status

    @property
    def committed(self) -> bool:
        return self.chunks > 0

    @property
    def body_complete(self) -> bool:
        """Whether the server got the whole request (else it could not have acted on it)."""
        return not (self.a.status is None and "during the request body" in self.a.note)

    def ids_sent(self) -> tuple[str, ...]:
        return tuple(e.id for e in self.a.data_events if e.id is not None)


def _step_of(attempt: Attempt, scenario: Scenario | None) -> Step | None:
    if scenario is None or attempt.step is None:
        return None
    endpoint = scenario.endpoint(attempt.path)
    if endpoint is None or attempt.step >= len(endpoint.steps):
        return None
    return endpoint.steps[attempt.step]


def _look(attempt: Attempt, scenario: Scenario | None, cancelled: bool) -> _Look:
    step = _step_of(attempt, scenario)
    chunks = len(attempt.data_events)
    terminal = any(e.kind == "terminal" for e in attempt.events)
    hint = _hint(step)
    state, outcome = _judge_attempt(attempt, step, chunks, terminal)
    if cancelled and state != "ok":
        state, outcome = "cancelled", outcome + " (the app stopped reading)"
    return _Look(attempt, step, state, chunks, terminal, hint, outcome)


def _judge_attempt(
    a: Attempt, step: Step | None, chunks: int, terminal: bool
) -> tuple[_State, str]:
    if a.end is None:
        return "open", f"{a.status or 'no status'}, {chunks} chunk(s) so far, still open"
    if a.status is None:
        return "failed", f"no response ({a.end}{': ' + a.note if a.note else ''})"
    if a.status >= 400:
        return "failed", str(a.status)
    streamed = isinstance(step, Stream) or bool(a.events)
    if not streamed:
        return ("ok", str(a.status)) if a.end == "completed" else ("failed", f"{a.status} {a.end}")
    if terminal:
        return "ok", f"{a.status}, {chunks} chunk(s), done"
    if _in_band_error(a, step):
        return "failed", f"{a.status}, {chunks} chunk(s), in-band error event"
    how = {
        "completed": "truncated: no terminal event",
        "aborted": "connection broken",
        "client_closed": "closed by the client",
        "server_stopped": "cut: server stopped",
    }[a.end]
    return "failed", f"{a.status}, {chunks} chunk(s), {how}"


def _in_band_error(a: Attempt, step: Step | None) -> bool:
    """The stream ended with the provider's error event (e.g. Anthropic's ``event: error``)."""
    scripted = isinstance(step, Stream) and step.end == "error"
    return a.end == "completed" and (scripted or a.note == "in-band error")


def _hint(step: Step | None) -> float | None:
    """Seconds the scripted response asked the client to wait (Retry-After / retry-after-ms)."""
    if not isinstance(step, Respond):
        return None
    if step.retry_after_date is not None:
        return step.retry_after_date  # the date is at least this far after sending
    headers = {k.lower(): v.strip() for k, v in step.headers}
    if "retry-after-ms" in headers:
        value = _number(headers["retry-after-ms"])
        if value is not None:
            return value / 1000
    if "retry-after" in headers:
        # A literal HTTP date in a script is relative to nothing the ledger knows: no
        # hint (script dates with Respond.retry_after_date instead).
        return _number(headers["retry-after"])
    return None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


# -- logical calls ----------------------------------------------------------------------


@dataclass
class _Group:
    label: str
    looks: list[_Look] = field(default_factory=list)
    keys: set[tuple[str, ...]] = field(default_factory=set)  # Idempotency-Keys seen
    bodies: set[tuple[str, ...]] = field(default_factory=set)  # body fingerprints seen

    def add(self, look: _Look) -> None:
        key, body = _identity(look.a)
        self.looks.append(look)
        self.bodies.add(body)
        if key is not None:
            self.keys.add(key)

    def same_request(self, look: _Look) -> bool:
        key, body = _identity(look.a)
        return body in self.bodies or (key is not None and key in self.keys)


def _identity(a: Attempt) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """(Idempotency-Key identity or None, body fingerprint identity) of a request."""
    idem = a.idempotency_key
    key = None if idem is None else (a.method, a.path, idem)
    return key, (a.method, a.path, a.query, a.body_sha256, str(a.body_size))


def _label(a: Attempt) -> str:
    if a.idempotency_key is not None:
        return f"Idempotency-Key {a.idempotency_key}"
    return f"body {a.body_sha256[:12]}, {a.body_size} B" if a.body_size else "no body"


def _group(looks: Sequence[_Look]) -> list[_Group]:
    """Same request (same body bytes, or the same Idempotency-Key) after a failure: a retry."""
    groups: list[_Group] = []
    for look in looks:
        joinable = [g for g in groups if g.same_request(look) and _continues(g.looks[-1], look)]
        if joinable:
            group = max(joinable, key=lambda g: g.looks[-1].a.ended_at or 0.0)
        else:
            group = _Group(_label(look.a))
            groups.append(group)
        group.add(look)
    return groups


def _continues(last: _Look, look: _Look) -> bool:
    """Whether ``look`` can be a retry of ``last``: it failed and ended before ``look`` came."""
    ended = last.a.ended_at
    return last.state == "failed" and ended is not None and ended <= look.a.arrived_at + JOIN_SLACK


# -- the judging context ------------------------------------------------------------------


@dataclass(frozen=True)
class _Inputs:
    looks: tuple[_Look, ...]
    calls: tuple[tuple[int, tuple[_Look, ...]], ...]  # (number, looks)
    policy: ClientPolicy
    profile: Profile | None
    app_output: str | None
    error: str | None
    idempotent: bool | None
    stall_timeout: float | None
    stopped_reading_at: float | None
    judged_at: float
    seed: int | None
    scale: float  # the profile's test_scale at test timing, else 1

    def delays(self, looks: Sequence[_Look]) -> list[_Wait]:
        """How long the client waited before each retry of a call."""
        return [_Wait(i, looks[i - 1], looks[i]) for i in range(1, len(looks))]


@dataclass(frozen=True)
class _Wait:
    """The wait before retry ``n`` (1-based) of a call, bounded from both sides.

    The server stamps an attempt's end after its last write returns, and on a busy
    machine the client may already be waiting by then. So "too soon" is judged on
    ``most`` (from the server's last record before that write: no client can have
    seen the failure earlier) and "too late" on ``least`` (from the recorded end).
    """

    n: int
    prev: _Look
    nxt: _Look

    @property
    def most(self) -> float:
        return self.nxt.a.arrived_at - _seen_from(self.prev.a)

    @property
    def least(self) -> float:
        a = self.prev.a
        return self.nxt.a.arrived_at - (a.ended_at if a.ended_at is not None else _seen_from(a))


def _seen_from(a: Attempt) -> float:
    """The earliest a client can have seen how ``a`` ended: the server's last record
    before its final write (a plain response's headers, a stream's last event)."""
    times = [a.arrived_at]
    if a.headers_at is not None:
        times.append(a.headers_at)
    if a.events:
        times.append(a.events[-1].at)
    return max(times)


def _finding(rule_id: str, attempts: Sequence[int], observed: str, **kw: Any) -> Finding:
    rule = RULES[rule_id]
    level: FindingLevel = kw.pop("level", rule.level)
    return Finding(
        rule=rule.id,
        level=level,
        title=rule.title,
        source=kw.pop("source", rule.source),
        attempts=tuple(attempts),
        observed=observed,
        advice=rule.advice,
        call=kw.pop("call", None),
    )


# -- the rules: each yields findings from the inputs ----------------------------------------


def _non_retryable(ins: _Inputs) -> Iterator[Finding]:
    matrix = ins.policy.matrix
    for number, looks in ins.calls:
        hits = [
            (prev, nxt)
            for prev, nxt in itertools.pairwise(looks)
            if prev.status is not None
            and prev.status >= 400
            and not matrix.is_retryable(prev.status)
            and prev.status != 408  # RFC 9110 §15.5.9: the client MAY repeat the request
            and prev.a.header("authorization") == nxt.a.header("authorization")
        ]
        if not hits:
            continue
        must = any(prev.status in matrix.never for prev, _ in hits)
        seqs = sorted({s for prev, nxt in hits for s in (prev.seq, nxt.seq)})
        said = ", ".join(f"#{p.seq} got {p.status}, #{n.seq} retried it" for p, n in hits)
        yield _finding(
            "V-RETRY-NON-RETRYABLE",
            seqs,
            f"{said} (same request, same credentials)",
            level="MUST" if must else "SHOULD",
            call=number,
        )


def _retry_after_ignored(ins: _Inputs) -> Iterator[Finding]:
    cap = ins.policy.retry_after_cap
    for number, looks in ins.calls:
        for wait in ins.delays(looks):
            prev, nxt, delay = wait.prev, wait.nxt, wait.most
            if prev.hint is None:
                continue
            wanted = min(prev.hint, cap)
            if delay < wanted - LOWER_BOUND_SLACK:
                yield _finding(
                    "V-RETRY-AFTER-IGNORED",
                    (prev.seq, nxt.seq),
                    f"#{prev.seq} got {prev.status} asking to wait {prev.hint:g} s; #{nxt.seq} "
                    f"came {delay:.3f} s later (at least {wanted:g} s expected, cap {cap:g} s)",
                    call=number,
                )


def _gave_up(ins: _Inputs) -> Iterator[Finding]:
    if ins.idempotent is False:
        return  # not retrying a non-idempotent call is right
    matrix = ins.policy.matrix
    threshold = _breaker_threshold(ins)
    for number, looks in ins.calls:
        only = looks[0]
        if len(looks) != 1 or only.state != "failed" or only.committed:
            continue
        status = only.status
        if status is not None and status >= 400 and not matrix.is_retryable(status):
            continue
        if only.hint is not None and only.hint > ins.policy.retry_after_cap:
            continue  # a hint beyond the cap: giving up is honest
        if threshold and _failures_before(ins, only) >= threshold - 1:
            continue  # a breaker that just opened rightly stops here
        yield _finding(
            "V-RETRY-NONE",
            (only.seq,),
            f"#{only.seq} failed ({only.outcome}) before any chunk and was never retried",
            call=number,
        )


def _storm(ins: _Inputs) -> Iterator[Finding]:
    limit = ins.policy.max_attempts if ins.profile is not None else None
    for number, looks in ins.calls:
        if limit is not None:
            if len(looks) > limit:
                yield _finding(
                    "V-RETRY-STORM",
                    [look.seq for look in looks],
                    f"{len(looks)} attempts for one call; the profile allows {limit}",
                    call=number,
                )
            continue
        window = STORM_WINDOW * ins.scale
        burst = _densest(looks, window)
        if len(burst) > STORM_ATTEMPTS:
            yield _finding(
                "V-RETRY-STORM",
                [look.seq for look in burst],
                f"{len(burst)} attempts for one call within {window:g} s "
                f"(more than {STORM_ATTEMPTS})",
                call=number,
            )


def _densest(looks: Sequence[_Look], window: float) -> list[_Look]:
    best: list[_Look] = []
    for i, first in enumerate(looks):
        run = [look for look in looks[i:] if look.a.arrived_at - first.a.arrived_at <= window]
        if len(run) > len(best):
            best = run
    return best


def _backoff_delays(ins: _Inputs, looks: Sequence[_Look]) -> list[_Wait]:
    """Waits the client chose itself: not after a Retry-After hint, not a breaker pause."""
    threshold = _breaker_threshold(ins)
    return [
        wait
        for wait in ins.delays(looks)
        if wait.prev.hint is None and not (threshold and wait.n >= threshold)
    ]


def _no_backoff(ins: _Inputs) -> Iterator[Finding]:
    if ins.profile is not None:
        return  # the profile's envelope judges every delay
    for number, looks in ins.calls:
        delays = _backoff_delays(ins, looks)
        waits = [wait.most for wait in delays]
        if len(waits) >= NO_BACKOFF_RETRIES and statistics.fmean(waits) < NO_BACKOFF:
            shown = ", ".join(f"{d * 1000:.0f} ms" for d in waits)
            yield _finding(
                "V-BACKOFF-NONE",
                [looks[0].seq, *(wait.nxt.seq for wait in delays)],
                f"{len(waits)} retries averaging under {NO_BACKOFF * 1000:.0f} ms after the "
                f"failure: {shown}",
                call=number,
            )


def _fixed_schedule(ins: _Inputs) -> Iterator[Finding]:
    if ins.profile is not None:
        return  # the envelope (growing with the retry number) and its jitter test judge it
    for number, looks in ins.calls:
        delays = [wait.most for wait in _backoff_delays(ins, looks)]
        if len(delays) < FIXED_MIN_DELAYS:
            continue
        mid = statistics.median(delays)
        band = max(FIXED_TOLERANCE, 0.02 * mid)
        alike = sum(abs(d - mid) <= band for d in delays)
        if mid >= MIN_FIXED_DELAY and alike >= max(FIXED_MIN_DELAYS, FIXED_SHARE * len(delays)):
            yield _finding(
                "V-BACKOFF-NO-JITTER",
                [look.seq for look in looks],
                f"{alike} of {len(delays)} retries came {mid:.3f} s (within {band * 1000:.0f} "
                "ms) after the failure: a fixed delay, neither growing nor jittered",
                call=number,
            )


def _envelope(ins: _Inputs) -> Iterator[Finding]:
    if ins.profile is None:
        return
    backoff = ins.policy.backoff
    for number, looks in ins.calls:
        positions: list[float] = []
        judged: list[int] = []
        for wait in _backoff_delays(ins, looks):
            n, nxt = wait.n, wait.nxt
            low, high = backoff.envelope(n)
            if wait.most < low - LOWER_BOUND_SLACK or wait.least > high + UPPER_BOUND_SLACK:
                shown = wait.most if wait.most < low else wait.least
                yield _finding(
                    "V-BACKOFF-ENVELOPE",
                    (wait.prev.seq, nxt.seq),
                    f"retry {n} (#{nxt.seq}) came {shown:.3f} s after the failure; "
                    f"{ins.profile.key} allows [{low:.3f}, {high:.3f}] s",
                    source=f"{ins.profile.key}: {ins.profile.source}",
                    call=number,
                )
            elif high - low >= JITTER_MIN_SPAN:
                positions.append(min(max((wait.most - low) / (high - low), 0.0), 1.0))
                judged.append(nxt.seq)
        # Under the declared jitter positions are uniform: n of them inside one band of
        # width w has probability below n * w**(n-1) (8e-7 for 5 in 0.02).
        if len(positions) >= JITTER_MIN_DELAYS and max(positions) - min(positions) <= JITTER_BAND:
            yield _finding(
                "V-BACKOFF-NO-JITTER",
                judged,
                f"{len(positions)} delays all at {statistics.median(positions):.0%} of "
                f"their envelope: {ins.profile.key} declares jitter, none was drawn",
                source=f"{ins.profile.key}: {ins.profile.source}",
                call=number,
            )


def _breaker_threshold(ins: _Inputs) -> int:
    breaker = ins.policy.breaker
    return breaker.threshold if breaker.kind == "consecutive" else 0


def _counts_for_breaker(look: _Look, ins: _Inputs) -> bool | None:
    """True: a failure the breaker counts; False: a success (resets it); None: neither."""
    if look.state == "ok":
        return False
    if look.state != "failed" or look.committed:
        return None  # mid-stream failures do not count (seeds/002)
    if look.status is None or look.status < 400:
        return True
    return ins.policy.matrix.is_retryable(look.status)


def _failures_before(ins: _Inputs, target: _Look) -> int:
    run = 0
    for look in ins.looks:
        if look.a.path != target.a.path:
            continue
        if look.seq == target.seq:
            return run
        counted = _counts_for_breaker(look, ins)
        if counted is True:
            run += 1
        elif counted is False:
            run = 0
    return run


def _hammering(ins: _Inputs) -> Iterator[Finding]:
    threshold = _breaker_threshold(ins)
    if not threshold:
        return
    cooldown = ins.policy.breaker.cooldown
    level: FindingLevel = "MUST" if ins.profile is not None else "SHOULD"
    for path in dict.fromkeys(look.a.path for look in ins.looks):
        run: list[_Look] = []
        for look in (x for x in ins.looks if x.a.path == path):
            if len(run) >= threshold:
                pause = look.a.arrived_at - _seen_from(run[-1].a)  # at most this long
                if pause < cooldown - LOWER_BOUND_SLACK:
                    yield _finding(
                        "V-BREAKER-NO-PAUSE",
                        [*(x.seq for x in run), look.seq],
                        f"{len(run)} consecutive failures on {path}, then #{look.seq} only "
                        f"{pause:.3f} s later (a breaker would pause {cooldown:g} s)",
                        level=level,
                    )
                    break
            counted = _counts_for_breaker(look, ins)
            if counted is True:
                run.append(look)
            elif counted is False:
                run = []


def _resent(ins: _Inputs) -> Iterator[Finding]:
    if ins.idempotent is not False:
        return
    for number, looks in ins.calls:
        if looks[0].a.method in SAFE_METHODS or len(looks) < 2:
            continue
        seen = next((i for i, look in enumerate(looks) if look.body_complete), None)
        if seen is None or seen == len(looks) - 1:
            continue
        first = looks[seen]
        yield _finding(
            "V-POST-RESENT",
            [look.seq for look in looks[seen:]],
            f"#{first.seq} reached the server ({first.outcome}); the same non-idempotent "
            f"{first.a.method} was sent again {len(looks) - seen - 1} time(s)",
            call=number,
        )


def _body_changed(ins: _Inputs) -> Iterator[Finding]:
    for number, looks in ins.calls:
        first = looks[0].a
        changed = [
            look
            for look in looks[1:]
            if (look.a.body_sha256, look.a.body_size) != (first.body_sha256, first.body_size)
        ]
        if changed:
            yield _finding(
                "V-POST-BODY-CHANGED",
                [looks[0].seq, *(look.seq for look in changed)],
                f"retries under Idempotency-Key {first.idempotency_key} sent "
                f"{len(changed)} different bod(ies): "
                + ", ".join(
                    f"#{look.seq} {look.a.body_size} B sha256 {look.a.body_sha256[:12]}"
                    for look in changed
                )
                + f" (first: {first.body_size} B sha256 {first.body_sha256[:12]})",
                call=number,
            )


def _restarted(ins: _Inputs) -> Iterator[Finding]:
    for number, looks in ins.calls:
        for prev, nxt in itertools.pairwise(looks):
            if not prev.committed:
                continue
            ids = prev.ids_sent()
            resumed = bool(ids) and nxt.a.last_event_id is not None
            if resumed:
                continue
            why = (
                "without Last-Event-ID"
                if ids
                else "and the stream carried no ids, so it could only start over"
            )
            observed = (
                f"#{prev.seq} sent {prev.chunks} chunk(s) and failed ({prev.outcome}); "
                f"#{nxt.seq} asked again {why}"
            )
            yield _finding(
                "V-COMMIT-RESTART",
                (prev.seq, nxt.seq),
                observed + _duplicated(ins, prev),
                call=number,
            )


def _sent_text(ins: _Inputs, look: _Look) -> str:
    if ins.seed is None:
        return ""
    from fake_servers._formats import sent_text  # the answer's words; faker loads on first use

    return sent_text(look.a, ins.seed)


def _duplicated(ins: _Inputs, prev: _Look) -> str:
    if ins.app_output is None:
        return ""
    partial = _sent_text(ins, prev)
    if len(partial.strip()) >= 3 and ins.app_output.count(partial) >= 2:
        return f"; the app's output contains those chunks twice ({partial[:40]!r}...)"
    return ""


def _stall_threshold(ins: _Inputs, step: Stream) -> tuple[float, str]:
    if ins.stall_timeout is not None:
        return ins.stall_timeout, "the test's stall_timeout"
    p = ins.policy
    name = ins.profile.key if ins.profile is not None else "the seed's"
    if step.stall is not None and step.stall.after == 0 and p.first_chunk_timeout:
        return p.first_chunk_timeout, f"{name} time-to-first-chunk timeout"
    return p.stall_timeout + p.stall_check_interval, f"{name} silent-stream timeout + check"


def _stall_silence(look: _Look, step: Stream, ins: _Inputs) -> tuple[float, float] | None:
    """(start, silence endured) of the scripted stall, or None if it never began."""
    stall = step.stall
    assert stall is not None
    after = min(stall.after, step.events)  # past the last event it stalls before the end
    data = look.a.data_events
    if after > 0 and len(data) < after:
        return None
    start = data[after - 1].at if after > 0 else look.a.headers_at
    if start is None:
        return None
    idle_rule = ins.policy.idle_rule
    if stall.keepalive is not None and idle_rule == "bytes":
        return start, stall.keepalive  # every comment is a heartbeat: the gap is the beat
    later = [e.at for e in look.a.events if e.at > start and e.kind in ("data", "terminal")]
    end = min(later) if later else (look.a.ended_at or ins.judged_at)
    return start, end - start


def _sat_through(ins: _Inputs) -> Iterator[Finding]:
    for look in ins.looks:
        step = look.step
        if not isinstance(step, Stream) or step.stall is None or look.state == "cancelled":
            continue
        measured = _stall_silence(look, step, ins)
        if measured is None:
            continue
        start, silence = measured
        limit, what = _stall_threshold(ins, step)
        closed = look.a.end == "client_closed" and look.a.ended_at is not None
        if closed and (look.a.ended_at or 0.0) - start <= limit + UPPER_BOUND_SLACK:
            continue  # abandoned in time
        if silence <= limit + UPPER_BOUND_SLACK:
            continue
        still = " and is still connected" if look.a.end is None else ""
        yield _finding(
            "V-STALL-SAT-THROUGH",
            (look.seq,),
            f"#{look.seq} stayed through {silence:.3f} s of silence after "
            f"{step.stall.after} chunk(s){still}; {what} is {limit:g} s",
        )


def _not_closed(ins: _Inputs) -> Iterator[Finding]:
    mark = ins.stopped_reading_at
    if mark is None:
        return
    deadline = mark + UPPER_BOUND_SLACK
    for look in ins.looks:
        a = look.a
        if a.arrived_at > mark or (a.ended_at is not None and a.ended_at <= deadline):
            continue  # not in flight when the app stopped, or over in time
        if a.end is None and ins.judged_at < deadline:
            continue  # too early to tell
        how = (
            "is still open"
            if a.end is None
            else f"ended {a.end} {(a.ended_at or mark) - mark:.3f} s after"
        )
        yield _finding(
            "V-CANCEL-NOT-CLOSED",
            (a.seq,),
            f"the app stopped reading; #{a.seq} {how} (the close was due within "
            f"{UPPER_BOUND_SLACK:g} s), the server sent {look.chunks} chunk(s) in all",
        )


def _accepted(ins: _Inputs) -> Iterator[Finding]:
    if ins.app_output is None or ins.error is not None:
        return  # judged only when the app returned normally and said what it produced
    for number, looks in ins.calls:
        last = looks[-1]
        if last.state != "failed" or not last.committed:
            continue
        truncated = last.a.end == "completed" and not _in_band_error(last.a, last.step)
        rule = "V-TRUNCATED-ACCEPTED" if truncated else "V-MIDSTREAM-SWALLOWED"
        what = "ended without its terminal event" if truncated else f"failed ({last.outcome})"
        yield _finding(
            rule,
            (last.seq,),
            f"#{last.seq} {what} after {last.chunks} chunk(s); the app returned normally "
            f"with {len(ins.app_output)} chars of output and raised nothing",
            call=number,
        )


_RULE_FUNCS: tuple[Callable[[_Inputs], Iterator[Finding]], ...] = (
    _non_retryable,
    _retry_after_ignored,
    _gave_up,
    _storm,
    _no_backoff,
    _fixed_schedule,
    _envelope,
    _hammering,
    _resent,
    _body_changed,
    _restarted,
    _sat_through,
    _not_closed,
    _accepted,
)


def _not_judged(ins: _Inputs) -> tuple[str, ...]:
    out = []
    if ins.app_output is None and ins.error is None:
        out.append(
            "V-TRUNCATED-ACCEPTED, V-MIDSTREAM-SWALLOWED (pass app_output= or error=: "
            "invisible from the server)"
        )
    if ins.idempotent is None:
        out.append("V-POST-RESENT (pass idempotent=False for a non-idempotent call)")
    if ins.profile is None:
        out.append("V-BACKOFF-ENVELOPE (pass profile=)")
    if ins.stopped_reading_at is None:
        out.append(
            "V-CANCEL-NOT-CLOSED (if the app stops reading early, call app_stopped_reading())"
        )
    if ins.profile is not None and not _breaker_threshold(ins):
        out.append(f"V-BREAKER-NO-PAUSE ({ins.profile.key} has no consecutive-failure breaker)")
    return tuple(out)


def judge(
    attempts: Sequence[Attempt],
    *,
    scenario: Scenario | None = None,
    app_output: str | None = None,
    error: BaseException | str | None = None,
    profile: Profile | None = None,
    timing: Timing = "real",
    idempotent: bool | None = None,
    stall_timeout: float | None = None,
    stopped_reading_at: float | None = None,
    judged_at: float | None = None,
) -> Verdict:
    """Judge what a client did with the faults, from the ledger and what the app produced.

    Args:
        attempts: The ledger's attempts (any order; judged in arrival order).
        scenario: The script that answered them: Retry-After hints, stalls, stream steps.
        app_output: The text the app produced, when it returned normally.
        error: The exception (or message) the app raised, if it raised.
        profile: The policy the client claims; without it the seed article's numbers
            judge the matrix, Retry-After cap, breaker and stall timeout, and backoff is
            judged only for unmistakable faults (no wait, a fixed delay).
        timing: The profile's timing the client ran at ("real", or "test" when the
            client was configured with the profile's test numbers).
        idempotent: False when the test says the call must not run twice.
        stall_timeout: The silence (s) after which the app promises to abandon a stream.
        stopped_reading_at: When (on ``fake_servers.now()``) the app stopped reading.
        judged_at: When the snapshot was taken (default: the latest time in the records).

    Returns:
        The verdict: findings (MUST first), the logical calls, and what was not judged.
    """
    ordered = sorted(attempts, key=lambda a: a.seq)
    looks = tuple(_look(a, scenario, _cancelled(a, stopped_reading_at)) for a in ordered)
    groups = _group(looks)
    policy = profile.at(timing) if profile is not None else _SEED
    ins = _Inputs(
        looks=looks,
        calls=tuple((n, tuple(g.looks)) for n, g in enumerate(groups, start=1)),
        policy=policy,
        profile=profile,
        app_output=app_output,
        error=_describe(error),
        idempotent=idempotent,
        stall_timeout=stall_timeout,
        stopped_reading_at=stopped_reading_at,
        judged_at=judged_at if judged_at is not None else _latest(ordered),
        seed=scenario.seed if scenario is not None else None,
        scale=profile.test_scale if profile is not None and timing == "test" else 1.0,
    )
    findings = [f for rule in _RULE_FUNCS for f in rule(ins)]
    findings.sort(key=lambda f: (f.level != "MUST", min(f.attempts, default=0)))
    calls = tuple(
        Call(
            number=n,
            method=g.looks[0].a.method,
            path=g.looks[0].a.path,
            key=g.label,
            attempts=tuple(look.seq for look in g.looks),
            outcomes=tuple(look.outcome for look in g.looks),
        )
        for n, g in enumerate(groups, start=1)
    )
    return Verdict(
        findings=tuple(findings),
        calls=calls,
        not_judged=_not_judged(ins),
        profile=None if profile is None else f"{profile.key} ({timing} timing)",
        app_output=app_output,
        error=ins.error,
    )


def _cancelled(a: Attempt, stopped_reading_at: float | None) -> bool:
    """Closed by the client because the app stopped reading: not a failure to retry.

    The close may come a little before the mark: the ``break`` that drops the stream
    closes it, and the test says so on the next line.
    """
    return (
        stopped_reading_at is not None
        and a.arrived_at <= stopped_reading_at
        and a.end == "client_closed"
        and (a.ended_at or 0.0) >= stopped_reading_at - CANCEL_LEAD
    )


def _describe(error: BaseException | str | None) -> str | None:
    if error is None or isinstance(error, str):
        return error
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 300 else text[:297] + "..."


def _latest(attempts: Sequence[Attempt]) -> float:
    times = [0.0]
    for a in attempts:
        times += [a.arrived_at, a.ended_at or 0.0, *(e.at for e in a.events)]
    return max(times)
