"""Run the conformance suite K times under a defined load; report stability and wall time.

    python benchmarks/suite_stability.py --runs 20                    # quiet machine
    python benchmarks/suite_stability.py --runs 20 --burners 2        # 2 CPU burners beside
    python benchmarks/suite_stability.py --runs 20 --loads 0,2,4 --json stability.json
    python benchmarks/suite_stability.py --runs 5 --burners 2 \\
        --beside "python -m pytest -q tests/test_loader.py"           # a second suite beside
    python benchmarks/suite_stability.py --runs 5 -- -k SC-BACKOFF    # extra pytest arguments
    python benchmarks/suite_stability.py --runs 5 --lanes 1,4         # serial and 4 lanes,
                                                                      # runs interleaved

Each run is a fresh `python -m pytest -q -p no:cacheprovider --streamcheck=TARGET
--streamcheck-report=R [pytest args after --]` process (its own process group, killed
after --timeout seconds, default 600). Options before `--` are this script's own (an
unknown one is an error); everything after `--` goes to pytest. One line per run: exit
code, wall time, verdict counts, re-judged cases, the largest loop-lag p99 per source if
the report carries `noise`, and the ids of cases that neither passed nor were
unsupported. Then a summary per load: runs with any FAIL or ERROR, INCONCLUSIVE and
re-judged totals, wall median and max, the median 1-minute load average sampled during
the runs, the CPU count. `--loads` runs one series per burner count and ends with a table;
`--json PATH` writes every figure (rewritten after each run). `--lanes N[,N...]` passes
`--streamcheck-lanes=N`; with several values each load gets one series per value, and
their runs alternate (run 1 of each, then run 2 of each, ...), so a change in the
machine's own load falls on every series alike.

The load: `--burners N` starts N processes of `python -c "while True: pass"`, each in its
own process group, and prints their PIDs; `--beside CMD` runs CMD (split like a shell
would, not run by one) in a loop, restarted whenever it ends. Both are stopped by PID at
the end of each series (SIGTERM to the group, SIGKILL after 3 s, waited), on Ctrl-C,
SIGTERM, SIGHUP or an exception too; on Linux the kernel also kills them if this script is
itself killed (PR_SET_PDEATHSIG). The load average is a 1-minute moving average: it lags a
change of load, which `--settle SECONDS` (wait under the load before the first run) absorbs.

Exit code: 0 when every run finished with a report and no FAIL, ERROR or INCONCLUSIVE;
1 otherwise; 130 when interrupted (the figures so far are still printed and written).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _load import (
    Load,
    ignore_stop_signals,
    signals_blocked,
    signals_ignored,
    spawn,
    stop_group,
    stop_signals,
)

COUNTED = ("FAIL", "ERROR", "INCONCLUSIVE", "NON-STRICT")
HARMLESS = ("PASS", "UNSUPPORTED")
POLL = 0.2  # seconds between checks of the run, the beside command and the load average


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def rejudge_attempts(value) -> int:
    """A case row's `rejudged`: a list of attempts or a count; anything else counts 0."""
    if isinstance(value, list | tuple | dict):
        return len(value)
    if _number(value):
        return int(value)
    return 0


def noise_p99(value) -> dict[str, float]:
    """A case row's `noise` as {source: p99}, when it is {source: {"p99": number, ...}}."""
    out: dict[str, float] = {}
    if isinstance(value, dict):
        for source, stats in value.items():
            if isinstance(stats, dict) and _number(stats.get("p99")):
                out[str(source)] = float(stats["p99"])
    return out


def read_report(report: Path) -> dict:
    """The figures one run's JSON report gives, or {"report": False} if it has none."""
    try:
        data = json.loads(report.read_text())
        cases = data["cases"]
    except (OSError, ValueError, KeyError, TypeError):
        return {"report": False}
    counts = dict.fromkeys(COUNTED, 0)
    not_passing, rejudged, lag = [], [], {}
    attempts = 0
    for case in cases:
        verdict = case.get("verdict")
        if verdict in counts:
            counts[verdict] += 1
        if verdict not in HARMLESS:
            not_passing.append({"id": case.get("id"), "verdict": verdict})
        n = rejudge_attempts(case.get("rejudged"))
        if n:
            rejudged.append({"id": case.get("id"), "verdict": verdict, "attempts": n})
            attempts += n
        for source, p99 in noise_p99(case.get("noise")).items():
            lag[source] = max(lag.get(source, p99), p99)
    return {
        "report": True,
        "cases": len(cases),
        "summary": data.get("summary", {}),
        "conformant": data.get("conformant"),
        "seed": data.get("seed"),
        "report_duration": data.get("duration"),
        "counts": counts,
        "not_passing": not_passing,
        "rejudged_cases": rejudged,
        "rejudge_attempts": attempts,
        "noise_p99_max": lag,
    }


