"""Scenario files: the same meaning as the builders, errors that point at the field."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fake_servers
from fake_servers._builders import (
    ScenarioError,
    abort,
    build_step,
    drip,
    endpoint,
    exponential,
    fixed,
    raw,
    respond,
    scenario,
    stall,
    stream,
    truncate,
    uniform,
)
from fake_servers._limits import MAX_SECONDS
from fake_servers._loader import dump_scenario, load_scenario, parse_scenario
from fake_servers._script import Scenario, Stall

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "scenarios"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.toml")) + sorted(EXAMPLES.glob("*.json"))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # JSON's escapes are TOML's; TOML also wants DEL escaped.
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    items = (f"{_toml_value(key)} = {_toml_value(item)}" for key, item in value.items())
    return "{" + ", ".join(items) + "}"


def to_toml(tree: dict[str, Any]) -> str:
    """A TOML text for a dumped scenario tree (tomllib cannot write)."""
    lines = [f"seed = {tree['seed']}"]
    for table in tree["endpoint"]:
        lines.append("[[endpoint]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in table.items() if k != "step"]
        for step in table["step"]:
            lines.append("[[endpoint.step]]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in step.items()]
    return "\n".join(lines) + "\n"


def _error(text: str, file_format: str = "toml") -> ScenarioError:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, format=file_format, source=f"scenario.{file_format}")  # type: ignore[arg-type]
    return caught.value


STREAM_TOML = """
seed = 7
[[endpoint]]
path = "/v1/stream"
method = "GET"
then = "repeat_last"
[[endpoint.step]]
kind = "respond"
status = 503
retry_after = 1
[[endpoint.step]]
kind = "stream"
events = 5
gap = 0.01
end = "abort"
"""


def test_a_file_means_what_the_builders_say() -> None:
    """The brief's TOML file equals the same scenario written with builders."""
    expected = scenario(
        endpoint(
            "/v1/stream",
            respond(503, retry_after=1),
            stream(5, gap=0.01, end="abort"),
            method="GET",
        ),
        seed=7,
    )
    assert parse_scenario(STREAM_TOML, format="toml") == expected


def test_json_is_the_same_tree() -> None:
    """A JSON file with the same tree gives the same scenario as the TOML one."""
    text = json.dumps(
        {
            "seed": 7,
            "endpoint": [
                {
                    "path": "/v1/stream",
                    "method": "GET",
                    "step": [
                        {"kind": "respond", "status": 503, "retry_after": 1},
                        {"kind": "stream", "events": 5, "gap": 0.01, "end": "abort"},
                    ],
                }
            ],
        }
    )
    assert parse_scenario(text, format="json") == parse_scenario(STREAM_TOML, format="toml")


def test_every_step_kind_and_table_form() -> None:
    """Each step kind and each table value (gap, stall, headers, body) maps to its builder."""
    text = """
    [[endpoint]]
    path = "/a"
    [[endpoint.step]]
    kind = "respond"
    status = 429
    body = { error = { type = "rate_limit" } }
    headers = [["set-cookie", "a=1"], ["set-cookie", "b=2"]]
    retry_after_ms = 250
    [[endpoint.step]]
    kind = "respond"
    body_base64 = "/wA="
    retry_after_date = 2
    [[endpoint.step]]
    kind = "stream"
    gap = { kind = "exponential", mean = 0.05 }
    stall = { after = 2, keepalive = 0.5 }
    headers = { x-request-id = "r1" }
    [[endpoint.step]]
    kind = "stall"
    after = 1
    seconds = 2.5
    [[endpoint.step]]
    kind = "drip"
    rate = 100
    events = 2
    [[endpoint.step]]
    kind = "truncate"
    after = 3
    gap = { kind = "uniform", low = 0.01, high = 0.02 }
    [[endpoint.step]]
    kind = "abort"
    after = 2
    mid_line = true
    """
    steps = parse_scenario(text, format="toml").endpoints[0].steps
    assert steps == (
        respond(
            429,
            body={"error": {"type": "rate_limit"}},
            headers=[("set-cookie", "a=1"), ("set-cookie", "b=2")],
            retry_after_ms=250,
        ),
        respond(body=b"\xff\x00", retry_after_date=2),
        stream(
            gap=exponential(0.05),
            stall=Stall(after=2, keepalive=0.5),
            headers={"x-request-id": "r1"},
        ),
        stall(1, 2.5),
        drip(100, events=2),
        truncate(3, gap=uniform(0.01, 0.02)),
        abort(2, mid_line=True),
    )


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_loads_and_round_trips(path: Path) -> None:
    """Each example file loads, and the dump of it, as JSON and as TOML, loads back equal."""
    loaded = load_scenario(path)
    assert loaded.endpoints
    tree = dump_scenario(loaded)
    assert parse_scenario(json.dumps(tree), format="json") == loaded
    assert parse_scenario(to_toml(tree), format="toml") == loaded


