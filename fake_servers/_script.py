"""Scripts: frozen data saying what each successive attempt on an endpoint gets.

Nothing here performs IO. The server interprets these values; builders in
``_builders`` and the file loader in ``_loader`` both produce them, so a script
means the same thing whichever way it was written.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from fake_servers._limits import (
    MAX_ENDPOINTS,
    MAX_EVENTS,
    MAX_MILLISECONDS,
    MAX_SCRIPTED_BODY_BYTES,
    MAX_SEED,
    MAX_STEPS,
)
from fake_servers._providers import provider_for_path
from fake_servers._validate import (
    ScenarioError,
    check_choice,
    check_flag,
    check_headers,
    check_integer,
    check_limit,
    check_path,
    check_seconds,
    check_text,
    reject,
    show,
)

__all__ = [
    "Ending",
    "Endpoint",
    "Framing",
    "Gap",
    "Headers",
    "LineEnding",
    "Method",
    "Planner",
    "Raw",
    "RawEnd",
    "Respond",
    "Scenario",
    "Stall",
    "Step",
    "Stream",
    "Then",
]

Headers = tuple[tuple[str, str], ...]
Ending = Literal["done", "truncate", "abort", "abort_mid_line", "error"]
RawEnd = Literal["close", "abort"]
LineEnding = Literal["lf", "cr", "crlf"]
Method = Literal["GET", "POST", "ANY"]
Then = Literal["repeat_last", "cycle"]
GapKind = Literal["fixed", "uniform", "exponential"]


def _set(value: object, name: str, checked: Any) -> None:
    """Store the checked (normalised) form of a field of a frozen value."""
    object.__setattr__(value, name, checked)


def _optional_seconds(value: object, name: str, *, positive: bool = False) -> None:
    seconds = getattr(value, name)
    if seconds is not None:
        _set(value, name, check_seconds(name, seconds, positive=positive))


@dataclass(frozen=True)
class Gap:
    """Time between two events: fixed, or drawn from a seeded distribution."""

    kind: GapKind = "fixed"
    seconds: float = 0.0  # the fixed gap, or the mean of the exponential
    low: float = 0.0  # uniform bounds
    high: float = 0.0

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, get_args(GapKind))
        mean = self.kind == "exponential"
        seconds = check_seconds("mean" if mean else "seconds", self.seconds, positive=mean)
        _set(self, "seconds", seconds)
        low, high = check_seconds("low", self.low), check_seconds("high", self.high)
        if high < low:
            reject("high", f"a number >= low ({low:g})", self.high)
        _set(self, "low", low)
        _set(self, "high", high)


@dataclass(frozen=True)
class Stall:
    """Silence after ``after`` events (0: right after the headers).

    ``seconds=None`` stalls until the client goes away. With ``keepalive`` set,
    an SSE comment is sent every ``keepalive`` seconds during the stall, so bytes
    keep flowing while no data does.
    """

    after: int = 0
    seconds: float | None = None
    keepalive: float | None = None

    def __post_init__(self) -> None:
        check_integer("after", self.after)
        _optional_seconds(self, "seconds")
        _optional_seconds(self, "keepalive", positive=True)


@dataclass(frozen=True)
class Framing:
    """How the stream's bytes are laid out on the wire."""

    line_ending: LineEnding = "lf"
    bom: bool = False
    comment_every: int = 0  # a comment line before every k-th event; 0 = none
    retry_ms: int | None = None  # a ``retry:`` field at the start of the stream
    split: int = 0  # cut each write into pieces of at most this many bytes; 0 = whole
    split_random: bool = False  # piece sizes drawn (seeded) from 1..split
    split_pause: float = 0.0  # seconds between pieces, so they cross the wire apart
    buffered: bool = False  # hold everything back and send it at once at the end
    content_type: str = "text/event-stream; charset=utf-8"

    def __post_init__(self) -> None:
        check_choice("line_ending", self.line_ending, get_args(LineEnding))
        for flag in ("bom", "split_random", "buffered"):
            check_flag(flag, getattr(self, flag))
        check_integer("comment_every", self.comment_every)
        if self.retry_ms is not None:
            check_integer("retry_ms", self.retry_ms, 0, MAX_MILLISECONDS, what="milliseconds")
        check_integer("split", self.split)
        _set(self, "split_pause", check_seconds("split_pause", self.split_pause))
        check_text("content_type", self.content_type)
        if self.split == 0 and self.split_random:
            raise ScenarioError("needs split >= 1 (the largest piece)", field="split_random")
        if self.split == 0 and self.split_pause > 0:
            raise ScenarioError("needs split >= 1 (pieces to pause between)", field="split_pause")