def run_once(argv: list[str], report: Path, output: Path, timeout: float, tick) -> dict:
    """One pytest process; `tick` is called every POLL seconds while it runs."""
    with contextlib.suppress(FileNotFoundError):
        report.unlink()
    started = time.perf_counter()
    timed_out = False
    proc = None
    with output.open("wb") as out:
        try:
            with signals_blocked():  # recorded before a pending Ctrl-C can be raised
                proc = spawn(argv, stdout=out, stderr=subprocess.STDOUT)
            while proc.poll() is None:
                if time.perf_counter() - started > timeout:
                    timed_out = True
                    break
                tick()
                time.sleep(POLL)
        finally:
            if proc is not None and proc.poll() is None:
                with signals_ignored():
                    code = stop_group(proc)
                    print(f"pytest run stopped, PID {proc.pid} (exit code {code})", flush=True)
    wall = time.perf_counter() - started
    result = {
        "pid": proc.pid,
        "exit_code": None if timed_out else proc.returncode,
        "timed_out": timed_out,
        "wall": round(wall, 3),
        "loadavg_end": os.getloadavg()[0],
    }
    result.update(read_report(report))
    return result


def run_line(i: int, runs: int, burners: int, r: dict, lanes: int | None = None) -> str:
    where = f"burners={burners}" + ("" if lanes is None else f" lanes={lanes}")
    head = f"run {i:3d}/{runs} [{where}] {r['wall']:7.1f}s rc={r['exit_code']}"
    if r["timed_out"]:
        return f"{head} TIMED OUT"
    if not r["report"]:
        return f"{head} NO REPORT"
    counts = " ".join(f"{k}={v}" for k, v in r["summary"].items() if v)
    extra = [f"{k}={v}" for k, v in r["counts"].items() if v and k not in r["summary"]]
    if r["rejudged_cases"]:
        ids = ",".join(str(c["id"]) for c in r["rejudged_cases"])
        extra.append(f"rejudged={len(r['rejudged_cases'])}({ids})")
    if r["noise_p99_max"]:
        lag = ",".join(f"{s}:{v:g}" for s, v in sorted(r["noise_p99_max"].items()))
        extra.append(f"lag-p99-max={lag}")
    bad = " ".join(f"{c['id']}:{c['verdict']}" for c in r["not_passing"])
    return " ".join(x for x in (head, counts, *extra, bad) if x)


def output_tail(output: Path, lines: int = 15) -> str:
    try:
        text = output.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    | " + line for line in text[-lines:])


def summarize(series: dict) -> dict:
    runs = series["runs"]
    done = [r for r in runs if r["report"]]
    walls = [r["wall"] for r in runs]
    samples = series["loadavg_samples"]
    lag: dict[str, float] = {}
    not_passing: dict[str, int] = {}
    for r in done:
        for s, v in r["noise_p99_max"].items():
            lag[s] = max(lag.get(s, v), v)
        for c in r["not_passing"]:
            key = f"{c['id']}:{c['verdict']}"
            not_passing[key] = not_passing.get(key, 0) + 1
    exit_codes: dict[str, int] = {}
    for r in runs:
        exit_codes[str(r["exit_code"])] = exit_codes.get(str(r["exit_code"]), 0) + 1
    return {
        "runs_requested": series["runs_requested"],
        "runs": len(runs),
        "runs_with_fail": sum(1 for r in done if r["counts"]["FAIL"]),
        "runs_with_error": sum(1 for r in done if r["counts"]["ERROR"]),
        "runs_with_inconclusive": sum(1 for r in done if r["counts"]["INCONCLUSIVE"]),
        "runs_without_report": sum(1 for r in runs if not r["report"]),
        "runs_timed_out": sum(1 for r in runs if r["timed_out"]),
        "fail_total": sum(r["counts"]["FAIL"] for r in done),
        "error_total": sum(r["counts"]["ERROR"] for r in done),
        "inconclusive_total": sum(r["counts"]["INCONCLUSIVE"] for r in done),
        "non_strict_total": sum(r["counts"]["NON-STRICT"] for r in done),
        "rejudged_total": sum(len(r["rejudged_cases"]) for r in done),
        "rejudge_attempts_total": sum(r["rejudge_attempts"] for r in done),
        "wall_median": round(statistics.median(walls), 2) if walls else None,
        "wall_max": round(max(walls), 2) if walls else None,
        "wall_min": round(min(walls), 2) if walls else None,
        "loadavg_median": round(statistics.median(samples), 2) if samples else None,
        "loadavg_max": round(max(samples), 2) if samples else None,
        "noise_p99_max": lag,
        "exit_codes": exit_codes,
        "not_passing_cases": dict(sorted(not_passing.items())),
    }


