"""The compatibility matrix: clients as columns, the catalog's cases as rows
(docs/matrix.md). No pytest here: each target runs in a pytest subprocess of its own.

``run_targets`` plays each target as ``python -m pytest --streamcheck=TARGET`` in the
caller's folder, so relative paths in a target (``exec:node client.mjs``) mean what they
mean in the caller's shell, but with the folder's pytest configuration left out (no ini
file, no conftest.py) unless asked for; N at once, each with a time limit. Output options
passed through (``--junitxml``) are moved next to each target's report. ``load_column``
reads a JSON report back; ``build_matrix`` turns columns into the matrix's JSON, and
``render_markdown``/``render_html`` draw that JSON. Everything in the matrix comes from
the reports (a crashed target's column says why it has none, a column where nothing was
judged says which ERROR stopped it): the same reports render the same bytes.
"""

from __future__ import annotations

import html
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_streamcheck import __version__
from pytest_streamcheck.reports._badge import COLORS, badge_label, grade_of

__all__ = [
    "SCHEMA",
    "Column",
    "build_matrix",
    "errored",
    "load_column",
    "moved_outputs",
    "pytest_argv",
    "render_html",
    "render_markdown",
    "run_targets",
    "slug",
    "write_matrix",
]

SCHEMA = "streamcheck-matrix/1"
DEFAULT_JOBS = 2
DEFAULT_TIMEOUT = 3600.0  # seconds a target may take (a real-timing run of the catalog)
VERDICT_CLASSES = ("PASS", "FAIL", "NON-STRICT", "UNSUPPORTED", "ERROR", "INCONCLUSIVE")
JUDGED = ("PASS", "FAIL", "NON-STRICT")
# Options whose value is a file (or folder) a run writes: each target gets its own, next
# to its report, instead of all of them writing (in turn) the one the caller named.
OUTPUT_OPTIONS = (
    "--junitxml",
    "--junit-xml",
    "--streamcheck-certify",
    "--report-log",
    "--html",
    "--json-report-file",
)
# The matrix names these itself for each target (DIR/NAME.json, DIR/NAME.html).
OWN_OPTIONS = ("--streamcheck-report", "--streamcheck-html")


@dataclass(frozen=True)
class Column:
    """One client of the matrix: its report (None when the target crashed), where its
    report and HTML report lie (relative to the matrix's directory), and why it crashed."""

    target: str
    report: dict[str, Any] | None
    json_path: str | None
    html_path: str | None
    crashed: str | None = None


def slug(target: str) -> str:
    """A file name for a target: ``zoo:gives_up_at_once`` -> ``zoo_gives_up_at_once``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", target).strip("._") or "target"
    return name[:80]


def _slugs(targets: Sequence[str]) -> list[str]:
    """A distinct file name for each target, in order."""
    seen: dict[str, int] = {}
    names = []
    for target in targets:
        base = slug(target)
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return names


def _rel(path: Path, out: Path) -> str:
    return Path(os.path.relpath(path.resolve(), out.resolve())).as_posix()


def load_column(path: Path, out: Path, target: str | None = None) -> Column:
    """The column of the JSON report at ``path``; its HTML report is the file beside it
    with the suffix ``.html``, when there is one."""
    page = path.with_suffix(".html")
    html_path = _rel(page, out) if page.is_file() else None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(report, dict) or not isinstance(report.get("cases"), list):
            raise ValueError("not a streamcheck report (no cases)")
    except (OSError, ValueError) as exc:
        return Column(
            target or str(path), None, _rel(path, out), html_path, f"unreadable report: {exc}"
        )
    name = target or str((report.get("client") or {}).get("target") or path.stem)
    return Column(name, report, _rel(path, out), html_path)


def isolation(folder: Path) -> list[str]:
    """pytest options that leave a folder's pytest configuration out of a run started
    there: no ini file (``-c`` the null device: no pytest.ini, tox.ini, setup.cfg or
    pyproject.toml is read), no conftest.py, and the folder itself as rootdir."""
    return ["-c", os.devnull, f"--rootdir={folder}", "--noconftest"]


def pytest_argv(
    target: str, args: Sequence[str], *, folder: Path, project: bool = False
) -> list[str]:
    """``python -m pytest`` for the suite against ``target``, run in ``folder``: the
    folder's own pytest configuration only when ``project``; never a .pytest_cache."""
    isolated = [] if project else isolation(folder)
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        *isolated,
        f"--streamcheck={target}",
        *args,
    ]


