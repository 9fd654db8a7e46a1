"""The zoo: deliberately broken clients, each one mistake away from the reference client.

Every mutant is a ``--streamcheck`` target (``zoo:NAME``). Each area module
defines mutants and a ``MUTANTS`` table naming the cases that must catch them;
this package gathers them, and ``tests/test_zoo.py`` proves every one is caught
while the reference client passes the same cases. Mutants break either the
policy the client actually follows (while the kit judges it by the profile it
claims) or what the client hands its consumer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from conformance._adapter import ADAPTER_API, AdapterInfo, AdapterRequest, StreamSink
from conformance.reference import ClientPolicy
from pytest_streamcheck.targets._reference import ReferenceAdapter

PolicyChange = Callable[[ClientPolicy], ClientPolicy]


class _Sink(StreamSink):
    """A sink whose outgoing deliveries a mutant can rewrite."""

    def __init__(self, inner: StreamSink, mutant: Mutant) -> None:
        self._inner = inner
        self._mutant = mutant
        self.chunks = 0
        self.last: tuple[str, str | None, str | None] | None = None

    @property
    def cancelled(self) -> bool:
        return self._inner.cancelled

    def cancel(self) -> None:
        self._inner.cancel()

    def chunk(self, data: str, *, id: str | None = None, event: str | None = None) -> None:
        self._mutant.on_chunk(self, data, id, event)

    def comment(self, text: str) -> None:
        self._inner.comment(text)

    def state(self, state: str, *, delay: float | None = None, detail: str = "") -> None:
        self._mutant.on_state(self, state)
        self._inner.state(state, delay=delay, detail=detail)

    def error(self, kind, detail: str = "", *, status: int | None = None) -> None:  # type: ignore[no-untyped-def]
        self._mutant.on_error(self, kind, detail, status)

    def done(self) -> None:
        self._inner.done()

    def log(self, message: str) -> None:
        self._inner.log(message)

    # what the mutant passes on
    def pass_chunk(self, data: str, id: str | None, event: str | None) -> None:
        self.chunks += 1
        self.last = (data, id, event)
        self._inner.chunk(data, id=id, event=event)

    def pass_error(self, kind, detail: str, status: int | None) -> None:  # type: ignore[no-untyped-def]
        self._inner.error(kind, detail, status=status)


class Mutant(ReferenceAdapter):
    """The reference client with one mistake; subclasses override a hook. A mutant's
    name (``zoo:NAME``) is its class's."""

    policy_change: PolicyChange | None = None

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.info = AdapterInfo(
            name=f"zoo-{type(self).__name__}",
            version="0",
            capabilities=ReferenceAdapter.info.capabilities,
            api=ADAPTER_API,
            virtual_time=True,  # the reference's mistakes are judged exactly
        )
        self._resumed = False

    async def configure(self, policy: ClientPolicy) -> None:
        change = type(self).policy_change
        await super().configure(change(policy) if change else policy)

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        await super().stream(request, _Sink(sink, self))

    def on_chunk(self, sink: _Sink, data: str, id: str | None, event: str | None) -> None:
        sink.pass_chunk(data, id, event)

    def on_state(self, sink: _Sink, state: str) -> None:
        pass

    def on_error(self, sink: _Sink, kind: str, detail: str, status: int | None) -> None:
        sink.pass_error(kind, detail, status)


def _policy_mutant(name: str, change: PolicyChange) -> type[Mutant]:
    return type(name, (Mutant,), {"policy_change": staticmethod(change)})


def _matrix(**changes: object) -> PolicyChange:
    return lambda p: replace(p, matrix=replace(p.matrix, **changes))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Expectation:
    cases: str  # "SC-X-1 or SC-X-2": exactly the cases that must catch the mutant
    profile: str = "seed-eventsource,seed-fetch"
    level: str = "MUST"  # SHOULD: caught as NON-STRICT, failing only under --strict

    def __post_init__(self) -> None:
        from conformance import all_cases

        known = {case.id for case in all_cases()}
        unknown = [case for case in self.ids if case not in known]
        if unknown:
            raise ValueError(f"the zoo names cases the catalog lacks: {unknown}")

    @property
    def ids(self) -> tuple[str, ...]:
        """The case ids, each selected exactly (as -k, "SC-SSE-1" would match SC-SSE-10..19)."""
        return tuple(case.strip() for case in self.cases.split(" or "))


def _gather() -> dict[str, Expectation]:
    from zoo import backoff, breaker, fields, post_sse, request, retry, stall

    table: dict[str, Expectation] = {}
    for module in (retry, backoff, breaker, stall, post_sse, request, fields):
        for name, expectation in module.MUTANTS.items():
            if name in table:
                raise ValueError(f"mutant {name} defined twice")
            table[name] = expectation
            globals()[name] = getattr(module, name)  # so zoo:NAME resolves
    return table


MUTANTS = _gather()
