"""A weather played out: each stream's shape, the outages, and each attempt's step.

Pure: everything is drawn from the seed, and the one input from the world is when an
attempt arrived (``at``, on the server's clock), which decides whether it meets an
outage or a network that is still down after a handoff. The fake server asks
``WeatherPlan.step`` for every attempt (``FakeServer.load(..., planner=)``), and the
ledger keeps the fault each attempt met as its step number (``fault_of``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from conformance.weather._model import ATTEMPT_FAULTS, FAULT_KINDS, FaultKind, Weather
from fake_servers._script import Endpoint, Framing, Gap, Respond, Scenario, Stall, Step, Stream

__all__ = ["PORTAL_PAGE", "Outage", "StreamShape", "WeatherPlan", "fault_of", "stream_path"]

PORTAL_PAGE = b"<html><body><h1>Welcome!</h1><p>Log in to continue browsing.</p></body></html>"
_PREFIX = "/w/"


def stream_path(number: int) -> str:
    """The endpoint of stream ``number`` (1-based): one path each, so the server numbers
    each stream's attempts on its own."""
    return f"{_PREFIX}{number}"


def fault_of(step: int | None) -> FaultKind | None:
    """The fault an attempt met, from its ledger step (0: none)."""
    return FAULT_KINDS[step - 1] if step else None


def _index(kind: FaultKind | None) -> int:
    return 0 if kind is None else FAULT_KINDS.index(kind) + 1


@dataclass(frozen=True)
class StreamShape:
    """One stream's answer: ``tokens`` tokens ``gap`` s apart after ``first_byte`` s, and
    a research gap of ``research_seconds`` after token ``research_after`` (None: none)."""

    number: int
    tokens: int
    gap: float
    first_byte: float
    research_after: int | None
    research_seconds: float
    keepalive: float = 15.0  # seconds between the server's comments during research

    @property
    def fault_free(self) -> float:
        """Seconds the answer takes with no fault: headers, tokens, the terminal event."""
        # The research gap takes the place of one token gap (``fake_servers._render``).
        research = self.research_seconds - self.gap if self.research_after is not None else 0.0
        return self.first_byte + self.tokens * self.gap + research

    def pauses(self, first: int, last: int) -> bool:
        """Whether an attempt sending tokens ``first``..``last`` holds the research gap:
        it lies before token ``research_after + 1``, in the attempt that sends it."""
        research = self.research_after
        return research is not None and first - 1 <= research < last

    def token_at(self, first: int, start: float, index: int) -> float:
        """When an attempt that arrived at ``start`` and sends from token ``first`` sends
        token ``index`` (``first - 1``: its headers)."""
        at = start + self.first_byte + max(0, index - first) * self.gap
        research = self.research_after
        if research is not None and first - 1 <= research < index:
            # The silence takes the place of the gap before its write (none before the first).
            at += self.research_seconds - (self.gap if research >= first else 0.0)
        return at

    def sent_by(self, first: int, start: float, moment: float) -> int:
        """The last token an attempt that arrived at ``start`` and sends from token
        ``first`` has sent by ``moment`` (``first - 1``: none yet)."""
        if moment < start + self.first_byte:
            return first - 1
        last = min(self.tokens, first + int((moment - start - self.first_byte) / self.gap))
        research = self.research_after
        if research is None or not first - 1 <= research < last:
            return last
        resumes = self.token_at(first, start, research + 1)
        if moment < resumes:
            return research
        return min(self.tokens, research + 1 + int((moment - resumes) / self.gap))


@dataclass(frozen=True)
class Outage:
    """The backend refuses every request (503 + Retry-After) from ``start`` to ``end``."""

    start: float
    end: float

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end


