"""What a target factory may say before anything starts: that it cannot be loaded.

A factory may carry a ``preflight()`` that raises ``TargetError`` (or ``ImportError``)
when what it drives is missing; the target is then refused at once, saying what to
install (``with_preflight``). Kept apart from the loader, which the targets' own modules
(the browser's, the shipped clients') would otherwise import back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["PREFLIGHT", "TargetError", "with_preflight"]

PREFLIGHT = "preflight"


class TargetError(ValueError):
    """A TARGET that cannot be loaded; the message says why and what is valid."""


_F = TypeVar("_F", bound=Callable[..., Any])


def with_preflight(check: Callable[[], None]) -> Callable[[_F], _F]:
    """Give an adapter factory its ``preflight`` (see PREFLIGHT)."""

    def mark(factory: _F) -> _F:
        setattr(factory, PREFLIGHT, check)
        return factory

    return mark