def own_options(extra: Sequence[str]) -> list[str]:
    """The options in ``extra`` that the matrix sets itself for each target."""
    return sorted({a.partition("=")[0] for a in extra if a.partition("=")[0] in OWN_OPTIONS})


def moved_outputs(extra: Sequence[str], out: Path, name: str) -> list[str]:
    """``extra`` with the path of each output option (``--junitxml=junit.xml``) moved to
    ``OUT/NAME.BASENAME`` (``OUT/reference.junit.xml``): one per target, beside its report."""
    args: list[str] = []
    rest = iter(extra)
    for arg in rest:
        option, eq, value = arg.partition("=")
        if option not in OUTPUT_OPTIONS:
            args.append(arg)
        elif eq:
            args.append(f"{option}={_beside(value, out, name)}")
        else:  # --junitxml PATH; a missing PATH stays missing, for pytest to refuse
            path = next(rest, None)
            args += [option] if path is None else [option, _beside(path, out, name)]
    return args


def _beside(value: str, out: Path, name: str) -> str:
    return str((out / f"{name}.{Path(value).name or 'output'}").resolve())


# Lines of a crashed run's output that say nothing about the crash.
_NOISE = re.compile(r"Warning|warnings\.warn|^The event loop scope|^=+$|^-+$")


def _tail(text: str, lines: int = 2) -> str:
    """The last lines a crashed run printed, warnings left out."""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip() and not _NOISE.search(ln.strip())]
    return " | ".join(kept[-lines:])[:300]


def _exit(code: int | None) -> str:
    if code is not None and code < 0:
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


def run_target(
    target: str,
    name: str,
    out: Path,
    *,
    timeout: float,
    extra: Sequence[str] = (),
    project: bool = False,
) -> tuple[Column, float]:
    """Run one target in the caller's folder; its column and its wall time.

    The run's output goes to ``OUT/NAME.log``, its reports to ``OUT/NAME.json`` and
    ``OUT/NAME.html``, its other outputs beside them (``moved_outputs``). A target that
    exits without writing its report (it crashed, or its arguments were refused) or
    outlives ``timeout`` gets a column that says so.
    """
    report, page, log = out / f"{name}.json", out / f"{name}.html", out / f"{name}.log"
    for stale in (report, page):
        stale.unlink(missing_ok=True)
    own = ["-q", "--streamcheck-report", str(report.resolve()), "--streamcheck-html"]
    args = [*own, str(page.resolve()), *moved_outputs(extra, out, name)]
    started = time.monotonic()
    crashed: str | None = None
    with log.open("wb") as sink:
        process = subprocess.Popen(
            pytest_argv(target, args, folder=Path.cwd(), project=project),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a timeout ends the run and every process it started
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(process)
            crashed = f"timed out after {timeout:g} s (killed)"
            code = None
    seconds = time.monotonic() - started
    if crashed is None and (code not in (0, 1) or not report.is_file()):
        said = _tail(log.read_text(encoding="utf-8", errors="replace"))
        crashed = f"{_exit(code)} without a report" + (f"; its last output: {said}" if said else "")
    if crashed is not None:
        return Column(target, None, None, None, crashed), seconds
    return load_column(report, out, target), seconds


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.kill()
    process.wait()


def run_targets(
    targets: Sequence[str],
    out: Path,
    *,
    jobs: int = DEFAULT_JOBS,
    timeout: float = DEFAULT_TIMEOUT,
    extra: Sequence[str] = (),
    project: bool = False,
    say: Callable[[str], None] = print,
) -> list[Column]:
    """Run every target, ``jobs`` at once; the columns in the order of ``targets``."""
    out.mkdir(parents=True, exist_ok=True)
    names = _slugs(targets)

    def one(index: int) -> Column:
        column, seconds = run_target(
            targets[index], names[index], out, timeout=timeout, extra=extra, project=project
        )
        log = f"(log: {out / names[index]}.log)"
        if column.crashed:
            say(f"matrix: {targets[index]}: CRASHED after {seconds:.1f} s: {column.crashed} {log}")
        elif why := errored(column.report or {}):
            say(f"matrix: {targets[index]}: NOTHING JUDGED after {seconds:.1f} s: {why} {log}")
        else:
            headline = _headline(column.report or {})
            say(f"matrix: {targets[index]}: done in {seconds:.1f} s: {headline}")
        return column

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, range(len(targets))))


