"""The one validation layer of scripts: ``ScenarioError`` and the checks every value passes.

The frozen values of ``_script`` run these checks when they are made, and the
builders and the file loader run the same ones on their looser inputs, so a
script is accepted, rejected and explained alike whichever way it was built.
Each check names the field and says what was expected and what was got; a
value past a limit of ``_limits`` says so and names the limit.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable
from typing import NoReturn, cast

from fake_servers._files import printable
from fake_servers._limits import MAX_HEADER_BYTES, MAX_SECONDS

__all__ = [
    "ScenarioError",
    "check_choice",
    "check_flag",
    "check_headers",
    "check_integer",
    "check_limit",
    "check_path",
    "check_seconds",
    "check_text",
    "is_number",
    "reject",
    "show",
    "suggestion",
]

Headers = tuple[tuple[str, str], ...]


class ScenarioError(ValueError):
    """A script that cannot be played, and where it went wrong.

    Attributes:
        problem: what is wrong, without the location.
        file: the scenario file, or None for a builder call.
        step: the endpoint or step it is in, e.g. ``endpoint[0].step[1]``; None at the top.
        field: the argument or key, e.g. ``gap`` or ``stall.seconds``; None for a whole table.
        line: the line of a syntax error, when known.
    """

    def __init__(
        self,
        problem: str,
        *,
        field: str | None = None,
        step: str | None = None,
        file: str | None = None,
        line: int | None = None,
    ) -> None:
        self.problem = problem
        self.field = field
        self.step = step
        self.file = file
        self.line = line
        super().__init__(problem)

    def __str__(self) -> str:
        place = ".".join(part for part in (self.step, self.field) if part)
        if self.line is not None and not place:
            place = f"line {self.line}"
        # escaped: a key or a parser's quote of the file may hold a NUL or a U+202E
        return printable(": ".join(part for part in (self.file, place, self.problem) if part))

    def located(
        self, *, file: str | None = None, step: str | None = None, parent: str | None = None
    ) -> ScenarioError:
        """A copy placed in ``file``, at ``step``, under the parent field ``parent``."""
        field = ".".join(part for part in (parent, self.field) if part) or None
        return ScenarioError(
            self.problem,
            field=field,
            step=self.step or step,
            file=self.file or file,
            line=self.line,
        )


def show(value: object) -> str:
    """A short rendering of a rejected value, in the files' (JSON) spelling; characters
    that are not printable (a NUL, U+202E) escaped, so a message shows what is there."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    text = printable(text)
    return text if len(text) <= 60 else text[:57] + "..."


def reject(field: str, expected: str, got: object) -> NoReturn:
    raise ScenarioError(f"expected {expected}, got {show(got)}", field=field)


def check_limit(field: str | None, value: float, limit: float, what: str) -> None:
    """Refuse ``value`` past ``limit``: ``events: 2000000 is over the limit of 1000000 events``."""
    if value > limit:
        shown = int(limit) if float(limit).is_integer() else limit
        raise ScenarioError(f"{show(value)} is over the limit of {shown} {what}", field=field)


def suggestion(word: str, choices: Iterable[str]) -> str:
    """``'; did you mean "x"?'`` for the closest of ``choices``, or ``""``."""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f'; did you mean "{by_lower[close[0]]}"?' if close else ""


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_seconds(
    field: str,
    value: object,
    *,
    positive: bool = False,
    limit: float = MAX_SECONDS,
    unit: str = "seconds",
) -> float:
    """A finite number >= 0 (> 0 with ``positive``) and at most ``limit``, as a float."""
    expected = "a number > 0" if positive else "a number >= 0"
    if not is_number(value):
        reject(field, expected, value)
    try:
        seconds = float(cast(float, value))
    except OverflowError:
        reject(field, expected, value)
    if not math.isfinite(seconds) or seconds < 0 or (positive and seconds == 0):
        reject(field, expected, value)
    check_limit(field, cast(float, value), limit, unit)
    return seconds


def check_integer(
    field: str, value: object, low: int = 0, high: int | None = None, *, what: str = ""
) -> int:
    """An integer in ``low..high``; with ``what``, ``high`` is a limit and says so past it."""
    if what and high is not None:
        expected = f"an integer >= {low}"
        if isinstance(value, int) and not isinstance(value, bool) and value >= low:
            check_limit(field, value, high, what)
            return value
        reject(field, expected, value)
    expected = f"an integer {low}..{high}" if high is not None else f"an integer >= {low}"
    if not isinstance(value, int) or isinstance(value, bool):
        reject(field, expected, value)
    if value < low or (high is not None and value > high):
        reject(field, expected, value)
    return value


def check_flag(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        reject(field, "true or false", value)
    return value


def check_choice(field: str, value: object, choices: tuple[str, ...]) -> str:
    if isinstance(value, str) and value in choices:
        return value
    expected = "one of " + ", ".join(f'"{choice}"' for choice in choices)
    hint = suggestion(value, choices) if isinstance(value, str) else ""
    raise ScenarioError(f"expected {expected}, got {show(value)}{hint}", field=field)


def _header_value(field: str, value: object, expected: str) -> str:
    """Text the server can send as a header value, or a ScenarioError saying why not."""
    if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
        reject(field, expected, value)
    # Header bytes are latin-1 on the wire, and HTTP strips spaces at either end.
    if any(ord(c) > 0xFF for c in value):
        reject(field, "latin-1 text (a header value cannot carry other characters)", value)
    if value != value.strip(" \t"):
        reject(field, "no space or tab at either end (HTTP cannot send them)", value)
    return value


def check_text(field: str, value: object) -> str:
    """A non-empty single-line string a header can carry."""
    if value == "":
        reject(field, "a non-empty single-line string", value)
    return _header_value(field, value, "a non-empty single-line string")


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def check_headers(headers: object) -> Headers:
    """Names that are tokens, values on one line in latin-1, within MAX_HEADER_BYTES."""
    if not isinstance(headers, tuple):
        reject("headers", "a tuple of (name, value) pairs", headers)
    size = 0
    for pair in headers:
        if not isinstance(pair, tuple) or len(pair) != 2:
            reject("headers", "a tuple of (name, value) pairs", headers)
        name, text = pair
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            reject("headers", "header names made of letters, digits and -", name)
        _header_value(f"headers.{name}", text, "a single-line string")
        size += len(name) + len(text)
    check_limit("headers", size, MAX_HEADER_BYTES, "bytes of headers")
    return cast(Headers, headers)


def check_path(value: object) -> str:
    if not isinstance(value, str) or not value.startswith("/") or re.search(r"[\s?#]", value):
        reject("path", 'a path starting with "/" (no query, no spaces)', value)
    return value
