"""Resolve ``--streamcheck=TARGET`` into an adapter.

TARGET is ``reference``, ``exec:COMMAND``, ``browser:PAGE`` (an HTML file, or
``eventsource`` for the browser's native EventSource), ``module:factory``, a module that has
a ``streamcheck_adapter`` factory, or a name registered under the
``streamcheck.clients`` entry-point group.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from conformance._adapter import ClientAdapter
from pytest_streamcheck.targets._preflight import PREFLIGHT, TargetError

__all__ = ["ENTRY_POINT_GROUP", "describe_targets", "load_target"]

ENTRY_POINT_GROUP = "streamcheck.clients"
MODULE_FACTORY = "streamcheck_adapter"


def load_target(
    target: str, *, seed: int = 0, hello_timeout: float | None = None
) -> Callable[[], ClientAdapter]:
    """A factory for the adapter TARGET names; nothing is started yet. ``hello_timeout``:
    seconds an ``exec:`` process or a ``browser:`` page has to start and answer hello
    (None: ``HELLO_TIMEOUT``); a Python factory starts its own client."""
    from pytest_streamcheck.targets._exec_protocol import HELLO_TIMEOUT

    hello = HELLO_TIMEOUT if hello_timeout is None else hello_timeout
    target = target.strip()
    if not target:
        raise TargetError("empty --streamcheck target; " + describe_targets())
    if target == "reference":
        from pytest_streamcheck.targets._reference import ReferenceAdapter

        return functools.partial(ReferenceAdapter, seed=seed)  # it pickles: for a worker
    if target.startswith("exec:"):
        try:
            argv = shlex.split(target[len("exec:") :])
        except ValueError as exc:  # "No closing quotation", "No escaped character"
            raise TargetError(f"exec: cannot split the command into words: {exc}") from None
        if not argv:
            raise TargetError("exec: needs a command, e.g. exec:node client.mjs")
        from pytest_streamcheck.targets._exec import ExecAdapter

        return lambda: ExecAdapter(argv, hello_timeout=hello)
    if target.startswith("browser:"):
        from pytest_streamcheck.targets._browser_target import browser_factory

        return browser_factory(target[len("browser:") :], hello)
    registered = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if target in registered:
        return _factory(registered[target].load(), target, seed)
    return _factory(_import(target), target, seed)


def _import(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(
            f"cannot import {module_name!r} for --streamcheck={target}: {exc}; "
            + describe_targets()
        ) from exc
    name = attr or MODULE_FACTORY
    try:
        return getattr(module, name)
    except AttributeError:
        raise TargetError(
            f"module {module_name!r} has no {name!r}; name the factory as module:factory"
        ) from None


def _factory(obj: Any, target: str, seed: int) -> Callable[[], ClientAdapter]:
    if not callable(obj):
        raise TargetError(f"{target}: {obj!r} is not callable; expected an adapter factory")
    # What the factory needs that is missing (a library, an install) is a usage error
    # now, before any case, not the first case's ERROR (``PREFLIGHT`` below).
    check = getattr(obj, PREFLIGHT, None)
    if callable(check):
        try:
            check()
        except (ImportError, OSError) as exc:
            raise TargetError(f"{target}: {exc}") from None
    # A factory that takes ``seed`` gets the run's (--streamcheck-seed): it seeds the
    # client's randomness, so a run reproduces with the seed it prints.
    return _Factory(obj, target, {"seed": seed} if _takes_seed(obj) else {})


@dataclass(frozen=True)
class _Factory:
    """A user's factory, called with what it takes and its product checked; it pickles
    when the user's factory does, so a worker process can make the client too
    (``conformance._worker``)."""

    make: Callable[..., Any]
    target: str
    kwargs: dict[str, Any]

    def __call__(self) -> ClientAdapter:
        adapter = self.make(**self.kwargs)
        if not isinstance(adapter, ClientAdapter):
            missing = ", ".join(n for n in _MEMBERS if not hasattr(adapter, n))
            raise TargetError(
                f"{self.target}: the factory returned {type(adapter).__name__}, which lacks "
                f"{missing or 'none of them by name'} of the adapter's members "
                f"({', '.join(_MEMBERS)}; a no-op is fine where a capability is missing: "
                "docs/adapters.md)"
            )
        return adapter


# What ClientAdapter asks of an adapter, in its order: read off the protocol itself.
_MEMBERS = tuple(
    name
    for name in (*ClientAdapter.__annotations__, *vars(ClientAdapter))
    if not name.startswith("_")
    and (name in ClientAdapter.__annotations__ or callable(getattr(ClientAdapter, name)))
)


def _takes_seed(obj: Any) -> bool:
    try:
        parameters = inspect.signature(obj).parameters
    except (TypeError, ValueError):  # a builtin or C callable: call it plainly
        return False
    seed = parameters.get("seed")
    return seed is not None and seed.kind in (seed.POSITIONAL_OR_KEYWORD, seed.KEYWORD_ONLY)


def describe_targets() -> str:
    names = sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    registered = f"; registered: {', '.join(names)}" if names else ""
    return (
        "valid targets: reference, exec:COMMAND, browser:PAGE.html, browser:eventsource, "
        "module:factory, a module with "
        f"{MODULE_FACTORY}(){registered}"
    )
