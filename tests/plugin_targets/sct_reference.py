"""Async targets built on the kit's reference adapter, for the plugin's pytester tests.

Each factory names its client distinctly, so a test can tell from the header,
the summary or the report which target the plugin really loaded.
"""

from __future__ import annotations

from dataclasses import replace

from conformance._adapter import AdapterRequest, StreamSink
from conformance.reference import ClientPolicy
from pytest_streamcheck.targets._reference import ReferenceAdapter

__all__ = [
    "CRASH",
    "crashes_on_post",
    "declares_pipeline",
    "make_adapter",
    "retries_401",
    "streamcheck_adapter",
]

CRASH = "the adapter crashed on purpose"


class _Named(ReferenceAdapter):
    """The reference adapter under another client name."""

    def __init__(self, name: str) -> None:
        super().__init__(seed=0)
        self.info = replace(ReferenceAdapter.info, name=name)


class Retries401(_Named):
    """A client that wrongly retries 401: its matrix moves 401 from ``never`` to ``extra``."""

    def __init__(self) -> None:
        super().__init__("sct-retries-401")

    async def configure(self, policy: ClientPolicy) -> None:
        matrix = policy.matrix
        wrong = replace(matrix, never=matrix.never - {401}, extra=matrix.extra | {401})
        await super().configure(replace(policy, matrix=wrong))


class CrashesOnPost(_Named):
    """An adapter whose ``stream`` raises for POST requests; GET streams work."""

    def __init__(self) -> None:
        super().__init__("sct-crashes-on-post")

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        if request.request.method == "POST":
            raise RuntimeError(CRASH)
        await super().stream(request, sink)


def declares_pipeline() -> ReferenceAdapter:
    """A client that declares the profile it follows (AdapterInfo.profile)."""
    adapter = _Named("sct-declares-pipeline")
    adapter.info = replace(adapter.info, profile="seed-pipeline")
    return adapter


def make_adapter() -> ReferenceAdapter:
    """The ``module:factory`` form of a target."""
    return _Named("sct-factory")


def streamcheck_adapter() -> ReferenceAdapter:
    """The factory the plugin looks for when the target names only the module."""
    return _Named("sct-module")


def retries_401() -> ReferenceAdapter:
    return Retries401()


def crashes_on_post() -> ReferenceAdapter:
    return CrashesOnPost()