class WeatherPlan:
    """What every attempt of a weather run meets (``step``), drawn from ``seed``.

    ``origin``: the server-clock moment the run starts; outages fall in the ``horizon``
    seconds after it. The plan keeps one thing as the run goes: until when each
    stream's network is down after a handoff (it depends on when the cut came).
    """

    def __init__(
        self,
        weather: Weather,
        *,
        seed: int,
        streams: int,
        origin: float,
        horizon: float,
        expected: float | None = None,
    ) -> None:
        self.weather = weather
        self.seed = seed
        self.origin = origin
        self.shapes = tuple(self._shape(n) for n in range(1, streams + 1))
        self.outages = self._outages(horizon, expected or horizon)
        # A deploy's 503s all say the same Retry-After, as a load balancer's do: the
        # deploy's shortest length. (The seconds left would bring every client back in
        # the same instant, whatever its backoff, and the herd would not tell a jittered
        # client from one without jitter.)
        deploy = weather.fault("deploy")
        self._hint = str(max(1, math.ceil(deploy.span[0]))) if deploy is not None else "1"
        self._offline_until: dict[int, float] = {}

    # -- the scenario the server loads ---------------------------------------------
    def scenario(self) -> Scenario:
        """One endpoint per stream; ``step`` decides every answer."""
        endpoints = tuple(Endpoint(stream_path(s.number), (Stream(),)) for s in self.shapes)
        return Scenario(endpoints=endpoints, seed=self.seed)

    # -- drawing ---------------------------------------------------------------------
    def _rng(self, *parts: object) -> random.Random:
        return random.Random(":".join(str(p) for p in (self.weather.key, self.seed, *parts)))

    def _shape(self, number: int) -> StreamShape:
        shape, rng = self.weather.shape, self._rng("shape", number)
        tokens = rng.randint(*shape.tokens)
        gap = round(rng.uniform(*shape.token_gap), 3)
        first_byte = round(rng.uniform(*shape.first_byte), 3)
        research = rng.random() < shape.research and tokens > 1
        return StreamShape(
            number,
            tokens,
            gap,
            first_byte,
            rng.randint(1, tokens - 1) if research else None,
            round(rng.uniform(*shape.research_seconds), 3),
            shape.keepalive,
        )

    def _outages(self, horizon: float, expected: float) -> tuple[Outage, ...]:
        deploy = self.weather.fault("deploy")
        if deploy is None or deploy.rate == 0:
            return ()
        rng, out, at = self._rng("deploy"), [], self.origin
        mean_gap = 3600.0 / deploy.rate
        # The first outage comes within the run's ``expected`` length (while its users
        # stream): a run shorter than the mean gap would often meet none, and show no herd.
        at += rng.uniform(0.2, 0.6) * min(mean_gap, expected)
        while at < self.origin + horizon:
            length = round(rng.uniform(*deploy.span), 3)
            out.append(Outage(at, at + length))
            at += length + rng.expovariate(1.0 / mean_gap)
        return tuple(out)

    def drawn(self, stream: int, attempt: int) -> FaultKind | None:
        """The per-attempt fault attempt ``attempt`` of ``stream`` draws (None: clear)."""
        u = self._rng("attempt", stream, attempt).random()
        total = 0.0
        for fault in self.weather.faults:
            if fault.kind in ATTEMPT_FAULTS:
                total += fault.rate
                if u < total:
                    return fault.kind
        return None

    # -- answering -------------------------------------------------------------------
    def step(
        self, path: str, attempt: int, at: float, last_event_id: str | None
    ) -> tuple[int, Step] | None:
        """The step for ``attempt`` (1-based) of the stream at ``path``, arriving at
        ``at``, as (its fault's index, the step); None: not a weather path."""
        number = _number(path)
        if number is None or number > len(self.shapes):
            return None
        shape = self.shapes[number - 1]
        first = _first(last_event_id, shape.tokens)
        outage = next((o for o in self.outages if o.holds(at)), None)
        if outage is not None:
            return _index("deploy"), Respond(503, headers=(("retry-after", self._hint),))
        if at < self._offline_until.get(number, -math.inf):
            return _index("handoff"), _clear(shape, first, first - 1, "abort")
        kind = self.drawn(number, attempt)
        step = self._fault_step(kind, shape, first, attempt, at)
        if step is None:  # the fault has nothing to act on in this attempt
            kind, step = None, _clear(shape, first)
        return self._deployed(shape, first, at, kind, step)

    def _fault_step(
        self, kind: FaultKind | None, shape: StreamShape, first: int, attempt: int, at: float
    ) -> Step | None:
        rng = self._rng("cut", shape.number, attempt)
        left = shape.tokens - first  # tokens after the first this attempt sends
        if kind is None:
            return _clear(shape, first)
        if kind == "status_5xx":
            return Respond(rng.choice((500, 502, 503)))
        if kind == "captive_portal":
            headers = (("content-type", "text/html; charset=utf-8"),)
            return Respond(200, headers=headers, body=PORTAL_PAGE)
        if kind == "wrong_content_type":
            return _clear(shape, first, framing=Framing(content_type="text/plain; charset=utf-8"))
        if kind == "buffering":
            return _clear(shape, first, framing=Framing(buffered=True))
        if kind == "idle_cut":
            return self._idle_cut(shape, first)
        if left < 1:  # the cuts below need a token after the first to cut before
            return None
        cut = rng.randint(first, shape.tokens - 1)
        if kind == "handoff":
            fault = self.weather.fault("handoff")
            assert fault is not None
            down = rng.uniform(*fault.span)
            self._offline_until[shape.number] = shape.token_at(first, at, cut) + down
        end = "truncate" if kind == "truncate" else "abort"
        return _clear(shape, first, cut, end)

    def _idle_cut(self, shape: StreamShape, first: int) -> Step | None:
        research = shape.research_after
        fault = self.weather.fault("idle_cut")
        assert fault is not None
        if not shape.pauses(first, shape.tokens) or shape.research_seconds < fault.low:
            return None  # no silence long enough for the proxy to cut in this attempt
        assert research is not None
        stall = Stall(after=research - first + 1, seconds=fault.low)
        return replace(_clear(shape, first, research, "abort"), stall=stall)

    def _deployed(
        self, shape: StreamShape, first: int, at: float, kind: FaultKind | None, step: Step
    ) -> tuple[int, Step]:
        """A stream in flight when an outage starts is cut there, as every other one."""
        deploy = self.weather.fault("deploy")
        if not isinstance(step, Stream) or deploy is None or not deploy.in_flight:
            return _index(kind), step
        ends = shape.token_at(first, at, step.events) + shape.gap
        if step.stall is not None and step.events < shape.tokens and step.stall.seconds:
            ends += step.stall.seconds  # an idle cut: the silence before the abort
        outage = next((o for o in self.outages if at < o.start < ends), None)
        if outage is None:
            return _index(kind), step
        sent = shape.sent_by(first, at, outage.start)
        if sent >= step.events:  # this attempt ends (or is cut) before the outage
            return _index(kind), step
        cut = replace(_clear(shape, first, sent, "abort"), framing=step.framing)
        research = shape.research_after
        if research is not None and first - 1 <= research == sent:
            # Cut in its research gap: the silence (keepalives flowing) lasts until the
            # outage starts; the next attempt holds the whole gap again.
            hold = max(0.0, outage.start - shape.token_at(first, at, research))
            stall = Stall(after=research - first + 1, seconds=hold, keepalive=shape.keepalive)
            cut = replace(cut, stall=stall)
        return _index("deploy"), cut


