"""The weather plan, pure (no network), and the fault mix a run on the real server meets.

"The fault mix is what it says": over many attempts the share of each per-attempt fault
lies within a 99.9 % binomial interval of the weather's stated rate, for every shipped
weather, in the plan's draws and in what the server's ledger recorded.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from conformance.weather import (
    FAULT_KINDS,
    WEATHERS,
    FaultKind,
    Weather,
    WeatherPlan,
    fault_of,
    get_weather,
    run_weather,
    stream_path,
)
from conformance.weather._model import ATTEMPT_FAULTS
from conformance.weather._plan import PORTAL_PAGE, StreamShape
from fake_servers import Respond, Stream, fixed
from fake_servers._render import Abort, Hold, Send, plan_stream
from fake_servers._script import Step
from pytest_streamcheck.targets._load import load_target

STREAMS, ATTEMPTS = 200, 20  # draws per weather: 4000 attempts
ALPHA = 0.001  # the binomial interval's miss chance: 99.9 %
FAR = 1e4  # seconds between the attempts of the realization test: no handoff overlaps


def binomial_interval(n: int, p: float, alpha: float = ALPHA) -> tuple[int, int]:
    """The central ``1 - alpha`` interval of Binomial(n, p): the counts ``lo..hi`` with at
    most ``alpha / 2`` of the mass below ``lo`` and at most that above ``hi``."""
    if p <= 0.0:
        return 0, 0
    if p >= 1.0:
        return n, n

    def pmf(k: int) -> float:
        log = (
            math.lgamma(n + 1)
            - math.lgamma(k + 1)
            - math.lgamma(n - k + 1)
            + k * math.log(p)
            + (n - k) * math.log1p(-p)
        )
        return math.exp(log)

    masses = [pmf(k) for k in range(n + 1)]
    lo, below = 0, 0.0
    while below + masses[lo] <= alpha / 2:
        below += masses[lo]
        lo += 1
    hi, above = n, 0.0
    while above + masses[hi] <= alpha / 2:
        above += masses[hi]
        hi -= 1
    return lo, hi


def test_the_binomial_interval_itself() -> None:
    lo, hi = binomial_interval(4000, 0.05)  # mean 200, sd 13.8: about +-3.3 sd
    assert 150 <= lo <= 158
    assert 242 <= hi <= 250
    assert binomial_interval(100, 0.0) == (0, 0)
    assert binomial_interval(100, 1.0) == (100, 100)


def plan_of(weather: Weather, seed: int = 0, streams: int = STREAMS) -> WeatherPlan:
    return WeatherPlan(weather, seed=seed, streams=streams, origin=0.0, horizon=3600.0)


def stream_with(plan: WeatherPlan, *, research: bool) -> StreamShape:
    return next(s for s in plan.shapes if (s.research_after is not None) == research)


def attempt_drawing(
    plan: WeatherPlan, kind: FaultKind | None, shape: StreamShape | None = None
) -> tuple[int, int]:
    """(stream, attempt) of the first draw of ``kind`` (of stream ``shape``, if given)."""
    streams = [shape] if shape is not None else plan.shapes
    for s in streams:
        for attempt in range(1, 200):
            if plan.drawn(s.number, attempt) == kind:
                return s.number, attempt
    raise AssertionError(f"no draw of {kind}")


def played(
    plan: WeatherPlan, number: int, attempt: int, at: float, last: str | None = None
) -> tuple[FaultKind | None, Step]:
    answer = plan.step(stream_path(number), attempt, at, last)
    assert answer is not None
    index, step = answer
    return fault_of(index), step


def schedule(
    step: Stream, number: int, start: float, last: str | None = None
) -> tuple[dict[int, float], float | None]:
    """When the server sends each data event of ``step`` (by index), and when it aborts:
    the renderer's own plan of the answer, timed from an arrival at ``start``."""
    plan = plan_stream(step, seed=0, path=stream_path(number), attempt=1, last_event_id=last)
    t, sent, aborted = start + step.delay, {}, None
    for action in plan.actions:
        if isinstance(action, Send):
            t += action.pause
            sent.update({e.index: t for e in action.events if e.kind == "data"})
        elif isinstance(action, Hold):
            assert action.seconds is not None
            t += action.seconds
        elif isinstance(action, Abort):
            aborted = t
    return sent, aborted


# -- determinism --------------------------------------------------------------------


def _fingerprint(plan: WeatherPlan) -> tuple[object, ...]:
    draws = tuple(plan.drawn(s, a) for s in range(1, 51) for a in range(1, 6))
    steps = tuple(plan.step(stream_path(s), 1, -FAR * s, None) for s in range(1, 51))
    return plan.shapes, plan.outages, draws, steps


