"""Scripts: frozen data saying what each successive attempt on an endpoint gets.

Nothing here performs IO. The server interprets these values; builders in
``_builders`` and the file loader in ``_loader`` both produce them, so a script
means the same thing whichever way it was written.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Ending",
    "Endpoint",
    "Framing",
    "Gap",
    "Headers",
    "LineEnding",
    "Method",
    "Respond",
    "Scenario",
    "Stall",
    "Step",
    "Stream",
    "Then",
]

Headers = tuple[tuple[str, str], ...]
Ending = Literal["done", "truncate", "abort", "abort_mid_line", "error"]
LineEnding = Literal["lf", "cr", "crlf"]
Method = Literal["GET", "POST", "ANY"]
Then = Literal["repeat_last", "cycle"]


@dataclass(frozen=True)
class Gap:
    """Time between two events: fixed, or drawn from a seeded distribution."""

    kind: Literal["fixed", "uniform", "exponential"] = "fixed"
    seconds: float = 0.0  # the fixed gap, or the mean of the exponential
    low: float = 0.0  # uniform bounds
    high: float = 0.0


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


Step = Respond | Stream


@dataclass(frozen=True)
class Endpoint:
    """A path and the steps its successive attempts get."""

    path: str
    steps: tuple[Step, ...]
    method: Method = "ANY"
    then: Then = "repeat_last"  # what attempts past the last step get

    def step_for(self, attempt: int) -> tuple[int, Step]:
        """The 0-based step index and step for the 1-based ``attempt``."""
        if not self.steps:
            raise ValueError(f"endpoint {self.path} has no steps")
        index = attempt - 1
        if index >= len(self.steps):
            index = len(self.steps) - 1 if self.then == "repeat_last" else index % len(self.steps)
        return index, self.steps[index]


@dataclass(frozen=True)
class Scenario:
    """Every endpoint of a server, and the seed its content and randomness come from."""

    endpoints: tuple[Endpoint, ...] = ()
    seed: int = 0

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


@functools.lru_cache(maxsize=256)
def _pattern(path: str) -> re.Pattern[str]:
    parts = re.split(r"\{[^{}/]*\}", path)
    return re.compile("[^/]+".join(re.escape(part) for part in parts))
