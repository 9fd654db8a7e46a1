"""The suite in pytest's ``--junitxml``: a classname per area (``streamcheck.RETRY``),
and a ``system-out`` line on cases that passed without being plain passes (NON-STRICT,
a stale known failure), which JUnit would otherwise show as passes."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from pytest_streamcheck._select import SUITE
from pytest_streamcheck.reports._report import REPORT_ATTR

__all__ = ["JunitFields"]


def _log_xml(config: pytest.Config) -> Any:
    """pytest's LogXML for this run (the object ``record_xml_attribute`` writes to), or
    None without --junitxml, on an xdist worker, or if pytest moved it."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - a future pytest
        return None
    return config.stash.get(xml_key, None)


class JunitFields:
    """Registered for every streamcheck run; acts only once --junitxml's LogXML exists
    (pytest configures it after this plugin)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)  # before LogXML records the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        prefix = f"{SUITE}::SC-"
        xml = _log_xml(self.config)
        if xml is None or not report.nodeid.startswith(prefix):
            return
        node = xml.node_reporter(report)
        area = report.nodeid.removeprefix(prefix).split("-")[0]
        # Attributes set before LogXML builds the testcase override its own.
        node.add_attribute("classname", f"{SUITE}.{area}")
        row = getattr(report, REPORT_ATTR, None)
        note = _note(row) if report.passed and isinstance(row, dict) else None
        if note is not None:
            out = ET.Element("system-out")
            out.text = note
            node.append(out)


def _note(row: dict[str, Any]) -> str | None:
    if row.get("stale"):
        return f"STALE known failure ({row['known_failure']}): the case passes now"
    if row["verdict"] == "NON-STRICT":
        return (
            f"NON-STRICT: a SHOULD was missed (fails only with --streamcheck-strict): "
            f"{row.get('observed', '')}"
        )
    return None
