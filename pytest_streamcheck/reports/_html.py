"""The HTML rendering of the JSON report: one self-contained page (inline CSS, JS and
SVG; no network) that a person opens first.

The verdict and coverage lead, then an area x verdict table, filters, and the cases:
those that need attention first and open, then the rest in catalog order. Each case
is a ``<details id="SC-…">`` with its transport on the row, what its check judged
drawn as a figure, and its timeline. All data is escaped.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from conformance._coverage import coverage
from conformance._verdict._rules import advice_for
from pytest_streamcheck.reports._figures import judged_figure, timeline
from pytest_streamcheck.reports._render import reproduce_command

__all__ = ["render_html"]

# Display order: what needs attention first.
VERDICT_ORDER = ("FAIL", "ERROR", "INCONCLUSIVE", "NON-STRICT", "PASS", "UNSUPPORTED")
ATTENTION = frozenset({"FAIL", "ERROR", "INCONCLUSIVE", "NON-STRICT"})
OPENED = frozenset({"FAIL", "ERROR", "INCONCLUSIVE"})
MEANING = {
    "PASS": "the requirement held",
    "FAIL": "a MUST was not met",
    "ERROR": "the harness or the adapter broke; not counted against the client",
    "INCONCLUSIVE": "the machine was too noisy to judge; not conformant until judged",
    "NON-STRICT": "a SHOULD was missed",
    "UNSUPPORTED": "the client or its profile lacks what the case needs",
}
NOISE_STATS = ("p50", "p99", "max")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _cls(verdict: str) -> str:
    """A CSS class for a verdict; unknown verdicts share one style."""
    return "v-" + verdict if verdict in VERDICT_ORDER else "v-OTHER"


def _verdicts(counts: Counter[str]) -> list[str]:
    """Known verdicts in display order, then any the kit did not know of when written."""
    return [v for v in VERDICT_ORDER if counts[v]] + sorted(set(counts) - set(VERDICT_ORDER))


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def render_html(report: dict[str, Any]) -> str:
    """The whole page for a ``streamcheck-report/1`` report."""
    cases: list[dict[str, Any]] = list(report.get("cases") or [])
    client = report.get("client") or {}
    name = f"{client.get('name', '')} {client.get('version', '')}".strip()
    return "\n".join(
        [
            "<!doctype html><html lang='en'><meta charset='utf-8'>",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<title>streamcheck: {_e(name)}</title>",
            f"<style>{CSS}</style>",
            "<body><main>",
            _headline(report, cases, name),
            _area_table(cases),
            _filters(cases),
            _case_list(report, cases),
            _weather(report),
            "</main>",
            f"<script>{SCRIPT}</script>",
            "</body></html>",
        ]
    )


def _weather(report: dict[str, Any]) -> str:
    """The run's --streamcheck-weather figures: the weather report's own page, framed
    (its styles and plots stay its own; the page stays one file with no script)."""
    runs = report.get("weather")
    if not runs:
        return ""
    from pytest_streamcheck.reports._weather import render_weather_html

    page = render_weather_html({"kit": report.get("kit"), "runs": runs})
    return (
        "<section id='weather'><h2>Network weather</h2>"
        f"<iframe title='network weather' srcdoc='{_e(page)}' "
        "style='width:100%;height:1600px;border:0'></iframe></section>"
    )


# -- the headline --------------------------------------------------------------------------


def _conformant(report: dict[str, Any], counts: Counter[str]) -> bool:
    """The report's own verdict, and never with an inconclusive case."""
    return bool(report.get("conformant")) and counts["INCONCLUSIVE"] == 0


def _headline(report: dict[str, Any], cases: Sequence[dict[str, Any]], name: str) -> str:
    counts = Counter(str(c.get("verdict")) for c in cases)
    ok = _conformant(report, counts)
    bad = ", ".join(f"{counts[v]} {v}" for v in _verdicts(counts) if v in OPENED)
    verdict = "Conformant" if ok else "NOT conformant"
    return (
        "<header>"
        f"<h1>{_e(name or 'streamcheck report')}</h1>"
        f"<p class='meta'>{_meta(report)}</p>"
        f"<div class='headline {'good' if ok else 'bad'}' id='headline'>"
        f"<span class='verdict'>{verdict}</span>"
        f"<span class='why'>{_e(bad or _lax(report, counts))}</span>{_worst(cases)}</div>"
        f"<p class='coverage' id='coverage'>{_coverage(report, cases)}</p>"
        f"{_bar(counts, len(cases))}"
        "</header>"
    )