@pytest.mark.parametrize("name", ["seed-mix", "backend-deploy"])
def test_the_same_seed_plays_the_same_weather(name: str) -> None:
    weather = get_weather(name)
    assert _fingerprint(plan_of(weather, seed=7)) == _fingerprint(plan_of(weather, seed=7))


@pytest.mark.parametrize("name", ["seed-mix", "backend-deploy"])
def test_another_seed_plays_another_weather(name: str) -> None:
    weather = get_weather(name)
    one, other = plan_of(weather, seed=7), plan_of(weather, seed=8)
    assert one.shapes != other.shapes
    assert _fingerprint(one) != _fingerprint(other)
    if weather.fault("deploy") is not None:
        assert one.outages != other.outages


def test_the_scenario_has_one_endpoint_a_stream() -> None:
    plan = plan_of(get_weather("seed-mix"), streams=5)
    scenario = plan.scenario()
    assert [e.path for e in scenario.endpoints] == [f"/w/{n}" for n in range(1, 6)]
    assert scenario.seed == plan.seed


def test_the_streams_are_drawn_from_the_shape() -> None:
    weather = get_weather("seed-mix")
    shape = weather.shape
    plan = plan_of(weather)
    for s in plan.shapes:
        assert shape.tokens[0] <= s.tokens <= shape.tokens[1]
        assert shape.token_gap[0] <= s.gap <= shape.token_gap[1]
        assert shape.first_byte[0] <= s.first_byte <= shape.first_byte[1]
        if s.research_after is not None:
            assert 1 <= s.research_after < s.tokens
    researched = sum(s.research_after is not None for s in plan.shapes)
    lo, hi = binomial_interval(STREAMS, shape.research)
    assert lo <= researched <= hi


# -- the fault mix is what it says ---------------------------------------------------


@pytest.mark.parametrize("name", sorted(WEATHERS))
def test_each_fault_is_drawn_at_its_stated_rate(name: str) -> None:
    weather = WEATHERS[name]
    plan = plan_of(weather, seed=0)
    counts = Counter(
        plan.drawn(s, a) for s in range(1, STREAMS + 1) for a in range(1, ATTEMPTS + 1)
    )
    n = STREAMS * ATTEMPTS
    for kind in ATTEMPT_FAULTS:
        lo, hi = binomial_interval(n, weather.rate(kind))
        assert lo <= counts[kind] <= hi, f"{kind}: {counts[kind]} of {n}, not in {lo}..{hi}"
    lo, hi = binomial_interval(n, weather.clear_rate)
    assert lo <= counts[None] <= hi
    assert "deploy" not in counts  # an outage is scheduled for the run, never drawn


def _check_realized(
    weather: Weather, shape: StreamShape, drawn: FaultKind | None, met: FaultKind | None, step: Step
) -> None:
    """``step`` is what ``drawn`` names, or (where the fault has nothing to act on)
    the clear answer, met as no fault."""
    if drawn == "idle_cut":
        fault = weather.fault("idle_cut")
        assert fault is not None
        if shape.research_after is None or shape.research_seconds < fault.low:
            drawn = None  # no silence long enough for the proxy to cut
    assert met == drawn
    if drawn == "status_5xx":
        assert isinstance(step, Respond)
        assert step.status in (500, 502, 503)
        return
    if drawn == "captive_portal":
        assert isinstance(step, Respond)
        assert step.status == 200
        assert dict(step.headers)["content-type"].startswith("text/html")
        assert step.body == PORTAL_PAGE
        return
    assert isinstance(step, Stream)
    assert step.ids
    assert step.delay == shape.first_byte
    assert step.gap.seconds == shape.gap
    if drawn is None:
        assert (step.events, step.end) == (shape.tokens, "done")
        assert not step.framing.buffered
        assert step.framing.content_type.startswith("text/event-stream")
    elif drawn == "wrong_content_type":
        assert step.framing.content_type.startswith("text/plain")
        assert (step.events, step.end) == (shape.tokens, "done")
    elif drawn == "buffering":
        assert step.framing.buffered
        assert (step.events, step.end) == (shape.tokens, "done")
    elif drawn in ("midstream_drop", "handoff"):
        assert step.end == "abort"
        assert 1 <= step.events < shape.tokens
    elif drawn == "truncate":
        assert step.end == "truncate"
        assert 1 <= step.events < shape.tokens
    elif drawn == "idle_cut":
        fault = weather.fault("idle_cut")
        assert fault is not None
        assert step.end == "abort"
        assert step.events == shape.research_after
        assert step.stall is not None
        assert step.stall.after == shape.research_after
        assert step.stall.seconds == fault.low
        assert step.stall.keepalive is None  # the proxy holds the comments back
    else:  # pragma: no cover - every kind is handled above
        raise AssertionError(drawn)
    if drawn == "idle_cut":
        return
    # the research gap, where the answer goes past it: keepalive comments flowing
    research = shape.research_after
    assert (step.stall is not None) == (research is not None and research < step.events)
    if step.stall is not None:
        assert step.stall.after == shape.research_after
        assert step.stall.seconds == shape.research_seconds
        assert step.stall.keepalive == shape.keepalive


