"""A weather played by the fake server for an application's own tests (``llm_server``).

The application is the client: it asks for stream ``n`` at ``url(n)`` (a base URL its
SDK appends the provider's path to), hands back what it got (``record``), and
``metrics()`` measures the run as a weather run does, from the ledger and the recorded
answers, whose tokens name themselves (marked answers). Thresholds:
``session.metrics().require("completion >= 0.99", "duplicated_tokens == 0")``.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance._evidence import Delivery
from conformance.weather._metrics import WeatherMetrics, outcome_of, summarize
from conformance.weather._model import Weather
from conformance.weather._plan import WeatherPlan, stream_path
from fake_servers import FakeServer, now

__all__ = ["HORIZON", "WeatherSession"]

HORIZON = 3600.0  # seconds of the test over which outages are scheduled


@dataclass
class _Answer:
    started: float
    ended: float | None = None
    text: str | None = None
    error: str | None = None


class WeatherSession:
    """``streams`` streams of ``weather`` (seeded), served at ``base_url`` by ``server``."""

    def __init__(
        self, server: FakeServer, base_url: str, weather: Weather, *, streams: int, seed: int = 0
    ) -> None:
        if not 1 <= streams <= 1000:
            raise ValueError(f"streams: 1..1000, got {streams}")
        self.weather = weather
        self._server = server
        self._base = base_url.rstrip("/")
        self._origin = now()
        self.plan = WeatherPlan(
            weather, seed=seed, streams=streams, origin=self._origin, horizon=HORIZON
        )
        self._answers: dict[int, _Answer] = {}
        server.marked = True  # every token names itself in the application's text
        server.load(self.plan.scenario(), planner=self.plan.step)

    @property
    def streams(self) -> int:
        return len(self.plan.shapes)

    def url(self, number: int) -> str:
        """The base URL of stream ``number`` (1-based); the stream starts now."""
        if not 1 <= number <= self.streams:
            raise ValueError(f"stream numbers run 1..{self.streams}, got {number}")
        self._answers.setdefault(number, _Answer(now()))
        return self._base + stream_path(number)

    def record(self, number: int, *, text: str | None = None, error: object = None) -> None:
        """What the application got for stream ``number``: its whole text, or the error
        it raised (an exception or a message)."""
        answer = self._answers.setdefault(number, _Answer(now()))
        answer.ended = now()
        answer.text, answer.error = text, None if error is None else str(error) or repr(error)

    def metrics(self) -> WeatherMetrics:
        """The measured outcome of every stream asked for so far."""
        by_path: dict[str, list[object]] = {}
        for attempt in self._server.ledger.attempts():
            by_path.setdefault(attempt.path, []).append(attempt)
        outcomes = []
        for number, answer in sorted(self._answers.items()):
            shape = self.plan.shapes[number - 1]
            outcomes.append(
                outcome_of(
                    number,
                    shape.tokens,
                    shape.fault_free,
                    answer.started,
                    by_path.get(stream_path(number), ()),  # type: ignore[arg-type]
                    _deliveries(number, answer),
                )
            )
        arrivals = [a.arrived_at for a in self._server.ledger.attempts()]
        outages = [(o.start, o.end) for o in self.plan.outages if o.start < now()]
        return summarize(outcomes, arrivals, outages)


def _deliveries(number: int, answer: _Answer) -> list[Delivery]:
    stream, at = f"w{number}", answer.ended
    if at is None:
        return []
    if answer.error is not None:
        return [Delivery(stream, "error", at, detail=answer.error)]
    return [Delivery(stream, "chunk", at, data=answer.text or ""), Delivery(stream, "done", at)]