def _worst(cases: Sequence[dict[str, Any]], limit: int = 10) -> str:
    """Links to the cases that made the run not conformant, the first few."""
    ids = [str(c.get("id")) for c in cases if c.get("verdict") in OPENED]
    if not ids:
        return ""
    links = ", ".join(f"<a href='#{_e(i)}'>{_e(i)}</a>" for i in ids[:limit])
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"<span class='ids'>{links}{more}</span>"


def _lax(report: dict[str, Any], counts: Counter[str]) -> str:
    if counts["NON-STRICT"]:
        strict = " (strict: counted as failures)" if report.get("strict") else ""
        return f"{counts['NON-STRICT']} SHOULD missed{strict}"
    return "every MUST held"


def _meta(report: dict[str, Any]) -> str:
    client = report.get("client") or {}
    profiles = ", ".join(
        f"{p.get('name')}@{p.get('version')}" for p in report.get("profiles") or []
    )
    plat = report.get("platform") or {}
    parts = [
        f"target <code>{_e(client.get('target', ''))}</code>",
        f"profiles {_e(profiles)}",
        f"timing {_e(report.get('timing'))}",
        f"seed {_e(report.get('seed'))} (<code>--streamcheck-seed={_e(report.get('seed'))}</code>)",
        f"run {_e(_duration(report.get('duration')))} at {_e(report.get('generated_at', ''))}",
        f"pytest-streamcheck {_e((report.get('kit') or {}).get('version', ''))}",
        f"Python {_e(plat.get('python', ''))} on {_e(plat.get('system', ''))}",
    ]
    if report.get("strict"):
        parts.append("strict")
    return " · ".join(parts)


def _coverage(report: dict[str, Any], cases: Sequence[dict[str, Any]]) -> str:
    """The report's coverage (a report without one: its cases, as the whole catalog)."""
    got = report.get("coverage")
    if not isinstance(got, dict):
        got = coverage(cases, {str(c["id"]): str(c["area"]) for c in cases}).to_json()
    text = (
        f"Judged <b>{got['judged']}</b> of <b>{got['applicable']}</b> applicable cases "
        f"({got['selected']} of the catalog's {got['total']} selected)"
    )
    why = got.get("why_not") or []
    return text + (f"; not conformant: {_e('; '.join(why))}" if why else "") + "."


def _bar(counts: Counter[str], total: int) -> str:
    """The run as one stacked bar, a segment per verdict."""
    if not total:
        return ""
    segments = "".join(
        f"<span class='{_cls(v)}' style='flex:{counts[v]}' title='{_e(v)}: {counts[v]}'>"
        f"{counts[v]} {_e(v)}</span>"
        for v in _verdicts(counts)
    )
    return f"<div class='stack' aria-label='cases by verdict'>{segments}</div>"


# -- the area x verdict table -------------------------------------------------------------


def _area_table(cases: Sequence[dict[str, Any]]) -> str:
    areas = list(dict.fromkeys(str(c.get("area")) for c in cases))
    counts = Counter((str(c.get("area")), str(c.get("verdict"))) for c in cases)
    verdicts = _verdicts(Counter(str(c.get("verdict")) for c in cases))
    head = "".join(
        f"<th class='{_cls(v)}' title='{_e(MEANING.get(v, v))}'>{_e(v)}</th>" for v in verdicts
    )
    rows = []
    for area in [*areas, ""]:  # "" is the total row
        cells = "".join(_count_cell(area, v, counts) for v in verdicts)
        total = sum(n for (a, _), n in counts.items() if a == area or not area)
        label = _e(area) if area else "total"
        rows.append(f"<tr><th>{label}</th>{cells}<td class='n'>{total}</td></tr>")
    return (
        "<section class='overview'><div><h2>By area</h2><table class='areas' id='areas'>"
        f"<tr><th>area</th>{head}<th>cases</th></tr>{''.join(rows)}</table></div>"
        f"{_legend(verdicts)}</section>"
    )


