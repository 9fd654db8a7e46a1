"""Mutants of the SSE request and connection (SC-SSE-19..40)."""

from __future__ import annotations

from zoo import Expectation

MUTANTS: dict[str, Expectation] = {}