@pytest.mark.parametrize("name", sorted(WEATHERS))
def test_each_drawn_fault_plays_as_the_step_it_names(name: str) -> None:
    weather = WEATHERS[name]
    plan = plan_of(weather, seed=1)
    realized: Counter[FaultKind | None] = Counter()
    for shape in plan.shapes:
        for attempt in range(1, ATTEMPTS + 1):
            # long before the run's outages, and far apart: no handoff reaches the next
            at = -1e9 + FAR * (ATTEMPTS * shape.number + attempt)
            drawn = plan.drawn(shape.number, attempt)
            met, step = played(plan, shape.number, attempt, at)
            _check_realized(weather, shape, drawn, met, step)
            realized[met] += 1
    for fault in weather.faults:
        if fault.kind != "deploy":
            assert realized[fault.kind] > 0, f"{fault.kind} never played"


def test_idle_cut_needs_a_research_gap_long_enough() -> None:
    weather = get_weather("seed-mix")  # half the streams have no research gap
    plan = plan_of(weather)
    plain = stream_with(plan, research=False)
    number, attempt = attempt_drawing(plan, "idle_cut", plain)
    met, step = played(plan, number, attempt, 0.0)
    assert met is None
    assert isinstance(step, Stream)
    assert (step.events, step.end, step.stall) == (plain.tokens, "done", None)


def test_idle_cut_silences_the_stream_until_the_proxy_cuts_it() -> None:
    weather = get_weather("corporate-proxy")
    plan = plan_of(weather)
    number, attempt = attempt_drawing(plan, "idle_cut")
    shape = plan.shapes[number - 1]
    met, step = played(plan, number, attempt, 0.0)
    assert met == "idle_cut"
    assert isinstance(step, Stream)
    sent, aborted = schedule(step, number, 0.0)
    assert shape.research_after is not None
    assert max(sent) == shape.research_after
    assert aborted == pytest.approx(sent[shape.research_after] + 60.0)


# -- outages and handoffs --------------------------------------------------------------


def test_an_attempt_inside_an_outage_gets_503_with_one_retry_after() -> None:
    """Every 503 of a deploy says the same Retry-After, its shortest length, as a load
    balancer's does (the seconds left would bring every client back in one instant)."""
    weather = get_weather("backend-deploy")
    plan = plan_of(weather)
    assert plan.outages
    outage = plan.outages[0]
    deploy = weather.fault("deploy")
    assert deploy is not None
    assert deploy.low <= outage.end - outage.start <= deploy.high
    assert all(a.end <= b.start for a, b in zip(plan.outages, plan.outages[1:], strict=False))
    for number in (1, 2, 77):  # every client at once
        for at in (outage.start, outage.start + 10.3, outage.end - 0.2):
            met, step = played(plan, number, 1, at)
            assert met == "deploy"
            assert isinstance(step, Respond)
            assert step.status == 503
            assert dict(step.headers)["retry-after"] == str(math.ceil(deploy.low))
    met, step = played(plan, 1, 3, outage.end)  # over: the network's weather again
    assert met is None
    assert isinstance(step, Stream)


def test_a_deploy_cuts_the_streams_in_flight() -> None:
    weather = get_weather("backend-deploy")
    plan = plan_of(weather)
    outage = plan.outages[0]
    shape = stream_with(plan, research=False)
    start = outage.start - (shape.first_byte + 10.5 * shape.gap)  # 11 tokens out by then
    met, step = played(plan, shape.number, 1, start)
    assert met == "deploy"
    assert isinstance(step, Stream)
    assert (step.events, step.end) == (11, "abort")
    _, aborted = schedule(step, shape.number, start)
    assert aborted is not None
    assert outage.start - shape.gap <= aborted <= outage.start