def _legend(verdicts: Sequence[str]) -> str:
    items = "".join(
        f"<dt><span class='v {_cls(v)}'>{_e(v)}</span></dt><dd>{_e(MEANING.get(v, ''))}</dd>"
        for v in verdicts
    )
    return f"<div><h2>Verdicts</h2><dl class='legend'>{items}</dl></div>"


def _count_cell(area: str, verdict: str, counts: Counter[tuple[str, str]]) -> str:
    n = counts[(area, verdict)] if area else sum(c for (_, v), c in counts.items() if v == verdict)
    if not n:
        return "<td class='n zero'>·</td>"
    return (
        f"<td class='n'><a href='#cases' data-area='{_e(area)}' data-verdict='{_e(verdict)}' "
        f"title='show these cases'>{n}</a></td>"
    )


# -- filters ---------------------------------------------------------------------------------


def _filters(cases: Sequence[dict[str, Any]]) -> str:
    verdicts = Counter(str(c.get("verdict")) for c in cases)
    fields = [
        ("verdict", [(v, v) for v in _verdicts(verdicts)], verdicts),
        ("area", _values(cases, "area"), Counter(str(c.get("area")) for c in cases)),
        ("level", _values(cases, "level"), Counter(str(c.get("level")) for c in cases)),
        ("transport", _transports(cases), Counter(str(c.get("transport")) for c in cases)),
    ]
    selects = "".join(_select(name, options, counts) for name, options, counts in fields)
    return (
        "<form class='filters' id='filters' onsubmit='return false'>"
        f"{selects}"
        "<label>search <input type='search' id='f-text' placeholder='id or title'></label>"
        "<button type='button' id='f-reset'>show all</button>"
        "<button type='button' id='f-open'>expand</button>"
        "<button type='button' id='f-close'>collapse</button>"
        "<span id='f-count' aria-live='polite'></span></form>"
    )


def _values(cases: Iterable[dict[str, Any]], key: str) -> list[tuple[str, str]]:
    return [(v, v) for v in dict.fromkeys(str(c.get(key)) for c in cases)]


def _transports(cases: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(v, v.upper()) for v in sorted({str(c.get("transport")) for c in cases})]


def _select(name: str, options: Sequence[tuple[str, str]], counts: Counter[str]) -> str:
    items = "".join(
        f"<option value='{_e(value)}'>{_e(label)} ({counts[value]})</option>"
        for value, label in options
    )
    return (
        f"<label>{name} <select id='f-{name}' data-key='{name}'>"
        f"<option value=''>all</option>{items}</select></label>"
    )


# -- the cases --------------------------------------------------------------------------------


def _case_list(report: dict[str, Any], cases: Sequence[dict[str, Any]]) -> str:
    first = sorted(
        (c for c in cases if c.get("verdict") in ATTENTION),
        key=lambda c: VERDICT_ORDER.index(str(c.get("verdict"))),
    )
    rest = [c for c in cases if c.get("verdict") not in ATTENTION]
    parts = ["<section id='cases'>"]
    if first:
        parts.append(f"<h2 class='group'>Needs attention ({len(first)})</h2>")
        parts += [_case(report, c) for c in first]
    parts.append(f"<h2 class='group'>{'Other cases' if first else 'Cases'} ({len(rest)})</h2>")
    parts += [_case(report, c) for c in rest]
    parts.append("<p id='none' hidden>No case matches these filters.</p></section>")
    return "\n".join(parts)


def _case(report: dict[str, Any], case: dict[str, Any]) -> str:
    verdict = str(case.get("verdict"))
    cid = str(case.get("id"))
    data = " ".join(
        f"data-{k}='{_e(case.get(k))}'" for k in ("verdict", "area", "level", "transport")
    )
    known = case.get("known_failure")
    tag = f"<span class='known' title='{_e(known)}'>known failure</span>" if known else ""
    return (
        f"<details class='case' id='{_e(cid)}' {data}{' open' if verdict in OPENED else ''}>"
        f"<summary><span class='v {_cls(verdict)}'>{_e(verdict)}</span> <b>{_e(cid)}</b> "
        f"<span class='tr'>{_e(str(case.get('transport', '')).upper())}</span> "
        f"<span class='lvl'>{_e(case.get('level', ''))}</span> "
        f"<span class='title'>{_e(case.get('title', ''))}</span>{tag}"
        f"<span class='dur'>{_e(_duration(case.get('duration')))}</span>"
        f"<a class='link' href='#{_e(cid)}' title='link to this case'>#</a></summary>"
        f"<div class='body'>{_body(report, case)}</div></details>"
    )


