"""Run the conformance suite many times and report stability and wall time.

    python benchmarks/suite_stability.py --runs 50                   # quiet machine
    python benchmarks/suite_stability.py --runs 50 --burners 2       # both cores kept busy
    python benchmarks/suite_stability.py --runs 5 -- -n 2            # extra pytest arguments

Each run is a fresh `pytest --streamcheck=TARGET` process. Prints one line per run
(outcome counts, wall time, non-passing case ids) and a summary: runs with any FAIL or
ERROR, median and max wall time. Burners are busy-looping processes started before the
runs and killed after them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def burn() -> None:
    while True:
        pass


def run_once(
    target: str, extra: list[str], report: Path
) -> tuple[float, dict[str, int], list[str]]:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--streamcheck={target}",
            f"--streamcheck-report={report}",
            *extra,
        ],
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - started
    data = json.loads(report.read_text())
    bad = [
        f"{c['id']}:{c['verdict']}"
        for c in data["cases"]
        if c["verdict"] in ("FAIL", "ERROR", "NON-STRICT")
    ]
    return wall, data["summary"], bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--burners", type=int, default=0)
    parser.add_argument("--target", default="reference")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(args.burners)]
    for b in burners:
        b.start()
    walls: list[float] = []
    failing_runs = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(1, args.runs + 1):
                wall, summary, bad = run_once(args.target, extra, Path(tmp) / f"r{i}.json")
                walls.append(wall)
                failing_runs += bool(bad)
                counts = " ".join(f"{k}={v}" for k, v in summary.items() if v)
                print(f"run {i:3d}: {wall:6.1f}s {counts} {' '.join(bad)}", flush=True)
    finally:
        for b in burners:
            b.terminate()
    print(
        f"runs={args.runs} burners={args.burners} runs-with-FAIL/ERROR/NON-STRICT="
        f"{failing_runs} wall median={statistics.median(walls):.1f}s max={max(walls):.1f}s"
    )


if __name__ == "__main__":
    main()
