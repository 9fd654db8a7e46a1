"""SC-BACKOFF: exponential backoff with jitter, caps that widen, and the thundering herd.

Each row is registered for GET (the odd id) and POST (the even id) where it is
written; the herd row is GET only (the seed's herd is EventSource connections), so
SC-BACKOFF-12 is reserved. The jitter and herd statistics are in ``conformance.timing``.

How waits are measured (docs/timing.md and docs/timing-backoff.md): each client's
own wait is an interval from ``conformance.timing.wait_between`` (or ``wait_from``,
for the herd's cut): the server's stamps, less the harness lag measured during the
case. A check fails only when the whole interval breaks its bound, and is
undecidable (re-judged at a coarser scale) when the noise could hide its flaw.

Every row also runs untuned (``tune_optional``): a client that cannot be configured
plays it at its profile's real timing, and is judged by the seed's rules as well as by
its profile's claims. A profile that declares no retry, no jitter or no growth is not
excused: the failures are played and the measured delays judged against the seed (a
fixed delay is bunched against the seed's 0-50 % jitter; a constant series does not
grow). The failure played is a 503 where the profile retries it, else a broken stream
(a client that retries no status, e.g. EventSource, still shows its backoff).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from conformance._case import (
    CaseContext,
    Figure,
    FigureSample,
    Outcome,
    SetupFailed,
    StreamRequest,
)
from conformance._checks import all_of, ended_with_done
from conformance._evidence import Evidence
from conformance.cases._common import (
    Row,
    Transport,
    one_stream,
    register_row,
    request_for,
    retry_budget,
    waited_the_hint,
)
from conformance.reference import BackoffConfig, BreakerConfig, ClientPolicy
from conformance.timing._noise import PATH_FLOOR, Noise, ms
from conformance.timing._stats import herd_outcome, jitter_outcome, too_noisy
from conformance.timing._waits import Wait, decide, wait_between, wait_from
from fake_servers import Attempt, Endpoint, Respond, Scenario, Stall, Step, Stream, now

__all__ = ["delays_figure", "envelope_outcome", "envelope_resolution", "first_delay_range"]

SEED = "seeds/000 §Exponential Backoff Is Table Stakes. Jitter Is What Saves You."
RETRY_AFTER = "RFC 9110 §10.2.3 (Retry-After); seeds/000 §The Retryable-Error Matrix (429, 503)"
EVENTS = 3
ROOT = "/v1/backoff"

# Jitter statistics over JITTER_CLIENTS first retries, one per independent client.
# The users arrive JITTER_STAGGER apart so their failures do not queue up behind
# each other; the policy is tuned so the first delay's jitter range is JITTER_SPAN
# wide. Each client's own wait is an interval (``conformance.timing``); the rules
# (``conformance.timing.jitter_outcome``) fail and pass on sure evidence only, so the
# measured noise can make the case undecidable, never FAIL.
JITTER_CLIENTS = 50
JITTER_STAGGER = 0.003
JITTER_SPAN = 0.15
# The herd: HERD_CLIENTS lose their streams at one instant. Each client's own delay,
# from the cut to its reconnect, is an interval, judged by
# ``conformance.timing.herd_outcome``.
HERD_CLIENTS = 50
HERD_SPAN = 0.6  # the cut's own burst widens every interval by up to ~0.12 s (quiet)
HERD_HOLD = 0.05  # reconnects are answered late: answering them does not delay arrivals
PER_CLIENT = 0.05  # deadline allowance per client for setting it up on a busy machine
HERD_FORM_LIMIT = 30.0  # seconds the herd may take to form while streams keep opening


# -- measuring waits ---------------------------------------------------------------


def _linked(ev: Evidence) -> Evidence:
    """``ev`` with the accept of each attempt's new connection, as the ledger links them
    (``conformance.timing.connection_accepts``): a retry's wait then ends at that
    connection's accept, the earliest sign of the retry on the path, and the rest of the
    connection's set-up counts as path, not as the client's delay."""
    return replace(ev, noise=ev.noise.linked(ev.attempts, ev.connections))


def _window(low: float, high: float) -> str:
    return f"{ms(low)}-{ms(high)}"


def envelope_resolution(low: float, high: float) -> float:
    """The smallest excess over an envelope the envelope checks exist to catch: half
    the envelope's upper end (a missing cap, a doubled jitter), at least twice the
    quiet path floor."""
    return max(2 * PATH_FLOOR, 0.5 * high)


def _envelope_decision(wait: Wait, low: float, high: float) -> str:
    """``decide`` for one retry of an exponential series, whose early envelopes sit at
    the harness's own noise at every scale (re-judging only moves the series up): a
    lower end below twice the wait's noise allowance is left unjudged, not undecidable.
    Its upper end is judged as ever, and the later, larger retries judge the lower ends
    the flaws show in (caps that never widen, a constant delay)."""
    resolution = envelope_resolution(low, high)
    decision = decide(wait, low, high, resolution)
    if decision != "unsure" or wait.most >= high + resolution:
        return decision
    return "unjudged" if low < 2 * (wait.measured - wait.least) else decision


def _describe(n: int, wait: Wait, low: float, high: float) -> str:
    return (
        f"retry {n}: waited {ms(wait.measured)} (the client's own delay "
        f"{ms(max(wait.least, 0.0))}-{ms(wait.most)}), envelope {_window(low, high)}"
    )


def envelope_outcome(
    attempts: Sequence[Attempt],
    backoff: BackoffConfig,
    retries: int,
    noise: Noise,
    first: int = 1,
) -> Outcome:
    """Each of ``retries`` retries waited within the envelope of its retry number.

    Args:
        attempts: One stream's attempts in order: ``retries`` failures, then the last.
        backoff: The claimed backoff (its envelopes).
        retries: How many retries the script forced.
        noise: The harness lag measured during the case.
        first: The retry number of the first retry.

    Returns:
        The outcome; its details list every retry's wait against its envelope.
    """
    want = (
        f"{retries} retries, each waiting within its envelope (the client's own delay, "
        f"from the failure's end, less the measured harness lag)"
    )
    rows: list[str] = []
    bad: list[str] = []
    unsure: list[str] = []
    for i in range(1, min(len(attempts), retries + 1)):
        n = first + i - 1
        low, high = backoff.envelope(n)
        wait = wait_between(attempts[i - 1], attempts[i], noise)
        row = _describe(n, wait, low, high)
        rows.append(row)
        decision = _envelope_decision(wait, low, high)
        if decision == "unjudged":
            row += " (its lower end is within the measured noise: not judged at this scale)"
            rows[-1] = row
        (bad if decision == "out" else unsure if decision == "unsure" else []).append(row)
    if len(attempts) < retries + 1:
        n = first + len(attempts) - 1
        bad.append(f"retry {n} never came (envelope {_window(*backoff.envelope(n))})")
    figure = delays_figure(
        "each retry's wait against its envelope", attempts, backoff, noise, first
    )
    if bad:
        return Outcome.failed(want, bad[0], *rows, *bad[1:], figure=figure)
    if unsure:
        return Outcome.unsure(want, unsure[0], noise.headline(), *rows, figure=figure)
    return Outcome(True, want, f"{retries} retries within their envelopes", tuple(rows), figure)


def delays_figure(
    label: str,
    attempts: Sequence[Attempt],
    backoff: BackoffConfig,
    noise: Noise,
    first: int = 1,
) -> Figure:
    """Each retry's wait (measured, and its interval) against its own envelope."""
    samples = []
    for i in range(1, len(attempts)):
        n = first + i - 1
        low, high = backoff.envelope(n)
        wait = wait_between(attempts[i - 1], attempts[i], noise)
        samples.append(FigureSample(f"retry {n}", wait.measured, wait.least, wait.most, low, high))
    return Figure("delays", label, tuple(samples))


