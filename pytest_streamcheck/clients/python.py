"""The shipped Python adapters: ``pytest --streamcheck=openai`` and its siblings.

Each factory drives a real client library through its public API, as an application
does (docs/clients-python.md): the library's own retries and timeouts, which its
profile in ``conformance._client_profiles`` describes. The library is imported when
the factory is called, so this module loads without any of them; a missing one is an
``ImportError`` that names the extra to install.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_streamcheck.targets import TargetError, with_preflight

if TYPE_CHECKING:
    from conformance._adapter import ClientAdapter

__all__ = [
    "anthropic_adapter",
    "anthropic_async_adapter",
    "httpx_sse_adapter",
    "openai_adapter",
    "openai_async_adapter",
    "textbook_adapter",
]


def _needs(library: str, extra: str) -> Callable[[], None]:
    def check() -> None:
        if importlib.util.find_spec(library) is None:
            raise TargetError(
                f"the {extra} target drives the {library} library, which is not installed: "
                f"pip install 'pytest-streamcheck[{extra}]'"
            )

    return check


def _load(module: str, cls: str, extra: str, library: str) -> Any:
    """An instance of ``cls`` from ``module``; the library missing is an ImportError
    that names the extra to install (the module, or the adapter as it is made, imports it)."""
    try:
        found = importlib.import_module(f"pytest_streamcheck.clients.{module}")
        return getattr(found, cls)()
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] != library:
            raise
        raise ImportError(
            f"the {extra} target drives the {library} library, which is not installed: "
            f"pip install 'pytest-streamcheck[{extra}]'",
            name=library,
        ) from exc


@with_preflight(_needs("openai", "openai"))
def openai_adapter() -> ClientAdapter:
    """openai-python's ``OpenAI`` (sync, a thread per stream), streaming chat completions."""
    adapter: ClientAdapter = _load("_py_stainless", "OpenAIAdapter", "openai", "openai")
    return adapter


@with_preflight(_needs("openai", "openai"))
def openai_async_adapter() -> ClientAdapter:
    """openai-python's ``AsyncOpenAI``, streaming chat completions."""
    adapter: ClientAdapter = _load("_py_stainless", "OpenAIAsyncAdapter", "openai", "openai")
    return adapter


@with_preflight(_needs("anthropic", "anthropic"))
def anthropic_adapter() -> ClientAdapter:
    """anthropic-sdk-python's ``Anthropic`` (sync, a thread per stream), streaming messages."""
    adapter: ClientAdapter = _load("_py_stainless", "AnthropicAdapter", "anthropic", "anthropic")
    return adapter


@with_preflight(_needs("anthropic", "anthropic"))
def anthropic_async_adapter() -> ClientAdapter:
    """anthropic-sdk-python's ``AsyncAnthropic``, streaming messages."""
    adapter: ClientAdapter = _load(
        "_py_stainless", "AnthropicAsyncAdapter", "anthropic", "anthropic"
    )
    return adapter


@with_preflight(_needs("httpx_sse", "httpx-sse"))
def httpx_sse_adapter() -> ClientAdapter:
    """httpx-sse's ``aconnect_sse`` over an ``httpx.AsyncClient``, GET and POST."""
    adapter: ClientAdapter = _load("_py_httpx_sse", "HttpxSSEAdapter", "httpx-sse", "httpx_sse")
    return adapter


def textbook_adapter() -> ClientAdapter:
    """The seed article's textbook client (fetch, no resilience): the weather's baseline."""
    from pytest_streamcheck.clients._py_textbook import TextbookAdapter

    return TextbookAdapter()
