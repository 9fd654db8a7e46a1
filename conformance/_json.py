"""A frozen dataclass as report JSON: its fields, in order, as plain values.

The report's record of a result is its dataclass: a field added there is written
without a second list to keep in step. A field that needs another form (rounded,
converted) is given by name and keeps its place.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

__all__ = ["fields_json", "plain"]


def plain(value: Any) -> Any:
    """``value`` as JSON can hold it: tuples as lists, sets sorted, enums by value."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, frozenset | set):
        return sorted(plain(v) for v in value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


def fields_json(obj: Any, **given: Any) -> dict[str, Any]:
    """Every field of the dataclass ``obj`` by name, ``given`` ones as given."""
    return {
        f.name: given[f.name] if f.name in given else plain(getattr(obj, f.name))
        for f in dataclasses.fields(obj)
    }