# -- the jitter's declared range ---------------------------------------------------------


SEED_JITTER = 0.5  # the seed's jitter: a uniform 0-50 % on top of the delay


def judged_range(policy: ClientPolicy) -> tuple[float, float]:
    """The range the first delay is judged uniform on: the declared one, or, for a
    profile that declares none (a fixed delay), the seed's 0-50 % over its delay."""
    low, high = first_delay_range(policy.backoff)
    if high > low:
        return low, high
    return low, low * (1 + SEED_JITTER)


def _range_note(policy: ClientPolicy) -> str:
    low, high = first_delay_range(policy.backoff)
    if high > low:
        return ""
    return (
        f" (the profile declares no jitter: judged against the seed's 0-"
        f"{SEED_JITTER:.0%} over its {ms(low)} delay)"
    )


def first_delay_range(backoff: BackoffConfig) -> tuple[float, float]:
    """The interval the first retry's delay is declared uniform on.

    The seed's, full and equal jitter draw uniformly over the first envelope;
    decorrelated jitter draws from ``[base, 3 * base]`` (clipped by the cap).
    """
    if backoff.family == "decorrelated":
        return backoff.base, min(3 * backoff.base, backoff.cap(1))
    return backoff.envelope(1)


def _jitter_applies(policy: ClientPolicy, transport: str) -> str | None:
    b = policy.backoff
    if b.family == "decorrelated" and b.cap(1) < 3 * b.base:
        return "the first cap clips decorrelated jitter: its first delay is not uniform"
    return None


