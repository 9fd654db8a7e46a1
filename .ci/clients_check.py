"""Check the shipped adapters' matrix run (.ci/clients): every column has a report, no
case is an ERROR, and no BACKOFF case is UNSUPPORTED (issue 9: judged for every
client where it applies)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def main(out: Path) -> int:
    matrix = json.loads((out / "matrix.json").read_text(encoding="utf-8"))
    problems: list[str] = []
    for column in matrix["columns"]:
        target = column["target"]
        report_path = column.get("report")
        if not report_path:
            problems.append(f"{target}: no report ({column.get('crashed')})")
            continue
        report = json.loads((out / report_path).read_text(encoding="utf-8"))
        cases = report["cases"]
        tally = Counter(c["verdict"] for c in cases)
        print(
            f"{target:22} {report['duration']:7.1f} s  "
            + ", ".join(
                f"{v} {tally[v]}"
                for v in ("PASS", "FAIL", "NON-STRICT", "UNSUPPORTED", "ERROR", "INCONCLUSIVE")
            )
        )
        # the FAILs by id, so a run's verdicts can be compared after CI deletes the reports
        failed = [c["id"] for c in cases if c["verdict"] == "FAIL"]
        print(f"  FAIL: {' '.join(failed) or 'none'}")
        for c in cases:
            if c["verdict"] == "ERROR":
                problems.append(f"{target}: {c['id']} ERROR: {c.get('reason')}")
            backoff = c["id"].startswith("SC-BACKOFF-")
            # not applicable (a transport the client has not, e.g. GET for an SDK) is fine
            applicable = c.get("skip") not in ("transport", "profile")
            if backoff and c["verdict"] == "UNSUPPORTED" and applicable:
                problems.append(f"{target}: {c['id']} UNSUPPORTED: {c.get('reason')}")
            if backoff and c["verdict"] == "INCONCLUSIVE":
                print(f"  note: {c['id']} INCONCLUSIVE: {c.get('reason')}")
    for p in problems:
        print(f"FAIL {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
