"""A weather run: many users' streams through one client, under one weather.

The run plays as one case on the kit's runner (``SuiteRunner``): the same hosting, the
same time limits and, for a client that waits on the kit's loop alone, virtual time, so
an hour of weather at the seed's real numbers takes seconds. Other clients play in real
time; ``estimate`` says how long before the run starts.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance._adapter import ClientAdapter
from conformance._case import Case, CaseContext, Level, Outcome, StreamRequest, Verdict
from conformance._result import HarnessError
from conformance._runner import VIRTUAL_LIMIT, SuiteRunner
from conformance.cases._common import request_for
from conformance.weather._metrics import (
    StreamOutcome,
    WeatherMetrics,
    outcome_of,
    per_second,
    summarize,
)
from conformance.weather._model import (
    ATTEMPT_FAULTS,
    DEFAULT_STREAMS,
    DEFAULT_USERS,
    FaultKind,
    Weather,
)
from conformance.weather._plan import WeatherPlan, fault_of, stream_path
from fake_servers import now

__all__ = [
    "AFTER_ERROR",
    "DEFAULT_STREAMS",
    "DEFAULT_USERS",
    "MAX_STREAMS",
    "THINK",
    "WeatherRun",
    "estimate",
    "run_weather",
]

MAX_STREAMS = 1000  # one endpoint each (fake_servers' MAX_ENDPOINTS)
THINK = (1.0, 10.0)  # seconds a user waits between one answer and the next question
# ... and after an error: the user reads the apology before asking again (seeds/000:
# "a half-rendered landing page and an apologetic refresh button"). Without it a client
# that fails at once would meet an outage over and over, as no user does.
AFTER_ERROR = (30.0, 90.0)
ARRIVE = 30.0  # users arrive over this many seconds at the start
# A stream may take this many times its fault-free length before the run stops waiting
# (retries, outages, cooldowns): past it, the stream is "unfinished".
PATIENCE = 4.0
MARGIN = 300.0  # seconds on top of that for the breaker's cooldowns and the outages


@dataclass(frozen=True)
class WeatherRun:
    """One client's run under one weather: its metrics and what they were made from."""

    target: str
    client: str
    weather: Weather
    timing: str  # "virtual" or "real"
    seed: int
    streams: int
    users: int
    wall: float  # seconds of wall time the run took
    played: float  # seconds of the clock the run's streams took (virtual or real)
    metrics: WeatherMetrics | None
    error: str | None = None
    outcomes: tuple[StreamOutcome, ...] = ()
    faults: dict[str, int] = field(default_factory=dict)  # attempts that met each fault
    attempts_clear: int = 0
    requests_per_second: tuple[tuple[int, int], ...] = ()  # (second of the run, requests)
    completions: tuple[float, ...] = ()  # seconds into the run each completed stream ended
    outages: tuple[tuple[float, float], ...] = ()  # seconds into the run

    @classmethod
    def failed(
        cls,
        target: str,
        weather: Weather,
        seed: int,
        streams: int,
        users: int,
        error: str,
        *,
        timing: str = "",
        wall: float = 0.0,
    ) -> WeatherRun:
        """A run that could not be measured (the client broke, or it was refused)."""
        return cls(target, target, weather, timing, seed, streams, users, wall, 0.0, None, error)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "client": self.client,
            "weather": self.weather.to_json(),
            "timing": self.timing,
            "seed": self.seed,
            "streams": self.streams,
            "users": self.users,
            "wall": round(self.wall, 3),
            "played": round(self.played, 3),
            "error": self.error,
            "metrics": None if self.metrics is None else self.metrics.to_json(),
            "faults": dict(self.faults),
            "attempts_clear": self.attempts_clear,
            "series": {
                "requests_per_second": [list(p) for p in self.requests_per_second],
                "completions": [round(t, 3) for t in self.completions],
                "outages": [list(o) for o in self.outages],
                "took": [None if o.took is None else round(o.took, 3) for o in self.outcomes],
                "fault_free": [round(o.fault_free, 3) for o in self.outcomes],
            },
        }