# -- tuning ------------------------------------------------------------------------------


def _quiet(policy: ClientPolicy) -> ClientPolicy:
    """Only the backoff acts: no breaker (five failures would open it and add its
    cooldown), no first-chunk or stall timer on the deliberately silent streams."""
    return replace(
        policy,
        breaker=BreakerConfig(kind="none"),
        first_chunk_timeout=None,
        stall_timeout=policy.stall_timeout * 10,
        stall_check_interval=policy.stall_check_interval * 10,
    )


def _scaled(policy: ClientPolicy, factor: float) -> ClientPolicy:
    """Every backoff duration times ``factor``: ratios, jitter share and attempt
    thresholds (the relations the checks judge) stay as the profile declares."""
    b = policy.backoff
    caps = tuple((n, c * factor) for n, c in b.caps)
    return replace(policy, backoff=replace(b, base=b.base * factor, caps=caps))


def _span_tune(target: float) -> Callable[[ClientPolicy], ClientPolicy]:
    """Scale the backoff so the first delay's jitter range is ``target`` seconds wide,
    large against scheduling noise."""

    def tune(policy: ClientPolicy) -> ClientPolicy:
        low, high = first_delay_range(policy.backoff)
        factor = target / (high - low) if high > low else 1.0
        return _quiet(_scaled(policy, factor))

    return tune


# -- row 1: every delay inside its envelope ------------------------------------------------

ENVELOPE_RETRIES = 5  # reaches the first cap at the seed's numbers
# Retry 1's envelope ends at least this late (the backoff scaled up if needed, keeping
# its ratios): envelopes of a few milliseconds sit inside the harness's own quiet path
# (PATH_FLOOR), where a doubled jitter or a missing cap cannot show.
ENVELOPE_FIRST_HIGH = 0.03


def _envelope_tune(policy: ClientPolicy) -> ClientPolicy:
    high = policy.backoff.envelope(1)[1]
    return _quiet(_scaled(policy, max(1.0, ENVELOPE_FIRST_HIGH / high) if high > 0 else 1.0))


def _retries_allowed(policy: ClientPolicy, wanted: int) -> int:
    """``wanted`` retries, fewer where the profile stops sooner or its breaker would open
    (its cooldown is no backoff), but at least one: a profile that never retries is
    judged by the seed, which retries."""
    limit = policy.max_attempts
    retries = wanted if limit is None else min(wanted, limit - 1)
    if policy.breaker.kind == "consecutive":
        retries = min(retries, policy.breaker.threshold - 1)
    return max(1, retries)


def _envelope_retries(policy: ClientPolicy) -> int:
    return _retries_allowed(policy, ENVELOPE_RETRIES)