def print_summary(series: dict, machine: dict) -> None:
    s = series["summary"]
    load = series["load"]
    beside = load["beside"]
    lanes = "" if series.get("lanes") is None else f" lanes={series['lanes']}"
    print(f"--- burners={load['burners']}{lanes}", end="")
    print(f" beside={beside['command']!r}" if beside else " beside=none")
    print(
        f"  runs {s['runs']}/{s['runs_requested']}: with FAIL {s['runs_with_fail']}, "
        f"with ERROR {s['runs_with_error']}, with INCONCLUSIVE {s['runs_with_inconclusive']}, "
        f"no report {s['runs_without_report']} (timed out {s['runs_timed_out']})"
    )
    print(
        f"  totals: FAIL {s['fail_total']}, ERROR {s['error_total']}, INCONCLUSIVE "
        f"{s['inconclusive_total']}, NON-STRICT {s['non_strict_total']}, re-judged cases "
        f"{s['rejudged_total']} ({s['rejudge_attempts_total']} attempts)"
    )
    print(
        f"  wall: median {_fmt(s['wall_median'], 's')}, max {_fmt(s['wall_max'], 's')}, "
        f"min {_fmt(s['wall_min'], 's')}; exit codes {s['exit_codes']}"
    )
    print(
        f"  load average (1 min) during the runs: median {_fmt(s['loadavg_median'])}, "
        f"max {_fmt(s['loadavg_max'])}, {len(series['loadavg_samples'])} samples; "
        f"CPUs {machine['cpu_count']} (usable {machine['usable_cpus']})"
    )
    if s["noise_p99_max"]:
        lag = ", ".join(f"{k} {v:g}" for k, v in sorted(s["noise_p99_max"].items()))
        print(f"  largest loop-lag p99 per source (report units): {lag}")
    if beside:
        print(
            f"  beside: {beside['rounds_completed']} rounds completed "
            f"(exit codes {beside['completed_exit_codes']}), {beside['rounds_started']} started"
        )
    if s["not_passing_cases"]:
        cases = ", ".join(f"{k} x{v}" for k, v in s["not_passing_cases"].items())
        print(f"  not passing (runs): {cases}")


