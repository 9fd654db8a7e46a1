"""A package façade's lazy names (PEP 562): each is loaded from its private module on
first use, so that importing the package imports nothing else.

Shared by ``conformance.reference``, ``conformance`` and ``conformance.timing``. It
lives here because the reference client may import nothing of the kit, and ``import
conformance`` may load only the reference client; ``fake_servers`` (the bottom layer)
and ``pytest_streamcheck`` (whose import may load neither ``conformance`` nor
``fake_servers``) keep their own few lines.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name in ``exports`` is loaded from the
    submodule it maps to on first use, and kept in the package so that it is looked up
    only once; any other name raises AttributeError.

    Write ``__getattr__ = lazy_getattr(__name__, {"Name": "_module", ...})`` in the
    package's ``__init__``, after importing the same names under ``TYPE_CHECKING``.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