def _failure(policy: ClientPolicy) -> Step:
    """One failure the profile retries: a 503, else a stream that breaks before its
    first event (EventSource retries no status, only a lost connection)."""
    if policy.matrix.is_retryable(503) or not policy.matrix.retry_network:
        return Respond(status=503)
    return Stream(events=0, end="abort")


def _failures(count: int, policy: ClientPolicy) -> list[Step]:
    return [*([_failure(policy)] * count), Stream(events=EVENTS)]


async def _play_envelope(ctx: CaseContext) -> None:
    retries = _envelope_retries(ctx.policy)
    await one_stream(lambda p: _failures(retries, p), retries=retries)(ctx)


def _check_envelope(ev: Evidence, policy: ClientPolicy) -> Outcome:
    ev = _linked(ev)
    retries = _envelope_retries(policy)
    return all_of(
        envelope_outcome(ev.attempts, policy.backoff, retries, ev.noise), ended_with_done(ev)
    )


register_row(
    Row(
        title="Each retry waits within its attempt's envelope",
        requirement=(
            "A client MUST wait before retry n at least the capped exponential delay "
            "min(base * 2^(n-1), cap(n)) and at most that plus its declared jitter."
        ),
        source=SEED,
        play=_play_envelope,
        check=_check_envelope,
        tune=_envelope_tune,
        tune_optional=True,
        # Upper bounds tens of ms wide over a chain of retries: beside other lanes, in an
        # xdist worker next to a second suite, the reference once waited 58 ms past its
        # envelope with 42 ms of lag measured (a false FAIL), so it plays alone.
        alone=True,
    ),
    get_id="SC-BACKOFF-1",
    post_id="SC-BACKOFF-2",
)


# -- row 2: exponential growth to caps that widen ----------------------------------------------

# The backoff runs at half the test timing, and faster still when its widest cap is
# above CAPS_LAST, so twelve attempts stay quick. At these numbers the last caps'
# lower ends (50 ms EventSource, 300 ms fetch) stand well clear of the first cap's
# upper end (30 ms, 15 ms), and an uncapped delay passes its envelope by more than
# half again (the envelope resolution) by retry 11 (by retry 10 at EventSource's numbers).
CAPS_SCALE = 0.5
CAPS_LAST = 0.3


def _caps_retries(policy: ClientPolicy) -> int:
    """Enough retries that the last one is under the widest cap (at least two, to see
    growth), as far as the profile goes on retrying."""
    return max(2, _retries_allowed(policy, max(first for first, _ in policy.backoff.caps)))


GROWS_SURELY = 1.5  # the last delay at least this many times the first: it grows
FLAT_SURELY = 1.2  # at most this many times: it does not double (the seed's least is 2)


def _declares_growth(backoff: BackoffConfig) -> bool:
    return backoff.family != "none" and backoff.exponential(2) > backoff.exponential(1)


def growth_outcome(attempts: Sequence[Attempt], retries: int, noise: Noise) -> Outcome:
    """The seed's growth rule on measured delays, for a profile that declares none: the
    last retry's own delay is surely under FLAT_SURELY times the first's (a fixed
    delay): FAIL; surely GROWS_SURELY times or more: it grows."""
    want = (
        f"the delays grow (the seed doubles them): retry {retries} waits at least "
        f"{GROWS_SURELY:g}x retry 1's delay; the profile declares a constant delay"
    )
    if len(attempts) < retries + 1:
        return Outcome.failed(want, f"{len(attempts) - 1} of {retries} retries came")
    first = wait_between(attempts[0], attempts[1], noise)
    last = wait_between(attempts[retries - 1], attempts[retries], noise)
    seen = f"retry 1 waited {ms(first.measured)}, retry {retries} {ms(last.measured)}"
    if last.most < FLAT_SURELY * max(first.least, 0.0):
        return Outcome.failed(want, f"a constant delay: {seen}")
    if last.least >= GROWS_SURELY * first.most:
        return Outcome.passed(want, seen)
    return Outcome.unsure(want, seen, noise.headline())