def _body(report: dict[str, Any], case: dict[str, Any]) -> str:
    parts = [
        f"<p class='req'>{_e(case.get('requirement', ''))}</p>",
        f"<p class='src'>{_e(case.get('source', ''))} · profile {_e(case.get('profile'))} · "
        f"timing {_e(case.get('timing'))} · took {_e(_duration(case.get('duration')))}</p>",
    ]
    if case.get("known_failure"):
        parts.append(f"<p class='note'>Known failure: {_e(case['known_failure'])}</p>")
    if case.get("expected") is not None:
        parts.append(
            "<dl class='eo'>"
            f"<dt>expected</dt><dd>{_e(case.get('expected'))}</dd>"
            f"<dt>observed</dt><dd>{_e(case.get('observed', ''))}</dd></dl>"
        )
    if case.get("reason"):
        parts.append(f"<pre class='reason'>{_e(case['reason'])}</pre>")
    if case.get("verdict") in ("FAIL", "NON-STRICT"):
        parts.append(_advice(str(case.get("area", ""))))
    parts.append(
        f"<p class='repro'>reproduce: <code>{_e(reproduce_command(report, case))}</code></p>"
    )
    parts += [_judged(case), _timeline(case), _details(case), _noise(case.get("noise"))]
    parts.append(_raw_timeline(case.get("timeline")))
    return "".join(parts)


def _advice(area: str) -> str:
    """How clients fix a failure of this area (the app-level verdict's advice)."""
    items = "".join(f"<dt>{_e(t)}</dt><dd>{_e(a)}</dd>" for t, a in advice_for(area))
    return f"<h3>How to fix it</h3><dl class='advice'>{items}</dl>" if items else ""


def _raw_timeline(lines: Any) -> str:
    """The timeline as text, folded away behind a button: the drawing comes first."""
    if not lines:
        return ""
    return (
        f"<button type='button' class='raw-toggle'>timeline as text ({len(lines)} lines)"
        f"</button><pre class='raw' hidden>{_e(chr(10).join(map(str, lines)))}</pre>"
    )


def _judged(case: dict[str, Any]) -> str:
    figure = judged_figure(case)
    if figure is None:
        return ""
    note = f"<figcaption>{_e(figure.note)}</figcaption>" if figure.note else ""
    return f"<figure class='judged'><h3>{_e(figure.title)}</h3>{figure.svg}{note}</figure>"


def _timeline(case: dict[str, Any]) -> str:
    svg = timeline(case)
    return f"<figure class='timeline'><h3>Timeline</h3>{svg}</figure>" if svg else ""


def _details(case: dict[str, Any]) -> str:
    details = [str(d) for d in case.get("details") or [] if d]
    if not details:
        return ""
    return "<h3>Details</h3><pre class='details'>" + _e("\n".join(details)) + "</pre>"


def _noise(noise: Any) -> str:
    """The lag measured on each loop while the case ran (seconds, shown in ms)."""
    if not isinstance(noise, dict) or not noise:
        return ""
    loops = {str(k): v if isinstance(v, dict) else {} for k, v in noise.items()}
    counted = any("samples" in stats for stats in loops.values())
    rows = []
    for loop, stats in loops.items():
        cells = "".join(f"<td class='n'>{_lag(stats.get(k))}</td>" for k in NOISE_STATS)
        if counted:
            cells += f"<td class='n'>{_e(stats.get('samples', '-'))}</td>"
        rows.append(f"<tr><th>{_e(loop.replace('_', ' '))}</th>{cells}</tr>")
    head = "".join(f"<th>{k}</th>" for k in NOISE_STATS) + ("<th>samples</th>" if counted else "")
    return (
        "<h3>Machine noise during the case</h3><table class='noise'>"
        f"<tr><th>loop lag (ms)</th>{head}</tr>{''.join(rows)}</table>"
    )


