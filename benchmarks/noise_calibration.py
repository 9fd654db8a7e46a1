"""Check the kit's noise model against the truth the reference client announces.

    python benchmarks/noise_calibration.py --rounds 5                 # quiet machine
    python benchmarks/noise_calibration.py --rounds 5 --burners 2     # 2 CPU burners beside
    python benchmarks/noise_calibration.py --rounds 5 --beside 3      # 3 lanes playing beside

The reference client announces every delay it draws (its "retrying" state carries it),
so for each of the jitter cases' 50 clients the harness's true share of a measured
wait is known: measured minus announced. The model (``conformance.timing``) claims
that share is at most ``measured - least``. This prints, per round and in all, how
often the claim held, the quantiles of the true share and of the model's allowance,
and how many waits the model called undecidable. A claim that fails is a possible
false failure: the figure to keep at zero.

``--beside N`` plays the catalog's shared cases on N more lanes (each its own server,
proxy and client, in this process) throughout, as a run with lanes would beside a
case that is not exclusive: the calibration then holds the model against the load
other lanes put on a case's loops (the GIL included), which its probes must see.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _load import Load, stop_signals

from conformance._case import all_cases, get_case
from conformance._profiles import get_profile
from conformance._runner import SuiteRunner
from conformance.timing import wait_between
from pytest_streamcheck.targets._reference import ReferenceAdapter

CASES = ("SC-BACKOFF-9", "SC-BACKOFF-10")


def _q(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def one_round(runner: SuiteRunner) -> tuple[list[float], list[float], int, list[str]]:
    shares: list[float] = []
    allowances: list[float] = []
    verdicts: list[str] = []
    misses = 0
    for case_id in CASES:
        result = runner.run(get_case(case_id))
        verdicts.append(f"{case_id}:{result.verdict.value}")
        ev = result.evidence
        if ev is None:
            continue
        announced = {
            d.stream: d.delay
            for d in ev.deliveries
            if d.kind == "state" and d.state == "retrying" and d.delay is not None
        }
        for i in range(50):
            atts = [a for a in ev.attempts if a.path == f"/v1/backoff/jitter/{i}"]
            delay = announced.get(f"j{i}")
            if len(atts) < 2 or delay is None:
                continue
            wait = wait_between(atts[0], atts[1], ev.noise)
            share = wait.measured - delay
            allowance = wait.measured - wait.least
            shares.append(share)
            allowances.append(allowance)
            misses += share > allowance or delay > wait.most
    return shares, allowances, misses, verdicts


def _beside(profiles: list, stop: threading.Event, played: list[int]) -> None:
    """One lane beside the calibration: the shared cases, over and over, until stopped."""
    runner = SuiteRunner(lambda: ReferenceAdapter(seed=7), profiles, seed=7).start()
    try:
        while not stop.is_set():
            for case in all_cases():
                if stop.is_set():
                    break
                if not case.exclusive:
                    runner.run(case)
                    played[0] += 1
    finally:
        runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--burners", type=int, default=0)
    parser.add_argument("--beside", type=int, default=0, help="lanes playing cases beside")
    args = parser.parse_args()
    profiles = [get_profile("seed-eventsource"), get_profile("seed-fetch")]
    all_shares: list[float] = []
    all_allow: list[float] = []
    total_misses = 0
    with stop_signals():
        load = Load(burners=args.burners)
        load.start()
        stop, played = threading.Event(), [0]
        lanes = [
            threading.Thread(target=_beside, args=(profiles, stop, played), daemon=True)
            for _ in range(args.beside)
        ]
        for lane in lanes:
            lane.start()
        runner = SuiteRunner(lambda: ReferenceAdapter(seed=7), profiles, seed=7).start()
        try:
            for r in range(1, args.rounds + 1):
                shares, allow, misses, verdicts = one_round(runner)
                all_shares += shares
                all_allow += allow
                total_misses += misses
                print(
                    f"round {r}: {len(shares)} waits, harness share p50 "
                    f"{statistics.median(shares) * 1e3:.1f} ms max {max(shares) * 1e3:.1f} ms; "
                    f"allowance p50 {statistics.median(allow) * 1e3:.1f} ms; "
                    f"model missed {misses}; {' '.join(verdicts)}",
                    flush=True,
                )
        finally:
            runner.close()
            stop.set()
            for lane in lanes:
                lane.join()
            load.stop()
    print(
        f"burners={args.burners} beside={args.beside} (cases played beside: {played[0]}): "
        f"{len(all_shares)} waits; true harness share p50/p99/max "
        f"{_q(all_shares, 0.5) * 1e3:.1f}/{_q(all_shares, 0.99) * 1e3:.1f}/"
        f"{max(all_shares) * 1e3:.1f} ms; model allowance p50/p99 "
        f"{_q(all_allow, 0.5) * 1e3:.1f}/{_q(all_allow, 0.99) * 1e3:.1f} ms; "
        f"share beyond allowance: {total_misses}"
    )


if __name__ == "__main__":
    main()