def _caps_tune(policy: ClientPolicy) -> ClientPolicy:
    widest = max(c for _, c in policy.backoff.caps)
    return _quiet(_scaled(policy, min(CAPS_SCALE, CAPS_LAST / widest)))


async def _play_caps(ctx: CaseContext) -> None:
    retries = _caps_retries(ctx.policy)
    await one_stream(lambda p: _failures(retries, p), retries=retries)(ctx)


def _check_caps(ev: Evidence, policy: ClientPolicy) -> Outcome:
    ev = _linked(ev)
    retries = _caps_retries(policy)
    caps = ", ".join(f"{ms(c)} from retry {n}" for n, c in policy.backoff.caps)
    outcome = envelope_outcome(ev.attempts, policy.backoff, retries, ev.noise)
    outcome = replace(outcome, expected=f"{outcome.expected}; caps {caps}")
    if not _declares_growth(policy.backoff):
        outcome = all_of(growth_outcome(ev.attempts, retries, ev.noise), outcome)
    return all_of(outcome, ended_with_done(ev))


register_row(
    Row(
        title="Delays grow exponentially up to a cap that widens with the attempts",
        requirement=(
            "A client MUST double its delay with every retry up to the cap, and MUST widen "
            "the cap as its profile says (seeds: 2 s, then 3 s after 5 attempts, then 5 s "
            "for EventSource or 60 s for fetch after 10)."
        ),
        source=SEED + " (progressive caps)",
        play=_play_caps,
        check=_check_caps,
        tune=_caps_tune,
        tune_optional=True,
        alone=True,  # the same tight upper bounds as SC-BACKOFF-1/2
    ),
    get_id="SC-BACKOFF-3",
    post_id="SC-BACKOFF-4",
)


# -- row 3: the count starts over after a success -----------------------------------------

RESET_FAILURES = 2  # failures of the first stream, before it succeeds (fewer if it stops)
RESET_GAP = 0.15  # tuned: retry 3's envelope starts this far above retry 1's end
RESET_PATHS = (f"{ROOT}/first", f"{ROOT}/second")
RESET_CLIENT = "returning-user"


def _reset_failures(policy: ClientPolicy) -> int:
    return _retries_allowed(policy, RESET_FAILURES)


def _reset_tune(policy: ClientPolicy) -> ClientPolicy:
    b = policy.backoff
    distance = b.envelope(3)[0] - b.envelope(1)[1]
    factor = RESET_GAP / distance if distance > 0 else 1.0
    return _quiet(_scaled(policy, factor))


async def _play_reset(ctx: CaseContext) -> None:
    seed = ctx.server.scenario.seed
    first, second = RESET_PATHS
    ctx.server.load(
        Scenario(
            endpoints=(
                Endpoint(first, tuple(_failures(_reset_failures(ctx.policy), ctx.policy))),
                Endpoint(second, tuple(_failures(1, ctx.policy))),
            ),
            seed=seed,
        )
    )
    failed = _reset_failures(ctx.policy)
    for n, (path, failures) in enumerate(((first, failed), (second, 1)), start=1):
        ctx.start(_request(ctx.transport, path, f"s{n}", RESET_CLIENT))
        await ctx.wait_ended(f"s{n}", retry_budget(ctx.policy, failures))


def _request(transport: Transport, path: str, stream: str, client: str) -> StreamRequest:
    return replace(request_for(transport, stream=stream, client=client), path=path)