def estimate(weather: Weather, streams: int, users: int) -> float:
    """Seconds a fault-free run takes on the clock: what a real-time run costs."""
    shape = weather.shape
    mean = (
        sum(shape.first_byte) / 2
        + sum(shape.tokens) / 2 * sum(shape.token_gap) / 2
        + shape.research * sum(shape.research_seconds) / 2
    )
    rounds = math.ceil(streams / max(1, users))
    return ARRIVE / 2 + rounds * (mean + sum(THINK) / 2)


def _budget(weather: Weather, streams: int, users: int) -> float:
    shape = weather.shape
    longest = (
        shape.first_byte[1]
        + shape.tokens[1] * shape.token_gap[1]
        + (shape.research_seconds[1] if shape.research else 0.0)
    )
    rounds = math.ceil(streams / max(1, users))
    return ARRIVE + rounds * (PATIENCE * longest + THINK[1]) + MARGIN


def run_weather(
    factory: Callable[[], ClientAdapter],
    weather: Weather,
    *,
    streams: int = DEFAULT_STREAMS,
    users: int = DEFAULT_USERS,
    seed: int = 0,
    target: str = "",
    wall_limit: float | None = None,
) -> WeatherRun:
    """Drive ``streams`` streams from ``users`` users through the client ``factory``
    makes, under ``weather``, and measure what they lived.

    Args:
        factory: Makes the adapter (as ``run_suite``'s).
        weather: The weather (``get_weather``).
        streams: How many streams in all (1..MAX_STREAMS).
        users: How many users stream at once, each with a client instance of its own.
        seed: Fixes the weather: the same seed plays the same faults.
        target: The client's name in the report.
        wall_limit: Seconds of wall time before the run is an error (default: generous
            for virtual time, the estimate's budget for real time).
    """
    if not 1 <= streams <= MAX_STREAMS:
        raise ValueError(f"streams: 1..{MAX_STREAMS}, got {streams}")
    if not 1 <= users <= streams:
        raise ValueError(f"users: 1..streams ({streams}), got {users}")
    budget = _budget(weather, streams, users)
    runner = SuiteRunner(factory, None, seed=seed, case_timeout=wall_limit or budget + 60)
    started = time.monotonic()
    try:
        runner.start()
        runner.play_unscaled()
        if runner.timing == "virtual":
            budget = min(budget, VIRTUAL_LIMIT - 60)
            runner.case_timeout = wall_limit or 600.0
        return _play(runner, weather, streams, users, seed, target, budget, started)
    except HarnessError as exc:
        return _failed(target, weather, seed, streams, users, started, str(exc))
    finally:
        runner.close()


def _failed(
    target: str,
    weather: Weather,
    seed: int,
    streams: int,
    users: int,
    started: float,
    error: str,
    timing: str = "",
) -> WeatherRun:
    wall = time.monotonic() - started
    return WeatherRun.failed(target, weather, seed, streams, users, error, timing=timing, wall=wall)


def _transport(runner: SuiteRunner) -> str:
    return "get" if runner.profile_for("get") is not None else "post"


def _play(
    runner: SuiteRunner,
    weather: Weather,
    streams: int,
    users: int,
    seed: int,
    target: str,
    budget: float,
    started: float,
) -> WeatherRun:
    transport = _transport(runner)
    state: dict[str, Any] = {}
    case = Case(
        id=f"WEATHER-{weather.name}",
        title=f"{weather.key}: {streams} streams from {users} users",
        level=Level.SHOULD,
        requirement="Streams finish, intact, under the network's weather.",
        source=weather.source,
        play=lambda ctx: _users(ctx, weather, streams, users, seed, budget, transport, state),
        check=lambda ev, policy: Outcome.passed("measured"),
        transport=transport,  # type: ignore[arg-type]
    )
    result = runner.run(case)
    name = runner.info.name
    timing = runner.timing
    if result.verdict is not Verdict.PASS or result.evidence is None:
        reason = result.reason or f"the run ended {result.verdict.value}"
        return _failed(target or name, weather, seed, streams, users, started, reason, timing)
    return _measured(
        result.evidence, state, weather, seed, users, target or name, name, timing, started
    )