def test_examples_mean_what_their_comments_say() -> None:
    """Two examples, spelled out with builders."""
    assert load_scenario(EXAMPLES / "rate-limited-then-ok.toml") == scenario(
        endpoint(
            "/v1/chat/completions",
            respond(
                429,
                retry_after=1,
                body={"error": {"type": "rate_limit_exceeded", "message": "slow down"}},
            ),
            respond(429, retry_after_ms=500),
            stream(5, gap=0.01),
            method="POST",
        ),
        seed=1,
    )
    assert load_scenario(EXAMPLES / "stall.json") == scenario(
        endpoint("/v1/stream", stall(2, keepalive=0.5, events=5), stream(5, gap=0.01)), seed=3
    )


def test_raw_steps_in_files() -> None:
    """A raw step's pieces are strings (sent as UTF-8), or base64 texts for other bytes;
    its dump picks whichever spelling holds the bytes."""
    text = r"""
    [[endpoint]]
    path = "/a"
    [[endpoint.step]]
    kind = "raw"
    pieces = ["\uFEFFdata: a\n\n", "id: 1\u0000\ndata"]
    pause = 0.01
    [[endpoint.step]]
    kind = "raw"
    pieces_base64 = ["/w==", "ZGF0YQ=="]
    status = 503
    end = "abort"
    """
    built = scenario(
        endpoint(
            "/a",
            raw(["\ufeffdata: a\n\n", b"id: 1\x00\ndata"], pause=0.01),
            raw([b"\xff", b"data"], status=503, end="abort"),
        )
    )
    assert parse_scenario(text, format="toml") == built
    steps = dump_scenario(built)["endpoint"][0]["step"]
    assert steps == [
        {"kind": "raw", "pieces": ["\ufeffdata: a\n\n", "id: 1\x00\ndata"], "pause": 0.01},
        {"kind": "raw", "pieces_base64": ["/w==", "ZGF0YQ=="], "status": 503, "end": "abort"},
    ]


def test_dump_leaves_defaults_out() -> None:
    """The dump writes only what differs from the defaults, and shorthands as streams."""
    built = scenario(endpoint("/a", respond(), drip(100)), seed=3)
    assert dump_scenario(built) == {
        "seed": 3,
        "endpoint": [
            {
                "path": "/a",
                "step": [
                    {"kind": "respond", "status": 200},
                    {"kind": "stream", "events": 5, "split": 1, "split_pause": 0.01},
                ],
            }
        ],
    }


def test_the_facade_exports_the_loader() -> None:
    """The public package re-exports the loader names, dump_scenario included."""
    assert fake_servers.load_scenario is load_scenario
    assert fake_servers.parse_scenario is parse_scenario
    assert fake_servers.dump_scenario is dump_scenario
    assert "dump_scenario" in fake_servers.__all__


# -- errors ------------------------------------------------------------------------


def test_the_error_names_file_step_and_field() -> None:
    """A bad value is reported as file: endpoint[i].step[j].field: what was expected."""
    error = _error(STREAM_TOML.replace("gap = 0.01", 'gap = "fast"'))
    assert str(error) == (
        'scenario.toml: endpoint[0].step[1].gap: expected a number >= 0 or a table, got "fast"'
    )
    assert (error.file, error.step, error.field) == ("scenario.toml", "endpoint[0].step[1]", "gap")
    assert isinstance(error, ValueError)


