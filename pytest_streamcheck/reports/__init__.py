"""What a run writes for people and tools to read, in one room: the JSON report, the
terminal summary and failure text, JUnit fields, the HTML page with its figures and
charts, and the badge.

- ``_report``: the JSON report (``Reporter``, ``build_report``, ``report_row``) and the
  terminal summary's lines;
- ``_render``: the terminal's text: the summary table, a failure, the reproduce command;
- ``_junit``: the suite's classes and notes in pytest's ``--junitxml``;
- ``_html``, ``_figures``, ``_charts``: the self-contained HTML page and its SVG;
- ``_badge``: a run's grade as a word and as a badge.

Every writer reads the rows the JSON report holds, so a page, a badge or a matrix made
later from a saved report says what the run said. Importing this package imports
nothing (each name is loaded from its module on first use): the plugin loads only the
writers a run asks for.
"""

from typing import TYPE_CHECKING

from conformance.reference._exports import lazy_getattr

if TYPE_CHECKING:
    from pytest_streamcheck.reports._badge import badge_label, badge_svg, grade_of
    from pytest_streamcheck.reports._figures import judged_figure, timeline
    from pytest_streamcheck.reports._html import render_html
    from pytest_streamcheck.reports._junit import JunitFields
    from pytest_streamcheck.reports._render import (
        render_failure,
        render_summary,
        reproduce_command,
    )
    from pytest_streamcheck.reports._report import (
        SCHEMA,
        Reporter,
        build_report,
        report_row,
        summary_lines,
    )

# private module -> the public names it provides
_MODULES = {
    "_report": ("SCHEMA", "Reporter", "build_report", "report_row", "summary_lines"),
    "_render": ("render_failure", "render_summary", "reproduce_command"),
    "_junit": ("JunitFields",),
    "_html": ("render_html",),
    "_figures": ("judged_figure", "timeline"),
    "_badge": ("badge_label", "badge_svg", "grade_of"),
    "_weather": (
        "WEATHER_SCHEMA",
        "check_weather_paths",
        "render_weather_html",
        "weather_lines",
        "weather_report",
        "weather_table",
        "write_weather_report",
    ),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "SCHEMA",
    "WEATHER_SCHEMA",
    "JunitFields",
    "Reporter",
    "badge_label",
    "badge_svg",
    "build_report",
    "check_weather_paths",
    "grade_of",
    "judged_figure",
    "render_failure",
    "render_html",
    "render_summary",
    "render_weather_html",
    "report_row",
    "reproduce_command",
    "summary_lines",
    "timeline",
    "weather_lines",
    "weather_report",
    "weather_table",
    "write_weather_report",
]
__getattr__ = lazy_getattr(__name__, _EXPORTS)
