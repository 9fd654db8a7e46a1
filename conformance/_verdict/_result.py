"""The verdict's results: Finding, Call and AppVerdict, and a rule's finding (make_finding).

``AppVerdict`` is the app-level verdict (findings about one test's client); a case's
PASS/FAIL is ``conformance.Verdict``. Each has one name, everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from conformance._json import fields_json
from conformance._verdict._rules import RULES, FindingLevel

__all__ = [
    "AppVerdict",
    "Call",
    "Finding",
    "make_finding",
]


@dataclass(frozen=True)
class Finding:
    """One way the client mishandled a fault, with the attempts that show it."""

    rule: str
    level: FindingLevel
    title: str
    source: str
    attempts: tuple[int, ...]  # ledger seq numbers
    observed: str
    advice: str
    call: int | None = None  # the logical call's number, when the finding is about one
    # True: the records fit the mistake and a correct client alike, because the load the
    # kit measured meanwhile could explain the difference. Neither a finding nor clean.
    undecided: bool = False

    def render(self) -> str:
        seqs = ", ".join(f"#{s}" for s in self.attempts) or "none"
        where = f"call {self.call}, " if self.call is not None else ""
        head = "UNDECIDED " if self.undecided else ""
        return (
            f"{head}{self.level} {self.rule}: {self.title} ({where}attempts {seqs})\n"
            f"    observed: {self.observed}\n"
            f"    source:   {self.source}\n"
            f"    advice:   {self.advice}"
        )

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class Call:
    """One logical call: the attempts that carried the same request, retries included."""

    number: int
    method: str
    path: str
    key: str  # what grouped them: the body fingerprint or the Idempotency-Key
    attempts: tuple[int, ...]
    outcomes: tuple[str, ...]  # per attempt, e.g. "429", "200, 5 chunks, done"

    def render(self) -> str:
        steps = " -> ".join(f"#{s} {o}" for s, o in zip(self.attempts, self.outcomes, strict=True))
        return f"call {self.number}: {self.method} {self.path} ({self.key}): {steps}"

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class AppVerdict:
    """Everything judged about one test's client: findings, the calls, what was not judged."""

    findings: tuple[Finding, ...]
    calls: tuple[Call, ...]
    not_judged: tuple[str, ...] = ()  # "RULE-ID: what the test would have to pass"
    profile: str | None = None
    app_output: str | None = None
    error: str | None = None
    # Rules the records could not decide under the measured load (``Finding.undecided``):
    # a wrong client must not pass because load hid its mistake, so these are not ok.
    undecided: tuple[Finding, ...] = ()

    @property
    def ok(self) -> bool:
        """No MUST finding, and no MUST rule left undecided."""
        return not any(f.level == "MUST" for f in (*self.findings, *self.undecided))

    @property
    def clean(self) -> bool:
        """No finding at all, and nothing undecided."""
        return not self.findings and not self.undecided

    def rules(self) -> tuple[str, ...]:
        """The rule ids found, in order."""
        return tuple(f.rule for f in self.findings)

    def assert_ok(self, strict: bool = False) -> None:
        """Raise AssertionError with the rendered verdict on a MUST finding (any, if strict)."""
        failed = not self.clean if strict else not self.ok
        if failed:
            raise AssertionError(self.render())

    def render(self) -> str:
        must = sum(f.level == "MUST" for f in self.findings)
        head = (
            f"streamcheck verdict: {len(self.findings)} finding(s) ({must} MUST, "
            f"{len(self.findings) - must} SHOULD)"
            if self.findings
            else "streamcheck verdict: clean"
            if not self.undecided
            else "streamcheck verdict: no finding"
        )
        if self.undecided:
            head += (
                f"; {len(self.undecided)} rule(s) undecided under the measured load "
                "(play the test again on a quieter machine)"
            )
        attempts = sum(len(c.attempts) for c in self.calls)
        produced = (
            "no app output given"
            if self.app_output is None
            else (f"app output {len(self.app_output)} chars")
        )
        lines = [
            head,
            f"judged {attempts} attempt(s) in {len(self.calls)} call(s); profile "
            f"{self.profile or 'none (seed defaults)'}; {produced}; error "
            f"{self.error if self.error is not None else 'none given'}",
            *(c.render() for c in self.calls),
            *(f.render() for f in self.findings),
            *(f.render() for f in self.undecided),
        ]
        if self.not_judged:
            lines.append("not judged: " + "; ".join(self.not_judged))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "findings": [f.to_json() for f in self.findings],
            "undecided": [f.to_json() for f in self.undecided],
            "calls": [c.to_json() for c in self.calls],
            "not_judged": list(self.not_judged),
            "profile": self.profile,
            "app_output": _clip(self.app_output),
            "error": self.error,
        }


def _clip(text: str | None, limit: int = 2000) -> str | None:
    """Long outputs stay readable in a report: the head, and how much was left out."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more chars)"


def make_finding(rule_id: str, attempts: Sequence[int], observed: str, **kw: Any) -> Finding:
    rule = RULES[rule_id]
    level: FindingLevel = kw.pop("level", rule.level)
    return Finding(
        rule=rule.id,
        level=level,
        title=rule.title,
        source=kw.pop("source", rule.source),
        attempts=tuple(attempts),
        observed=observed,
        advice=rule.advice,
        call=kw.pop("call", None),
        undecided=kw.pop("undecided", False),
    )