@dataclass(frozen=True)
class Respond:
    """A plain, non-streaming response: any status, headers and body."""

    status: int = 200
    headers: Headers = ()
    body: bytes | None = None  # None: a JSON error body that names the status
    delay: float = 0.0  # before the headers (slow time to first byte)
    # Retry-After as an HTTP date this many seconds after the response is sent;
    # a date can only be computed at send time, so it is not a plain header.
    retry_after_date: float | None = None

    def __post_init__(self) -> None:
        check_integer("status", self.status, 100, 599)
        check_headers(self.headers)
        if self.body is not None:
            if not isinstance(self.body, bytes):
                reject("body", "bytes or None", self.body)
            check_limit("body", len(self.body), MAX_SCRIPTED_BODY_BYTES, "bytes per body")
        _set(self, "delay", check_seconds("delay", self.delay))
        _optional_seconds(self, "retry_after_date")
        if self.retry_after_date is not None and _has_header(self.headers, "retry-after"):
            raise ScenarioError(
                'conflicts with the "retry-after" header in headers', field="retry_after_date"
            )


@dataclass(frozen=True)
class Stream:
    """An SSE response: ``events`` chunks with ``gap`` between them, then ``end``.

    ``end``: ``done`` sends the format's terminal event; ``truncate`` ends the
    body cleanly without it; ``abort`` breaks the connection after the last
    event (broken chunked encoding); ``abort_mid_line`` sends the first part of
    the next event's line and then breaks the connection; ``error`` sends the
    format's in-band error event (Anthropic's ``event: error``) and ends cleanly.
    ``format`` ``auto`` speaks the provider whose path the request is on.
    """

    events: int = 5
    gap: Gap = field(default_factory=Gap)
    end: Ending = "done"
    status: int = 200
    headers: Headers = ()
    delay: float = 0.0  # before the headers (slow time to first byte)
    stall: Stall | None = None
    format: str = "auto"  # a name in the format registry, or auto (by the path)
    ids: bool = False  # send ``id:`` fields (the event's 1-based index)
    resume: bool = True  # with ids: honour Last-Event-ID by continuing after it
    framing: Framing = field(default_factory=Framing)

    def __post_init__(self) -> None:
        from fake_servers._formats import format_names  # the registry imports the providers

        check_integer("events", self.events, 0, MAX_EVENTS, what="events per response")
        _typed("gap", self.gap, Gap, "a gap (fixed(), uniform(), exponential())")
        check_choice("end", self.end, get_args(Ending))
        check_integer("status", self.status, 100, 599)
        if _has_header(check_headers(self.headers), "content-type"):
            raise ScenarioError("set a stream's Content-Type with content_type", field="headers")
        _set(self, "delay", check_seconds("delay", self.delay))
        if self.stall is not None:
            _typed("stall", self.stall, Stall, "a Stall or null")
            if self.stall.after > self.events:
                expected = f"an integer 0..{self.events} (at most events)"
                reject("stall.after", expected, self.stall.after)
        check_choice("format", self.format, format_names())
        check_flag("ids", self.ids)
        check_flag("resume", self.resume)
        _typed("framing", self.framing, Framing, "a Framing")


@dataclass(frozen=True)
class Raw:
    """A response whose body is exactly ``pieces``, one write each, ``pause`` s apart.

    For wire-level tests of a parser: the server sends the bytes as they are and
    interprets none of them, so what a correct parser makes of them is the test's to
    declare. ``end``: ``close`` ends the body cleanly, ``abort`` breaks the connection.
    """

    pieces: tuple[bytes, ...]
    pause: float = 0.0
    status: int = 200
    content_type: str = "text/event-stream; charset=utf-8"
    headers: Headers = ()
    end: RawEnd = "close"

    def __post_init__(self) -> None:
        if not isinstance(self.pieces, tuple | list):
            reject("pieces", "a tuple of bytes", self.pieces)
        _set(self, "pieces", tuple(self.pieces))
        for index, piece in enumerate(self.pieces):
            if not isinstance(piece, bytes) or not piece:
                reject(f"pieces[{index}]", "non-empty bytes (an empty write sends nothing)", piece)
        check_limit("pieces", self.size, MAX_SCRIPTED_BODY_BYTES, "bytes per body")
        _set(self, "pause", check_seconds("pause", self.pause))
        check_integer("status", self.status, 200, 599)
        if self.status in (204, 304):
            reject("status", "a status with a body (not 204 or 304)", self.status)
        check_text("content_type", self.content_type)
        if _has_header(check_headers(self.headers), "content-type"):
            raise ScenarioError("set a raw step's Content-Type with content_type", field="headers")
        check_choice("end", self.end, get_args(RawEnd))

    @property
    def size(self) -> int:
        """The body's length in bytes."""
        return sum(len(piece) for piece in self.pieces)


