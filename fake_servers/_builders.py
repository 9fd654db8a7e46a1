"""Builders: the Python spelling of a script, and its one validation layer.

Each builder returns the frozen values of ``_script`` and checks every argument.
The file loader calls these same builders with the file's keys as keyword
arguments, so a script written in Python and one read from TOML or JSON are
accepted, rejected and explained alike: a ``ScenarioError`` names the field and
says what was expected and what was got.

Where the file has a table (``gap``, ``stall``, ``headers``, ``body``), the
builder also takes a mapping of the same shape, so ``stream(gap={"kind":
"uniform", "low": 0.01, "high": 0.02})`` means what the file's inline table does.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from fake_servers._limits import MAX_MILLISECONDS
from fake_servers._script import (
    Ending,
    Endpoint,
    Framing,
    Gap,
    Headers,
    LineEnding,
    Method,
    Raw,
    RawEnd,
    Respond,
    Scenario,
    Stall,
    Step,
    Stream,
    Then,
)
from fake_servers._validate import (
    ScenarioError,
    check_choice,
    check_flag,
    check_headers,
    check_integer,
    check_seconds,
    is_number,
    reject,
    show,
    suggestion,
)

__all__ = [
    "STEP_BUILDERS",
    "ScenarioError",
    "abort",
    "build_step",
    "drip",
    "endpoint",
    "exponential",
    "fixed",
    "required_keys",
    "respond",
    "scenario",
    "show",
    "stall",
    "step_arguments",
    "step_keys",
    "stream",
    "suggestion",
    "truncate",
    "uniform",
]

GapLike = float | Gap | Mapping[str, Any]
StallLike = Stall | Mapping[str, Any]
HeadersLike = Mapping[str, str] | Iterable[tuple[str, str]]


# -- input shapes (the values check themselves: ``_validate``) -------------------


def _optional_seconds(field: str, value: object, *, positive: bool = False) -> float | None:
    return None if value is None else check_seconds(field, value, positive=positive)


_HEADERS_SHAPE = "a table of name = value, or a list of [name, value] pairs"


def _header_pairs(value: object) -> list[tuple[object, object]]:
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        reject("headers", _HEADERS_SHAPE, value)
    pairs: list[tuple[object, object]] = []
    for pair in value:
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            reject("headers", _HEADERS_SHAPE, value)
        pairs.append((pair[0], pair[1]))
    return pairs


def _headers(value: object) -> Headers:
    if value is None:
        return ()
    return check_headers(tuple(_header_pairs(value)))


def _has_header(headers: Headers, name: str) -> bool:
    return any(key.lower() == name for key, _ in headers)


def _utf8(text: str, field: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (which UTF-8 cannot carry) is the field's error."""
    try:
        return text.encode()
    except UnicodeEncodeError as error:
        lone = repr(text[error.start])[1:-1]
        raise ScenarioError(
            f"expected text UTF-8 can carry, got the lone surrogate {lone}", field=field
        ) from None