S0 = "endpoint[0].step[0]"
S1 = "endpoint[0].step[1]"
_KEY_ERRORS = [
    ("seed = 7", "sed = 7", 'sed: unknown key for a scenario; did you mean "seed"?'),
    (
        'method = "GET"',
        'methd = "GET"',
        'endpoint[0].methd: unknown key for an endpoint; did you mean "method"?',
    ),
    (
        "events = 5",
        "evnets = 5",
        f'{S1}.evnets: unknown key for a "stream" step; did you mean "events"?',
    ),
    (
        "retry_after = 1",
        "retry_afer = 1",
        f'{S0}.retry_afer: unknown key for a "respond" step; did you mean "retry_after"?',
    ),
    (
        "gap = 0.01",
        'gap = { kind = "uniform", low = 0, hi = 1 }',
        f'{S1}.gap.hi: unknown key for a "uniform" gap; did you mean "high"?',
    ),
    (
        'end = "abort"',
        "stall = { after = 1, secs = 1 }",
        f'{S1}.stall.secs: unknown key for a stall; did you mean "seconds"?',
    ),
    (
        'kind = "stream"',
        'kind = "strem"',
        f'{S1}.kind: expected one of "respond", "stream", "stall", "drip", "truncate", "abort", '
        '"raw", "reply", "rate_limited", "outage", "drop_after", "stall_after", "truncate_after", '
        '"error_after", got "strem"; did you mean "stream"?',
    ),
    ('kind = "stream"', "", f"{S1}.kind: required key is missing"),
    ('path = "/v1/stream"', "", "endpoint[0].path: required key is missing"),
    ("seed = 7", "seed = -7", "seed: expected an integer 0..9223372036854775807, got -7"),
    (
        'then = "repeat_last"',
        'then = "again"',
        'endpoint[0].then: expected one of "repeat_last", "cycle", got "again"',
    ),
    (
        "events = 5",
        "events = 2\nstall = { after = 3 }",
        f"{S1}.stall.after: expected an integer 0..2 (at most events), got 3",
    ),
    (
        "retry_after = 1",
        'retry_after = 1\nbody_base64 = "!!"',
        f'{S0}.body_base64: expected base64 text, got "!!"',
    ),
    (
        "retry_after = 1",
        'body = "x"\nbody_base64 = "eA=="',
        f"{S0}.body_base64: conflicts with body (set one of them)",
    ),
]


@pytest.mark.parametrize(("old", "new", "message"), _KEY_ERRORS)
def test_errors_point_at_the_key(old: str, new: str, message: str) -> None:
    """Unknown keys (with the closest valid one), missing and bad values name where they are."""
    assert old in STREAM_TOML
    assert str(_error(STREAM_TOML.replace(old, new, 1))) == f"scenario.toml: {message}"


_ONE_ENDPOINT = '[[endpoint]]\npath = "/a"\n'
_ONE_STEP = '[[endpoint.step]]\nkind = "respond"\n'
_STRUCTURE_ERRORS = [
    (_ONE_ENDPOINT, "endpoint[0].step: expected at least one step"),
    (
        '[endpoint]\npath = "/a"\n',
        'endpoint: expected an array of tables ([[endpoint]]), got {"path": "/a"}',
    ),
    (
        _ONE_ENDPOINT + "step = 3\n",
        "endpoint[0].step: expected an array of tables ([[endpoint.step]]), got 3",
    ),
    (
        (_ONE_ENDPOINT + _ONE_STEP) * 2,
        'endpoint[1].path: duplicate path "/a" (endpoint[0] has it too)',
    ),
]


@pytest.mark.parametrize(("text", "message"), _STRUCTURE_ERRORS)
def test_structure_errors(text: str, message: str) -> None:
    """Missing steps, a table where an array belongs, and duplicate paths are refused."""
    assert str(_error(text)) == f"scenario.toml: {message}"


def test_a_toml_syntax_error_names_the_line() -> None:
    """Invalid TOML is reported with the file and the line."""
    error = _error('seed = 1\n[[endpoint]]\npath = "/a\n')
    assert error.line == 3
    assert str(error).startswith("scenario.toml: line 3: not valid TOML: ")


def test_a_json_syntax_error_names_the_line() -> None:
    """Invalid JSON is reported with the file and the line."""
    error = _error('{"seed": 1,\n "endpoint": [}\n', "json")
    assert error.line == 2
    assert str(error).startswith("scenario.json: line 2: not valid JSON: ")


def test_json_may_not_repeat_a_key() -> None:
    """A repeated JSON key is an error, as in TOML, not a silent last-one-wins."""
    step = '{"kind": "respond", "status": 200, "status": 500}'
    text = f'{{"endpoint": [{{"path": "/a", "step": [{step}]}}]}}'
    assert str(_error(text, "json")) == 'scenario.json: not valid JSON: duplicate key "status"'


def test_json_top_level_must_be_a_table() -> None:
    """A JSON file holding something other than an object is refused."""
    assert (
        str(_error("[1]", "json"))
        == "scenario.json: expected a table of seed and [[endpoint]], got [1]"
    )