def _clear(
    shape: StreamShape,
    first: int,
    events: int | None = None,
    end: str = "done",
    framing: Framing | None = None,
) -> Stream:
    """Stream ``shape`` from token ``first`` up to token ``events`` (all: None), ending
    ``end``, with its research gap (keepalive comments flowing) where it lies ahead."""
    last = shape.tokens if events is None else max(events, first - 1)
    research = shape.research_after
    stall = None
    if research is not None and shape.pauses(first, last):
        after, seconds = research - first + 1, shape.research_seconds
        stall = Stall(after=after, seconds=seconds, keepalive=shape.keepalive)
    return Stream(
        events=last,
        gap=Gap("fixed", seconds=shape.gap),
        end=end,  # type: ignore[arg-type]
        delay=shape.first_byte,
        stall=stall,
        ids=True,
        framing=framing if framing is not None else Framing(),
    )


def _number(path: str) -> int | None:
    if not path.startswith(_PREFIX):
        return None
    tail = path[len(_PREFIX) :]
    number = int(tail) if tail.isascii() and tail.isdecimal() and len(tail) < 7 else 0
    return number if number >= 1 else None


def _first(last_event_id: str | None, tokens: int) -> int:
    """The first token an attempt sends: after a numeric Last-Event-ID (the server's
    own rule, ``fake_servers._render``), else the first."""
    text = (last_event_id or "").strip()
    if not (text.isascii() and text.isdecimal()):
        return 1
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(tokens)):  # past the last token, however many digits
        return tokens + 1
    return min(int(digits), tokens) + 1
