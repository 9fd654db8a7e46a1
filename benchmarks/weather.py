"""The seed's experiment, timed: the reference and the textbook client under a weather.

    python benchmarks/weather.py [--weather seed-mix] [--streams 500] [--users 50] [--runs 3]

For each seed 0..runs-1 it plays the weather through both clients (virtual time) and
prints each run's completion, silent failures, duplicated tokens and wall time, then the
medians and the ratio of the clients' wall times. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

from conformance.weather import get_weather, run_weather
from pytest_streamcheck.targets._load import load_target

CLIENTS = ("reference", "textbook")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--weather", default="seed-mix")
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    weather = get_weather(args.weather)
    walls: dict[str, list[float]] = {c: [] for c in CLIENTS}
    completion: dict[str, list[float]] = {c: [] for c in CLIENTS}
    for seed in range(args.runs):
        for client in CLIENTS:
            started = time.monotonic()
            run = run_weather(
                load_target(client), weather, streams=args.streams, users=args.users, seed=seed
            )
            wall = time.monotonic() - started
            m = run.metrics
            if m is None:
                print(f"seed {seed} {client}: ERROR {run.error}")
                continue
            walls[client].append(wall)
            completion[client].append(m.completion)
            print(
                f"seed {seed} {client:9} {run.timing}: completed {m.completed}, silent "
                f"{m.failed_silently.count}, duplicated tokens {m.duplicated_tokens}, "
                f"played {run.played:.0f} s in {wall:.1f} s wall"
            )
    for client in CLIENTS:
        if walls[client]:
            print(
                f"{client:9} median wall {statistics.median(walls[client]):.1f} s, median "
                f"completion {statistics.median(completion[client]):.1%}"
            )
    if walls["reference"] and walls["textbook"]:
        ratio = statistics.median(walls["reference"]) / statistics.median(walls["textbook"])
        print(f"wall ratio reference/textbook: {ratio:.2f}")


if __name__ == "__main__":
    main()
