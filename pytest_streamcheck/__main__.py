"""``streamcheck`` (or ``python -m pytest_streamcheck``): the kit's commands outside a
pytest project.

``run TARGET [PYTEST ARGS ...]`` runs the suite against one target in the current folder
with no pytest project needed (docs/matrix.md#streamcheck-run); ``matrix TARGET [TARGET ...]
--out DIR [-j N] [--timeout S] [--from-json FILE ...] [-- ARGS]`` runs each target as its
own pytest run and renders the compatibility matrix (docs/matrix.md); ``verify DIR
[--require-conformant]`` checks a certification bundle (docs/certification.md);
``weather TARGET [TARGET ...] --weather NAME`` plays a network weather through clients
and measures how many streams finish (docs/weather.md).
Exit codes: run: pytest's. matrix: 0 every column has a report and none erred on all it
played, 1 otherwise, 2 usage. verify: 0 intact and complete (and conformant, when
required), 1 not, 2 usage. weather: 0 every run measured and every --require met, 1 not,
2 usage.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

PROJECT_HELP = (
    "read the current folder's pytest configuration (pytest.ini, pyproject.toml, tox.ini, "
    "setup.cfg, conftest.py), as a plain pytest run there would; by default it is left out"
)


def _prog() -> str:
    """The name the user typed: the console script, or the module."""
    return (
        "streamcheck" if Path(sys.argv[0]).name == "streamcheck" else "python -m pytest_streamcheck"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=_prog())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="run the conformance suite against one target, no pytest project needed",
        description="Run `python -m pytest --streamcheck=TARGET PYTEST_ARGS` in the current "
        "folder without its pytest configuration (no ini file, no conftest.py, no "
        ".pytest_cache). The exit status is pytest's.",
    )
    run.add_argument("--with-project", action="store_true", help=PROJECT_HELP)
    run.add_argument("target", metavar="TARGET", help="a --streamcheck target")
    run.add_argument(
        "pytest_args",
        nargs=argparse.REMAINDER,
        metavar="PYTEST_ARGS",
        help="passed to pytest as they are (-k SC-RETRY, streamcheck::SC-RETRY-1, "
        "--junitxml=junit.xml, --streamcheck-certify=cert, ...)",
    )
    _matrix_parser(commands)
    from pytest_streamcheck._weather_cli import add_parser as add_weather

    add_weather(commands)
    verify = commands.add_parser(
        "verify",
        help="check a certification bundle (--streamcheck-certify DIR)",
        description="Check the bundle's hashes, that its manifest matches its report and "
        "this kit's catalog, and that the run is complete; say what it shows.",
    )
    verify.add_argument("directory", type=Path, metavar="DIR")
    verify.add_argument(
        "--require-conformant",
        action="store_true",
        help="exit 1 unless the bundle also shows a conformant client (for a CI gate)",
    )
    return parser


def _matrix_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from pytest_streamcheck._matrix import DEFAULT_JOBS, DEFAULT_TIMEOUT

    matrix = commands.add_parser(
        "matrix",
        help="run targets (or read their JSON reports) and render the compatibility matrix",
        description="Run each TARGET as `python -m pytest --streamcheck=TARGET` in the current "
        "folder (without its pytest configuration) and render matrix.md, matrix.html and "
        "matrix.json into --out. Arguments after `--` go to every target's pytest run "
        "(e.g. -- -k SC-RETRY); output paths among them (--junitxml=junit.xml) become one "
        "file per target in --out (DIR/NAME.junit.xml).",
    )
    matrix.add_argument("targets", nargs="*", metavar="TARGET", help="a --streamcheck target")
    matrix.add_argument("--out", required=True, type=Path, metavar="DIR", help="where to write")
    matrix.add_argument(
        "--shipped",
        action="store_true",
        help="add every shipped adapter (the streamcheck.clients entry points) and the "
        "browser's native EventSource: docs/compatibility.md is this matrix",
    )
    matrix.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=DEFAULT_JOBS,
        metavar="N",
        help=f"targets run at once (default {DEFAULT_JOBS})",
    )
    matrix.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit per target (default {DEFAULT_TIMEOUT:g} s)",
    )
    matrix.add_argument(
        "--from-json",
        nargs="+",
        default=[],
        type=Path,
        metavar="FILE",
        action="extend",
        help="a JSON report to render as a column, without running anything",
    )
    matrix.add_argument("--with-project", action="store_true", help=PROJECT_HELP)


def _matrix(args: argparse.Namespace, extra: Sequence[str]) -> int:
    from pytest_streamcheck._matrix import (
        errored,
        load_column,
        own_options,
        run_targets,
        write_matrix,
    )

    if args.shipped:
        args.targets = [*args.targets, *shipped_targets()]
    if usage := _matrix_usage(args, own_options(extra)):
        print(f"matrix: {usage}", file=sys.stderr)
        return 2
    started = time.monotonic()
    _say_outputs(extra, args.out, bool(args.targets))
    columns = (
        run_targets(
            args.targets,
            args.out,
            jobs=args.jobs,
            timeout=args.timeout,
            extra=extra,
            project=args.with_project,
        )
        if args.targets
        else []
    )
    columns += [load_column(path, args.out) for path in args.from_json]
    paths = write_matrix(columns, args.out)
    crashed = [c for c in columns if c.crashed]
    erred = [(c, why) for c in columns if c.report and (why := errored(c.report))]
    for c in crashed:
        print(f"matrix: {c.target}: no report ({c.crashed}); its column says so", file=sys.stderr)
    for c, why in erred:
        print(f"matrix: {c.target}: {why}; its column says so", file=sys.stderr)
    print(f"matrix: {', '.join(str(p) for p in paths.values())}")
    print(
        f"matrix: {len(columns)} column(s), {len(crashed)} without a report, "
        f"{len(erred)} with nothing judged but ERRORs; "
        f"wall time {time.monotonic() - started:.1f} s"
    )
    return 1 if crashed or erred else 0


def _matrix_usage(args: argparse.Namespace, own: Sequence[str]) -> str | None:
    """What is wrong with the matrix's arguments, if anything."""
    if not args.targets and not args.from_json:
        return "name at least one TARGET or --from-json FILE"
    if args.jobs < 1 or not args.timeout > 0:
        return "-j needs 1 or more, --timeout a positive number of seconds"
    missing = [str(p) for p in args.from_json if not p.is_file()]
    if missing:
        return f"no such report: {', '.join(missing)}"
    if own:
        return (
            f"{', '.join(own)} after -- : the matrix writes each target's reports itself "
            "(DIR/NAME.json, DIR/NAME.html); leave it out"
        )
    return None