def test_load_names_the_file(tmp_path: Path) -> None:
    """load_scenario puts the path it was given into every error."""
    broken = tmp_path / "broken.json"
    broken.write_text('{"endpoint": [{"path": "/a", "step": [{"kind": "respond", "status": 99}]}]}')
    with pytest.raises(ScenarioError) as caught:
        load_scenario(broken)
    assert str(caught.value) == (
        f"{broken}: endpoint[0].step[0].status: expected an integer 100..599, got 99"
    )


def test_load_refuses_unknown_suffixes_and_missing_files(tmp_path: Path) -> None:
    """Only .toml and .json are read; an unreadable file is a ScenarioError too."""
    with pytest.raises(
        ScenarioError, match=r'unknown file type "\.yaml"; expected \.toml or \.json'
    ):
        load_scenario(tmp_path / "s.yaml")
    with pytest.raises(ScenarioError, match="cannot read the file: No such file or directory"):
        load_scenario(tmp_path / "missing.toml")


# The same invalid step, as a builder call and as a file step: the same error.
_SAME_WORDS: list[tuple[str, dict[str, Any]]] = [
    ("respond", {"status": 42}),
    ("respond", {"delay": -1}),
    ("respond", {"retry_after": "soon"}),
    ("respond", {"retry_after": 1, "retry_after_date": 2}),
    ("respond", {"headers": {"x-a": 1}}),
    ("respond", {"body": [1, 2]}),
    ("respond", {"sttus": 200}),
    ("stream", {"events": -1}),
    ("stream", {"gap": "fast"}),
    ("stream", {"gap": {"kind": "gaussian"}}),
    ("stream", {"gap": {"kind": "uniform", "low": 2, "high": 1}}),
    ("stream", {"end": "crash"}),
    ("stream", {"stall": {"after": 9}}),
    ("stream", {"split_pause": 0.5}),
    ("stream", {"format": "cohere"}),
    ("stream", {"line_ending": "\n"}),
    ("stream", {"body": "x"}),
    ("stall", {"after": 6}),
    ("stall", {"stall": {"after": 1}}),
    ("drip", {"rate": -3}),
    ("drip", {"split": 4, "rate": 1}),
    ("truncate", {"events": 3}),
    ("truncate", {}),
    ("abort", {"after": 1, "mid_line": "yes"}),
    ("abort", {"after": 1, "end": "done"}),
    ("raw", {}),
    ("raw", {"pieces": "data: x"}),
    ("raw", {"pieces": ["data: x", ""]}),
    ("raw", {"pieces": ["x"], "status": 204}),
    ("raw", {"pieces": ["x"], "end": "done"}),
    ("raw", {"pieces": ["x"], "headers": {"content-type": "text/plain"}}),
    ("raw", {"pieces": ["x"], "events": 3}),
]


@pytest.mark.parametrize(("kind", "arguments"), _SAME_WORDS)
def test_builders_and_files_reject_alike(kind: str, arguments: dict[str, Any]) -> None:
    """An invalid step fails with the same field and words from a builder and from a file."""
    with pytest.raises(ScenarioError) as from_builder:
        build_step(kind, arguments)
    tree = {"endpoint": [{"path": "/a", "step": [{"kind": kind, **arguments}]}]}
    from_file = _error(json.dumps(tree), "json")
    assert (from_file.field, from_file.problem) == (
        from_builder.value.field,
        from_builder.value.problem,
    )
    assert str(from_file) == f"scenario.json: endpoint[0].step[0].{from_builder.value}"


# -- round trips of generated scenarios ------------------------------------------

_seconds = st.one_of(
    st.integers(0, 100),
    st.floats(0, MAX_SECONDS, allow_nan=False, allow_infinity=False),
)
_positive = st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False)
_header_names = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,12}", fullmatch=True).filter(
    lambda name: name.lower() not in {"content-type", "retry-after", "retry-after-ms"}
)
_header_text = st.text(  # what a header can carry: latin-1, no space at either end
    st.characters(max_codepoint=0xFF, blacklist_characters="\r\n\0"), max_size=12
).map(lambda text: text.strip(" \t"))
_headers = st.one_of(
    st.none(),
    st.dictionaries(_header_names, _header_text, max_size=3),
    st.lists(st.tuples(_header_names, _header_text), max_size=4),
)
_json_leaf = st.one_of(st.integers(-(2**31), 2**31), st.text(max_size=8), st.booleans())
_bodies = st.one_of(
    st.none(),
    st.binary(max_size=24),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=24),
    st.dictionaries(st.text(max_size=6), _json_leaf, max_size=3),
)
_gaps = st.one_of(
    _seconds,
    st.builds(fixed, _seconds),
    st.tuples(_seconds, _seconds).map(lambda pair: uniform(min(pair), max(pair))),
    st.builds(exponential, _positive),
)


