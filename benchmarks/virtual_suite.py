"""The README's main job in virtual time, run after run, quiet or beside CPU burners.

    python benchmarks/virtual_suite.py --runs 20 --burners 4 [--seed 5]

Each run is ``pytest --streamcheck=reference --streamcheck-report=...`` in an empty
folder (as a user runs it), timed as a whole process; the burners are ``while True:
pass`` processes started before the first run and killed by PID after the last. With a
fixed ``--seed`` it also says whether every run's evidence (the OS-chosen ports aside)
was the same. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from conformance._evidence import without_ports


def burners(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def one_run(folder: Path, seed: int | None) -> tuple[float, Counter[str], str]:
    report = folder / "report.json"
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    args += ["--streamcheck=reference", f"--streamcheck-report={report}"]
    if seed is not None:
        args.append(f"--streamcheck-seed={seed}")
    started = time.perf_counter()
    subprocess.run(args, cwd=folder, capture_output=True, check=False)
    wall = time.perf_counter() - started
    data = json.loads(report.read_text(encoding="utf-8"))
    verdicts = Counter(c["verdict"] for c in data["cases"])
    # Every played case's timeline (a passed case keeps no "evidence" block, so that alone
    # would compare nothing): attempts, events and deliveries, every stamp, in order
    # (deliveries of one instant come in stream order: DeliveryLog.by_instant).
    evidence = {c["id"]: c.get("timeline") or [] for c in data["cases"]}
    digest = hashlib.sha256(without_ports(json.dumps(evidence, sort_keys=True)).encode())
    return wall, verdicts, digest.hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--burners", type=int, default=0)
    parser.add_argument("--seed", type=int, default=None)
    opts = parser.parse_args()
    load = burners(opts.burners)
    walls: list[float] = []
    bad = 0
    digests: set[str] = set()
    try:
        for n in range(opts.runs):
            with tempfile.TemporaryDirectory() as folder:
                wall, verdicts, digest = one_run(Path(folder), opts.seed)
            walls.append(wall)
            digests.add(digest)
            bad += sum(verdicts[v] for v in ("FAIL", "ERROR", "INCONCLUSIVE", "NON-STRICT"))
            print(f"run {n + 1}: {wall:.2f} s {dict(verdicts)} evidence {digest}", flush=True)
    finally:
        for proc in load:
            proc.kill()
            proc.wait()
    print(
        f"{opts.runs} runs beside {opts.burners} burners: wall median "
        f"{statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}); "
        f"cases not PASS/UNSUPPORTED: {bad}"
        + (f"; distinct evidence: {len(digests)}" if opts.seed is not None else "")
    )


if __name__ == "__main__":
    main()