def errored(report: Mapping[str, Any]) -> str | None:
    """Why a report judged nothing, when ERROR is why: no case PASS, FAIL or NON-STRICT and
    at least one ERROR (a client that cannot start errs on every case). The most detailed
    ERROR's first line and the first error its output names. None otherwise."""
    cases = [c for c in report.get("cases") or [] if isinstance(c, dict)]
    errors = [str(c.get("reason") or "") for c in cases if c.get("verdict") == "ERROR"]
    if not errors or any(c.get("verdict") in JUDGED for c in cases):
        return None
    detailed = max(errors, key=lambda reason: len(reason.splitlines()))
    lines = [ln.strip() for ln in detailed.splitlines() if ln.strip()]
    said = (lines[0] + _cause(lines[1:])) if lines else "no reason given"
    every = "every case" if len(errors) == len(cases) else f"{len(errors)} of {len(cases)} cases"
    return f"{every} ERROR, none judged: {said}"[:400]


def _cause(lines: Sequence[str]) -> str:
    """The line of a client's quoted output (``| ...``) that names its error: the first
    that says error (Node's "Error: Cannot find module", ModuleNotFoundError), else the
    last."""
    quoted = [ln.lstrip("|").strip() for ln in lines if ln.startswith("|")]
    quoted = [ln for ln in quoted if ln]
    cause = next((ln for ln in quoted if "rror" in ln), quoted[-1] if quoted else "")
    return f" ({cause})" if cause else ""


# -- the matrix as data ----------------------------------------------------------------------


