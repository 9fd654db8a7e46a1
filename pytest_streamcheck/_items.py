"""One pytest item per case. The case runs in the item's setup, so a harness or
adapter failure shows as a pytest ERROR, while the verdict decides the call phase.

The adapters close after this process's last case is played, before its row is made:
an ``aclose()`` that failed is that case's ``teardown`` in the report, and an ERROR at
its teardown, as a failing session fixture's teardown is in pytest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from _pytest._code.code import TerminalRepr  # the type pytest's repr_failure returns

from conformance._case import Case, Verdict
from conformance._result import CaseResult, HarnessError
from pytest_streamcheck._select import SUITE, case_marks
from pytest_streamcheck._session import StreamcheckSession
from pytest_streamcheck.reports._render import cap, render_failure

__all__ = [
    "LAST",
    "CaseFailed",
    "CaseItem",
    "CaseRepr",
    "keep_line",
    "make_items",
    "restore_repr",
    "upcoming",
]

ERROR_HEAD = "ERROR (the harness or the adapter broke; not counted against the client)"
INCONCLUSIVE_HEAD = (
    "INCONCLUSIVE (the kit's own measured noise hid the verdict, even re-judged at a "
    "coarser scale; neither a pass nor a failure of the client)"
)
# An adapter's message by default: its first lines and its last (an exec client's
# stderr tail ends with what matters, the exception).
ERROR_HEAD_ROWS, ERROR_TAIL_ROWS = 5, 20
LINE_ATTR = "streamcheck_line"  # a CaseRepr's one line, on the report: it crosses xdist
# On the item this process runs last (the plugin's pytest_runtest_protocol sets it).
LAST: pytest.StashKey[bool] = pytest.StashKey()


class Inconclusive(HarnessError):
    """A case the measured noise left undecided: shown as a pytest error, not a failure."""


class CaseFailed(AssertionError):
    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.case.id)
        self.result = result


class CaseItem(pytest.Item):
    def __init__(self, *, case: Case, session_state: StreamcheckSession, **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case
        self._state = session_state
        self.result: CaseResult | None = None
        for mark in case_marks(case):  # -m and -k read markers (not item.keywords)
            self.add_marker(mark)

    def setup(self) -> None:
        try:
            self.result = self._state.result(self.case, upcoming(self))
        except HarnessError as exc:  # the harness broke outside any case: an ERROR
            timing = self._state.settings.timing or "real"
            self.result = CaseResult(self.case, Verdict.ERROR, None, timing, reason=str(exc))
        if self.stash.get(LAST, False):  # the run's end: its row carries how closing went
            self.result = replace(self.result, teardown=self._state.close())
        self._state.record(self.result)
        # Properties for --junitxml; added before an ERROR is raised so it carries them too.
        self.user_properties += [
            ("streamcheck_id", self.case.id),
            ("streamcheck_verdict", self.result.verdict.value),
            ("streamcheck_level", self.case.level.value),
        ]
        if self.result.verdict is Verdict.ERROR:
            raise HarnessError(f"{self.case.id}: {self.result.reason}")
        if self.result.verdict is Verdict.INCONCLUSIVE:
            if self._state.settings.inconclusive == "skip":  # the headline still counts it
                pytest.skip(f"INCONCLUSIVE (not conformant): {self.result.reason}")
            raise Inconclusive(f"{self.case.id}: {self.result.reason}")

    def teardown(self) -> None:
        """The adapters' aclose() failure, on the case they closed after: an ERROR."""
        if self.result is not None and self.result.teardown:
            raise HarnessError(f"{self.case.id}: {self.result.teardown}")

    def runtest(self) -> None:
        result = self.result
        assert result is not None
        if result.verdict is Verdict.UNSUPPORTED:
            pytest.skip(f"UNSUPPORTED: {result.reason}")
        # A listed SHOULD miss is an expected failure too (xfailed), not a stale entry.
        listed = self._state.known.reason_for(self.case.id) is not None
        strict = self._state.settings.strict or listed
        if result.verdict is Verdict.FAIL or (result.verdict is Verdict.NON_STRICT and strict):
            raise CaseFailed(result)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        full = self.config.get_verbosity() >= 2
        error = excinfo.value
        if isinstance(error, CaseFailed):
            outcome = error.result.outcome
            line = f"{outcome.observed} (expected {outcome.expected})" if outcome else ""
            return CaseRepr(render_failure(error.result, full=full), _Crash(line))
        if isinstance(error, HarnessError):
            text = cap(str(error).splitlines(), ERROR_HEAD_ROWS, ERROR_TAIL_ROWS, full, "lines")
            line = text[0].removeprefix(f"{self.case.id}: ")
            head = INCONCLUSIVE_HEAD if isinstance(error, Inconclusive) else ERROR_HEAD
            return CaseRepr("\n".join([head, *text]), _Crash(line))
        # A bug in the kit: its traceback, without pytest's and pluggy's frames.
        return excinfo.getrepr(
            style="long" if full else "short",
            tbfilter=lambda info: info.traceback.filter(lambda e: not _internal(e.path)),
        )

    def reportinfo(self) -> tuple[str, int | None, str]:
        return SUITE, None, f"{self.case.id} [{self.case.level.value}] {self.case.title}"


