"""Judge the async SDK adapters in virtual time and set their verdicts beside the
committed compatibility matrix's (made in real time): prints every case whose verdict
differs, and the wall time of each virtual run.

    python benchmarks/virtual_vs_matrix.py [openai-async anthropic-async httpx-sse]
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

from conformance import run_suite
from pytest_streamcheck.targets import load_target

MATRIX = Path(__file__).resolve().parent.parent / "docs" / "compatibility" / "matrix.json"


def committed(target: str) -> dict[str, str]:
    matrix = json.loads(MATRIX.read_text(encoding="utf-8"))
    column = next(i for i, c in enumerate(matrix["columns"]) if c["target"] == target)
    return {
        case["id"]: case["cells"][column]["verdict"]
        for area in matrix["areas"]
        for case in area["cases"]
    }


def main(targets: list[str]) -> None:
    for target in targets:
        real = committed(target)
        started = time.perf_counter()
        results = run_suite(load_target(target), timing="virtual", lanes=1)
        wall = time.perf_counter() - started
        virtual = {r.case.id: r.verdict.value for r in results}
        print(f"{target}: virtual {Counter(virtual.values())} in {wall:.1f} s wall")
        print(f"  real (committed matrix): {Counter(real.values())}")
        for case_id, verdict in virtual.items():
            if real.get(case_id) != verdict:
                print(f"  {case_id}: real {real.get(case_id)} -> virtual {verdict}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["openai-async", "anthropic-async", "httpx-sse"])
