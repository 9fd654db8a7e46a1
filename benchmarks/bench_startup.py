"""Start-up of a pytest run with the kit installed: the time before the first case.

Each run is a fresh ``python -m pytest`` process. A probe plugin (``-p``, written to a
temporary directory) stamps the wall clock when the first test starts and when the last
one ends; the parent stamps the process start and its exit. Reported, as medians over
``--runs`` runs (modes interleaved):

- ``start``: process start to the first case starting (interpreter, pytest, plugins,
  the kit, collection, the runner's first server);
- ``cases``: first case start to last case end;
- ``tail``: last case end to the process exit (the summary, the reports, teardown).

Three workloads: the kit's ``pytest --streamcheck=reference -k SC-RETRY-1`` in an empty
directory (a user's run), the same in the checkout (its ini and ``tests/conftest.py``
load too), and a host project's plain ``pytest`` of one trivial test (no
``--streamcheck``), each in two
bytecode modes: ``no-cache`` (``PYTHONDONTWRITEBYTECODE=1``: nothing is cached, so every
module pytest rewrites is rewritten again) and ``cached`` (bytecode written to a
private ``PYTHONPYCACHEPREFIX``, warmed by one run first). The host run also lists the
heavy modules found in ``sys.modules`` at its end. ``--importtime`` adds the
``python -X importtime`` self time per top-level package of one no-cache run of the
first workload.

Run: python benchmarks/bench_startup.py [--runs 7] [--importtime]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("hypothesis", "faker", "hypercorn", "starlette", "httpx", "anyio", "h11")

PROBE = """
import json, os, sys, time
_first = None
_last = None
def pytest_runtest_logstart(nodeid, location):
    global _first
    if _first is None:
        _first = time.time()
def pytest_runtest_logfinish(nodeid, location):
    global _last
    _last = time.time()
def pytest_unconfigure(config):
    heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)
    with open(os.environ["STARTUP_PROBE_OUT"], "w") as f:
        json.dump({{"first": _first, "last": _last, "heavy": heavy}}, f)
"""

HOST_TEST = "def test_trivial():\n    assert 1 + 1 == 2\n"


def run_once(
    args: list[str], cwd: Path, env: dict[str, str], out: Path
) -> dict[str, float | list[str]]:
    env = {**env, "STARTUP_PROBE_OUT": str(out)}
    start = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "_startup_probe", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    end = time.time()
    if proc.returncode != 0:
        raise SystemExit(f"pytest {args} failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    probe = json.loads(out.read_text())
    return {
        "start": probe["first"] - start,
        "cases": probe["last"] - probe["first"],
        "tail": end - probe["last"],
        "total": end - start,
        "heavy": probe["heavy"],
    }


def environment(tmp: Path, cached: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp), env.get("PYTHONPATH")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if cached:
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def importtime(tmp: Path, env: dict[str, str]) -> list[tuple[str, float]]:
    """Self time of each top-level package in one ``-X importtime`` run, in seconds."""
    args = ["-p", "no:cacheprovider", "--streamcheck=reference", "-k", "SC-RETRY-1", "-q"]
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pytest", *args],
        cwd=tmp / "kit",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    totals: collections.Counter[str] = collections.Counter()
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.split("|")
        totals[name.strip().split(".")[0]] += int(own.split(":")[1])
    return [(name, us / 1e6) for name, us in totals.most_common(12)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to run in")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "_startup_probe.py").write_text(PROBE.format(HEAVY=HEAVY))
        (tmp / "kit").mkdir()  # no conftest, no ini: the suite alone
        host = tmp / "host"
        host.mkdir()
        (host / "test_host.py").write_text(HOST_TEST)
        out = tmp / "probe.json"
        kit_args = ["-p", "no:cacheprovider", "--streamcheck=reference", "-k", "SC-RETRY-1", "-q"]
        workloads = {
            "kit -k SC-RETRY-1": (kit_args, tmp / "kit"),
            "same, in the repo": (kit_args, opts.repo),
            "host, plain pytest": (["-p", "no:cacheprovider", "-q"], host),
        }
        modes = {"no-cache": environment(tmp, False), "cached": environment(tmp, True)}
        for args, cwd in workloads.values():  # warm the private bytecode cache
            run_once(args, cwd, modes["cached"], out)
        samples: dict[tuple[str, str], list[dict[str, float | list[str]]]] = {
            (w, m): [] for w in workloads for m in modes
        }
        for _ in range(opts.runs):
            for w, (args, cwd) in workloads.items():
                for m, env in modes.items():
                    samples[w, m].append(run_once(args, cwd, env, out))
        load = os.getloadavg()
        print(f"{opts.runs} runs each, medians in seconds; load {load[0]:.2f} {load[1]:.2f}")
        print(f"  {'workload':20s} {'bytecode':9s} {'start':>7s} {'cases':>7s} {'tail':>7s}")
        for (w, m), rows in samples.items():
            med = {k: statistics.median(float(r[k]) for r in rows) for k in ("start", "cases")}
            tail = statistics.median(float(r["tail"]) for r in rows)
            print(f"  {w:20s} {m:9s} {med['start']:7.3f} {med['cases']:7.3f} {tail:7.3f}")
        for w in workloads:
            heavy = samples[w, "cached"][-1]["heavy"]
            print(f"  heavy modules at the end of '{w}': {', '.join(heavy) or 'none'}")
        if opts.importtime:
            print("import self time per top-level package, one no-cache kit run:")
            for pkg, seconds in importtime(tmp, modes["no-cache"]):
                print(f"  {pkg:28s} {seconds:6.3f}")


if __name__ == "__main__":
    main()
