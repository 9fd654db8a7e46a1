"""The certification bundle: ``--streamcheck-certify DIR`` writes it, ``python -m
pytest_streamcheck verify DIR`` checks it (docs/certification.md).

A bundle is four files: ``report.json`` (the run's JSON report), ``report.html`` (its
rendering), ``badge.svg`` (the grade its coverage earns, conformance._coverage) and
``manifest.json``, which names the kit, the catalog (and a sha256 of every case's
definition), the client, profiles, timing, platform, seed, selection, the noise the kit
measured, and the sha256 of the other three files. ``verify`` recomputes what it can from
``report.json`` and this kit's catalog and says what a reader may conclude, and what not.
The hashes make the files agree with each other; they are not a signature.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fake_servers._files import FileRefused, read_bytes_limited
from pytest_streamcheck import __version__
from pytest_streamcheck.reports._badge import badge_label, badge_svg

if TYPE_CHECKING:
    from pytest_streamcheck._session import StreamcheckSession
    from pytest_streamcheck.reports._report import Reporter

__all__ = [
    "FILES",
    "MANIFEST",
    "SCHEMA",
    "Certifier",
    "Verification",
    "build_manifest",
    "catalog_fingerprint",
    "verify",
    "write_bundle",
]

SCHEMA = "streamcheck-certificate/1"
REPORT_SCHEMA = "streamcheck-report/1"
MANIFEST = "manifest.json"
FILES = ("report.json", "report.html", "badge.svg")  # what the manifest hashes
# The fields of a case's definition, as the catalog registers it (Case.to_json).
DEFINITION = ("id", "area", "title", "level", "requirement", "source", "transport", "needs")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def catalog_definitions() -> dict[str, dict[str, Any]]:
    """Every registered case's definition, by id, in catalog order."""
    from conformance._case import all_cases

    return {case.id: case.to_json() for case in all_cases()}


def catalog_fingerprint() -> dict[str, Any]:
    """This kit's catalog: its size and a sha256 over every case's definition (id, area,
    title, level, requirement, source, transport, needs; canonical JSON, catalog order).

    The catalog has no version number of its own: it ships with the kit, so ``version`` is
    the kit's, and the hash is what identifies the catalog.
    """
    definitions = list(catalog_definitions().values())
    return {
        "version": __version__,
        "cases": len(definitions),
        "sha256": _sha256(_canonical(definitions)),
    }


def report_bytes(report: Mapping[str, Any]) -> bytes:
    """report.json as the JSON report is written (``--streamcheck-report``)."""
    return json.dumps(report, indent=1, default=str).encode("utf-8")


def _profile_keys(report: Mapping[str, Any]) -> list[str]:
    return [f"{p.get('name')}@{p.get('version')}" for p in report.get("profiles") or []]


