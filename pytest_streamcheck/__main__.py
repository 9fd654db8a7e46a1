"""``python -m pytest_streamcheck``: the kit's commands outside a pytest run.

``matrix TARGET [TARGET ...] --out DIR [-j N] [--timeout S] [--from-json FILE ...] [-- ARGS]``
runs each target as its own pytest run and renders the compatibility matrix
(docs/matrix.md); ``verify DIR`` checks a certification bundle (docs/certification.md).
Exit codes: 0 done (matrix: every column has a report; verify: intact and complete),
1 not (a target crashed or timed out; a bundle tampered with or incomplete), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    from pytest_streamcheck._matrix import DEFAULT_JOBS, DEFAULT_TIMEOUT

    parser = argparse.ArgumentParser(prog="python -m pytest_streamcheck")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    matrix = commands.add_parser(
        "matrix",
        help="run targets (or read their JSON reports) and render the compatibility matrix",
        description="Run each TARGET as `python -m pytest --streamcheck=TARGET` in an empty "
        "temporary directory and render matrix.md, matrix.html and matrix.json into --out. "
        "Arguments after `--` go to every target's pytest run (e.g. -- -k SC-RETRY).",
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
    verify = commands.add_parser(
        "verify",
        help="check a certification bundle (--streamcheck-certify DIR)",
        description="Check the bundle's hashes, that its manifest matches its report and "
        "this kit's catalog, and that the run is complete; say what it shows.",
    )
    verify.add_argument("directory", type=Path, metavar="DIR")
    return parser


def _matrix(args: argparse.Namespace, extra: Sequence[str]) -> int:
    from pytest_streamcheck._matrix import load_column, run_targets, write_matrix

    if args.shipped:
        args.targets = [*args.targets, *shipped_targets()]
    if not args.targets and not args.from_json:
        print("matrix: name at least one TARGET or --from-json FILE", file=sys.stderr)
        return 2
    if args.jobs < 1 or not args.timeout > 0:
        print("matrix: -j needs 1 or more, --timeout a positive number of seconds", file=sys.stderr)
        return 2
    missing = [str(p) for p in args.from_json if not p.is_file()]
    if missing:
        print(f"matrix: no such report: {', '.join(missing)}", file=sys.stderr)
        return 2
    started = time.monotonic()
    columns = (
        run_targets(args.targets, args.out, jobs=args.jobs, timeout=args.timeout, extra=extra)
        if args.targets
        else []
    )
    columns += [load_column(path, args.out) for path in args.from_json]
    paths = write_matrix(columns, args.out)
    crashed = [c for c in columns if c.crashed]
    for c in crashed:
        print(f"matrix: {c.target}: no report ({c.crashed}); its column says so", file=sys.stderr)
    print(f"matrix: {', '.join(str(p) for p in paths.values())}")
    print(
        f"matrix: {len(columns)} column(s), {len(crashed)} without a report; "
        f"wall time {time.monotonic() - started:.1f} s"
    )
    return 1 if crashed else 0


def shipped_targets() -> list[str]:
    """The clients the kit ships adapters for, by entry-point name, in a stable order,
    then the browser's native EventSource."""
    from importlib.metadata import entry_points

    from pytest_streamcheck._targets import ENTRY_POINT_GROUP

    # this kit's own, not another package's registered clients
    ours = (ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.value.startswith(__package__))
    names = sorted({ep.name for ep in ours})
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
    if args.command == "verify":
        if extra:
            print("verify: takes no arguments after --", file=sys.stderr)
            return 2
        from pytest_streamcheck._certify import verify_main

        return verify_main([str(args.directory)])
    return _matrix(args, extra)


if __name__ == "__main__":
    sys.exit(main())