@dataclass(frozen=True)
class _Crash:
    message: str

    def __str__(self) -> str:  # --tb=line
        return self.message


@dataclass(eq=False)
class CaseRepr(TerminalRepr):
    """A case's failure text, and the one line (``reprcrash.message``) that pytest's
    short summary, --tb=line and JUnit's message show; a plain string would be printed
    whole in the short summary on CI and with -vv."""

    text: str
    reprcrash: _Crash

    def toterminal(self, tw: Any) -> None:
        for row in self.text.splitlines():
            tw.line(row)


def keep_line(report: pytest.TestReport) -> None:
    """On the report of a failed case: its one line, which xdist would otherwise lose."""
    if isinstance(report.longrepr, CaseRepr):
        setattr(report, LINE_ATTR, report.longrepr.reprcrash.message)


def restore_repr(report: pytest.TestReport) -> None:
    """On the xdist controller: the text arrives as a string; make it a CaseRepr again."""
    line = getattr(report, LINE_ATTR, None)
    if isinstance(line, str) and isinstance(report.longrepr, str):
        report.longrepr = CaseRepr(report.longrepr, _Crash(line))


def upcoming(item: CaseItem) -> list[Case]:
    """The cases this process will run after ``item``, in order: what free lanes may
    play meanwhile. Under xdist a worker knows only the items it has been sent so far
    (its queue); pytest's own run knows them all (-x or --maxfail may still stop it
    early: a case played ahead and never reported is dropped)."""
    items = item.session.items
    queued = _xdist_queue(item.config)
    if queued is not None:
        ahead = [items[i] for i in queued if 0 <= i < len(items)]
    else:
        index = _index(item)
        ahead = items[index + 1 :] if index is not None else []
    return [x.case for x in ahead if isinstance(x, CaseItem)]


def _index(item: CaseItem) -> int | None:
    positions: dict[str, int] | None = getattr(item.session, _POSITIONS, None)
    if positions is None or len(positions) != len(item.session.items):
        positions = {x.nodeid: i for i, x in enumerate(item.session.items)}
        setattr(item.session, _POSITIONS, positions)
    return positions.get(item.nodeid)


_POSITIONS = "_streamcheck_positions"  # item node ids to their place in session.items


def _xdist_queue(config: pytest.Config) -> list[int] | None:
    """In an xdist worker, the indices (into session.items) it has been sent and has not
    run yet, next first; None outside xdist, or if xdist's worker cannot be read."""
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        torun = getattr(plugin, "torun", None)
        if type(plugin).__name__ != "WorkerInteractor" or torun is None:
            continue
        try:
            nxt = getattr(plugin, "nextitem_index", None)
            with torun.lock() as pending:
                queued = [i for i in pending if isinstance(i, int)]
        except Exception:  # another xdist: play ahead of nothing, as one lane would
            return []
        return ([nxt] if isinstance(nxt, int) else []) + queued
    return []


def _internal(path: Path | str) -> bool:
    return bool({"_pytest", "pluggy"} & set(Path(path).parts))


class _Suite(pytest.Collector):
    def collect(self) -> list[pytest.Item]:  # pragma: no cover - items are made directly
        return []


def make_items(session: pytest.Session, state: StreamcheckSession) -> list[pytest.Item]:
    """The suite's items: every case, or those named as ``streamcheck::ID``; a known
    failure is xfailed (strict under --streamcheck-strict, else as ``xfail_strict`` says)."""
    suite = _Suite.from_parent(session, name=SUITE, nodeid=SUITE)
    items: list[pytest.Item] = []
    for case in state.cases:
        if state.selected is not None and case.id not in state.selected:
            continue
        item = CaseItem.from_parent(suite, name=case.id, case=case, session_state=state)
        reason = state.known.reason_for(case.id)
        if reason is not None:
            strict = {"strict": True} if state.settings.strict else {}
            # raises: only the verdict is expected to fail; an ERROR stays an error.
            mark = pytest.mark.xfail(reason=f"known failure: {reason}", raises=CaseFailed, **strict)
            item.add_marker(mark)
        items.append(item)
    from pytest_streamcheck._weather_item import weather_items

    return [*items, *weather_items(suite, state)]