def noise_of(cases: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What the report keeps of the kit's own noise, over the run: per loop the samples
    and the worst p99 and max lag (seconds) with the case it came from; the cases
    re-judged at a coarser scale; the cases left INCONCLUSIVE."""
    loops: dict[str, dict[str, Any]] = {}
    measured = 0
    rejudged: list[dict[str, Any]] = []
    inconclusive: list[str] = []
    exact = 0
    for case in cases:
        cid = str(case.get("id"))
        if case.get("rejudged"):
            rejudged.append(
                {"id": cid, "factor": case.get("factor"), "verdict": case.get("verdict")}
            )
        if case.get("verdict") == "INCONCLUSIVE":
            inconclusive.append(cid)
        exact += case.get("timing") == "virtual"  # no noise to measure: exact stamps
        noise = case.get("noise")
        if not isinstance(noise, Mapping) or not noise:
            continue
        measured += 1
        for loop, stats in sorted(noise.items()):
            if not isinstance(stats, Mapping) or not stats.get("samples"):
                continue
            worst = loops.setdefault(
                str(loop),
                {
                    "samples": 0,
                    "worst_p99": 0.0,
                    "worst_p99_case": None,
                    "worst_max": 0.0,
                    "worst_max_case": None,
                },
            )
            worst["samples"] += int(stats.get("samples", 0))
            for stat in ("p99", "max"):
                value = stats.get(stat)
                if isinstance(value, int | float) and value > worst[f"worst_{stat}"]:
                    worst[f"worst_{stat}"], worst[f"worst_{stat}_case"] = value, cid
    return {
        "cases_exact": exact,
        "cases_measured": measured,
        "loops": dict(sorted(loops.items())),
        "rejudged": rejudged,
        "inconclusive": inconclusive,
    }


def build_manifest(
    report: Mapping[str, Any], files: Mapping[str, bytes], catalog: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The manifest of a bundle holding ``files`` (name -> bytes) rendered from ``report``."""
    client = report.get("client") or {}
    covered = report.get("coverage") or {}
    profiles = report.get("profiles") or []
    mode = report.get("timing")
    return {
        "schema": SCHEMA,
        "kit": report.get("kit"),
        "catalog": dict(catalog if catalog is not None else catalog_fingerprint()),
        "client": {k: client.get(k) for k in ("name", "version", "target")},
        "profiles": _profile_keys(report),
        "timing": {
            "mode": mode,
            "test_scale": {
                f"{p.get('name')}@{p.get('version')}": p.get("test_scale") for p in profiles
            }
            if mode == "test"
            else None,
            "generated_at": report.get("generated_at"),
            "duration": report.get("duration"),
        },
        "platform": report.get("platform"),
        "seed": report.get("seed"),
        "strict": report.get("strict"),
        "selection": report.get("selection"),
        "summary": report.get("summary"),
        "coverage": {
            "grade": badge_label(covered),
            "conformant": bool(covered.get("conformant")),
            **{k: covered.get(k) for k in ("judged", "applicable", "selected", "total", "why_not")},
        },
        "noise": noise_of(report.get("cases") or []),
        "files": {
            name: {"sha256": _sha256(data), "bytes": len(data)}
            for name, data in sorted(files.items())
        },
    }


def render_files(report: Mapping[str, Any]) -> dict[str, bytes]:
    """report.json, report.html and badge.svg for ``report``."""
    from pytest_streamcheck.reports._html import render_html

    return {
        "report.json": report_bytes(report),
        "report.html": render_html(dict(report)).encode("utf-8"),
        "badge.svg": badge_svg(report.get("coverage") or {}).encode("utf-8"),
    }


def write_bundle(directory: Path, report: Mapping[str, Any]) -> dict[str, Any]:
    """Write the bundle for ``report`` into ``directory``; returns the manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    files = render_files(report)
    manifest = build_manifest(report, files)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


class Certifier:
    """The plugin object of ``--streamcheck-certify DIR``: writes the bundle from the rows
    the reporter collected (on the xdist controller, or the only process)."""

    def __init__(self, state: StreamcheckSession, reporter: Reporter, directory: Path) -> None:
        self.state = state
        self.reporter = reporter
        self.directory = directory
        self.manifest: dict[str, Any] | None = None

    def pytest_sessionfinish(self, session: Any) -> None:
        if hasattr(session.config, "workerinput"):
            return  # the controller writes the bundle, with every worker's cases
        from pytest_streamcheck.reports._report import build_report

        duration = time.time() - self.reporter.started
        report = build_report(self.reporter.rows, self.state, duration)
        self.manifest = write_bundle(self.directory, report)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.manifest is not None:
            terminalreporter.write_line(
                f"streamcheck: certification bundle in {self.directory} "
                f"(badge: {self.manifest['coverage']['grade']}); check it with "
                f"python -m pytest_streamcheck verify {self.directory}"
            )


# -- verify ------------------------------------------------------------------------------


class UsageError(Exception):
    """verify was not given a bundle directory to check (exit 2)."""


@dataclass
class Verification:
    """What ``verify`` found: each check (intact: the files agree; complete: the run
    judged the whole catalog), whether the coverage recomputed from the cases says
    conformant, and what a reader may and may not conclude."""

    checks: list[tuple[str, bool, str, str]] = field(default_factory=list)  # kind, ok, name, detail
    can: list[str] = field(default_factory=list)
    cannot: list[str] = field(default_factory=list)
    coverage: dict[str, Any] | None = None  # recomputed from report.json's cases

    def add(self, kind: str, ok: bool, name: str, detail: str) -> bool:
        self.checks.append((kind, ok, name, detail))
        return ok

    @property
    def intact(self) -> bool:
        return all(ok for kind, ok, _, _ in self.checks if kind == "intact")

    @property
    def complete(self) -> bool:
        return self.intact and all(ok for kind, ok, _, _ in self.checks if kind == "complete")

    @property
    def conformant(self) -> bool:
        """Intact, complete, and the recomputed coverage says conformant."""
        return self.complete and bool((self.coverage or {}).get("conformant"))

    @property
    def exit_code(self) -> int:
        return 0 if self.intact and self.complete else 1

    def status(self, *, require_conformant: bool = False) -> int:
        """The exit status: ``exit_code``, and 1 unless conformant when that is required."""
        return 1 if require_conformant and not self.conformant else self.exit_code

    def refusal(self) -> str | None:
        """Why ``--require-conformant`` does not accept the bundle; None when it does."""
        if not self.intact:
            return "the bundle is not intact"
        if not self.complete:
            return "the bundle is incomplete: " + "; ".join(
                detail for kind, ok, _, detail in self.checks if kind == "complete" and not ok
            )
        if not self.conformant:
            why = (self.coverage or {}).get("why_not") or []
            return "the client is NOT conformant: " + "; ".join(why)
        return None

    def lines(self) -> list[str]:
        marks = {"intact": "FAIL", "complete": "NOT "}  # tampered, or only incomplete
        out = [
            f"  {'ok  ' if ok else marks[kind]} {name}: {detail}"
            for kind, ok, name, detail in self.checks
        ]
        out.append(_summary(self.intact, self.complete, self.conformant))
        if self.can:
            out.append("a reader can conclude:")
            out += [f"  - {line}" for line in self.can]
        if self.cannot:
            out.append("a reader cannot conclude:")
            out += [f"  - {line}" for line in self.cannot]
        return out


def _summary(intact: bool, complete: bool, conformant: bool) -> str:
    if not intact:
        return "intact: NO; complete: unknown (not intact); conformant: unknown"
    return (
        f"intact: yes; complete: {'yes' if complete else 'no'}; "
        f"conformant: {'yes' if conformant else 'no'}"
    )


MAX_BYTES = 256 * 2**20  # what verify reads of a file: far above a whole catalog's report
MAX_DEPTH = 64  # a bundle's JSON nests a dozen levels; deeper is not the kit's


class Unreadable(ValueError):
    """A bundle file that verify will not read: not a regular file, too large, too deep."""


def _read_bytes(path: Path) -> bytes:
    """A bundle file's bytes, at most MAX_BYTES of them, from a regular file only: a FIFO
    or a device (whose size says nothing) would never end."""
    if not path.exists():
        raise FileNotFoundError(path)  # a missing file is its own finding, as before
    try:
        return read_bytes_limited(path, MAX_BYTES, "bytes per bundle file")
    except FileRefused as refused:
        raise Unreadable(str(refused)) from None


def _parse_json(data: bytes) -> Any:
    """JSON no deeper than MAX_DEPTH: a deeper one would exhaust the recursion of whatever
    reads it next (the parser first)."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise Unreadable("JSON nested too deeply to parse") from None
    depth = _depth(value)
    if depth > MAX_DEPTH:
        raise Unreadable(f"JSON nested {depth} levels deep (a bundle's is at most {MAX_DEPTH})")
    return value


def _depth(value: Any) -> int:
    """How deep ``value`` nests lists and objects, without recursing."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack += [(child, level + 1) for child in children]
    return deepest


def verify(directory: Path) -> Verification:
    """Check the bundle in ``directory``; raises UsageError when it is not a directory."""
    if not directory.is_dir():
        raise UsageError(f"not a directory: {directory}")
    v = Verification()
    manifest = _read_manifest(v, directory)
    if manifest is None:
        return v
    files = _read_files(v, directory, manifest)
    report = _read_report(v, files)
    if report is None:
        return v
    _check_manifest(v, manifest, report, files)
    covered = v.coverage = _check_report(v, report)
    if covered is not None:
        _check_renderings(v, report, files, covered)
        _check_complete(v, report, covered)
    if v.intact:
        _conclusions(v, report, covered or {}, manifest)
    else:
        v.cannot.append(
            "anything about the client: the bundle is not intact (edited after it was "
            "written, or not written by this kit)"
        )
    return v


def _read_manifest(v: Verification, directory: Path) -> dict[str, Any] | None:
    try:
        manifest = _parse_json(_read_bytes(directory / MANIFEST))
    except (OSError, ValueError) as exc:
        v.add("intact", False, MANIFEST, f"cannot be read: {exc}")
        v.cannot.append("anything: the bundle has no readable manifest")
        return None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        got = manifest.get("schema") if isinstance(manifest, dict) else type(manifest).__name__
        v.add("intact", False, MANIFEST, f"schema {got!r}, expected {SCHEMA!r}")
        return None
    return manifest


def _read_files(v: Verification, directory: Path, manifest: Mapping[str, Any]) -> dict[str, bytes]:
    """The files the manifest hashes, each checked against its sha256."""
    files: dict[str, bytes] = {}
    for name in FILES:
        want = ((manifest.get("files") or {}).get(name) or {}).get("sha256")
        try:
            files[name] = data = _read_bytes(directory / name)
        except FileNotFoundError:
            v.add("intact", False, name, "missing")
            continue
        except (OSError, ValueError) as exc:
            v.add("intact", False, name, f"cannot be read: {exc}")
            continue
        got = _sha256(data)
        v.add(
            "intact",
            got == want,
            name,
            "sha256 matches the manifest"
            if got == want
            else f"sha256 {got[:16]}… but the manifest says {str(want)[:16]}…",
        )
    return files


def _read_report(v: Verification, files: Mapping[str, bytes]) -> dict[str, Any] | None:
    if "report.json" not in files:
        return None
    try:
        report = _parse_json(files["report.json"])
    except ValueError as exc:
        v.add("intact", False, "report.json", f"cannot be read: {exc}")
        return None
    if not isinstance(report, dict) or report.get("schema") != REPORT_SCHEMA:
        v.add("intact", False, "report.json", f"not a {REPORT_SCHEMA} report")
        return None
    return report


def _check_manifest(
    v: Verification,
    manifest: Mapping[str, Any],
    report: Mapping[str, Any],
    files: Mapping[str, bytes],
) -> None:
    mine = catalog_fingerprint()
    theirs = manifest.get("catalog") or {}
    v.add(
        "intact",
        theirs.get("sha256") == mine["sha256"],
        "catalog",
        f"the bundle's catalog ({theirs.get('cases')} cases) is this kit's "
        f"({mine['cases']} cases, sha256 {mine['sha256'][:16]}…)"
        if theirs.get("sha256") == mine["sha256"]
        else "the bundle was made against another catalog "
        f"(sha256 {str(theirs.get('sha256'))[:16]}…, {theirs.get('cases')} cases) than this "
        f"kit's ({mine['sha256'][:16]}…, {mine['cases']} cases, kit {__version__})",
    )
    expected = build_manifest(report, {k: files[k] for k in files if k in FILES}, catalog=theirs)
    differ = [
        k for k in expected if k not in ("catalog", "files") and expected[k] != manifest.get(k)
    ]
    v.add(
        "intact",
        not differ,
        "manifest",
        "client, profiles, timing, platform, seed, selection, coverage and noise match report.json"
        if not differ
        else f"{', '.join(differ)} differ from report.json",
    )


def _check_report(v: Verification, report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The cases are this catalog's, and the report's coverage follows from them."""
    from conformance._coverage import coverage

    catalog = catalog_definitions()
    cases = [c for c in report.get("cases") or [] if isinstance(c, dict)]
    unknown = [str(c.get("id")) for c in cases if c.get("id") not in catalog]
    changed = [
        str(c["id"])
        for c in cases
        if c.get("id") in catalog and {k: c.get(k) for k in DEFINITION} != catalog[c["id"]]
    ]
    ok = not unknown and not changed
    detail = f"{len(cases)} case(s), each as this kit's catalog defines it"
    if unknown:
        detail = f"not in this kit's catalog: {', '.join(unknown[:5])}"
    elif changed:
        detail = f"defined otherwise than in this kit's catalog: {', '.join(changed[:5])}"
    v.add("intact", ok, "cases", detail)
    if not ok:
        return None
    areas = {cid: str(d["area"]) for cid, d in catalog.items()}
    covered = coverage(cases, areas, strict=bool(report.get("strict"))).to_json()
    claimed = report.get("coverage")
    same = claimed == covered and report.get("conformant") == covered["conformant"]
    v.add(
        "intact",
        same,
        "coverage",
        "report.json's coverage and grade follow from its cases"
        if same
        else "report.json's coverage or conformant flag does not follow from its cases",
    )
    return covered


def _check_renderings(
    v: Verification,
    report: Mapping[str, Any],
    files: Mapping[str, bytes],
    covered: Mapping[str, Any],
) -> None:
    if "badge.svg" in files:
        ok = files["badge.svg"] == badge_svg(covered).encode("utf-8")
        v.add(
            "intact",
            ok,
            "badge.svg",
            f"says {badge_label(covered)!r}, as the coverage earns"
            if ok
            else f"does not say what the coverage earns ({badge_label(covered)!r})",
        )
    if "report.html" in files:
        made_by = (report.get("kit") or {}).get("version")
        if made_by != __version__:
            v.add(
                "intact",
                True,
                "report.html",
                f"not re-rendered (made by kit {made_by}, this is {__version__})",
            )
            return
        from pytest_streamcheck.reports._html import render_html

        ok = files["report.html"] == render_html(dict(report)).encode("utf-8")
        v.add(
            "intact",
            ok,
            "report.html",
            "is the rendering of report.json" if ok else "is not the rendering of report.json",
        )


def _check_complete(v: Verification, report: Mapping[str, Any], covered: Mapping[str, Any]) -> None:
    selection = report.get("selection") or {}
    narrowed = {k: val for k, val in selection.items() if val}
    whole = covered["selected"] == covered["total"] and not narrowed
    how = ", ".join(f"{k} {val!r}" for k, val in narrowed.items())
    v.add(
        "complete",
        whole,
        "selection",
        f"the whole catalog ({covered['total']} cases) was selected"
        if whole
        else f"{covered['selected']} of the catalog's {covered['total']} cases selected"
        + (f" ({how})" if how else ""),
    )
    judged = covered["judged"] == covered["applicable"] and covered["applicable"] > 0
    v.add(
        "complete",
        judged,
        "judged",
        f"every applicable case was judged ({covered['judged']} of {covered['applicable']})"
        if judged
        else f"{covered['judged']} of {covered['applicable']} applicable cases judged",
    )


def _phrase_timing(report: Mapping[str, Any]) -> str:
    if report.get("timing") == "real":
        return "at real timing (the profile's own durations)"
    if report.get("timing") == "virtual":
        return (
            "in virtual time at the profile's own durations (the server, the proxy and the "
            "client on one clock: every timing exact)"
        )
    scales = sorted({str(p.get("test_scale")) for p in report.get("profiles") or []})
    return (
        f"at test timing (every duration of the profile scaled by {'/'.join(scales)}, ratios kept)"
    )


def _conclusions(
    v: Verification,
    report: Mapping[str, Any],
    covered: Mapping[str, Any],
    manifest: Mapping[str, Any],
) -> None:
    client = report.get("client") or {}
    who = f"{client.get('name')} {client.get('version', '')}".strip()
    profiles = ", ".join(_profile_keys(report)) or "no profile"
    timing = _phrase_timing(report)
    plat = report.get("platform") or {}
    where = f"Python {plat.get('python')} on {plat.get('system')} {plat.get('machine')}"
    cases = [c for c in report.get("cases") or [] if isinstance(c, dict)]
    bad = {
        verdict: [str(c["id"]) for c in cases if c.get("verdict") == verdict]
        for verdict in ("FAIL", "NON-STRICT", "ERROR", "INCONCLUSIVE")
    }
    if v.complete:
        if covered.get("conformant"):
            v.can.append(
                f"every applicable case ({covered['applicable']} of the catalog's "
                f"{covered['total']}) was judged and passed for {who} under profile "
                f"{profiles} {timing}, on {where}: conformant"
            )
        else:
            v.can.append(
                f"every applicable case ({covered['applicable']} of {covered['total']}) was "
                f"judged for {who} under profile {profiles} {timing}, and the client is "
                "NOT conformant: " + "; ".join(covered.get("why_not") or [])
            )
    else:
        v.can.append(
            f"only what was judged: {covered.get('judged')} of {covered.get('applicable')} "
            f"applicable cases for {who} under profile {profiles} {timing} "
            f"({covered.get('selected')} of {covered.get('total')} selected)"
        )
        v.cannot.append(
            "that the client is conformant: "
            + "; ".join(covered.get("why_not") or ["the run was incomplete"])
        )
    for verdict, ids in bad.items():
        if ids:
            more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
            v.can.append(f"{len(ids)} {verdict}: {', '.join(ids[:5])}{more}")
    if bad["NON-STRICT"] and not report.get("strict"):
        v.can.append(
            "a SHOULD missed (NON-STRICT) does not stop conformance here; a strict run "
            "would fail on it"
        )
    skipped = covered.get("skipped") or {}
    inapplicable = sum(int(skipped.get(k, 0)) for k in ("transport", "profile"))
    noise = manifest.get("noise") or {}
    if noise.get("rejudged"):
        v.can.append(
            f"{len(noise['rejudged'])} case(s) were re-judged at a coarser scale after the "
            "kit's own noise hid the first verdict"
        )
    v.cannot += [
        f"behaviour under other profiles than {profiles}"
        + (
            f" ({inapplicable} selected case(s) did not apply to these profiles)"
            if inapplicable
            else ""
        ),
        *(
            ["behaviour at the profile's real durations (this run used test timing)"]
            if report.get("timing") not in ("real", "virtual")
            else []
        ),
        *(
            [
                "behaviour in real time: this run used virtual time, so the machine's "
                "scheduling and the network path's delays were not part of it"
            ]
            if report.get("timing") == "virtual"
            else []
        ),
        "behaviour on other networks: every fault was scripted by the kit's fake servers "
        "and fault proxy on 127.0.0.1",
        f"behaviour of other versions or builds of the client, or on other platforms than {where}",
        "who ran it: the sha256 sums make the files agree with each other and with this "
        "kit's catalog; they are not a signature (re-run with "
        f"--streamcheck-seed={report.get('seed')} to reproduce)",
    ]


def verify_main(directory: Path, *, require_conformant: bool = False, out: Any = None) -> int:
    """``verify DIR``: print the checks and conclusions; 0 intact and complete (and, with
    ``require_conformant``, conformant), 1 not, 2 usage."""
    import sys

    out = out or sys.stdout
    try:
        result = verify(directory)
    except UsageError as exc:
        print(f"verify: {exc}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, AttributeError, ValueError, RecursionError) as exc:
        print(f"streamcheck verify {directory}", file=out)  # a malformed report or manifest
        print(f"  FAIL report.json: malformed ({type(exc).__name__}: {exc})", file=out)
        print(_summary(intact=False, complete=False, conformant=False), file=out)
        return 1
    print(f"streamcheck verify {directory}", file=out)
    for line in result.lines():
        print(line, file=out)
    if require_conformant:
        refused = result.refusal()
        print(f"--require-conformant: {'REFUSED: ' + refused if refused else 'accepted'}", file=out)
    return result.status(require_conformant=require_conformant)
