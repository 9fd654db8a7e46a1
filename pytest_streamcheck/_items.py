"""One pytest item per case. The case runs in the item's setup, so a harness or
adapter failure shows as a pytest ERROR, while the verdict decides the call phase."""

from __future__ import annotations

from typing import Any

import pytest

from conformance._case import Case, Verdict
from pytest_streamcheck._render import render_failure
from pytest_streamcheck._runner import CaseResult, HarnessError, SuiteRunner
from pytest_streamcheck._session import StreamcheckSession

__all__ = ["CaseFailed", "CaseItem", "make_items"]


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
        self.keywords[case.area] = True
        self.keywords[case.level.value] = True

    def setup(self) -> None:
        runner: SuiteRunner = self._state.runner()
        self.result = runner.run(self.case)
        self._state.record(self.result)
        # Properties for --junitxml; added before an ERROR is raised so it carries them too.
        self.user_properties += [
            ("streamcheck_id", self.case.id),
            ("streamcheck_verdict", self.result.verdict.value),
            ("streamcheck_level", self.case.level.value),
        ]
        if self.result.verdict is Verdict.ERROR:
            raise HarnessError(f"{self.case.id}: {self.result.reason}")

    def runtest(self) -> None:
        result = self.result
        assert result is not None
        if result.verdict is Verdict.UNSUPPORTED:
            pytest.skip(f"UNSUPPORTED: {result.reason}")
        strict = self._state.settings.strict
        if result.verdict is Verdict.FAIL or (result.verdict is Verdict.NON_STRICT and strict):
            raise CaseFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return render_failure(excinfo.value.result)
        if isinstance(excinfo.value, HarnessError):
            return (
                f"ERROR (the harness or the adapter broke; not counted against the client)\n"
                f"{excinfo.value}"
            )
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "streamcheck", None, f"{self.case.id} [{self.case.level.value}] {self.case.title}"


class _Suite(pytest.Collector):
    def collect(self) -> list[pytest.Item]:  # pragma: no cover - items are made directly
        return []


def make_items(session: pytest.Session, state: StreamcheckSession) -> list[pytest.Item]:
    from conformance._case import all_cases

    suite = _Suite.from_parent(session, name="streamcheck", nodeid="streamcheck")
    items: list[pytest.Item] = []
    for case in all_cases():
        item = CaseItem.from_parent(suite, name=case.id, case=case, session_state=state)
        reason = state.known.reason_for(case.id)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=f"known failure: {reason}", strict=False))
        items.append(item)
    return items
