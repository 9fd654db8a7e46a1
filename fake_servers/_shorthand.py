"""Failure shorthands: one call per failure, named like the failure it scripts.

::

    server.script("/v1/messages", *rate_limited(times=2, retry_after=1), reply())
    server.script("/v1/chat/completions", *outage(times=3, status=503), reply(chunks=8))
    server.script("/v1/responses", drop_after(3))

The ones that script several attempts (``rate_limited``, ``outage``) return a
tuple of steps; the others return one step. They are thin layers over the
builders, so they validate alike (``ScenarioError`` naming the field), and the
stream ones take the ``stream()`` keywords too (``gap``, ``ids``, ``format``...).
Streams default to ``format="auto"``: the provider whose path the request is on.
Scenario files spell them as step kinds (``kind = "rate_limited"``, ``times = 2``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from fake_servers._builders import (
    STEP_BUILDERS,
    ScenarioError,
    abort,
    respond,
    show,
    stall,
    step_keys,
    stream,
    suggestion,
    truncate,
)
from fake_servers._limits import MAX_STEPS
from fake_servers._script import Respond, Step, Stream
from fake_servers._validate import check_integer

__all__ = [
    "SHORTHANDS",
    "drop_after",
    "error_after",
    "expand_step",
    "outage",
    "rate_limited",
    "reply",
    "stall_after",
    "truncate_after",
]


def _times(value: object) -> int:
    # Checked before the steps are made: times = 10**10 is refused, not a MemoryError.
    return check_integer("times", value, 1, MAX_STEPS, what="steps per endpoint")


def rate_limited(
    times: int = 2,
    retry_after: float | None = 1,
    *,
    retry_after_ms: float | None = None,
    status: int = 429,
) -> tuple[Respond, ...]:
    """``times`` attempts refused with 429 and ``Retry-After: retry_after`` seconds.

    Args:
        times: how many successive attempts are refused.
        retry_after: the Retry-After header in seconds; None to send none.
        retry_after_ms: a ``retry-after-ms`` header too (the OpenAI and Anthropic
            SDKs read it first).
        status: the status (429 unless a provider signals rate limits otherwise).
    """
    step = respond(status, retry_after=retry_after, retry_after_ms=retry_after_ms)
    return (step,) * _times(times)


def outage(
    times: int = 3, status: int = 503, *, retry_after: float | None = None
) -> tuple[Respond, ...]:
    """``times`` attempts failing with ``status`` (a 5xx, or any status), then what follows."""
    return (respond(status, retry_after=retry_after),) * _times(times)


def reply(chunks: int = 5, **stream_kwargs: Any) -> Stream:
    """A whole answer of ``chunks`` token events, then the terminal event."""
    _check("reply", stream_kwargs)
    return stream(_chunks(chunks), **stream_kwargs)


def drop_after(chunks: int, *, mid_line: bool = False, **stream_kwargs: Any) -> Stream:
    """``chunks`` token events, then the connection breaks (inside the next with ``mid_line``)."""
    _check("drop_after", stream_kwargs)
    return abort(_chunks(chunks), mid_line=mid_line, **stream_kwargs)


def stall_after(
    chunks: int,
    seconds: float | None = None,
    *,
    keepalive: float | None = None,
    events: int | None = None,
    **stream_kwargs: Any,
) -> Stream:
    """``chunks`` token events, then silence for ``seconds`` (None: until the client leaves).

    After the stall the answer goes on to ``events`` tokens (default: ``chunks``
    or 5, whichever is more) and ends. ``keepalive`` sends an SSE comment every
    ``keepalive`` seconds during the stall.
    """
    _check("stall_after", stream_kwargs)
    after = _chunks(chunks)
    if events is None:
        events = max(after, 5)
    elif isinstance(events, int) and not isinstance(events, bool) and events < after:
        problem = f"expected an integer >= chunks ({after}), got {events}"
        raise ScenarioError(problem, field="events")
    return stall(after, seconds, keepalive=keepalive, events=events, **stream_kwargs)


def truncate_after(chunks: int, **stream_kwargs: Any) -> Stream:
    """``chunks`` token events, then a clean end of the body without the terminal event."""
    _check("truncate_after", stream_kwargs)
    return truncate(_chunks(chunks), **stream_kwargs)


def error_after(chunks: int, **stream_kwargs: Any) -> Stream:
    """``chunks`` token events, then the format's in-band error event (Anthropic ``error``)."""
    _check("error_after", stream_kwargs)
    return stream(_chunks(chunks), end="error", **stream_kwargs)


def _chunks(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ScenarioError(f"expected an integer >= 0, got {show(value)}", field="chunks")
    return value


SHORTHANDS: dict[str, Callable[..., Step | tuple[Step, ...]]] = {
    "reply": reply,
    "rate_limited": rate_limited,
    "outage": outage,
    "drop_after": drop_after,
    "stall_after": stall_after,
    "truncate_after": truncate_after,
    "error_after": error_after,
}

# The builder each stream shorthand passes its other keywords to, and the keys it sets.
_PASSED_TO = {
    "reply": ("stream", {"events"}),
    "drop_after": ("abort", {"after", "mid_line"}),
    "stall_after": ("stall", {"after", "seconds", "keepalive", "events"}),
    "truncate_after": ("truncate", {"after"}),
    "error_after": ("stream", {"events", "end"}),
}


def _own_keys(kind: str) -> frozenset[str]:
    params = inspect.signature(SHORTHANDS[kind]).parameters
    return frozenset(params) - {"stream_kwargs"}


def _valid_keys(kind: str) -> frozenset[str]:
    if kind not in _PASSED_TO:
        return _own_keys(kind)
    builder, sets = _PASSED_TO[kind]
    return _own_keys(kind) | (step_keys(builder) - sets)


def _check(kind: str, keys: Mapping[str, Any] | list[str]) -> None:
    valid = sorted(_valid_keys(kind))
    for key in keys:
        if key not in valid:
            hint = suggestion(key, valid) or "; valid keys: " + ", ".join(valid)
            raise ScenarioError(f'unknown key for a "{kind}" step{hint}', field=key)


def expand_step(kind: str, arguments: Mapping[str, Any]) -> tuple[Step, ...]:
    """The steps a scenario file's step table of a shorthand ``kind`` stands for.

    Raises:
        ScenarioError: ``kind`` is not a shorthand, a key is unknown or missing,
            or a value is out of range.
    """
    if kind not in SHORTHANDS:
        kinds = (*STEP_BUILDERS, *SHORTHANDS)
        expected = "one of " + ", ".join(f'"{name}"' for name in kinds)
        hint = suggestion(kind, kinds) if isinstance(kind, str) else ""
        raise ScenarioError(f"expected {expected}, got {show(kind)}{hint}", field="kind")
    _check(kind, list(arguments))
    params = inspect.signature(SHORTHANDS[kind]).parameters.values()
    for param in params:
        required = param.default is param.empty and param.kind is not param.VAR_KEYWORD
        if required and param.name not in arguments:
            raise ScenarioError("required key is missing", field=param.name)
    steps = SHORTHANDS[kind](**arguments)
    return steps if isinstance(steps, tuple) else (steps,)
