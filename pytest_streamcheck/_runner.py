"""Moved to ``conformance._runner`` (``conformance.run_suite`` needs no pytest).

Kept so that existing imports of ``pytest_streamcheck._runner`` work; patch the
runner's constants on ``conformance._runner``, where they are read.
"""

from conformance._runner import (
    CaseResult,
    HarnessError,
    LoopBlocked,
    Rejudged,
    SuiteRunner,
    run_suite,
)

__all__ = ["CaseResult", "HarnessError", "LoopBlocked", "Rejudged", "SuiteRunner", "run_suite"]