def _lag(value: Any) -> str:
    return f"{value * 1000:.1f}" if isinstance(value, int | float) else "-"


CSS = """
:root{--fail:#c62828;--pass:#2e7d32;--lax:#ef6c00;--unsup:#757575;--error:#6a1b9a;
--inc:#8d6e00;--line:#ddd;--soft:#f6f7f8}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#212121}
main{max-width:1280px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:0 0 2px}h2{font-size:17px;margin:22px 0 8px}
h3{font-size:13px;margin:12px 0 4px;color:#444}
code{font:12px ui-monospace,monospace;background:var(--soft);padding:0 3px}
.meta{color:#555;margin:0 0 10px;font-size:12.5px}
.headline{display:flex;align-items:baseline;gap:16px;padding:10px 16px;border-radius:6px}
.headline.bad{background:#fdecea;border-left:6px solid var(--fail)}
.headline.good{background:#e8f5e9;border-left:6px solid var(--pass)}
.headline .verdict{font-size:26px;font-weight:700;white-space:nowrap}
.raw-toggle{font:inherit;font-size:12px;margin:8px 0 2px}
.headline.bad .verdict{color:var(--fail)}.headline.good .verdict{color:var(--pass)}
.headline .why{font-size:16px;white-space:nowrap}
.coverage{margin:8px 0 6px}
.stack{display:flex;height:22px;border-radius:4px;overflow:hidden;font-size:11.5px}
.stack span{white-space:nowrap;padding:2px 6px;min-width:max-content}
.overview{display:flex;flex-wrap:wrap;gap:0 48px;align-items:flex-start}
dl.legend{display:grid;grid-template-columns:auto 1fr;gap:4px 10px;margin:0;max-width:34em}
dl.legend dd{margin:0;color:#444}
.v-PASS{background:var(--pass);color:#fff}.v-FAIL{background:var(--fail);color:#fff}
.v-NON-STRICT{background:var(--lax);color:#fff}.v-UNSUPPORTED{background:var(--unsup);color:#fff}
.v-ERROR{background:var(--error);color:#fff}.v-OTHER{background:#455a64;color:#fff}
.v-INCONCLUSIVE{background:repeating-linear-gradient(135deg,#ffe082 0 6px,#e0e0e0 6px 12px);
color:#4e3b00!important;outline:1px dashed var(--inc);outline-offset:-1px}
table{border-collapse:collapse}
.areas th,.areas td{padding:3px 10px;border-bottom:1px solid var(--line);text-align:left}
.areas th.v-PASS,.areas th.v-FAIL,.areas th[class^=v-]{font-size:12px}
.areas td.n{text-align:right;font-variant-numeric:tabular-nums}.areas td.zero{color:#bbb}
.areas tr:last-child th,.areas tr:last-child td{font-weight:600;border-bottom:0}
.areas a{color:inherit;font-weight:600}
.filters{position:sticky;top:0;z-index:2;background:#fff;display:flex;flex-wrap:wrap;
gap:6px 14px;align-items:center;padding:8px 0;border-bottom:1px solid var(--line);margin-top:18px}
.filters select,.filters input,.filters button{font:inherit;padding:2px 4px}
.filters select{max-width:9.5em}.filters input{width:9em}
.headline .ids{font-size:13px}.headline .ids a{color:inherit}
#f-count{color:#555;margin-left:auto}
details.case{border:1px solid var(--line);border-radius:5px;margin:6px 0;background:#fff}
details.case[open]{box-shadow:0 1px 3px #0002}
details.case>summary{cursor:pointer;padding:6px 10px;display:flex;gap:8px;align-items:center}
details.case>summary .title{flex:1;min-width:0}
.v{padding:1px 7px;border-radius:3px;font-size:12px;font-weight:600;min-width:7.5em;
text-align:center}
.tr,.lvl{font-size:11px;border:1px solid #999;border-radius:3px;padding:0 4px;color:#333}
.tr{background:#e3f2fd;border-color:#90caf9}
.known{font-size:11px;background:#fff8e1;border:1px solid #ffca28;border-radius:3px;padding:0 4px}
.dur{color:#666;font-size:12px;font-variant-numeric:tabular-nums;min-width:5em;text-align:right}
.link{color:#999;text-decoration:none}.link:hover{color:#000}
.body{padding:2px 14px 12px;border-top:1px solid var(--line)}
.req{margin:8px 0 2px}.src{color:#666;font-size:12px;margin:0 0 8px}
.repro code{font-size:12px;background:#f4f4f4;padding:1px 4px;user-select:all}
.advice dt{font-weight:600}.advice dd{margin:0 0 6px 16px}
.note{background:#fff8e1;padding:4px 8px}
dl.eo{display:grid;grid-template-columns:6em 1fr;gap:2px 10px;margin:6px 0}
dl.eo dt{color:#666}dl.eo dd{margin:0}
pre{background:var(--soft);padding:6px 8px;overflow:auto;font-size:12px;margin:4px 0}
pre.raw,pre.details,pre.reason{max-height:16em}
pre.details,pre.reason{white-space:pre-wrap}
figure{margin:8px 0}figcaption{color:#555;font-size:12px}
svg.chart{max-width:100%;height:auto;border:1px solid #e5e5e5;background:#fff;display:block}
svg.chart text{font:11px system-ui,sans-serif;fill:#333}
svg.chart text.unit{fill:#666;font-style:italic}
svg.chart .ax{stroke:#555}svg.chart .grid{stroke:#eee}
.noise th,.noise td{padding:1px 10px;text-align:left;font-size:12px}.noise td.n{text-align:right}
h2.group{border-bottom:2px solid #333;padding-bottom:2px}
@media print{.filters{display:none}details.case{break-inside:avoid}}
"""