async def _users(
    ctx: CaseContext,
    weather: Weather,
    streams: int,
    users: int,
    seed: int,
    budget: float,
    transport: str,
    state: dict[str, Any],
) -> None:
    origin = now()
    expected = estimate(weather, streams, users)
    plan = WeatherPlan(
        weather, seed=seed, streams=streams, origin=origin, horizon=budget, expected=expected
    )
    server = ctx.server
    server.marked = True  # every token names itself: measured alike from events or text
    server.load(plan.scenario(), planner=plan.step)
    loop = asyncio.get_running_loop()
    ended: dict[str, asyncio.Event] = {f"w{n}": asyncio.Event() for n in range(1, streams + 1)}

    errors: dict[str, bool] = {}

    def on_end(stream: str, error: bool) -> None:
        errors[stream] = error
        event = ended.get(stream)
        if event is not None:
            loop.call_soon_threadsafe(event.set)

    ctx.deliveries.on_end = on_end
    state.update(plan=plan, origin=origin, starts={})
    numbers = iter(range(1, streams + 1))
    deadline = origin + budget
    rng = random.Random(f"{weather.key}:{seed}:users")
    arrivals = [rng.uniform(0, ARRIVE) for _ in range(users)]
    thinks = random.Random(f"{weather.key}:{seed}:think")

    async def user(index: int) -> None:
        await asyncio.sleep(arrivals[index])
        for number in numbers:
            if now() >= deadline:
                return
            stream = f"w{number}"
            state["starts"][number] = now()
            ctx.start(_request(transport, number, index))
            remaining = deadline - now()
            try:
                await asyncio.wait_for(ended[stream].wait(), remaining)
            except TimeoutError:
                return
            failed = errors.get(stream, False)
            await asyncio.sleep(thinks.uniform(*(AFTER_ERROR if failed else THINK)))

    await asyncio.gather(*(user(i) for i in range(users)))
    ctx.deliveries.on_end = None
    state["played"] = now() - origin


def _request(transport: str, number: int, user: int) -> StreamRequest:
    changes: dict[str, Any] = {"path": stream_path(number), "stream": f"w{number}"}
    changes["client"] = f"u{user}"
    if transport == "post":
        changes["headers"] = (("idempotency-key", f"weather-{number}"),)
    return request_for(transport, **changes)  # type: ignore[arg-type]


def _measured(
    evidence: Any,
    state: dict[str, Any],
    weather: Weather,
    seed: int,
    users: int,
    target: str,
    client: str,
    timing: str,
    started: float,
) -> WeatherRun:
    plan: WeatherPlan = state["plan"]
    origin: float = state["origin"]
    starts: dict[int, float] = state["starts"]
    by_path: dict[str, list[Any]] = {}
    for attempt in evidence.attempts:
        by_path.setdefault(attempt.path, []).append(attempt)
    by_stream: dict[str, list[Any]] = {}
    for delivery in evidence.deliveries:
        by_stream.setdefault(delivery.stream, []).append(delivery)
    outcomes = tuple(
        outcome_of(
            n,
            plan.shapes[n - 1].tokens,
            plan.shapes[n - 1].fault_free,
            starts[n],
            by_path.get(stream_path(n), ()),
            by_stream.get(f"w{n}", ()),
        )
        for n in sorted(starts)
    )
    arrivals = [a.arrived_at for a in evidence.attempts]
    outages = [(o.start, o.end) for o in plan.outages if o.start < origin + state["played"]]
    metrics = summarize(outcomes, arrivals, outages)
    faults: dict[str, int] = {}
    for attempt in evidence.attempts:
        kind: FaultKind | None = fault_of(attempt.step)
        if kind is not None:
            faults[kind] = faults.get(kind, 0) + 1
    clear = sum(1 for a in evidence.attempts if not a.step)
    return WeatherRun(
        target=target,
        client=client,
        weather=weather,
        timing=timing,
        seed=seed,
        streams=len(outcomes),
        users=users,
        wall=time.monotonic() - started,
        played=state["played"],
        metrics=metrics,
        outcomes=outcomes,
        faults={k: faults[k] for k in (*ATTEMPT_FAULTS, "deploy") if k in faults},
        attempts_clear=clear,
        requests_per_second=tuple(per_second(arrivals, origin)),
        completions=tuple(
            sorted(o.ended_at - origin for o in outcomes if o.completed and o.ended_at)
        ),
        outages=tuple((s - origin, e - origin) for s, e in outages),
    )