def _check_reset(ev: Evidence, policy: ClientPolicy) -> Outcome:
    ev = _linked(ev)
    first, second = (tuple(a for a in ev.attempts if a.path == p) for p in RESET_PATHS)
    failures = _reset_failures(policy)
    low, high = policy.backoff.envelope(1)
    want = (
        f"after a stream that needed {failures} retries completed, the next stream's "
        f"first retry waits within retry 1's envelope {_window(low, high)} "
        "(the client's own delay, less the measured harness lag)"
    )
    setup = all_of(ended_with_done(ev, "s1"), ended_with_done(ev, "s2"))
    if not setup.ok:
        return replace(setup, expected=want)
    if len(first) != failures + 1 or len(second) != 2:
        return Outcome.failed(want, f"{len(first)} and {len(second)} attempts on the two streams")
    wait = wait_between(second[0], second[1], ev.noise)
    row = _describe(1, wait, low, high)
    # The flaw: a count carried over, so the next retry's envelope; RESET_GAP above
    # retry 1's when tuned. Untuned envelopes may overlap (a fixed delay): then the
    # check holds the wait to retry 1's envelope at the envelope checks' resolution.
    resolution = policy.backoff.envelope(failures + 1)[0] - high
    if resolution <= 0:
        resolution = envelope_resolution(low, high)
    decision = decide(wait, low, high, resolution)
    if decision == "in":
        return Outcome(True, want, row)
    earlier = [
        _describe(n, wait_between(first[n - 1], first[n], ev.noise), *policy.backoff.envelope(n))
        for n in range(1, len(first))
    ]
    if decision == "unsure":
        return Outcome.unsure(want, row, ev.noise.headline(), "the first stream:", *earlier)
    return Outcome.failed(want, row, "the first stream:", *earlier)


register_row(
    Row(
        title="The attempt count starts over after a successful stream",
        requirement=(
            "After a stream completes, a client MUST count attempts from 1 again: the "
            "first retry of a later failure waits within retry 1's envelope."
        ),
        source=SEED + " (getReconnectDelay(attempt)); seeds/000 §Network-Aware "
        '("reconnectAttempts = 0") and §Circuit Breakers ("If the once works, reset the '
        'counter")',
        play=_play_reset,
        check=_check_reset,
        tune=_reset_tune,
        tune_optional=True,
    ),
    get_id="SC-BACKOFF-5",
    post_id="SC-BACKOFF-6",
)


# -- row 4: Retry-After longer than the backoff -------------------------------------------------

HINT = 0.1  # seconds, at least
# The hint is this many times the hinted retry's own backoff (its envelope's end): a
# client that ignores it waits at most a third of it, surely under the half that fails.
HINT_OVER_BACKOFF = 3


def _hinted(policy: ClientPolicy) -> int:
    """The retry the hint comes with: the second, or the first for a profile that stops
    after two attempts (it would give up before a second)."""
    limit = policy.max_attempts
    return 2 if limit is None or limit >= 3 else 1


def _hint(policy: ClientPolicy) -> float:
    own = policy.backoff.envelope(_hinted(policy))[1]
    return math.ceil(max(HINT, HINT_OVER_BACKOFF * own) * 1000) / 1000


def _hint_applies(policy: ClientPolicy, transport: str) -> str | None:
    if policy.retry_after and policy.retry_after_cap < _hint(policy):
        return f"the profile caps Retry-After below {ms(_hint(policy))}"
    return None


def _hint_steps(policy: ClientPolicy) -> list[Step]:
    millis = str(round(_hint(policy) * 1000))
    hinted = Respond(status=429, headers=(("retry-after-ms", millis),))
    before = [Respond(status=503)] if _hinted(policy) == 2 else []
    return [*before, hinted, Stream(events=EVENTS)]


def _check_hint(ev: Evidence, policy: ClientPolicy) -> Outcome:
    ev = _linked(ev)
    hint = _hint(policy)
    n = _hinted(policy)
    backoff = policy.backoff.envelope(n)
    ignores = "" if policy.retry_after else "; the profile declares it ignores Retry-After"
    want = (
        f"retry {n} waits at least the server's {ms(hint)} hint, longer than its backoff "
        f"({_window(*backoff)}){ignores}"
    )
    if len(ev.attempts) < n + 1:
        return Outcome.failed(want, f"{len(ev.attempts)} attempt(s)")
    wait = wait_between(ev.attempts[n - 1], ev.attempts[n], ev.noise)
    seen = f"waited {ms(wait.measured)} (the client's own delay at most {ms(wait.most)})"
    # The hint ignored leaves retry 2's backoff at most, under half the hint.
    return all_of(waited_the_hint(wait, hint, want, seen, ev.noise), ended_with_done(ev))


