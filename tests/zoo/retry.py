"""Mutants of the retry matrix and the commit point (SC-RETRY, SC-COMMIT)."""

from __future__ import annotations

from dataclasses import replace

from conformance._adapter import AdapterRequest, StreamSink
from pytest_streamcheck.targets._reference import ReferenceAdapter
from zoo import Expectation, Mutant, _matrix, _policy_mutant, _Sink

retries_401 = _policy_mutant(
    "retries_401",
    lambda p: replace(
        p, matrix=replace(p.matrix, never=p.matrix.never - {401}, extra=p.matrix.extra | {401})
    ),
)
retries_every_4xx = _policy_mutant(
    "retries_every_4xx", _matrix(never=frozenset(), extra=frozenset(range(400, 500)))
)
retries_409 = _policy_mutant(
    "retries_409", lambda p: replace(p, matrix=replace(p.matrix, extra=p.matrix.extra | {409}))
)
retries_408 = _policy_mutant(
    "retries_408", lambda p: replace(p, matrix=replace(p.matrix, extra=p.matrix.extra | {408}))
)
no_retry_on_503 = _policy_mutant(
    "no_retry_on_503",
    lambda p: replace(
        p, matrix=replace(p.matrix, never=p.matrix.never | {503}, always=p.matrix.always - {503})
    ),
)
no_retry_on_429 = _policy_mutant(
    "no_retry_on_429",
    lambda p: replace(
        p, matrix=replace(p.matrix, never=p.matrix.never | {429}, always=p.matrix.always - {429})
    ),
)
no_retry_on_5xx = _policy_mutant("no_retry_on_5xx", _matrix(retry_5xx=False))
no_network_retry = _policy_mutant("no_network_retry", _matrix(retry_network=False))
ignores_retry_after = _policy_mutant("ignores_retry_after", lambda p: replace(p, retry_after=False))
gives_up_at_once = _policy_mutant("gives_up_at_once", lambda p: replace(p, max_attempts=1))
unbounded_retries = _policy_mutant("unbounded_retries", lambda p: replace(p, max_attempts=None))
no_first_chunk_timeout = _policy_mutant(
    "no_first_chunk_timeout", lambda p: replace(p, first_chunk_timeout=None)
)
never_resumes = _policy_mutant("never_resumes", lambda p: replace(p, resume=False))


class truncation_is_done(Mutant):
    """A stream that ends without its terminal event is reported complete."""

    def on_error(self, sink: _Sink, kind: str, detail: str, status: int | None) -> None:
        if kind == "truncated":
            sink.done()
        else:
            sink.pass_error(kind, detail, status)


class swallows_midstream_error(Mutant):
    """Any failure after the first chunk is reported as a normal end."""

    def on_error(self, sink: _Sink, kind: str, detail: str, status: int | None) -> None:
        if sink.chunks:
            sink.done()
        else:
            sink.pass_error(kind, detail, status)


class restarts_after_commit(Mutant):
    """After a mid-stream failure it starts the whole request again (duplicates)."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        wrapped = _Sink(sink, self)
        for _ in range(2):
            self._failed_after_chunks = False
            await ReferenceAdapter.stream(self, request, wrapped)
            if not self._failed_after_chunks:
                return

    def on_error(self, sink: _Sink, kind: str, detail: str, status: int | None) -> None:
        if sink.chunks:
            self._failed_after_chunks = True
            return
        sink.pass_error(kind, detail, status)


class duplicates_on_resume(Mutant):
    """When it resumes a stream it hands the last chunk over a second time."""

    def on_state(self, sink: _Sink, state: str) -> None:
        if state == "retrying" and sink.last is not None:
            sink.pass_chunk(*sink.last)


class hides_ids(Mutant):
    """It resumes right but hands its consumer every chunk without its event id."""

    def on_chunk(self, sink: _Sink, data: str, id: str | None, event: str | None) -> None:
        sink.pass_chunk(data, None, event)


class drops_server_message(Mutant):
    """Errors reach the consumer without the server's message (a SHOULD miss)."""

    def on_error(self, sink: _Sink, kind: str, detail: str, status: int | None) -> None:
        sink.pass_error(kind, f"HTTP {status}" if status else kind, status)


MUTANTS: dict[str, Expectation] = {
    "retries_401": Expectation("SC-RETRY-3 or SC-RETRY-4"),
    "retries_every_4xx": Expectation("SC-RETRY-1 or SC-RETRY-9"),
    # a 409 is the seeds' 4xx under every profile; a 408 is retried by seed-fetch's
    # profile, so only the GET case (seed-eventsource) catches a client that retries it
    "retries_409": Expectation("SC-RETRY-41 or SC-RETRY-42"),
    "retries_408": Expectation("SC-RETRY-39"),
    "no_retry_on_503": Expectation("SC-RETRY-13 or SC-RETRY-14"),
    "no_retry_on_429": Expectation("SC-RETRY-11 or SC-RETRY-12"),
    "no_retry_on_5xx": Expectation("SC-RETRY-15 or SC-RETRY-17"),
    "no_network_retry": Expectation("SC-RETRY-23 or SC-COMMIT-3"),
    "ignores_retry_after": Expectation("SC-RETRY-33"),
    "gives_up_at_once": Expectation("SC-RETRY-13 or SC-COMMIT-3"),
    "unbounded_retries": Expectation("SC-RETRY-35", profile="seed-pipeline"),
    "no_first_chunk_timeout": Expectation("SC-RETRY-27", profile="seed-pipeline"),
    "never_resumes": Expectation("SC-COMMIT-15"),
    "truncation_is_done": Expectation("SC-COMMIT-13"),
    "swallows_midstream_error": Expectation("SC-COMMIT-5 or SC-COMMIT-9"),
    "restarts_after_commit": Expectation("SC-COMMIT-5"),
    "duplicates_on_resume": Expectation("SC-COMMIT-15"),
    # SC-COMMIT-15 to 18 judge the resume without ids: test_zoo.py proves it passes them.
    "hides_ids": Expectation("SC-SSE-13 or SC-SSE-14"),
    "drops_server_message": Expectation("SC-RETRY-37", level="SHOULD"),
}