def _body(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return _utf8(value, "body")
    if isinstance(value, Mapping):
        try:
            return _utf8(json.dumps(value, separators=(",", ":"), allow_nan=False), "body")
        except (TypeError, ValueError, RecursionError):
            pass
    raise ScenarioError(
        f"expected a string or a table (sent as JSON), got {show(value)}", field="body"
    )


def _seconds_header(seconds: float) -> str:
    """Whole seconds as an integer, the way servers usually write them."""
    return str(int(seconds)) if seconds.is_integer() else repr(seconds)


def _check_keys(kind: str, keys: Iterable[str], valid: Iterable[str]) -> None:
    allowed = sorted(valid)
    for key in keys:
        if key not in allowed:
            hint = suggestion(key, allowed) or "; valid keys: " + ", ".join(allowed)
            raise ScenarioError(f"unknown key for {kind}{hint}", field=key)


def _from_table(kind: str, table: object, build: Callable[..., Any], skip: str = "") -> Any:
    """Call ``build`` with a table's keys, after checking them against its parameters."""
    if not isinstance(table, Mapping):
        raise ScenarioError(f"expected a table, got {show(table)}")
    params = inspect.signature(build).parameters
    keys = [key for key in table if key != skip]
    _check_keys(kind, keys, params)
    for name in params:
        if params[name].default is inspect.Parameter.empty and name not in table:
            raise ScenarioError("required key is missing", field=name)
    return build(**{key: table[key] for key in keys})


# -- gaps and stalls -------------------------------------------------------------


def fixed(seconds: float) -> Gap:
    """The same gap between every two events."""
    return Gap("fixed", seconds=seconds)


def uniform(low: float, high: float) -> Gap:
    """Gaps drawn (seeded) uniformly from ``low..high`` seconds."""
    return Gap("uniform", low=low, high=high)


def exponential(mean: float) -> Gap:
    """Gaps drawn (seeded) from an exponential distribution with this mean in seconds."""
    return Gap("exponential", seconds=mean)


_GAP_BUILDERS: dict[str, Callable[..., Gap]] = {
    "fixed": fixed,
    "uniform": uniform,
    "exponential": exponential,
}


def _gap(value: object) -> Gap:
    if isinstance(value, Gap):
        return value
    try:
        if isinstance(value, Mapping):
            kind = check_choice("kind", value.get("kind"), tuple(_GAP_BUILDERS))
            return cast(Gap, _from_table(f'a "{kind}" gap', value, _GAP_BUILDERS[kind], "kind"))
    except ScenarioError as error:
        raise error.located(parent="gap") from None
    if not is_number(value):
        reject("gap", "a number >= 0 or a table", value)
    return fixed(check_seconds("gap", value))


def _stall_value(after: object, seconds: object, keepalive: object, events: int) -> Stall:
    if isinstance(after, int) and not isinstance(after, bool) and after > events:
        reject("after", f"an integer 0..{events} (at most events)", after)
    return Stall(cast(int, after), cast(float | None, seconds), cast(float | None, keepalive))


def _stall_field(value: object, events: int) -> Stall | None:
    if value is None:
        return None
    if isinstance(value, Stall):
        value = dataclasses.asdict(value)

    def build(after: object = 0, seconds: object = None, keepalive: object = None) -> Stall:
        return _stall_value(after, seconds, keepalive, events)

    try:
        return cast(Stall, _from_table("a stall", value, build))
    except ScenarioError as error:
        raise error.located(parent="stall") from None


# -- steps -------------------------------------------------------------------------


def respond(
    status: int = 200,
    *,
    body: str | bytes | Mapping[str, Any] | None = None,
    headers: HeadersLike | None = None,
    retry_after: float | None = None,
    retry_after_date: float | None = None,
    retry_after_ms: float | None = None,
    delay: float = 0.0,
) -> Respond:
    """A plain response: a status such as 429 or 503, with optional Retry-After.

    Args:
        status: the HTTP status, 100..599.
        body: the body; a string is sent as UTF-8, a mapping as JSON (with a JSON
            Content-Type unless ``headers`` sets one). None: a JSON error naming the status.
        headers: extra headers, a mapping or (name, value) pairs (repeats allowed).
        retry_after: a ``Retry-After`` header in seconds (an integer when whole).
        retry_after_date: ``Retry-After`` as an HTTP date this many seconds after sending.
        retry_after_ms: a ``retry-after-ms`` header (milliseconds).
        delay: seconds before the headers are sent.

    Raises:
        ScenarioError: an argument is out of range or two arguments set the same header.
    """
    parsed_body = _body(body)
    extra = _headers(headers)
    if isinstance(body, Mapping) and not _has_header(extra, "content-type"):
        extra += (("content-type", "application/json"),)
    extra += _retry_headers(extra, retry_after, retry_after_date, retry_after_ms)
    return Respond(status, extra, parsed_body, delay, retry_after_date)


def _retry_headers(
    headers: Headers, after: object, after_date: object, after_ms: object
) -> Headers:
    """The Retry-After headers the three ``retry_after*`` arguments ask for."""
    added: list[tuple[str, str]] = []
    if after is not None and after_date is not None:
        raise ScenarioError(
            "conflicts with retry_after (both set Retry-After)", field="retry_after_date"
        )
    for field, value, header in (
        ("retry_after", after, "retry-after"),
        ("retry_after_date", after_date, "retry-after"),
        ("retry_after_ms", after_ms, "retry-after-ms"),
    ):
        if value is None:
            continue
        if _has_header(headers, header):
            raise ScenarioError(f'conflicts with the "{header}" header in headers', field=field)
        if field == "retry_after_ms":
            seconds = check_seconds(field, value, limit=MAX_MILLISECONDS, unit="milliseconds")
        else:
            seconds = check_seconds(field, value)
        if field != "retry_after_date":
            added.append((header, _seconds_header(seconds)))
    return tuple(added)


def stream(
    events: int = 5,
    *,
    gap: GapLike = 0.0,
    end: Ending = "done",
    ids: bool = False,
    resume: bool = True,
    format: str = "auto",
    status: int = 200,
    headers: HeadersLike | None = None,
    delay: float = 0.0,
    stall: StallLike | None = None,
    line_ending: LineEnding = "lf",
    bom: bool = False,
    comment_every: int = 0,
    retry_ms: int | None = None,
    split: int = 0,
    split_random: bool = False,
    split_pause: float = 0.0,
    buffered: bool = False,
    content_type: str = Framing.content_type,
) -> Stream:
    """An SSE response of ``events`` events ``gap`` apart, then ``end``.

    Args:
        events: how many data events, >= 0.
        gap: seconds between events, or a ``fixed``/``uniform``/``exponential`` gap.
        end: ``done`` (terminal event), ``truncate`` (clean end without it),
            ``abort`` (broken connection), ``abort_mid_line`` (broken inside an event),
            ``error`` (the format's in-band error event, then a clean end).
        ids: send ``id:`` fields; ``resume``: honour Last-Event-ID by continuing after it.
        format: the event format's name in the format registry; ``auto`` (the
            default): the provider whose path the request is on, else ``openai``.
        status, headers, delay: as for ``respond``; set the Content-Type with ``content_type``.
        stall: a ``Stall`` (or its table): silence after ``stall.after`` events.
        line_ending, bom, comment_every, retry_ms: how the SSE text is laid out.
        split, split_random, split_pause: cut writes into pieces of at most ``split``
            bytes (random sizes with ``split_random``), ``split_pause`` seconds apart.
        buffered: hold every byte back and send it all at the end.
        content_type: the Content-Type header.

    Raises:
        ScenarioError: an argument is out of range or contradicts another.
    """
    events = check_integer("events", events)  # the stall's bound, before Stream checks it
    return Stream(
        events=events,
        gap=_gap(gap),
        end=end,
        status=status,
        headers=_headers(headers),
        delay=delay,
        stall=_stall_field(stall, events),
        format=format,
        ids=ids,
        resume=resume,
        framing=Framing(
            line_ending=line_ending,
            bom=bom,
            comment_every=comment_every,
            retry_ms=retry_ms,
            split=split,
            split_random=split_random,
            split_pause=split_pause,
            buffered=buffered,
            content_type=content_type,
        ),
    )


_STREAM_KEYS = frozenset(inspect.signature(stream).parameters)
# Keys a shorthand sets itself (so they cannot be passed through), and what from.
_SET_FROM = {
    "respond": {},
    "stream": {},
    "raw": {},
    "stall": {"stall": "after, seconds and keepalive"},
    "drip": {"split": "rate", "split_random": "rate", "split_pause": "rate"},
    "truncate": {"events": "after", "end": "the kind"},
    "abort": {"events": "after", "end": "mid_line"},
}


def _check_step_keys(kind: str, keys: Iterable[str]) -> None:
    for key in keys:
        if key in _SET_FROM[kind]:
            raise ScenarioError(
                f"not allowed in {_step_name(kind)}, which sets it from {_SET_FROM[kind][key]}",
                field=key,
            )
    _check_keys(_step_name(kind), keys, step_keys(kind))


def _step_name(kind: str) -> str:
    article = "an" if kind[0] in "aeiou" else "a"
    return f'{article} "{kind}" step'


def stall(
    after: int = 0,
    seconds: float | None = None,
    *,
    keepalive: float | None = None,
    events: int = 5,
    **stream_kwargs: Any,
) -> Stream:
    """A stream that goes silent after ``after`` events, for ``seconds`` (None: for good).

    With ``keepalive``, an SSE comment every ``keepalive`` seconds keeps bytes
    flowing while no data does. Other keywords are ``stream``'s.
    """
    _check_step_keys("stall", stream_kwargs)
    silence = _stall_value(after, seconds, keepalive, check_integer("events", events))
    return stream(events, stall=silence, **stream_kwargs)


def drip(rate: float, **stream_kwargs: Any) -> Stream:
    """A stream written one byte at a time, ``rate`` bytes per second."""
    _check_step_keys("drip", stream_kwargs)
    pause = 1.0 / check_seconds("rate", rate, positive=True)
    if not math.isfinite(pause):
        reject("rate", "a number > 0", rate)
    return stream(split=1, split_pause=pause, **stream_kwargs)


def truncate(after: int, **stream_kwargs: Any) -> Stream:
    """A stream that ends cleanly after ``after`` events, without the terminal event."""
    _check_step_keys("truncate", stream_kwargs)
    return stream(check_integer("after", after), end="truncate", **stream_kwargs)


def abort(after: int, *, mid_line: bool = False, **stream_kwargs: Any) -> Stream:
    """A stream whose connection breaks after ``after`` events (inside the next: ``mid_line``)."""
    _check_step_keys("abort", stream_kwargs)
    end: Ending = "abort_mid_line" if check_flag("mid_line", mid_line) else "abort"
    return stream(check_integer("after", after), end=end, **stream_kwargs)


def raw(
    pieces: Iterable[str | bytes],
    *,
    pause: float = 0.0,
    status: int = 200,
    content_type: str = Framing.content_type,
    headers: HeadersLike | None = None,
    end: RawEnd = "close",
) -> Raw:
    """A response whose body is exactly ``pieces``, one write each, for byte-level tests.

    Args:
        pieces: the body's writes, in order; a string is sent as UTF-8 (a file's
            ``pieces_base64`` carries bytes that are not UTF-8).
        pause: seconds between two pieces.
        status, headers: as for ``respond``; set the Content-Type with ``content_type``.
        end: ``close`` ends the body cleanly; ``abort`` breaks the connection after it.

    Raises:
        ScenarioError: a piece is empty or not text, the body is past the limit, or an
            argument is out of range.
    """
    if isinstance(pieces, str | bytes) or not isinstance(pieces, Iterable):
        reject("pieces", "a list of strings or bytes", pieces)
    encoded = tuple(_utf8(p, "pieces") if isinstance(p, str) else p for p in pieces)
    return Raw(encoded, pause, status, content_type, _headers(headers), end)


STEP_BUILDERS: dict[str, Callable[..., Step]] = {
    "respond": respond,
    "stream": stream,
    "stall": stall,
    "drip": drip,
    "truncate": truncate,
    "abort": abort,
    "raw": raw,
}


def step_keys(kind: str) -> frozenset[str]:
    """Every keyword the ``kind`` builder takes (its own and the passed-through ``stream`` ones)."""
    params = inspect.signature(STEP_BUILDERS[kind]).parameters
    own = frozenset(params) - {"stream_kwargs"}
    if "stream_kwargs" not in params:
        return own
    return own | (_STREAM_KEYS - _SET_FROM[kind].keys())


def required_keys(kind: str) -> tuple[str, ...]:
    """The keywords the ``kind`` builder cannot do without."""
    params = inspect.signature(STEP_BUILDERS[kind]).parameters.values()
    return tuple(p.name for p in params if p.default is p.empty and p.kind is not p.VAR_KEYWORD)


def build_step(kind: str, arguments: Mapping[str, Any]) -> Step:
    """Build a ``kind`` step from keyword ``arguments``, checking every key first."""
    kind = check_choice("kind", kind, tuple(STEP_BUILDERS))
    _check_step_keys(kind, arguments)
    for name in required_keys(kind):
        if name not in arguments:
            raise ScenarioError("required key is missing", field=name)
    return STEP_BUILDERS[kind](**arguments)


def step_arguments(step: Step) -> tuple[str, dict[str, Any]]:
    """The builder and keyword arguments that rebuild ``step`` exactly (for valid steps)."""
    if isinstance(step, Raw):
        return "raw", {f.name: getattr(step, f.name) for f in dataclasses.fields(step)}
    if isinstance(step, Respond):
        return "respond", {
            "status": step.status,
            "body": step.body,
            "headers": step.headers,
            "retry_after_date": step.retry_after_date,
            "delay": step.delay,
        }
    arguments = {
        "events": step.events,
        "gap": step.gap,
        "end": step.end,
        "ids": step.ids,
        "resume": step.resume,
        "format": step.format,
        "status": step.status,
        "headers": step.headers,
        "delay": step.delay,
        "stall": step.stall,
    }
    arguments.update(dataclasses.asdict(step.framing))
    return "stream", arguments


# -- endpoints and scenarios -----------------------------------------------------


def endpoint(
    path: str, *steps: Step, method: Method = "ANY", then: Then = "repeat_last"
) -> Endpoint:
    """A path and what its successive attempts get: attempt n plays ``steps[n-1]``.

    Args:
        path: the URL path, starting with "/".
        steps: one step per attempt (at most ``MAX_STEPS``).
        method: ``GET``, ``POST`` or ``ANY``.
        then: what attempts past the last step get: ``repeat_last`` or ``cycle``.

    Raises:
        ScenarioError: a bad path, no steps, too many, or something that is not a step.
    """
    return Endpoint(path=path, steps=steps, method=method, then=then)


def scenario(*endpoints: Endpoint, seed: int = 0) -> Scenario:
    """Every endpoint of a server, and the seed for its content and randomness.

    Raises:
        ScenarioError: two endpoints share a path, too many endpoints, or a bad seed.
    """
    return Scenario(endpoints=endpoints, seed=seed)