# Filters: show the cases whose data-* match every chosen value (and the search text);
# a link to a case clears what hides it and opens it.
SCRIPT = """
(function(){
var cases=[].slice.call(document.querySelectorAll('details.case'));
var selects=[].slice.call(document.querySelectorAll('#filters select'));
var text=document.getElementById('f-text');
function apply(){
  var shown=0,q=text.value.trim().toLowerCase();
  cases.forEach(function(c){
    var ok=selects.every(function(s){return !s.value||c.dataset[s.dataset.key]===s.value;});
    if(ok&&q){ok=(c.id+' '+c.querySelector('.title').textContent).toLowerCase().indexOf(q)>=0;}
    c.hidden=!ok;if(ok)shown++;
  });
  document.querySelectorAll('h2.group').forEach(function(h){
    var n=h.nextElementSibling,any=false;
    while(n&&n.tagName==='DETAILS'){if(!n.hidden)any=true;n=n.nextElementSibling;}
    h.hidden=!any;
  });
  document.getElementById('none').hidden=shown>0;
  document.getElementById('f-count').textContent='showing '+shown+' of '+cases.length+' cases';
}
function reset(){selects.forEach(function(s){s.value='';});text.value='';apply();}
function set(key,value){
  var s=document.getElementById('f-'+key);
  if(s){s.value=value;}
}
selects.forEach(function(s){s.addEventListener('change',apply);});
text.addEventListener('input',apply);
document.getElementById('f-reset').addEventListener('click',reset);
document.getElementById('f-open').addEventListener('click',function(){
  cases.forEach(function(c){if(!c.hidden)c.open=true;});});
document.getElementById('f-close').addEventListener('click',function(){
  cases.forEach(function(c){c.open=false;});});
document.querySelectorAll('#areas a').forEach(function(a){
  a.addEventListener('click',function(ev){ev.preventDefault();reset();
    if(a.dataset.area)set('area',a.dataset.area);set('verdict',a.dataset.verdict);apply();
    document.getElementById('filters').scrollIntoView();});
});
function follow(){
  var c=location.hash&&document.getElementById(decodeURIComponent(location.hash.slice(1)));
  if(c&&c.classList.contains('case')){if(c.hidden)reset();c.open=true;c.scrollIntoView();}
}
document.querySelectorAll('.raw-toggle').forEach(function(b){
  b.addEventListener('click',function(){var pre=b.nextElementSibling;pre.hidden=!pre.hidden;});
});
window.addEventListener('hashchange',follow);
apply();follow();
})();
"""