Step = Respond | Stream | Raw
# Chooses an attempt's (step index, step) from its path, attempt number, arrival time and
# Last-Event-ID, instead of the endpoint's list (None: the list's): a weather's plan.
Planner = Callable[[str, int, float, str | None], tuple[int, Step] | None]


def _typed(name: str, value: object, kind: type, expected: str) -> None:
    if not isinstance(value, kind):
        reject(name, expected, value)


def _has_header(headers: Headers, name: str) -> bool:
    return any(key.lower() == name for key, _ in headers)


@dataclass(frozen=True)
class Endpoint:
    """A path and the steps its successive attempts get."""

    path: str
    steps: tuple[Step, ...]
    method: Method = "ANY"
    then: Then = "repeat_last"  # what attempts past the last step get

    def __post_init__(self) -> None:
        check_path(self.path)
        if not isinstance(self.steps, tuple | list):
            reject("steps", "a tuple of steps", self.steps)
        _set(self, "steps", tuple(self.steps))
        if not self.steps:
            raise ScenarioError("expected at least one step", field="steps")
        check_limit("steps", len(self.steps), MAX_STEPS, "steps per endpoint")
        for index, step in enumerate(self.steps):
            if not isinstance(step, Respond | Stream | Raw):
                raise ScenarioError(
                    f"expected a step (respond(), stream(), raw(), ...), got {show(step)}",
                    field=f"steps[{index}]",
                )
        check_choice("method", self.method, get_args(Method))
        check_choice("then", self.then, get_args(Then))

    def step_for(self, attempt: int) -> tuple[int, Step]:
        """The 0-based step index and step for the 1-based ``attempt``."""
        index = attempt - 1
        if index >= len(self.steps):
            index = len(self.steps) - 1 if self.then == "repeat_last" else index % len(self.steps)
        return index, self.steps[index]


@dataclass(frozen=True)
class Scenario:
    """Every endpoint of a server, and the seed its content and randomness come from."""

    endpoints: tuple[Endpoint, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.endpoints, tuple | list):
            reject("endpoints", "a tuple of endpoints", self.endpoints)
        _set(self, "endpoints", tuple(self.endpoints))
        check_limit("endpoint", len(self.endpoints), MAX_ENDPOINTS, "endpoints per scenario")
        seen: dict[str, int] = {}
        for index, item in enumerate(self.endpoints):
            if not isinstance(item, Endpoint):
                reject(f"endpoints[{index}]", "an endpoint()", item)
            if item.path in seen:
                raise ScenarioError(
                    f"duplicate path {show(item.path)} (endpoint[{seen[item.path]}] has it too)",
                    field="path",
                    step=f"endpoint[{index}]",
                )
            seen[item.path] = index
        check_integer("seed", self.seed, 0, MAX_SEED)

    def endpoint(self, path: str) -> Endpoint | None:
        """The endpoint at ``path``: an exact path first, else the first pattern matching it.

        In a pattern, ``{name}`` stands for any text without ``/``, e.g.
        ``/v1beta/models/{model}:streamGenerateContent``.
        """
        exact = next((e for e in self.endpoints if e.path == path), None)
        if exact is not None:
            return exact
        return next(
            (e for e in self.endpoints if "{" in e.path and _pattern(e.path).fullmatch(path)),
            None,
        )

    def base_of(self, path: str) -> Endpoint | None:
        """The endpoint an SDK used as its base URL for ``path``, if any.

        SDKs append their API's path to a base URL (``/v1/stream`` + ``/chat/completions``,
        + ``/v1/messages``): a request under an endpoint's path that ends like a provider's
        API is served by that endpoint, in that provider's format (``format="auto"``).
        The longest such endpoint path wins; patterns never serve as a base.
        """
        if provider_for_path(path) is None:
            return None
        bases = [
            e
            for e in self.endpoints
            if "{" not in e.path and path.startswith(e.path.rstrip("/") + "/")
        ]
        return max(bases, key=lambda e: len(e.path), default=None)


@functools.lru_cache(maxsize=256)
def _pattern(path: str) -> re.Pattern[str]:
    parts = re.split(r"\{[^{}/]*\}", path)
    return re.compile("[^/]+".join(re.escape(part) for part in parts))