@st.composite
def _respond_steps(draw: st.DrawFn) -> Any:
    retry_after = draw(st.none() | _seconds)
    return respond(
        draw(st.integers(100, 599)),
        body=draw(_bodies),
        headers=draw(_headers),
        retry_after=retry_after,
        retry_after_date=draw(st.none() | _seconds) if retry_after is None else None,
        retry_after_ms=draw(st.none() | _seconds),
        delay=draw(_seconds),
    )


@st.composite
def _stream_arguments(draw: st.DrawFn) -> dict[str, Any]:
    events = draw(st.integers(0, 50))
    split = draw(st.integers(0, 9))
    stall_value = draw(
        st.none()
        | st.builds(
            Stall,
            after=st.integers(0, events),
            seconds=st.none() | _seconds.map(float),
            keepalive=st.none() | _positive,
        )
    )
    return {
        "gap": draw(_gaps),
        "ids": draw(st.booleans()),
        "resume": draw(st.booleans()),
        "format": draw(st.sampled_from(["openai", "named"])),
        "status": draw(st.integers(100, 599)),
        "headers": draw(_headers),
        "delay": draw(_seconds),
        "stall": stall_value,
        "events": events,
        "end": draw(st.sampled_from(["done", "truncate", "abort", "abort_mid_line"])),
        "line_ending": draw(st.sampled_from(["lf", "cr", "crlf"])),
        "bom": draw(st.booleans()),
        "comment_every": draw(st.integers(0, 5)),
        "retry_ms": draw(st.none() | st.integers(0, 10_000)),
        "split": split,
        "split_random": draw(st.booleans()) if split else False,
        "split_pause": draw(_seconds) if split else 0.0,
        "buffered": draw(st.booleans()),
        "content_type": draw(st.sampled_from(["text/event-stream", "text/plain; charset=utf-8"])),
    }


def _without(arguments: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in arguments.items() if k not in keys}


_steps = st.one_of(
    _respond_steps(),
    _stream_arguments().map(lambda a: stream(**a)),
    st.builds(lambda a, r: drip(r, **_without(a, "split", "split_random", "split_pause")),
              _stream_arguments(), _positive),
    st.builds(lambda a: truncate(a["events"], **_without(a, "events", "end")), _stream_arguments()),
    st.builds(lambda a, m: abort(a["events"], mid_line=m, **_without(a, "events", "end")),
              _stream_arguments(), st.booleans()),
    st.builds(lambda p, t, e: raw(p, pause=t, end=e),
              st.lists(st.binary(min_size=1, max_size=9) | st.text(min_size=1, max_size=9),
                       max_size=4),
              _seconds, st.sampled_from(["close", "abort"])),
)  # fmt: skip


@st.composite
def _scenarios(draw: st.DrawFn) -> Scenario:
    paths = draw(
        st.lists(st.from_regex(r"/[a-z0-9/._-]{0,12}", fullmatch=True), unique=True, max_size=3)
    )
    endpoints = [
        endpoint(
            path,
            *draw(st.lists(_steps, min_size=1, max_size=3)),
            method=draw(st.sampled_from(["GET", "POST", "ANY"])),
            then=draw(st.sampled_from(["repeat_last", "cycle"])),
        )
        for path in paths
    ]
    return scenario(*endpoints, seed=draw(st.integers(0, 2**63 - 1)))


@settings(max_examples=150, deadline=None)
@given(_scenarios())
def test_dump_and_parse_round_trip(value: Scenario) -> None:
    """parse(dump(x)) == x for generated scenarios, through JSON and through TOML."""
    tree = dump_scenario(value)
    assert parse_scenario(json.dumps(tree), format="json") == value
    assert parse_scenario(to_toml(tree), format="toml") == value


def test_round_trip_keeps_float_precision() -> None:
    """Awkward floats survive the dump exactly."""
    value = scenario(endpoint("/a", stream(gap=math.pi / 1e7, delay=1e-300)))
    assert parse_scenario(to_toml(dump_scenario(value)), format="toml") == value
