"""Weathers: named, versioned fault mixes over a stream's life, and the streams' shape.

A weather is data. Each attempt a client makes draws at most one per-attempt fault, by
its stated rate (``FaultRate.rate``); an outage (``deploy``) is scheduled for the whole
run instead, and turns every client away at once. Values are validated where they are
made, with the scenario files' errors (``ScenarioError``), so a custom weather file is
refused with the field that is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from fake_servers._validate import (
    ScenarioError,
    check_choice,
    check_flag,
    check_integer,
    check_seconds,
    check_text,
    reject,
    show,
)

__all__ = [
    "ATTEMPT_FAULTS",
    "DEFAULT_STREAMS",
    "DEFAULT_USERS",
    "FAULT_KINDS",
    "MAX_TOKENS",
    "FaultKind",
    "FaultRate",
    "Shape",
    "Weather",
]

FaultKind = Literal[
    "status_5xx",  # a 500/502/503 before any byte of the answer
    "midstream_drop",  # the connection breaks after some tokens
    "truncate",  # the body ends cleanly, without the format's terminal event
    "idle_cut",  # a proxy cuts the connection after ``low`` s of silence (a research gap)
    "buffering",  # a proxy holds every byte back until the answer is whole
    "handoff",  # a reset mid-stream, then no network for ``low``-``high`` s
    "captive_portal",  # 200 text/html: the hotel's login page instead of the answer
    "wrong_content_type",  # the stream, labelled text/plain by a rewriting proxy
    "deploy",  # 503 + Retry-After for ``low``-``high`` s, to every client at once
]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
ATTEMPT_FAULTS: tuple[FaultKind, ...] = tuple(k for k in FAULT_KINDS if k != "deploy")
MAX_TOKENS = 100_000  # tokens of one stream
DEFAULT_STREAMS = 300  # a run's streams, and the users streaming at once
DEFAULT_USERS = 30
_SPANNED = ("handoff", "deploy")  # kinds whose low..high is a duration drawn per fault


def _pair(name: str, value: object, *, positive: bool = False) -> tuple[float, float]:
    if not isinstance(value, tuple | list) or len(value) != 2:
        reject(name, "a pair [low, high]", value)
    low = check_seconds(f"{name}[0]", value[0], positive=positive)
    high = check_seconds(f"{name}[1]", value[1], positive=positive)
    if high < low:
        reject(f"{name}[1]", f"a number >= {low:g} (the low end)", value[1])
    return low, high


@dataclass(frozen=True)
class FaultRate:
    """One fault of a weather and how often it strikes.

    ``rate``: for a per-attempt fault, the chance that one attempt meets it (0..1); for
    ``deploy``, outages per hour of the run. ``low``/``high``: seconds, where the kind
    has a duration (``idle_cut``: the proxy's idle limit, ``low`` only; ``handoff``:
    offline for low..high s; ``deploy``: the outage lasts low..high s).
    """

    kind: FaultKind
    rate: float
    low: float = 0.0
    high: float | None = None  # None: ``low`` (a fixed duration)
    # deploy only: streams in flight as the outage starts are cut too (a deploy that
    # kills its servers); False: a rolling deploy that only turns new requests away
    in_flight: bool = True

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, FAULT_KINDS)
        check_flag("in_flight", self.in_flight)
        limit = 1e6 if self.kind == "deploy" else 1.0
        unit = "outages per hour" if self.kind == "deploy" else "(a probability per attempt)"
        object.__setattr__(self, "rate", check_seconds("rate", self.rate, limit=limit, unit=unit))
        low, high = _pair("seconds", (self.low, self.low if self.high is None else self.high))
        if self.kind in _SPANNED and low <= 0:
            reject("seconds", "a duration > 0 for this kind", [self.low, self.high])
        if self.kind == "idle_cut" and low <= 0:
            reject("seconds", "the proxy's idle limit (> 0 s)", self.low)
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @property
    def span(self) -> tuple[float, float]:
        """(low, high) seconds, both set once made."""
        return self.low, self.low if self.high is None else self.high


@dataclass(frozen=True)
class Shape:
    """What the weather's streams look like, each drawn from these ranges by the seed:
    ``tokens`` per answer, ``token_gap`` s between tokens, ``first_byte`` s before the
    headers, and with chance ``research`` one research gap of ``research_seconds`` (the
    seed's 60 s gaps) at a drawn token, during which the server sends a keepalive
    comment every ``keepalive`` s."""

    tokens: tuple[int, int] = (60, 160)
    token_gap: tuple[float, float] = (0.2, 0.5)
    first_byte: tuple[float, float] = (0.2, 1.0)
    research: float = 0.5
    research_seconds: tuple[float, float] = (60.0, 75.0)
    keepalive: float = 15.0

    def __post_init__(self) -> None:
        tokens = self.tokens
        if not isinstance(tokens, tuple | list) or len(tokens) != 2:
            reject("tokens", "a pair [low, high]", tokens)
        low = check_integer("tokens[0]", tokens[0], 1, MAX_TOKENS)
        high = check_integer("tokens[1]", tokens[1], low, MAX_TOKENS)
        object.__setattr__(self, "tokens", (low, high))
        for name in ("token_gap", "first_byte", "research_seconds"):
            object.__setattr__(self, name, _pair(name, getattr(self, name)))
        check_seconds("research", self.research, limit=1.0, unit="(a probability)")
        check_seconds("keepalive", self.keepalive, positive=True)


@dataclass(frozen=True)
class Weather:
    """A named, versioned fault mix (``name@version``), modelled on a seed's conditions."""

    name: str
    version: int
    description: str
    faults: tuple[FaultRate, ...]
    shape: Shape = field(default_factory=Shape)
    source: str = "seeds/000"

    def __post_init__(self) -> None:
        check_text("name", self.name)
        if not self.name or any(c.isspace() for c in self.name) or "@" in self.name:
            reject("name", "a name without spaces or '@'", self.name)
        check_integer("version", self.version, 1)
        check_text("description", self.description)
        faults = tuple(self.faults)
        for index, fault in enumerate(faults):
            if not isinstance(fault, FaultRate):
                raise ScenarioError(f"expected a fault, got {show(fault)}", step=f"fault[{index}]")
        kinds = [f.kind for f in faults]
        twice = sorted({k for k in kinds if kinds.count(k) > 1})
        if twice:
            raise ScenarioError(f"{', '.join(twice)} given twice", field="fault")
        total = sum(f.rate for f in faults if f.kind != "deploy")
        if total > 1.0 + 1e-9:
            raise ScenarioError(
                f"the per-attempt rates add up to {total:g}: at most 1 (one fault an attempt)",
                field="fault",
            )
        object.__setattr__(self, "faults", faults)
        if not isinstance(self.shape, Shape):
            reject("shape", "a Shape", self.shape)

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    def scaled(self, factor: float) -> Weather:
        """The same weather with every duration times ``factor`` (token gaps, research
        gaps, the idle limit, offline and outage times; rates stay): for an application's
        own tests in real time, with its client's timeouts scaled alike. Named
        ``name*factor``, so a report never passes it for the weather itself."""
        check_seconds("factor", factor, positive=True, limit=1.0, unit="(at most 1)")
        s = self.shape

        def pair(p: tuple[float, float]) -> tuple[float, float]:
            return (p[0] * factor, p[1] * factor)

        shape = Shape(
            tokens=s.tokens,
            token_gap=pair(s.token_gap),
            first_byte=pair(s.first_byte),
            research=s.research,
            research_seconds=pair(s.research_seconds),
            keepalive=s.keepalive * factor,
        )
        faults = tuple(
            FaultRate(
                f.kind,
                f.rate if f.kind != "deploy" else f.rate / factor,
                f.low * factor,
                f.span[1] * factor,
                f.in_flight,
            )
            for f in self.faults
        )
        name = self.name if factor == 1 else f"{self.name}*{factor:g}"
        return Weather(name, self.version, self.description, faults, shape, self.source)

    def rate(self, kind: FaultKind) -> float:
        """The stated rate of ``kind`` (0 when the weather has none)."""
        return next((f.rate for f in self.faults if f.kind == kind), 0.0)

    def fault(self, kind: FaultKind) -> FaultRate | None:
        return next((f for f in self.faults if f.kind == kind), None)

    @property
    def clear_rate(self) -> float:
        """The chance that an attempt meets no per-attempt fault."""
        return max(0.0, 1.0 - sum(f.rate for f in self.faults if f.kind != "deploy"))

    def to_json(self) -> dict[str, object]:
        s = self.shape
        return {
            "name": self.name,
            "version": self.version,
            "key": self.key,
            "description": self.description,
            "source": self.source,
            "faults": [
                {
                    "kind": f.kind,
                    "rate": f.rate,
                    "seconds": list(f.span),
                    "in_flight": f.in_flight,
                }
                for f in self.faults
            ],
            "shape": {
                "tokens": list(s.tokens),
                "token_gap": list(s.token_gap),
                "first_byte": list(s.first_byte),
                "research": s.research,
                "research_seconds": list(s.research_seconds),
                "keepalive": s.keepalive,
            },
        }
