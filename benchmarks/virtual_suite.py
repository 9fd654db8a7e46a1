"""The README's main job in virtual time, run after run, quiet or beside CPU burners.

    python benchmarks/virtual_suite.py --runs 20 --burners 4 [--seed 5] [--peer]

Each run is ``pytest --streamcheck=reference --streamcheck-report=...`` in an empty
folder (as a user runs it), timed inside pytest (its "in N s") and as a whole process;
the burners are ``while True: pass`` processes started before the first run and killed
by PID after the last. ``--peer`` plays each run a second time in one process
(``--streamcheck-lanes=1``, as before lanes were processes), right after it, and gives
the ratio of the medians. With a fixed ``--seed`` it also says whether every run's
evidence (the OS-chosen ports aside) was the same, in either mode. Prints numbers;
asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
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


MODES = {"every core": [], "one process": ["--streamcheck-lanes=1"]}


def one_run(
    folder: Path, seed: int | None, extra: list[str]
) -> tuple[float, float, Counter[str], str]:
    report = folder / "report.json"
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    args += ["--streamcheck=reference", f"--streamcheck-report={report}", *extra]
    if seed is not None:
        args.append(f"--streamcheck-seed={seed}")
    started = time.perf_counter()
    done = subprocess.run(args, cwd=folder, capture_output=True, check=False, text=True)
    wall = time.perf_counter() - started
    inside = re.findall(r" in ([0-9.]+)s", done.stdout)
    data = json.loads(report.read_text(encoding="utf-8"))
    verdicts = Counter(c["verdict"] for c in data["cases"])
    # Every played case's timeline (a passed case keeps no "evidence" block, so that alone
    # would compare nothing): attempts, events and deliveries, every stamp, in order
    # (deliveries of one instant come in stream order: DeliveryLog.by_instant).
    evidence = {c["id"]: c.get("timeline") or [] for c in data["cases"]}
    digest = hashlib.sha256(without_ports(json.dumps(evidence, sort_keys=True)).encode())
    return float(inside[-1]) if inside else wall, wall, verdicts, digest.hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--burners", type=int, default=0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--peer", action="store_true", help="also play each run in one process")
    opts = parser.parse_args()
    modes = list(MODES) if opts.peer else ["every core"]
    load = burners(opts.burners)
    inside: dict[str, list[float]] = {m: [] for m in modes}
    walls: dict[str, list[float]] = {m: [] for m in modes}
    bad = 0
    digests: set[str] = set()
    try:
        for n in range(opts.runs):
            for mode in modes:
                with tempfile.TemporaryDirectory() as folder:
                    took, wall, verdicts, digest = one_run(Path(folder), opts.seed, MODES[mode])
                inside[mode].append(took)
                walls[mode].append(wall)
                digests.add(digest)
                bad += sum(verdicts[v] for v in ("FAIL", "ERROR", "INCONCLUSIVE", "NON-STRICT"))
                print(
                    f"run {n + 1} ({mode}): {took:.2f} s inside pytest, {wall:.2f} s in all "
                    f"{dict(verdicts)} evidence {digest}",
                    flush=True,
                )
    finally:
        for proc in load:
            proc.kill()
            proc.wait()
    for mode in modes:
        print(
            f"{opts.runs} runs ({mode}) beside {opts.burners} burners: inside pytest median "
            f"{statistics.median(inside[mode]):.2f} s (min {min(inside[mode]):.2f}, max "
            f"{max(inside[mode]):.2f}); whole process median {statistics.median(walls[mode]):.2f} s"
        )
    if opts.peer:
        ratio = statistics.median(inside["every core"]) / statistics.median(inside["one process"])
        print(f"every core / one process, inside pytest: {ratio:.2f}")
    print(
        f"cases not PASS/UNSUPPORTED: {bad}"
        + (f"; distinct evidence: {len(digests)}" if opts.seed is not None else "")
    )


if __name__ == "__main__":
    main()
