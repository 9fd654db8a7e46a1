"""Evidence as a report writes it: long texts are cut, everything else is kept."""

from __future__ import annotations

import json

from conformance._evidence import REPORT_TEXT_LIMIT, Delivery, Evidence


def test_a_huge_chunk_is_cut_in_the_report_and_says_how_much() -> None:
    big = "x" * (5 * 1024 * 1024)
    ev = Evidence(
        attempts=(),
        deliveries=(
            Delivery(stream="s1", kind="chunk", at=1.0, data=big, id="7"),
            Delivery(stream="s1", kind="chunk", at=2.0, data="small"),
        ),
    )
    rows = ev.to_json()["deliveries"]
    assert rows[0]["data"].startswith("x" * REPORT_TEXT_LIMIT)
    assert rows[0]["data"].endswith(f"({len(big) - REPORT_TEXT_LIMIT} more characters)")
    assert rows[0]["id"] == "7"
    assert rows[1]["data"] == "small"
    assert len(json.dumps(ev.to_json())) < 2 * REPORT_TEXT_LIMIT