register_row(
    Row(
        title="A Retry-After longer than the backoff is waited out",
        requirement=(
            "When a 429 or 503 carries a retry hint longer than the computed backoff, a "
            "client MUST wait at least the hint (up to its profile's cap) before retrying."
        ),
        source=RETRY_AFTER,
        play=lambda ctx: one_stream(_hint_steps, retries=_hinted(ctx.policy), waits=_hint)(ctx),
        check=_check_hint,
        applies=_hint_applies,
    ),
    get_id="SC-BACKOFF-7",
    post_id="SC-BACKOFF-8",
)


# -- row 5: jitter spread as declared --------------------------------------------------------


def _jitter_path(i: int) -> str:
    return f"{ROOT}/jitter/{i}"


async def _play_jitter(ctx: CaseContext) -> None:
    clients = range(JITTER_CLIENTS)
    failure = _failure(ctx.policy)
    endpoints = tuple(Endpoint(_jitter_path(i), (failure, Stream(events=1))) for i in clients)
    ctx.server.load(Scenario(endpoints=endpoints, seed=ctx.server.scenario.seed))
    for i in clients:
        ctx.start(_request(ctx.transport, _jitter_path(i), f"j{i}", f"jitter-{i}"))
        # Users arrive one by one, so their failures do not queue up behind each
        # other (nor behind building the next client) before the retry timers start.
        await ctx.hold(JITTER_STAGGER)
    budget = retry_budget(ctx.policy, 1, JITTER_CLIENTS * PER_CLIENT)
    await ctx.wait_until(_all_ended(ctx, [f"j{i}" for i in clients]), budget)


def _all_ended(ctx: CaseContext, streams: Sequence[str]) -> Callable[[], bool]:
    """A cheap predicate: polled every few milliseconds on the client's own event loop,
    it must not scan the deliveries once per stream."""
    waiting = set(streams)

    def done() -> bool:
        ends = ctx.deliveries.all()
        waiting.difference_update(d.stream for d in ends if d.kind in ("done", "error"))
        return not waiting

    return done


def _check_jitter(ev: Evidence, policy: ClientPolicy) -> Outcome:
    ev = _linked(ev)
    spread = judged_range(policy)
    if noisy := too_noisy(ev.noise):  # before any rule: a late retry is noise too
        return Outcome.unsure(f"{JITTER_CLIENTS} clients' first delays", noisy)
    samples: list[Wait] = []
    missing = 0
    for i in range(JITTER_CLIENTS):
        attempts = [a for a in ev.attempts if a.path == _jitter_path(i)]
        if len(attempts) < 2:
            missing += 1
            continue
        samples.append(wait_between(attempts[0], attempts[1], ev.noise))
    if missing:
        return Outcome.failed(
            f"all {JITTER_CLIENTS} clients retry once after a failure",
            f"{missing} client(s) did not retry within the deadline",
        )
    outcome = jitter_outcome(samples, spread, ev.noise.headline())
    return replace(outcome, expected=outcome.expected + _range_note(policy))


register_row(
    Row(
        title="Jitter spreads the delays over the declared range",
        requirement=(
            "A client MUST add the jitter its profile declares to every delay (the seed: "
            "a uniform 0-50 % on top of the exponential): delays cover the declared range "
            "and stay inside it."
        ),
        source=SEED,
        play=_play_jitter,
        check=_check_jitter,
        applies=_jitter_applies,
        tune=_span_tune(JITTER_SPAN),
        tune_optional=True,
        quiet_gc=True,  # fifty clients' waits, measured together
    ),
    get_id="SC-BACKOFF-9",
    post_id="SC-BACKOFF-10",
)


# -- row 6: the thundering herd ---------------------------------------------------------------


def _herd_path(i: int) -> str:
    return f"{ROOT}/herd/{i}"