def _say_outputs(extra: Sequence[str], out: Path, running: bool) -> None:
    """Where the output options passed through go: one file per target, in --out."""
    from pytest_streamcheck._matrix import OUTPUT_OPTIONS

    named = sorted({a.partition("=")[0] for a in extra} & set(OUTPUT_OPTIONS))
    if named and running:
        print(f"matrix: {', '.join(named)}: one per target, in {out} as NAME.<the name given>")


def _run(args: argparse.Namespace, extra: Sequence[str]) -> int:
    """The suite against one target, in this folder, as pytest's own run (its exit status)."""
    from pytest_streamcheck._matrix import pytest_argv

    argv = pytest_argv(
        args.target, [*args.pytest_args, *extra], folder=Path.cwd(), project=args.with_project
    )
    process = subprocess.Popen(argv)
    try:
        return process.wait()
    except KeyboardInterrupt:  # pytest got the ^C too: let it say what it ran, and end
        return process.wait()


def shipped_targets() -> list[str]:
    """The clients the kit ships adapters for, by entry-point name, in a stable order,
    then the browser's native EventSource."""
    from importlib.metadata import entry_points

    from pytest_streamcheck.targets import ENTRY_POINT_GROUP

    # this kit's own, not another package's registered clients
    ours = (ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.value.startswith(__package__))
    # the textbook client is the weather's baseline, not a library: no matrix column
    names = sorted({ep.name for ep in ours} - {"textbook"})
    return [*names, "browser:eventsource"]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:  # everything after -- goes to each target's pytest run
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    if args.command == "run":
        return _run(args, extra)
    if args.command == "weather":
        if extra:
            print("weather: takes no arguments after --", file=sys.stderr)
            return 2
        from pytest_streamcheck._weather_cli import main as weather_main

        return weather_main(args)
    if args.command == "verify":
        if extra:
            print("verify: takes no arguments after --", file=sys.stderr)
            return 2
        from pytest_streamcheck._certify import verify_main

        return verify_main(args.directory, require_conformant=args.require_conformant)
    return _matrix(args, extra)


if __name__ == "__main__":
    sys.exit(main())