def print_table(all_series: list[dict]) -> None:
    head = ("burners", "lanes", "runs", "FAIL runs", "ERROR runs", "inconcl.", "re-judged")
    head += ("no report",)
    head += ("wall med", "wall max", "loadavg")
    rows = []
    for series in all_series:
        s = series["summary"]
        rows.append(
            (
                str(series["load"]["burners"]),
                "-" if series.get("lanes") is None else str(series["lanes"]),
                f"{s['runs']}/{s['runs_requested']}",
                str(s["runs_with_fail"]),
                str(s["runs_with_error"]),
                str(s["inconclusive_total"]),
                str(s["rejudged_total"]),
                str(s["runs_without_report"]),
                _fmt(s["wall_median"], "s"),
                _fmt(s["wall_max"], "s"),
                _fmt(s["loadavg_median"]),
            )
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    for line in (head, tuple("-" * w for w in widths), *rows):
        print("  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)))


def _fmt(v, unit: str = "") -> str:
    return "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v)) + unit


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        usage="%(prog)s [options] [-- PYTEST_ARGS...]",
    )
    parser.add_argument("--runs", type=int, default=10, help="runs per load (default 10)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--burners", type=int, default=0, help="CPU burner processes")
    group.add_argument("--loads", help="burner counts, one series each: e.g. 0,2,4")
    parser.add_argument("--beside", metavar="CMD", help="command looped beside the runs")
    parser.add_argument("--target", default="reference", help="--streamcheck target")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--settle", type=float, default=0.0, help="seconds under load first")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write every figure here")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep reports and outputs")
    parser.add_argument(
        "--lanes", help="--streamcheck-lanes values, one series each, runs interleaved: 1,4"
    )
    if "--" in argv:
        i = argv.index("--")
        own, extra = argv[:i], argv[i + 1 :]
    else:
        own, extra = argv, []
    args = parser.parse_args(own)
    try:
        args.loads = [int(x) for x in args.loads.split(",")] if args.loads else [args.burners]
    except ValueError:
        parser.error(f"--loads takes burner counts separated by commas, not {args.loads!r}")
    try:
        args.lanes = [int(x) for x in args.lanes.split(",")] if args.lanes else [None]
    except ValueError:
        parser.error(f"--lanes takes lane counts separated by commas, not {args.lanes!r}")
    if any(n is not None and n < 1 for n in args.lanes):
        parser.error("lane counts must be at least 1")
    if any(n < 0 for n in args.loads) or args.runs < 1:
        parser.error("--runs must be at least 1 and burner counts at least 0")
    if args.beside is not None:
        words = shlex.split(args.beside)
        if not words or shutil.which(words[0]) is None:
            parser.error(f"--beside: no such command: {args.beside!r}")
    return args, extra


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(sys.argv[1:] if argv is None else argv)
    machine = {
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    doc = {
        "schema": "suite-stability/1",
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "argv": sys.argv,
        "target": args.target,
        "pytest_args": extra,
        "timeout": args.timeout,
        "settle": args.settle,
        "machine": machine,
        "interrupted": False,
        "series": [],
    }

    def write_json() -> None:
        if args.json:
            tmp = args.json.with_name(args.json.name + ".tmp")
            tmp.write_text(json.dumps(doc, indent=2) + "\n")
            tmp.replace(args.json)

    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    print(
        f"target={args.target} runs={args.runs} loads={args.loads} lanes={args.lanes} "
        f"beside={args.beside!r} "
        f"pytest args={extra} CPUs={machine['cpu_count']}",
        flush=True,
    )
    code = 0
    with stop_signals(), tempfile.TemporaryDirectory(prefix="suite-stability-") as tmp:
        try:
            for burners in args.loads:
                group = []
                for lanes in args.lanes:
                    series = {
                        "runs_requested": args.runs,
                        "load": {"burners": burners, "beside": None},
                        "lanes": lanes,
                        "runs": [],
                        "loadavg_samples": [],
                    }
                    doc["series"].append(series)
                    group.append(series)
                load = Load(burners=burners, beside=args.beside)
                for series in group:  # one sampler: the series share the load
                    series["loadavg_samples"] = load.sampler.samples
                try:
                    load.start()
                    for series in group:
                        series["load"] = load.figures()
                    settle_until = time.monotonic() + args.settle
                    while time.monotonic() < settle_until:
                        load.tick()
                        time.sleep(POLL)
                    for i in range(1, args.runs + 1):
                        for series in group:
                            lanes = series["lanes"]
                            name = f"b{burners}" + ("" if lanes is None else f"-l{lanes}")
                            report = Path(tmp) / f"{name}-r{i}.json"
                            output = Path(tmp) / f"{name}-r{i}.txt"
                            cmd = [
                                sys.executable,
                                "-m",
                                "pytest",
                                "-q",
                                "-p",
                                "no:cacheprovider",
                                f"--streamcheck={args.target}",
                                f"--streamcheck-report={report}",
                                *([] if lanes is None else [f"--streamcheck-lanes={lanes}"]),
                                *extra,
                            ]
                            r = run_once(cmd, report, output, args.timeout, load.tick)
                            r["run"] = i
                            r["uptime_load"] = os.getloadavg()
                            series["runs"].append(r)
                            print(run_line(i, args.runs, burners, r, lanes), flush=True)
                            if r["timed_out"] or not r["report"] or r["exit_code"] not in (0, 1):
                                print(output_tail(output), flush=True)
                            if args.keep:
                                for f in (report, output):
                                    if f.exists():
                                        shutil.copy(f, args.keep / f.name)
                            series["summary"] = summarize(series)
                            write_json()
                finally:
                    load.stop()
                    for series in group:
                        series["load"] = load.figures()
                        series["summary"] = summarize(series)
                    write_json()
        except KeyboardInterrupt as exc:
            doc["interrupted"] = True
            print(f"interrupted ({str(exc) or 'SIGINT'}): figures so far", flush=True)
            code = 130
    if code:  # a further Ctrl-C must not cut the figures short: they are all that is left
        ignore_stop_signals()
    for series in doc["series"]:
        print_summary(series, machine)
    if len(doc["series"]) > 1:
        print()
        print_table(doc["series"])
    write_json()
    if code:
        return code
    bad = any(
        s["summary"]["runs_with_fail"]
        or s["summary"]["runs_with_error"]
        or s["summary"]["runs_with_inconclusive"]
        or s["summary"]["runs_without_report"]
        for s in doc["series"]
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
