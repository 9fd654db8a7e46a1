"""The certification bundle (``--streamcheck-certify DIR``) and ``python -m
pytest_streamcheck verify DIR``: what the bundle holds, that verify finds it intact, that
an edit is caught, and that a run of part of the catalog is intact but not complete."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from plugin_targets._pytester import prepare, suite

import pytest_streamcheck
from pytest_streamcheck import _certify
from pytest_streamcheck._certify import catalog_fingerprint, verify, verify_main, write_bundle
from pytest_streamcheck.reports._badge import badge_label, badge_svg, grade_of

CASES = ("SC-RETRY-13", "SC-SSE-15")


@pytest.fixture
def bundle(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bundle of two cases against the reference, written by a real pytest run."""
    prepare(pytester, monkeypatch)
    result = pytester.runpytest(
        *suite("reference", *CASES), "--streamcheck-seed=5", "--streamcheck-certify=cert"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "streamcheck: certification bundle in cert"
            " (badge: partial 2/2 judged (2 of 208 selected))*"
        ]
    )
    return pytester.path / "cert"


def test_a_real_time_bundle_carries_the_measured_noise(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepare(pytester, monkeypatch)
    pytester.runpytest(
        *suite("reference", *CASES), "--streamcheck-timing=test", "--streamcheck-certify=cert"
    ).assert_outcomes(passed=2)
    manifest = _json(pytester.path / "cert" / "manifest.json")
    report = _json(pytester.path / "cert" / "report.json")
    # SC-SSE-15 plays for about 10 ms: on a loaded machine no probe may tick in it, and
    # a case with no sample is not counted as measured.
    sampled = sum(1 for c in report["cases"] if c.get("noise"))
    assert manifest["timing"]["mode"] == "test"
    assert manifest["noise"]["cases_measured"] == sampled >= 1
    assert set(manifest["noise"]["loops"]) == {"client", "proxy", "server"}
    assert manifest["noise"]["loops"]["server"]["worst_p99_case"] in CASES


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_streamcheck", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_bundle_holds_the_report_its_page_a_badge_and_a_manifest(bundle: Path) -> None:
    assert sorted(p.name for p in bundle.iterdir()) == [
        "badge.svg",
        "manifest.json",
        "report.html",
        "report.json",
    ]
    manifest, report = _json(bundle / "manifest.json"), _json(bundle / "report.json")
    assert manifest["schema"] == "streamcheck-certificate/1"
    assert manifest["kit"]["version"] == pytest_streamcheck.__version__
    assert manifest["catalog"] == catalog_fingerprint()
    assert manifest["catalog"]["cases"] == 208
    assert manifest["client"] == {
        "name": "streamcheck-reference",
        "version": pytest_streamcheck.__version__,
        "target": "reference",
    }
    assert manifest["profiles"] == ["seed-eventsource@1", "seed-fetch@1"]
    assert manifest["timing"]["mode"] == "virtual"  # the reference runs on the kit's loop
    assert manifest["timing"]["test_scale"] is None  # the profiles' own numbers
    assert manifest["seed"] == 5
    assert {"python", "system", "machine"} <= set(manifest["platform"])
    assert manifest["selection"]["keyword"]  # the -k the run was given
    assert manifest["coverage"]["grade"] == "partial 2/2 judged (2 of 208 selected)"
    # virtual time: exact stamps, no noise measured (test timing's noise: below)
    assert (manifest["noise"]["cases_exact"], manifest["noise"]["cases_measured"]) == (2, 0)
    assert manifest["noise"]["loops"] == {}
    for name in ("report.json", "report.html", "badge.svg"):
        data = (bundle / name).read_bytes()
        assert manifest["files"][name] == {
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
        }
    assert [c["id"] for c in report["cases"]] == list(CASES)
    assert "partial 2/2 judged" in (bundle / "badge.svg").read_text(encoding="utf-8")


def test_a_part_of_the_catalog_verifies_as_intact_but_not_complete(bundle: Path) -> None:
    result = verify(bundle)
    assert result.intact
    assert not result.complete
    assert result.exit_code == 1
    run = _cli("verify", str(bundle))
    assert run.returncode == 1, run.stdout + run.stderr
    out = run.stdout
    assert "intact: yes; complete: no" in out
    assert "NOT  selection: 2 of the catalog's 208 cases selected (keyword" in out
    assert "ok   judged: every applicable case was judged (2 of 2)" in out
    assert "that the client is conformant: 206 of the catalog's 208 cases not selected" in out
    assert "FAIL" not in out


def test_an_edited_report_is_caught(bundle: Path, tmp_path: Path) -> None:
    """An edit to report.json breaks its hash; an edit that also fixes the hash in the
    manifest still disagrees with the rest (the coverage, the page, the manifest)."""
    edited = tmp_path / "edited"
    shutil.copytree(bundle, edited)
    report_path = edited / "report.json"
    report = _json(report_path)
    report["cases"][0]["verdict"] = "FAIL"
    report_path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    run = _cli("verify", str(edited))
    assert run.returncode == 1
    assert "FAIL report.json: sha256" in run.stdout
    assert "intact: NO" in run.stdout
    assert "anything about the client: the bundle is not intact" in run.stdout

    manifest = _json(edited / "manifest.json")
    manifest["files"]["report.json"]["sha256"] = hashlib.sha256(
        report_path.read_bytes()
    ).hexdigest()
    (edited / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    again = verify(edited)
    assert not again.intact
    failed = {name for kind, ok, name, _ in again.checks if not ok}
    assert {"coverage", "report.html"} <= failed


def test_a_malformed_report_with_a_matching_hash_is_not_intact(bundle: Path) -> None:
    report = _json(bundle / "report.json")
    del report["cases"][0]["verdict"]
    (bundle / "report.json").write_text(json.dumps(report), encoding="utf-8")
    manifest = _json(bundle / "manifest.json")
    digest = hashlib.sha256((bundle / "report.json").read_bytes()).hexdigest()
    manifest["files"]["report.json"]["sha256"] = digest
    (bundle / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    run = _cli("verify", str(bundle))
    assert run.returncode == 1
    assert "FAIL report.json: malformed" in run.stdout


def test_a_bundle_of_another_catalog_is_not_intact(bundle: Path) -> None:
    manifest = _json(bundle / "manifest.json")
    manifest["catalog"]["sha256"] = "0" * 64
    (bundle / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    result = verify(bundle)
    assert not result.intact
    text = "\n".join(result.lines())
    assert "FAIL catalog: the bundle was made against another catalog" in text


def test_a_complete_bundle_verifies(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against a kit whose catalog were these two cases, the same run is complete and
    conformant: verify exits 0 and says what that shows, and what it does not."""
    from conformance._coverage import coverage

    report = _json(bundle / "report.json")
    small = {c["id"]: {k: c[k] for k in _certify.DEFINITION} for c in report["cases"]}
    monkeypatch.setattr(_certify, "catalog_definitions", lambda: small)
    covered = coverage(report["cases"], {i: d["area"] for i, d in small.items()}).to_json()
    report.update(coverage=covered, conformant=True)
    report["selection"] = {"ids": None, "keyword": None, "markexpr": None}
    whole = tmp_path / "whole"
    write_bundle(whole, report)
    result = verify(whole)
    assert (result.intact, result.complete, result.exit_code) == (True, True, 0)
    text = "\n".join(result.lines())
    assert "intact: yes; complete: yes" in text
    assert "badge.svg: says 'conformant'" in text
    assert (
        "every applicable case (2 of the catalog's 2) was judged and passed for "
        "streamcheck-reference 0.1.0 under profile seed-eventsource@1, seed-fetch@1 in virtual "
        "time at the profile's own durations" in text
    )
    assert "behaviour in real time: this run used virtual time" in text
    assert "behaviour on other networks" in text
    assert "they are not a signature (re-run with --streamcheck-seed=5" in text


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert _cli("verify").returncode == 2
    missing = _cli("verify", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert "not a directory" in missing.stderr
    empty = _cli("verify", str(tmp_path))  # a directory, but no bundle in it
    assert empty.returncode == 1
    assert "FAIL manifest.json: cannot be read" in empty.stdout


@pytest.mark.parametrize(
    ("coverage", "label", "grade"),
    [
        (
            {"conformant": True, "judged": 194, "applicable": 194, "selected": 206, "total": 206},
            "conformant",
            "conformant",
        ),
        (
            {
                "judged": 150,
                "applicable": 194,
                "selected": 206,
                "total": 206,
                "areas": [{"grade": "partial"}],
            },
            "partial 150/194 judged",
            "partial",
        ),
        (
            {
                "judged": 3,
                "applicable": 3,
                "selected": 206,
                "total": 206,
                "areas": [{"grade": "failing"}, {"grade": "undecided"}],
            },
            "failing",
            "failing",
        ),
        (
            {
                "judged": 2,
                "applicable": 3,
                "selected": 206,
                "total": 206,
                "areas": [{"grade": "undecided"}],
            },
            "undecided 2/3 judged",
            "undecided",
        ),
    ],
)
def test_the_badge_says_what_the_coverage_earns(
    coverage: dict[str, Any], label: str, grade: str
) -> None:
    assert (badge_label(coverage), grade_of(coverage)) == (label, grade)
    svg = badge_svg(coverage)
    assert svg.startswith("<svg xmlns=")
    assert f"streamcheck: {label}" in svg
    assert svg == badge_svg(coverage)  # deterministic


def _whole(bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verdict: str) -> Path:
    """The bundle's run as a complete one, against a kit whose catalog were its two cases,
    with its first case's verdict set to ``verdict``."""
    from conformance._coverage import coverage

    report = _json(bundle / "report.json")
    small = {c["id"]: {k: c[k] for k in _certify.DEFINITION} for c in report["cases"]}
    monkeypatch.setattr(_certify, "catalog_definitions", lambda: small)
    report["cases"][0]["verdict"] = verdict
    covered = coverage(report["cases"], {i: d["area"] for i, d in small.items()}).to_json()
    report.update(coverage=covered, conformant=covered["conformant"])
    report["selection"] = {"ids": None, "keyword": None, "markexpr": None}
    whole = tmp_path / verdict
    write_bundle(whole, report)
    return whole


def _gate(directory: Path) -> tuple[int, int, str]:
    """verify without and with --require-conformant: both exit statuses, the second's text."""
    plain, gated = io.StringIO(), io.StringIO()
    return (
        verify_main(directory, out=plain),
        verify_main(directory, require_conformant=True, out=gated),
        gated.getvalue(),
    )


def test_require_conformant_refuses_a_complete_bundle_of_a_failing_client(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, gated, text = _gate(_whole(bundle, tmp_path, monkeypatch, "FAIL"))
    assert (plain, gated) == (0, 1)  # intact and complete evidence, of a client that fails
    assert "intact: yes; complete: yes; conformant: no" in text
    assert "--require-conformant: REFUSED: the client is NOT conformant: 1 FAIL" in text


def test_require_conformant_accepts_a_conformant_bundle(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, gated, text = _gate(_whole(bundle, tmp_path, monkeypatch, "PASS"))
    assert (plain, gated) == (0, 0)
    assert "intact: yes; complete: yes; conformant: yes" in text
    assert text.rstrip().endswith("--require-conformant: accepted")


def test_require_conformant_refuses_an_incomplete_bundle(bundle: Path) -> None:
    """From the command line, the option after the directory as a CI script writes it."""
    run = _cli("verify", str(bundle), "--require-conformant")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "intact: yes; complete: no; conformant: no" in run.stdout
    assert (
        "--require-conformant: REFUSED: the bundle is incomplete: 2 of the catalog's 208 "
        "cases selected" in run.stdout
    )


def test_require_conformant_refuses_a_bundle_that_is_not_intact(tmp_path: Path) -> None:
    run = _cli("verify", "--require-conformant", str(tmp_path))
    assert run.returncode == 1
    assert "--require-conformant: REFUSED: the bundle is not intact" in run.stdout


@pytest.mark.parametrize("depth", [60_000, 500])
def test_a_deeply_nested_manifest_is_refused_with_a_message(tmp_path: Path, depth: int) -> None:
    """Too deep for the parser, or deep enough to exhaust whatever reads it next."""
    nested = "[" * depth + "]" * depth
    (tmp_path / "manifest.json").write_text(
        f'{{"schema": "{_certify.SCHEMA}", "files": {nested}}}', encoding="utf-8"
    )
    run = _cli("verify", str(tmp_path))
    assert run.returncode == 1
    assert "Traceback" not in run.stderr, run.stderr
    assert "FAIL manifest.json: cannot be read: JSON nested" in run.stdout
    assert "intact: NO" in run.stdout


def test_a_deeply_nested_report_with_a_matching_hash_is_refused(bundle: Path) -> None:
    data = b'{"schema": "streamcheck-report/1", "x": ' + b"[" * 600 + b"]" * 600 + b"}"
    (bundle / "report.json").write_bytes(data)
    manifest = _json(bundle / "manifest.json")
    manifest["files"]["report.json"]["sha256"] = hashlib.sha256(data).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    result = verify(bundle)
    assert not result.intact
    assert any("report.json: cannot be read: JSON nested" in line for line in result.lines())


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
def test_a_manifest_that_is_a_fifo_is_not_read(tmp_path: Path) -> None:
    """A FIFO would block the read forever: refused by what it is, at once."""
    os.mkfifo(tmp_path / "manifest.json")
    result = verify(tmp_path)
    assert not result.intact
    assert (
        "FAIL manifest.json: cannot be read: is a FIFO (named pipe), not a regular file"
        in "\n".join(result.lines())
    )
