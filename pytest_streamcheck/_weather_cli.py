"""``python -m pytest_streamcheck weather TARGET... --weather NAME``: weather runs, their
reports, and the shipped adapters' weather table in docs/compatibility.md.

Each target plays the weather in turn (or ``-j`` at once); a client on the kit's loop in
virtual time, any other in real time, whose cost is said before it starts, and refused
past ``--max-real`` seconds. Exit status: 0 every run measured (and every ``--require``
met), 1 otherwise, 2 usage.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from conformance.weather._model import DEFAULT_STREAMS, DEFAULT_USERS

if TYPE_CHECKING:  # the runs' modules load only when a weather runs: not for --help
    from conformance.weather import Weather, WeatherRun

__all__ = ["MAX_REAL", "TABLE_END", "TABLE_START", "add_parser", "main"]

MAX_REAL = 1800.0  # seconds a real-time run may be estimated to take before it is refused
TABLE_START = "<!-- weather-table:start -->"
TABLE_END = "<!-- weather-table:end -->"
# The shipped adapters' table: clients in real time play fewer streams, from as many users
# as a browser page can stream to one host at once (HTTP/1.1's six connections).
REAL_STREAMS = 30
REAL_USERS = 6


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    weather = commands.add_parser(
        "weather",
        help="play a network weather through clients and measure how many streams finish",
        description="Drive STREAMS streams from USERS users through each TARGET under the "
        "weather, and report streams completed (first try, in the end), failed honestly or "
        "silently, tokens duplicated and lost, time against the fault-free time, stalls "
        "surfaced, requests per completed stream and the herd after an outage "
        "(docs/weather.md).",
    )
    weather.add_argument("targets", nargs="*", metavar="TARGET", help="a --streamcheck target")
    weather.add_argument(
        "--weather",
        default="seed-mix",
        metavar="NAME",
        help="a shipped weather (name or name@version) or a .toml file; comma-separated "
        "for several (default seed-mix)",
    )
    weather.add_argument("--streams", type=int, default=DEFAULT_STREAMS, metavar="N")
    weather.add_argument("--users", type=int, default=DEFAULT_USERS, metavar="M")
    weather.add_argument("--seed", type=int, default=0, help="fixes the weather (default 0)")
    weather.add_argument("--json", type=Path, metavar="PATH", help="write the JSON report")
    weather.add_argument("--html", type=Path, metavar="PATH", help="write the HTML report")
    weather.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="CONDITION",
        help='a threshold every run must meet, e.g. "completion >= 0.99" (repeatable)',
    )
    weather.add_argument(
        "--max-real",
        type=float,
        default=MAX_REAL,
        metavar="SECONDS",
        help=f"refuse a real-time run estimated longer than this (default {MAX_REAL:g})",
    )
    weather.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="runs at once")
    weather.add_argument(
        "--shipped",
        action="store_true",
        help="add every shipped adapter and the textbook client; those in real time play "
        f"{REAL_STREAMS} streams from {REAL_USERS} users",
    )
    weather.add_argument(
        "--table",
        type=Path,
        metavar="FILE",
        help=f"write the weather table into FILE between {TABLE_START} and {TABLE_END}",
    )


def main(args: argparse.Namespace) -> int:
    from conformance.weather import get_weather
    from fake_servers._validate import ScenarioError
    from pytest_streamcheck.__main__ import shipped_targets

    if args.shipped:
        args.targets = [*args.targets, *shipped_targets(), "textbook"]
    try:
        weathers = [get_weather(name.strip()) for name in args.weather.split(",") if name.strip()]
    except ScenarioError as exc:
        print(f"weather: {exc}", file=sys.stderr)
        return 2
    if usage := _usage(args, weathers):
        print(f"weather: {usage}", file=sys.stderr)
        return 2
    started = time.monotonic()
    runs = _run_all(args, weathers)
    return _finish(args, runs, started)


def _usage(args: argparse.Namespace, weathers: Sequence[Weather]) -> str | None:
    if not args.targets:
        return "name at least one TARGET (or --shipped)"
    if not weathers:
        return "--weather names no weather"
    if not 1 <= args.users <= args.streams <= 1000:
        return "needs 1 <= --users <= --streams <= 1000"
    if args.jobs < 1 or not args.max_real > 0:
        return "-j needs 1 or more, --max-real a positive number of seconds"
    if args.table is not None and not args.table.is_file():
        return f"--table {args.table}: no such file"
    from conformance.weather._metrics import parse_condition

    for condition in args.require:
        try:
            parse_condition(condition)
        except ValueError as exc:
            return str(exc)
    from pytest_streamcheck.reports._weather import check_weather_paths

    try:  # now, not after an hour of runs
        check_weather_paths(args.json, args.html)
    except ValueError as exc:
        return str(exc)
    return None


def _run_all(args: argparse.Namespace, weathers: Sequence[Weather]) -> list[WeatherRun]:
    jobs = [(t, w) for w in weathers for t in args.targets]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(_one, args, target, weather) for target, weather in jobs]
        return [f.result() for f in futures]


def _one(args: argparse.Namespace, target: str, weather: Weather) -> WeatherRun:
    from conformance.weather import estimate, run_weather
    from pytest_streamcheck.reports._weather import weather_lines
    from pytest_streamcheck.targets import TargetError
    from pytest_streamcheck.targets._load import load_target

    try:
        factory = load_target(target, seed=args.seed)
    except (TargetError, ImportError) as exc:
        return _refused(target, weather, args, str(exc))
    virtual = _virtual(factory)
    shipped_real = args.shipped and not virtual
    streams = min(args.streams, REAL_STREAMS) if shipped_real else args.streams
    users = min(args.users, REAL_USERS, streams) if shipped_real else args.users
    cost = estimate(weather, streams, users)
    if not virtual and cost > args.max_real:
        return _refused(
            target,
            weather,
            args,
            f"in real time this run takes about {cost / 60:.0f} min, over --max-real "
            f"{args.max_real:g} s: lower --streams or raise --max-real",
        )
    how = "in virtual time" if virtual else f"in real time: about {cost / 60:.1f} min"
    print(f"weather: {target} under {weather.key}, {streams} streams from {users} users, {how}")
    run = run_weather(factory, weather, streams=streams, users=users, seed=args.seed, target=target)
    print(f"weather: {target}: {weather_lines([run.to_json()])[0]}")
    return run


def _virtual(factory: object) -> bool:
    """Whether the target's adapter says it waits on the kit's loop alone, known without
    starting it for a Python adapter (an exec or browser client is real time)."""
    try:
        adapter = factory()  # type: ignore[operator]
    except Exception:
        return False
    info = getattr(type(adapter), "info", None) or getattr(adapter, "info", None)
    return bool(getattr(info, "virtual_time", False))


def _refused(target: str, weather: Weather, args: argparse.Namespace, why: str) -> WeatherRun:
    from conformance.weather import WeatherRun

    print(f"weather: {target}: {why}", file=sys.stderr)
    return WeatherRun.failed(target, weather, args.seed, args.streams, args.users, why)


def _finish(args: argparse.Namespace, runs: Sequence[WeatherRun], started: float) -> int:
    from pytest_streamcheck.reports._weather import write_weather_report

    command = "python -m pytest_streamcheck weather " + " ".join(sys.argv[2:])
    if args.json or args.html:
        write_weather_report(runs, json_path=args.json, html_path=args.html, command=command)
    if args.table is not None:
        _write_table(args.table, runs, command)
    failed = [r for r in runs if r.metrics is None]
    unmet = []
    for run in runs:
        if run.metrics is None:
            continue
        try:
            run.metrics.require(*args.require)
        except AssertionError as exc:
            unmet.append(f"{run.target} ({run.weather.key}): {exc}")
    for line in unmet:
        print(f"weather: {line}", file=sys.stderr)
    print(
        f"weather: {len(runs)} run(s), {len(failed)} without figures, {len(unmet)} below "
        f"a --require; wall time {time.monotonic() - started:.1f} s"
    )
    return 1 if failed or unmet else 0


def _write_table(path: Path, runs: Sequence[WeatherRun], command: str) -> None:
    from pytest_streamcheck.reports._weather import weather_table

    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(TABLE_START) + ".*?" + re.escape(TABLE_END), re.S)
    block = f"{TABLE_START}\n{weather_table([r.to_json() for r in runs], command)}\n{TABLE_END}"
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")
    print(f"weather: table written to {path}")
