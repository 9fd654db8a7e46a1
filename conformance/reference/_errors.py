"""The errors a stream raises to its consumer; all of them are ``StreamError``."""

from __future__ import annotations

from conformance.reference._policy import Failure

__all__ = [
    "CircuitOpen",
    "GaveUp",
    "NonRetryableStatus",
    "NotIdempotent",
    "Offline",
    "Stalled",
    "StreamError",
    "Truncated",
]


class StreamError(Exception):
    """Base class: the stream ended without its terminal event."""


# What an empty-bodied status tells the consumer.
_MEANINGS = {204: "No Content, the server's sign to stop reconnecting"}


class NonRetryableStatus(StreamError):
    """The server answered with a status the retry matrix never retries (e.g. 401).

    A 204 is one on purpose: it is how a server tells an event-stream client to stop
    reconnecting (WHATWG HTML §9.2.1). A redirect the client could not follow (a bad
    Location, a loop) ends here too, ``body`` saying why.
    """

    def __init__(self, status: int, body: str) -> None:
        text = body[:200] or _MEANINGS.get(status, "")
        super().__init__(f"HTTP {status}: {text}")
        self.status = status
        self.body = body


class GaveUp(StreamError):
    """Every attempt allowed before the commit failed; ``last`` is the final failure."""

    def __init__(self, attempts: int, last: Failure) -> None:
        super().__init__(f"gave up after {attempts} attempt(s); last failure: {last.kind}")
        self.attempts = attempts
        self.last = last


class CircuitOpen(StreamError):
    """A new call met an open circuit breaker; it may be tried again at ``until``
    (on the client's clock)."""

    def __init__(self, until: float) -> None:
        super().__init__(f"circuit open until {until:.3f}")
        self.until = until


class Stalled(StreamError):
    """The stream went silent for longer than the stall timeout and could not resume."""

    def __init__(self, committed: bool) -> None:
        super().__init__("stream stalled" + (" after the first chunk" if committed else ""))
        self.committed = committed


class Truncated(StreamError):
    """The stream ended before its terminal event and could not resume.

    ``clean``: the body ended normally (the server stopped early); otherwise the
    connection broke.
    """

    def __init__(self, clean: bool) -> None:
        how = "ended without its terminal event" if clean else "connection broke mid-stream"
        super().__init__(f"stream truncated: {how}")
        self.clean = clean


class Offline(StreamError):
    """``offline()`` cut a committed stream that cannot resume."""

    def __init__(self) -> None:
        super().__init__("the network went offline mid-stream")


class NotIdempotent(StreamError):
    """A non-idempotent request failed after the server may have seen it; never re-sent."""

    def __init__(self, last: Failure) -> None:
        super().__init__(f"not re-sending a non-idempotent request after {last.kind}")
        self.last = last