def _coverage(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's coverage; one computed from its cases when it has none (an old report)."""
    got = report.get("coverage")
    if isinstance(got, dict):
        return got
    from conformance._coverage import coverage

    cases = [c for c in report.get("cases") or [] if isinstance(c, dict)]
    return coverage(cases, {str(c["id"]): str(c["area"]) for c in cases}).to_json()


def _headline(report: Mapping[str, Any]) -> str:
    got = _coverage(report)
    verdict = (
        "conformant"
        if got.get("conformant")
        else "NOT conformant: " + "; ".join(got.get("why_not") or [])
    )
    return (
        f"judged {got.get('judged')} of {got.get('applicable')} applicable cases "
        f"({got.get('selected')} of the catalog's {got.get('total')} selected); {verdict}"
    )


def _column_json(index: int, column: Column) -> dict[str, Any]:
    report = column.report or {}
    client = report.get("client") or {}
    got = _coverage(report) if column.report is not None else None
    return {
        "key": f"c{index + 1}",
        "target": column.target,
        "client": {"name": client.get("name"), "version": client.get("version")}
        if client
        else None,
        "profiles": [f"{p.get('name')}@{p.get('version')}" for p in report.get("profiles") or []],
        "timing": report.get("timing"),
        "seed": report.get("seed"),
        "strict": report.get("strict"),
        "kit": (report.get("kit") or {}).get("version"),
        "generated_at": report.get("generated_at"),
        "report": column.json_path,
        "html": column.html_path,
        "crashed": column.crashed,
        "errored": None if column.report is None else errored(column.report),
        "coverage": None
        if got is None
        else {
            "judged": got.get("judged"),
            "applicable": got.get("applicable"),
            "selected": got.get("selected"),
            "total": got.get("total"),
            "conformant": bool(got.get("conformant")),
            "grade": badge_label(got),
            "kind": grade_of(got),  # conformant, failing, undecided or partial
            "headline": _headline(report),
        },
    }


def _catalog_key(case_id: str) -> tuple[int, str, int]:
    from conformance._case import catalog_key

    try:
        return catalog_key(case_id)
    except (ValueError, IndexError):
        return (999, case_id, 0)


def build_matrix(columns: Sequence[Column]) -> dict[str, Any]:
    """The matrix as JSON (schema ``streamcheck-matrix/1``): the columns, then per area
    (catalog order) its grade in each column and its cases with a cell per column."""
    by_column: list[dict[str, dict[str, Any]]] = []
    definitions: dict[str, dict[str, Any]] = {}
    for column in columns:
        rows = {}
        for case in (column.report or {}).get("cases") or []:
            if isinstance(case, dict) and "id" in case:
                rows[str(case["id"])] = case
                definitions.setdefault(str(case["id"]), case)
        by_column.append(rows)
    grades = [
        {str(a.get("area")): a for a in _coverage(c.report).get("areas") or []} if c.report else {}
        for c in columns
    ]
    areas: dict[str, list[str]] = {}
    for cid in sorted(definitions, key=_catalog_key):
        areas.setdefault(str(definitions[cid].get("area")), []).append(cid)
    return {
        "schema": SCHEMA,
        "kit": {"name": "pytest-streamcheck", "version": __version__},
        "columns": [_column_json(i, c) for i, c in enumerate(columns)],
        "areas": [
            {
                "area": area,
                "grades": [
                    _area_cell(g.get(area), c) for g, c in zip(grades, columns, strict=True)
                ],
                "cases": [
                    {
                        "id": cid,
                        "title": definitions[cid].get("title"),
                        "level": definitions[cid].get("level"),
                        "transport": definitions[cid].get("transport"),
                        "cells": [
                            _cell(rows.get(cid), c)
                            for rows, c in zip(by_column, columns, strict=True)
                        ],
                    }
                    for cid in ids
                ],
            }
            for area, ids in areas.items()
        ],
    }


def _area_cell(grade: Mapping[str, Any] | None, column: Column) -> dict[str, Any] | None:
    if column.report is None:
        return None
    if grade is None:
        return {"grade": "not selected", "judged": 0, "applicable": 0}
    return {k: grade.get(k) for k in ("grade", "judged", "applicable")}


def _cell(case: Mapping[str, Any] | None, column: Column) -> dict[str, Any] | None:
    if column.report is None:
        return None
    if case is None:
        return {"verdict": None, "href": None}
    href = f"{column.html_path}#{case['id']}" if column.html_path else None
    cell: dict[str, Any] = {"verdict": case.get("verdict"), "href": href}
    if case.get("known_failure"):
        cell["known"] = True
    if isinstance(case.get("factor"), int | float) and case["factor"] != 1:
        cell["factor"] = case["factor"]
    return cell


# -- rendering --------------------------------------------------------------------------------


def _label(column: Mapping[str, Any]) -> str:
    client = column.get("client") or {}
    return f"{client.get('name') or column['target']} {client.get('version') or ''}".strip()


def _cell_text(cell: Mapping[str, Any] | None) -> str:
    if cell is None:
        return "not run"
    if cell.get("verdict") is None:
        return "not selected"
    text = str(cell["verdict"])
    if cell.get("known"):
        text += " (known)"
    if cell.get("factor"):
        text += f" x{cell['factor']:g}"
    return text


def _md(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(matrix: Mapping[str, Any]) -> str:
    columns = matrix["columns"]
    lines = ["# streamcheck compatibility matrix", ""]
    lines += [
        "| column | client | target | profiles | timing | seed | judged/applicable | grade "
        "| report |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in columns:
        got = c.get("coverage") or {}
        judged = f"{got['judged']}/{got['applicable']}" if got else "-"
        grade = got.get("grade") if got else f"CRASHED: {c['crashed']}"
        if c.get("errored"):  # absent from a matrix.json older than the field
            grade = f"{grade}: {c['errored']}"
        link = (
            f"[{c['html'] or c['report']}]({c['html'] or c['report']})"
            if (c.get("html") or c.get("report"))
            else "-"
        )
        lines.append(
            f"| {c['key']} | {_md(_label(c))} | `{_md(c['target'])}` "
            f"| {_md(', '.join(c['profiles']) or '-')} | {_md(c['timing'] or '-')} "
            f"| {_md(c['seed'] if c['seed'] is not None else '-')} | {judged} "
            f"| {_md(grade)} | {link} |"
        )
    lines.append("")
    for c in columns:
        if c.get("coverage"):
            lines.append(
                f"- {c['key']} ({_md(_label(c))}, {_md(c.get('generated_at') or '')}): "
                f"{_md(c['coverage']['headline'])}"
                + (f"; {_md(c['errored'])}" if c.get("errored") else "")
            )
        else:
            lines.append(f"- {c['key']} ({_md(c['target'])}): CRASHED: {_md(c['crashed'])}")
    lines += [
        "",
        "| case | title | level | "
        + " | ".join(f"{c['key']} {_md(_label(c))}" for c in columns)
        + " |",
    ]
    lines.append("|---|---|---|" + "---|" * len(columns))
    for area in matrix["areas"]:
        grades = " | ".join(
            "not run" if g is None else f"**{g['grade']}** {g['judged']}/{g['applicable']} judged"
            for g in area["grades"]
        )
        lines.append(f"| **{_md(area['area'])}** | | | {grades} |")
        for case in area["cases"]:
            cells = " | ".join(
                f"[{_cell_text(cell)}]({cell['href']})"
                if cell and cell.get("href")
                else _cell_text(cell)
                for cell in case["cells"]
            )
            lines.append(f"| {case['id']} | {_md(case['title'])} | {case['level']} | {cells} |")
    return "\n".join(lines) + "\n"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


GRADE_CLASSES = {
    "passing": "g-pass",
    "partial": "g-partial",
    "failing": "g-fail",
    "undecided": "g-undecided",
}


def render_html(matrix: Mapping[str, Any]) -> str:
    """The matrix as one self-contained page (inline CSS; no script, no network)."""
    columns = matrix["columns"]
    head = "".join(_column_head(c) for c in columns)
    body = []
    for area in matrix["areas"]:
        grades = "".join(
            "<td class='crashed'>not run</td>"
            if g is None
            else f"<td class='grade {GRADE_CLASSES.get(str(g['grade']), 'g-other')}'>"
            f"{_e(g['grade'])} "
            f"<small>{_e(g['judged'])}/{_e(g['applicable'])} judged</small></td>"
            for g in area["grades"]
        )
        body.append(
            f"<tr class='area' id='area-{_e(area['area'])}'>"
            f"<th colspan='3'>{_e(area['area'])}</th>{grades}</tr>"
        )
        for case in area["cases"]:
            cells = "".join(_cell_html(cell) for cell in case["cells"])
            body.append(
                f"<tr><th class='id'>{_e(case['id'])}</th>"
                f"<td class='title'>{_e(case['title'])}</td>"
                f"<td class='lvl'>{_e(case['level'])}</td>{cells}</tr>"
            )
    return (
        "\n".join(
            [
                "<!doctype html><html lang='en'><meta charset='utf-8'>",
                "<meta name='viewport' content='width=device-width, initial-scale=1'>",
                "<title>streamcheck compatibility matrix</title>",
                f"<style>{CSS}</style>",
                "<body><main><h1>streamcheck compatibility matrix</h1>",
                f"<p class='meta'>pytest-streamcheck {_e(matrix['kit']['version'])} · "
                f"{len(columns)} client(s) · "
                "each cell links to the case in that client's HTML report</p>",
                "<table class='matrix'><thead><tr><th>case</th><th>title</th><th>level</th>"
                f"{head}</tr></thead><tbody>",
                *body,
                "</tbody></table></main></body></html>",
            ]
        )
        + "\n"
    )


def _column_head(c: Mapping[str, Any]) -> str:
    got = c.get("coverage")
    if not got:
        return (
            f"<th class='col crashed'><b>{_e(c['target'])}</b><br>"
            f"<span class='grade-tag' style='background:{COLORS['failing']}'>CRASHED</span>"
            f"<div class='why'>{_e(c['crashed'])}</div></th>"
        )
    grade = str(got.get("kind") or "partial")
    name = _e(_label(c))
    if c.get("html"):
        name = f"<a href='{_e(c['html'])}'>{name}</a>"
    return (
        f"<th class='col' title='{_e(got['headline'])}'><b>{name}</b><br>"
        f"<code>{_e(c['target'])}</code><br>{_e(', '.join(c['profiles']))}<br>"
        f"timing {_e(c['timing'])} · seed {_e(c['seed'])}<br>"
        f"judged {_e(got['judged'])}/{_e(got['applicable'])} · "
        f"<span class='grade-tag' style='background:{COLORS.get(grade, '#9f9f9f')}'>"
        f"{_e(got['grade'])}</span>"
        f"<div class='why'>{_e(got['headline'])}</div>"
        # the CSS stays as it was: pages rendered before this field keep their bytes
        + (f"<div class='why crashed'>{_e(c['errored'])}</div>" if c.get("errored") else "")
        + f"<div class='when'>{_e(c.get('generated_at') or '')}</div></th>"
    )


def _cell_html(cell: Mapping[str, Any] | None) -> str:
    if cell is None:
        return "<td class='crashed'>not run</td>"
    verdict = cell.get("verdict")
    if verdict is None:
        return "<td class='none'>·</td>"
    cls = f"v-{verdict}" if verdict in VERDICT_CLASSES else "v-OTHER"
    text = _e(_cell_text(cell))
    if cell.get("href"):
        text = f"<a href='{_e(cell['href'])}'>{text}</a>"
    return f"<td class='cell {cls}'>{text}</td>"


CSS = """
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#212121}
main{padding:12px 20px 40px}h1{font-size:20px;margin:0 0 4px}.meta{color:#555;margin:0 0 10px}
table.matrix{border-collapse:collapse}
.matrix th,.matrix td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
.matrix thead th{position:sticky;top:0;background:#fafafa;z-index:1}
th.col{min-width:11em;max-width:16em;font-weight:normal}th.col code{font-size:11px}
.why,.when{color:#666;font-size:11px}.grade-tag{color:#fff;padding:0 5px;border-radius:3px}
tr.area th,tr.area td{background:#eceff1;font-weight:600;border-top:2px solid #999}
td.title{max-width:28em}td.lvl{font-size:11px}th.id{white-space:nowrap;font-weight:600}
td.cell a{color:inherit;text-decoration:none;display:block}td.none{color:#bbb;text-align:center}
.v-PASS{background:#e8f5e9;color:#1b5e20}.v-FAIL{background:#c62828;color:#fff}
.v-NON-STRICT{background:#ffe0b2;color:#8a3b00}.v-UNSUPPORTED{background:#eee;color:#616161}
.v-ERROR{background:#6a1b9a;color:#fff}.v-INCONCLUSIVE{background:#fff3c4;color:#4e3b00}
.v-OTHER{background:#455a64;color:#fff}.crashed{background:#fdecea;color:#b71c1c}
.g-pass{color:#1b5e20}.g-fail{color:#c62828}.g-partial{color:#8a6d00}.g-undecided{color:#6a1b9a}
"""


def write_matrix(columns: Sequence[Column], out: Path) -> dict[str, Path]:
    """Write matrix.json, matrix.md and matrix.html into ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    matrix = build_matrix(columns)
    paths = {"json": out / "matrix.json", "md": out / "matrix.md", "html": out / "matrix.html"}
    paths["json"].write_text(json.dumps(matrix, indent=1) + "\n", encoding="utf-8")
    paths["md"].write_text(render_markdown(matrix), encoding="utf-8")
    paths["html"].write_text(render_html(matrix), encoding="utf-8")
    return paths