def test_a_rolling_deploy_leaves_the_streams_in_flight() -> None:
    weather = get_weather("seed-mix")  # in_flight=False
    plan = plan_of(weather)
    outage = plan.outages[0]
    number, attempt = attempt_drawing(plan, None)
    shape = plan.shapes[number - 1]
    met, step = played(plan, number, attempt, outage.start - 5.0)
    assert met is None
    assert isinstance(step, Stream)
    assert (step.events, step.end) == (shape.tokens, "done")


def test_after_a_handoff_the_stream_has_no_network_until_it_is_back() -> None:
    weather = get_weather("mobile-handoff")
    handoff = weather.fault("handoff")
    assert handoff is not None
    plan = plan_of(weather)
    shape = stream_with(plan, research=False)
    number, attempt = attempt_drawing(plan, "handoff", shape)
    at = 100.0
    met, step = played(plan, number, attempt, at)
    assert met == "handoff"
    assert isinstance(step, Stream)
    cut = step.events
    sent, aborted = schedule(step, number, at)
    cut_at = sent[cut]
    assert aborted == pytest.approx(cut_at)  # reset right after the cut token
    # the client comes back after the cut, resuming, before the network is: cut again
    for moment in (cut_at + 0.01, cut_at + handoff.low - 0.01):
        met, again = played(plan, number, attempt + 1, moment, str(cut))
        assert met == "handoff"
        assert isinstance(again, Stream)
        assert (again.end, again.events) == ("abort", cut)
        assert schedule(again, number, moment, str(cut))[0] == {}  # not a token
    # another stream has its own network
    other, first = attempt_drawing(plan, None, next(s for s in plan.shapes if s.number != number))
    met, _ = played(plan, other, first, cut_at + 0.5)
    assert met is None
    # the network is back after the longest offline time at most
    later = next(a for a in range(attempt + 1, 200) if plan.drawn(number, a) is None)
    met, back = played(plan, number, later, cut_at + handoff.high + 0.01, str(cut))
    assert met is None
    assert isinstance(back, Stream)
    assert (back.events, back.end) == (shape.tokens, "done")


def test_a_resume_starts_after_the_last_event_id() -> None:
    weather = get_weather("hotel-wifi")
    plan = plan_of(weather)
    number, attempt = attempt_drawing(plan, None)
    shape = plan.shapes[number - 1]
    met, step = played(plan, number, attempt, 0.0, "7")
    assert met is None
    assert isinstance(step, Stream)
    assert step.events == shape.tokens  # the stream's tokens, sent from token 8
    assert step.ids
    assert step.resume
    sent, _ = schedule(step, number, 0.0, "7")
    assert min(sent) == 8
    assert max(sent) == shape.tokens
    assert sent[8] == pytest.approx(shape.first_byte)  # token 8 goes with the headers


def test_a_resumed_attempt_is_cut_after_the_last_event_id() -> None:
    weather = get_weather("hotel-wifi")
    plan = plan_of(weather)
    cuts = []
    for s in plan.shapes:
        for attempt in range(1, ATTEMPTS + 1):
            if plan.drawn(s.number, attempt) != "truncate" or s.tokens <= 9:
                continue
            met, step = played(plan, s.number, attempt, 0.0, "7")
            assert met == "truncate"
            assert isinstance(step, Stream)
            assert 8 <= step.events < s.tokens
            cuts.append(step.events)
    assert len(cuts) > 20


def test_the_research_gap_counts_from_the_resumed_token() -> None:
    weather = get_weather("corporate-proxy")  # every stream has its research gap
    plan = plan_of(weather)
    shape = next(s for s in plan.shapes if (s.research_after or 0) > 10)
    assert shape.research_after is not None
    number, attempt = attempt_drawing(plan, None, shape)
    _, step = played(plan, number, attempt, 0.0, "7")
    assert isinstance(step, Stream)
    assert step.stall is not None
    assert step.stall.after == shape.research_after - 7
    # resumed past the gap (its token and the next one sent): no silence left to cut in,
    # and none to play. Resumed right after its token, the gap is still ahead.
    number, attempt = attempt_drawing(plan, "idle_cut", shape)
    met, step = played(plan, number, attempt, 0.0, str(shape.research_after + 1))
    assert met is None
    assert isinstance(step, Stream)
    assert step.stall is None
    assert (step.events, step.end) == (shape.tokens, "done")
    met, step = played(plan, number, attempt, 0.0, str(shape.research_after))
    assert met == "idle_cut"
    assert isinstance(step, Stream)
    assert step.stall is not None
    assert step.stall.after == 0


