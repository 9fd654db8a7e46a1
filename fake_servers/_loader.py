"""Scenario files: TOML or JSON with exactly the builders' meaning.

A file is a tree of the builders' keyword arguments; the loader checks the keys
and calls the builders in ``_builders``, so a file is accepted, rejected and
explained exactly as the same Python call would be. ``docs/scenario-format.md``
has the full reference. In short::

    seed = 7                      # optional, default 0

    [[endpoint]]
    path = "/v1/stream"
    method = "GET"                # optional: GET | POST | ANY (default)
    then = "repeat_last"          # optional: repeat_last (default) | cycle

    [[endpoint.step]]             # attempt 1
    kind = "respond"              # respond | stream | stall | drip | truncate | abort | raw
    status = 503
    retry_after = 1

    [[endpoint.step]]             # attempt 2, and every later one (repeat_last)
    kind = "stream"
    events = 5
    gap = 0.01                    # or { kind = "uniform", low = 0.01, high = 0.02 }
    end = "abort"

Every other key of a step is the keyword of the same name of its ``kind``'s
builder (``respond``, ``stream``, ``stall``, ``drip``, ``truncate``, ``abort``,
``raw``), or
of a failure shorthand (``reply``, ``rate_limited``, ``outage``, ``drop_after``,
``stall_after``, ``truncate_after``, ``error_after``; ``rate_limited`` and
``outage`` stand for ``times`` steps).
``body`` is a string (sent as UTF-8) or a table (sent as JSON); ``body_base64``
carries bytes that are not UTF-8; a ``raw`` step's ``pieces`` are strings, or
``pieces_base64`` a list of base64 texts. ``headers`` is a table, or an array of
``[name, value]`` pairs when a name repeats. ``stall`` is a table with ``after``,
``seconds``, ``keepalive``. JSON files hold the same tree:
``{"seed": 7, "endpoint": [{"path": "/v1/stream", "step": [{"kind": "respond"}]}]}``.

Errors are ``ScenarioError`` naming the file, the step and the field::

    scenario.toml: endpoint[0].step[1].gap: expected a number >= 0 or a table, got "fast"
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NoReturn

from fake_servers._builders import (
    STEP_BUILDERS,
    ScenarioError,
    build_step,
    endpoint,
    scenario,
    show,
    step_arguments,
    suggestion,
)
from fake_servers._files import FileRefused, printable, read_text_limited, shown_path
from fake_servers._limits import MAX_DEPTH, MAX_ENDPOINTS, MAX_SCENARIO_BYTES, MAX_STEPS
from fake_servers._script import Endpoint, Gap, Headers, Raw, Scenario, Stall, Step, Stream
from fake_servers._shorthand import expand_step
from fake_servers._validate import check_limit

__all__ = ["FileFormat", "ScenarioError", "dump_scenario", "load_scenario", "parse_scenario"]

FileFormat = Literal["toml", "json"]
_SUFFIXES: dict[str, FileFormat] = {".toml": "toml", ".json": "json"}
_TOP_KEYS = ("seed", "endpoint")
_ENDPOINT_KEYS = ("path", "method", "then", "step")
_FILE_KEYS = {"steps": "step"}  # builder argument -> the file's key, where they differ


def load_scenario(path: str | Path) -> Scenario:
    """Read a ``.toml`` or ``.json`` scenario file.

    Raises:
        ScenarioError: the file cannot be read, is not valid TOML/JSON, or its
            script is invalid; the message names the file, the step and the field.
    """
    source = shown_path(path)
    file_format = _SUFFIXES.get(Path(path).suffix.lower())
    if file_format is None:
        raise ScenarioError(
            f"unknown file type {show(Path(path).suffix)}; expected .toml or .json", file=source
        )
    try:
        text = read_text_limited(path, MAX_SCENARIO_BYTES, "bytes per scenario file")
    except FileRefused as error:
        raise ScenarioError(str(error), file=source) from None
    return parse_scenario(text, format=file_format, source=source)


def parse_scenario(text: str, *, format: FileFormat, source: str = "<string>") -> Scenario:
    """Build the scenario a TOML or JSON text describes.

    Args:
        text: the file's contents.
        format: ``"toml"`` or ``"json"``.
        source: the name errors give the text (a file name).

    Raises:
        ScenarioError: the text is not valid ``format`` or its script is invalid.
    """
    tree = _decode(text, format, source)
    try:
        _check_depth(tree)
        if _SURROGATE.search(text) or _SURROGATE_ESCAPE.search(text):  # else none to find
            _check_text(tree)
        return _scenario(tree)
    except ScenarioError as error:
        raise error.located(file=source) from None


# -- decoding ----------------------------------------------------------------------


def _decode(text: str, file_format: FileFormat, source: str) -> object:
    if file_format not in ("toml", "json"):
        raise ValueError(f'format must be "toml" or "json", not {file_format!r}')
    check_limit(None, len(text), MAX_SCENARIO_BYTES, "characters per scenario")
    try:
        return _parse(text, file_format, source)
    except RecursionError:  # the parsers recurse per level; MAX_DEPTH is far below theirs
        problem = f"not valid {file_format.upper()}: nested deeper than {MAX_DEPTH} levels"
        raise ScenarioError(problem, file=source) from None


def _parse(text: str, file_format: FileFormat, source: str) -> object:
    if file_format == "toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            found = re.search(r"at line (\d+)", str(error))
            line = int(found.group(1)) if found else None
            raise ScenarioError(f"not valid TOML: {error}", file=source, line=line) from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        problem = f"not valid JSON: {error.msg} (column {error.colno})"
        raise ScenarioError(problem, file=source, line=error.lineno) from None
    except ValueError as error:  # a repeated key, or an integer of over 4300 digits
        raise ScenarioError(f"not valid JSON: {error}", file=source) from None


def _check_depth(tree: object) -> None:
    """Refuse tables and arrays nested deeper than MAX_DEPTH, level by level (no recursion)."""
    level = [tree] if isinstance(tree, dict | list) else []
    for _ in range(MAX_DEPTH):  # after n rounds, level holds the containers at depth n + 1
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
    if level:
        raise ScenarioError(f"nested deeper than {MAX_DEPTH} levels of tables and arrays")


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # how JSON writes one
_STEP_PLACE = re.compile(r"(endpoint\[\d+\](?:\.step\[\d+\])?)\.?(.*)", re.DOTALL)


def _check_text(tree: object) -> None:
    """Refuse a lone surrogate in any key or string (JSON's "\\ud800"): UTF-8 cannot
    carry it, so the server could neither send it nor print the listing."""
    stack: list[tuple[str, object]] = [("", tree)]
    while stack:  # a stack, not recursion: a file decides the depth
        where, node = stack.pop()
        if isinstance(node, str) and _SURROGATE.search(node):
            _lone_surrogate(where, node)
        elif isinstance(node, dict):
            for key, value in reversed(node.items()):
                place = f"{where}.{key}" if where else key
                if _SURROGATE.search(key):
                    _lone_surrogate(place, key)
                stack.append((place, value))
        elif isinstance(node, list):
            stack += [(f"{where}[{i}]", item) for i, item in reversed(list(enumerate(node)))]


def _lone_surrogate(place: str, text: str) -> NoReturn:
    found = _SURROGATE.search(text)
    assert found is not None
    problem = f"expected text UTF-8 can carry, got the lone surrogate {printable(found.group())}"
    located = _STEP_PLACE.fullmatch(place)
    step, field = (located.group(1), located.group(2)) if located else (None, place)
    raise ScenarioError(problem, step=step, field=printable(field) or None)


class _DuplicateKey(ValueError):
    """A repeated JSON key (a ValueError, so json.loads passes it through)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # TOML rejects a repeated key; JSON would silently keep the last one.
    table: dict[str, Any] = {}
    for key, value in pairs:
        if key in table:
            raise _DuplicateKey(f"duplicate key {show(key)}")
        table[key] = value
    return table


# -- building ----------------------------------------------------------------------


def _table(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"expected {what}, got {show(value)}")
    return value


def _tables(value: object, field: str, what: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise ScenarioError(f"expected {what}, got {show(value)}", field=field)
    return value


def _check_keys(table: Mapping[str, Any], valid: tuple[str, ...], what: str) -> None:
    for key in table:
        if key not in valid:
            hint = suggestion(key, valid) or "; valid keys: " + ", ".join(valid)
            raise ScenarioError(f"unknown key for {what}{hint}", field=key)


def _scenario(tree: object) -> Scenario:
    top = _table(tree, "a table of seed and [[endpoint]]")
    _check_keys(top, _TOP_KEYS, "a scenario")
    tables = _tables(top.get("endpoint", []), "endpoint", "an array of tables ([[endpoint]])")
    check_limit("endpoint", len(tables), MAX_ENDPOINTS, "endpoints per scenario")  # before any
    endpoints = [_endpoint(table, f"endpoint[{i}]") for i, table in enumerate(tables)]
    return scenario(*endpoints, **({"seed": top["seed"]} if "seed" in top else {}))


def _endpoint(table: Mapping[str, Any], where: str) -> Endpoint:
    try:
        _check_keys(table, _ENDPOINT_KEYS, "an endpoint")
        if "path" not in table:
            raise ScenarioError("required key is missing", field="path")
        what = "an array of tables ([[endpoint.step]])"
        steps: list[Step] = []
        for j, item in enumerate(_tables(table.get("step", []), "step", what)):
            steps += _steps(item, f"{where}.step[{j}]")
            check_limit("step", len(steps), MAX_STEPS, "steps per endpoint")  # as they grow
        options = {key: table[key] for key in ("method", "then") if key in table}
        return endpoint(table["path"], *steps, **options)
    except ScenarioError as error:
        if error.field in _FILE_KEYS:
            error = ScenarioError(error.problem, field=_FILE_KEYS[error.field])
        raise error.located(step=where) from None


def _steps(table: Mapping[str, Any], where: str) -> tuple[Step, ...]:
    """The step a table describes, or the steps a shorthand kind stands for."""
    try:
        if "kind" not in table:
            raise ScenarioError("required key is missing", field="kind")
        arguments = {key: value for key, value in table.items() if key != "kind"}
        field = _BASE64_FIELDS.get(table["kind"])
        if field is not None and f"{field}_base64" in arguments:
            arguments[field] = _base64_field(arguments, field)
        if table["kind"] in STEP_BUILDERS:
            return (build_step(table["kind"], arguments),)
        return expand_step(table["kind"], arguments)
    except ScenarioError as error:
        raise error.located(step=where) from None


# The field a kind's ``<field>_base64`` key carries as base64 (a body, or a list of pieces).
_BASE64_FIELDS = {"respond": "body", "raw": "pieces"}


def _base64_field(arguments: dict[str, Any], field: str) -> bytes | list[bytes]:
    key = f"{field}_base64"
    encoded = arguments.pop(key)
    if field in arguments:
        raise ScenarioError(f"conflicts with {field} (set one of them)", field=key)
    if field == "pieces" and isinstance(encoded, list):
        return [_base64_bytes(item, f"{key}[{n}]") for n, item in enumerate(encoded)]
    return _base64_bytes(encoded, key)


def _base64_bytes(encoded: object, key: str) -> bytes:
    try:
        if not isinstance(encoded, str):
            raise ValueError
        return base64.b64decode(encoded, validate=True)
    except (ValueError, binascii.Error):
        raise ScenarioError(f"expected base64 text, got {show(encoded)}", field=key) from None


# -- dumping -----------------------------------------------------------------------


def dump_scenario(value: Scenario) -> dict[str, Any]:
    """The file tree of ``value``: ``parse_scenario`` of its JSON gives ``value`` back.

    Keys at their default values are left out, and every step is written as the
    ``respond`` or ``stream`` it is (a ``drip`` comes back as its ``stream``).
    """
    return {"seed": value.seed, "endpoint": [_dump_endpoint(e) for e in value.endpoints]}


def _dump_endpoint(item: Endpoint) -> dict[str, Any]:
    tree: dict[str, Any] = {"path": item.path}
    if item.method != "ANY":
        tree["method"] = item.method
    if item.then != "repeat_last":
        tree["then"] = item.then
    tree["step"] = [_dump_step(step) for step in item.steps]
    return tree


_DEFAULT_ARGUMENTS = {"respond": step_arguments(build_step("respond", {}))[1]}
_DEFAULT_ARGUMENTS["stream"] = step_arguments(Stream())[1]
_DEFAULT_ARGUMENTS["raw"] = step_arguments(Raw((b" ",)))[1]
_ALWAYS = {"respond": "status", "stream": "events", "raw": "pieces"}  # even at their default


def _dump_step(step: Step) -> dict[str, Any]:
    kind, arguments = step_arguments(step)
    tree: dict[str, Any] = {"kind": kind}
    for key, value in arguments.items():
        if key == _ALWAYS[kind] or value != _DEFAULT_ARGUMENTS[kind][key]:
            tree.update(_dump_value(key, value))
    return tree


def _dump_value(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, Gap):
        return {key: _dump_gap(value)}
    if isinstance(value, Stall):
        return {key: {k: v for k, v in dataclasses.asdict(value).items() if v is not None}}
    if key == "headers":
        return {key: _dump_headers(value)}
    if key == "pieces":
        try:
            return {key: [piece.decode() for piece in value]}
        except UnicodeDecodeError:
            return {"pieces_base64": [base64.b64encode(piece).decode() for piece in value]}
    if isinstance(value, bytes):
        try:
            return {"body": value.decode()}
        except UnicodeDecodeError:
            return {"body_base64": base64.b64encode(value).decode()}
    return {key: value}


def _dump_gap(gap: Gap) -> float | dict[str, Any]:
    if gap.kind == "uniform":
        return {"kind": "uniform", "low": gap.low, "high": gap.high}
    if gap.kind == "exponential":
        return {"kind": "exponential", "mean": gap.seconds}
    return gap.seconds


def _dump_headers(headers: Headers) -> dict[str, str] | list[list[str]]:
    names = [name for name, _ in headers]
    if len(set(names)) == len(names):
        return dict(headers)
    return [[name, text] for name, text in headers]
