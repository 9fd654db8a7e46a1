"""Mutants of the SSE field parsing and comments (SC-SSE-41..80)."""

from __future__ import annotations

from zoo import Expectation

MUTANTS: dict[str, Expectation] = {}