def test_paths_that_are_not_the_weathers_are_left_to_the_script() -> None:
    plan = plan_of(get_weather("seed-mix"), streams=3)
    for path in ("/v1/chat/completions", "/w/4", "/w/x", "/w/", "/w/1/2", "/x/1"):
        assert plan.step(path, 1, 0.0, None) is None


def test_stream_zero_is_not_a_weather_path() -> None:
    plan = plan_of(get_weather("seed-mix"), streams=3)
    assert plan.step("/w/0", 1, 0.0, None) is None


def test_fault_of_maps_the_ledger_step_back() -> None:
    assert fault_of(None) is None
    assert fault_of(0) is None
    for index, kind in enumerate(FAULT_KINDS, start=1):
        assert fault_of(index) == kind
    assert FAULT_KINDS[-1] == "deploy"
    assert set(ATTEMPT_FAULTS) == set(FAULT_KINDS) - {"deploy"}


def test_sent_by_without_a_research_gap() -> None:
    shape = StreamShape(
        1, tokens=10, gap=0.5, first_byte=1.0, research_after=None, research_seconds=0.0
    )
    assert shape.sent_by(1, 10.0, 10.5) == 0  # headers not yet out
    assert shape.sent_by(1, 10.0, 11.0) == 1  # the first token goes with the headers
    assert shape.sent_by(1, 10.0, 12.0) == 3
    assert shape.sent_by(5, 10.0, 12.0) == 7  # resumed after 4
    assert shape.sent_by(1, 10.0, 100.0) == 10
    assert shape.fault_free == pytest.approx(6.0)
    sent, _ = schedule(Stream(events=10, gap=fixed(0.5), delay=1.0), 1, 10.0)
    assert sent[3] == pytest.approx(12.0)


def test_sent_by_matches_the_renderer_after_a_research_gap() -> None:
    plan = plan_of(get_weather("corporate-proxy"))
    shape = plan.shapes[0]
    assert shape.research_after is not None
    number, attempt = attempt_drawing(plan, None, shape)
    _, step = played(plan, number, attempt, 0.0)
    assert isinstance(step, Stream)
    sent, _ = schedule(step, number, 0.0)
    r = shape.research_after
    for moment in (sent[r] + 1.0, sent[r + 1] + 0.01, sent[r + 2] + 0.01, sent[r + 5] + 0.01):
        real = max(i for i, t in sent.items() if t <= moment)
        assert shape.sent_by(1, 0.0, moment) == real


def test_a_deploy_during_a_research_gap_cuts_the_stream_when_it_starts() -> None:
    # the silence (keepalives flowing) lasts until the outage, not cut when it begins
    weather = get_weather("backend-deploy")
    plan = plan_of(weather)
    outage = plan.outages[0]
    shape = stream_with(plan, research=True)
    assert shape.research_after is not None
    # the outage starts halfway through the stream's research gap
    start = outage.start - (
        shape.first_byte + (shape.research_after - 1) * shape.gap + shape.research_seconds / 2
    )
    met, step = played(plan, shape.number, 1, start)
    assert met == "deploy"
    assert isinstance(step, Stream)
    sent, aborted = schedule(step, shape.number, start)
    assert max(sent) == shape.research_after
    assert aborted is not None
    assert aborted == pytest.approx(outage.start, abs=shape.gap)
    assert step.stall is not None
    assert step.stall.keepalive == shape.keepalive


# -- on the real server ----------------------------------------------------------------


@pytest.mark.slow
def test_the_fault_mix_on_the_server_is_what_it_says() -> None:
    weather = get_weather("flaky-backend")
    run = run_weather(load_target("reference"), weather, streams=60, users=20, seed=3)
    assert run.error is None
    assert run.timing == "virtual"
    assert run.metrics is not None
    total = sum(run.faults.values()) + run.attempts_clear
    assert total == run.metrics.requests
    assert total >= 60
    for kind in (*ATTEMPT_FAULTS, "deploy"):
        lo, hi = binomial_interval(total, weather.rate(kind))
        got = run.faults.get(kind, 0)
        assert lo <= got <= hi, f"{kind}: {got} of {total} attempts, not in {lo}..{hi}"
    lo, hi = binomial_interval(total, weather.clear_rate)
    assert lo <= run.attempts_clear <= hi
    # the reference client finishes every stream, whole and once
    m = run.metrics
    assert (m.completed.count, m.completed.total) == (60, 60)
    assert m.duplicated_tokens == 0
    assert m.failed_silently.count == 0
    assert m.lost_tokens == 0
    assert m.requests_per_completed == pytest.approx(total / 60)