async def _play_herd(ctx: CaseContext) -> None:
    silent = Stream(events=0, stall=Stall(after=0, seconds=None))
    endpoints = tuple(
        Endpoint(_herd_path(i), (silent, Stream(events=1, delay=HERD_HOLD)))
        for i in range(HERD_CLIENTS)
    )
    ctx.server.load(Scenario(endpoints=endpoints, seed=ctx.server.scenario.seed))
    for i in range(HERD_CLIENTS):
        ctx.start(_request(ctx.transport, _herd_path(i), f"h{i}", f"user-{i}"))
    connect = retry_budget(ctx.policy, 0, HERD_CLIENTS * PER_CLIENT)
    opened = await _herd_formed(ctx, connect)
    if opened < HERD_CLIENTS:
        raise SetupFailed(
            f"the herd did not form: {opened} of {HERD_CLIENTS} streams were open, none more "
            f"in the last {connect:.1f}s (a client that caps its connections cannot run "
            "this case)"
        )
    streams = [f"h{i}" for i in range(HERD_CLIENTS)]
    budget = retry_budget(ctx.policy, 1, HERD_CLIENTS * PER_CLIENT)
    # The wifi router restarts: every connection drops at once, and it is back at once.
    ctx.proxy.offline()
    ctx.proxy.online()
    await ctx.wait_until(_all_ended(ctx, streams), budget)


async def _herd_formed(ctx: CaseContext, patience: float) -> int:
    """How many herd streams opened: waited for while more keep opening (a starved
    machine opens fifty slowly), for ``patience`` seconds after the last one, and
    at most HERD_FORM_LIMIT in all."""

    def opened() -> int:
        return sum(1 for a in ctx.ledger.attempts() if a.headers_at is not None)

    deadline = now() + HERD_FORM_LIMIT
    while (seen := opened()) < HERD_CLIENTS and now() < deadline:
        more = functools.partial(lambda before: opened() > before, seen)
        if not await ctx.wait_until(more, min(patience, deadline - now())):
            break
    return opened()


def _check_herd(ev: Evidence, policy: ClientPolicy) -> Outcome:
    ev = _linked(ev)
    spread = judged_range(policy)
    if noisy := too_noisy(ev.noise):  # before any rule: a late reconnect is noise too
        return Outcome.unsure(f"{HERD_CLIENTS} clients' reconnect delays", noisy)
    cuts = [
        c.closed_at for c in ev.connections if c.closed_by == "offline" and c.closed_at is not None
    ]
    paths = {_herd_path(i) for i in range(HERD_CLIENTS)}
    again = [a for a in ev.attempts if a.path in paths and a.number == 2]
    if not cuts:
        return Outcome.failed(f"{HERD_CLIENTS} streams cut at once", "no stream was open")
    # Every client's failure is the cut: the proxy drops all its connections in one go,
    # so the latest and earliest close bound each client's own failure moment.
    # A cut has no way back to measure; each reconnect's own way out is its own.
    delays = [
        wait_from(
            max(cuts),
            min(cuts),
            a.arrived_at,
            ev.noise,
            out=ev.noise.hop_out(a),
            opened=ev.noise.opened_at(a),
            sent=ev.noise.sent_at(a),
        )
        for a in again
    ]
    outcome = herd_outcome(delays, HERD_CLIENTS, spread)
    return replace(outcome, expected=outcome.expected + _range_note(policy))


register_row(
    Row(
        title=f"A herd of {HERD_CLIENTS} clients that lose their streams at once reconnects "
        "spread out",
        requirement=(
            "Clients that lose their streams at the same instant MUST NOT reconnect in "
            "lockstep: each draws its own jitter, so the reconnects reach the server spread "
            "over the declared range."
        ),
        source=SEED + " (the thundering herd)",
        play=_play_herd,
        check=_check_herd,
        applies=_jitter_applies,
        tune=_span_tune(HERD_SPAN),
        tune_optional=True,
        quiet_gc=True,  # fifty clients' delays from one cut, measured together
    ),
    get_id="SC-BACKOFF-11",  # GET only: SC-BACKOFF-12 is reserved
)
