"""Mutants of the circuit breaker (SC-BREAKER).

Policy mutants claim the profile's breaker and configure another one. The others
rewire each client instance the adapter creates: its breaker is wrapped (or
replaced by a subclass with one mistake), or its streams take a subclass of the
reference ``EventStream`` that books outcomes differently.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from conformance.reference import (
    Admit,
    BreakerState,
    CircuitBreaker,
    CircuitOpen,
    EventStream,
    RatioBreaker,
    Reject,
    State,
    StreamingClient,
)
from conformance.reference._client import _Attempt
from zoo import Expectation, Mutant, _policy_mutant

PIPELINE = "seed-pipeline"


def _breaker(**changes: Any) -> Any:
    return lambda p: replace(p, breaker=replace(p.breaker, **changes))


never_opens = _policy_mutant("never_opens", _breaker(kind="none"))
never_opens_ratio = _policy_mutant("never_opens_ratio", _breaker(kind="none"))
opens_after_fewer = _policy_mutant(
    "opens_after_fewer", lambda p: _breaker(threshold=p.breaker.threshold - 1)(p)
)
opens_after_more = _policy_mutant(
    "opens_after_more", lambda p: _breaker(threshold=p.breaker.threshold + 1)(p)
)
ignores_min_throughput = _policy_mutant("ignores_min_throughput", _breaker(min_throughput=1))
never_forgets = _policy_mutant("never_forgets", _breaker(window=1e9))


class _Rewired(Mutant):
    """Changes each client instance the moment the adapter creates it."""

    def _client(self, key: str) -> StreamingClient:
        fresh = key not in self._clients
        client = super()._client(key)
        if fresh:
            self.rewire(client)
        return client

    def rewire(self, client: StreamingClient) -> None:
        raise NotImplementedError


class _Wrapper:
    """The reference breaker behind a façade a mutant overrides one method of."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.config = inner.config

    @property
    def probe_in_flight(self) -> bool:
        return bool(self.inner.probe_in_flight)

    def state(self, at: float) -> BreakerState:
        return self.inner.state(at)  # type: ignore[no-any-return]

    def admit(self, at: float) -> Admit | Reject:
        return self.inner.admit(at)  # type: ignore[no-any-return]

    def record_success(self, at: float) -> None:
        self.inner.record_success(at)

    def record_failure(self, at: float) -> None:
        self.inner.record_failure(at)

    def probe_abandoned(self, at: float) -> None:
        self.inner.probe_abandoned(at)

    def reset(self) -> None:
        self.inner.reset()


class _WrappedBreaker(_Rewired):
    wrapper: type[_Wrapper] = _Wrapper

    def rewire(self, client: StreamingClient) -> None:
        client._shared.breaker = self.wrapper(client.breaker)  # type: ignore[assignment]


class _ProbeSuccessReopens(_Wrapper):
    def record_success(self, at: float) -> None:
        if self.inner.probe_in_flight:
            self.inner.record_failure(at)  # the mistake: it stays open
        else:
            self.inner.record_success(at)


class never_closes(_WrappedBreaker):
    """A successful probe leaves the breaker open for another cooldown."""

    wrapper = _ProbeSuccessReopens


class _EveryoneProbes(_Wrapper):
    def admit(self, at: float) -> Admit | Reject:
        verdict = self.inner.admit(at)
        if isinstance(verdict, Reject) and self.inner.state(at) is BreakerState.HALF_OPEN:
            return Admit(probe=True)  # the mistake: no single-probe lease
        return verdict  # type: ignore[no-any-return]


class every_waiting_caller_probes(_WrappedBreaker):
    """When the cooldown ends, every waiting stream goes out as a probe."""

    wrapper = _EveryoneProbes


class _ProbeFailureCloses(_Wrapper):
    def record_failure(self, at: float) -> None:
        if self.inner.probe_in_flight:
            self.inner.record_success(at)  # the mistake: closed, count reset
        else:
            self.inner.record_failure(at)


class probe_failure_closes(_WrappedBreaker):
    """A failed probe closes the breaker instead of re-opening it."""

    wrapper = _ProbeFailureCloses


class _NoResetOnSuccess(CircuitBreaker):
    def _closed_success(self, now: float) -> None:
        pass  # the mistake: failures keep adding up across successes


class success_does_not_reset(_Rewired):
    """A success while closed does not reset the consecutive-failure count."""

    def rewire(self, client: StreamingClient) -> None:
        client._shared.breaker = _NoResetOnSuccess(client.policy.breaker)


class _KeepsCountOnClose(CircuitBreaker):
    def _forget(self) -> None:
        pass  # the mistake: closing after a good probe keeps the old count


class close_keeps_count(_Rewired):
    """A successful probe closes the breaker but does not reset the failure count."""

    def rewire(self, client: StreamingClient) -> None:
        client._shared.breaker = _KeepsCountOnClose(client.policy.breaker)


class _StrictRatio(RatioBreaker):
    def _closed_failure(self, now: float) -> bool:
        self._record(now, failed=True)
        calls = len(self._calls)
        # the mistake: ">" where the profile says the ratio is reached at ">="
        return calls >= self.config.min_throughput and self._failures > self.config.ratio * calls


class ratio_strictly_above(_Rewired):
    """A ratio breaker that opens only above the ratio, not when it reaches it."""

    def rewire(self, client: StreamingClient) -> None:
        client._shared.breaker = _StrictRatio(client.policy.breaker)


# -- mistakes in how streams use the breaker ------------------------------------------


class _StreamsOf(StreamingClient):
    """A client whose streams are ``stream_class``."""

    stream_class: type[EventStream] = EventStream

    def stream(self, url: str, **kwargs: Any) -> EventStream:
        plain = super().stream(url, **kwargs)
        return self.stream_class(plain._shared, plain._call, plain._on_state)


class _LateVerdict(EventStream):
    def _resolve(self, att: _Attempt, *, success: bool) -> None:
        if success and not att.finished and not att.probe:
            return  # the mistake: a first chunk is not yet a success; the end decides
        super()._resolve(att, success=success)


class _LateVerdictClient(_StreamsOf):
    stream_class = _LateVerdict


class _WaitsWhenOpen(EventStream):
    async def _admission(self) -> bool:
        breaker = self._shared.breaker
        while True:
            verdict = breaker.admit(self._shared.clock())
            if isinstance(verdict, Admit):
                return verdict.probe
            # the mistake: a new stream waits like a retrying one instead of failing fast
            delay = max(0.0, verdict.until - self._shared.clock())
            self._set_state(State.BREAKER_OPEN, "circuit open", delay=delay)
            await self._pause(delay)
            await self._while_offline()


class _WaitsWhenOpenClient(_StreamsOf):
    stream_class = _WaitsWhenOpen


class _OnlyRetriesProbe(EventStream):
    async def _admission(self) -> bool:
        if (
            self.attempts == 0
            and self._shared.breaker.state(self._shared.clock()) is not BreakerState.CLOSED
        ):
            # the mistake: a new stream fails fast while half-open too, so only a
            # retrying stream can ever be the probe
            raise CircuitOpen(self._shared.clock())
        return await super()._admission()


class _OnlyRetriesProbeClient(_StreamsOf):
    stream_class = _OnlyRetriesProbe


class _NewCallersSkipTheLease(EventStream):
    async def _admission(self) -> bool:
        breaker = self._shared.breaker
        if self.attempts == 0 and breaker.state(self._shared.clock()) is BreakerState.HALF_OPEN:
            verdict = breaker.admit(self._shared.clock())
            # the mistake: only OPEN fails a new stream fast; one refused the half-open
            # probe's lease goes ahead anyway
            return isinstance(verdict, Admit) and verdict.probe
        return await super()._admission()


class _NewCallersSkipTheLeaseClient(_StreamsOf):
    stream_class = _NewCallersSkipTheLease


class _StreamMutant(_Rewired):
    client_class: type[StreamingClient] = StreamingClient

    def rewire(self, client: StreamingClient) -> None:
        client.__class__ = self.client_class


class counts_midstream_failures(_StreamMutant):
    """The breaker hears how a stream ended, so a mid-stream failure counts."""

    client_class = _LateVerdictClient


class counts_midstream_failures_ratio(counts_midstream_failures):
    pass  # the same mistake, under the failure-ratio breaker (the pipeline profile)


class no_fail_fast(_StreamMutant):
    """A new stream meeting an open breaker waits for it instead of failing fast."""

    client_class = _WaitsWhenOpenClient


class never_closes_after_cooldown(_StreamMutant):
    """New streams fail fast while half-open too: without a retrying stream it never closes."""

    client_class = _OnlyRetriesProbeClient


class lets_all_through_after_cooldown(_StreamMutant):
    """After the cooldown every new stream goes through with the probe, not one probe."""

    client_class = _NewCallersSkipTheLeaseClient


MUTANTS: dict[str, Expectation] = {
    # "SC-BREAKER-2" also selects 20-22, which do not apply to the seed profiles.
    "never_opens": Expectation("SC-BREAKER-2"),
    "opens_after_more": Expectation("SC-BREAKER-2"),
    "every_waiting_caller_probes": Expectation("SC-BREAKER-3"),
    "never_closes": Expectation("SC-BREAKER-5"),
    "close_keeps_count": Expectation("SC-BREAKER-5"),
    "probe_failure_closes": Expectation("SC-BREAKER-7"),
    "no_fail_fast": Expectation("SC-BREAKER-9"),
    "opens_after_fewer": Expectation("SC-BREAKER-11"),
    "success_does_not_reset": Expectation("SC-BREAKER-11"),
    "counts_midstream_failures": Expectation("SC-BREAKER-13"),
    "never_opens_ratio": Expectation("SC-BREAKER-15", profile=PIPELINE),
    "ratio_strictly_above": Expectation("SC-BREAKER-15", profile=PIPELINE),
    "ignores_min_throughput": Expectation("SC-BREAKER-17", profile=PIPELINE),
    "never_forgets": Expectation("SC-BREAKER-19", profile=PIPELINE),
    "counts_midstream_failures_ratio": Expectation("SC-BREAKER-21", profile=PIPELINE),
    "never_closes_after_cooldown": Expectation("SC-BREAKER-23 or SC-BREAKER-24"),
    "lets_all_through_after_cooldown": Expectation("SC-BREAKER-25 or SC-BREAKER-26"),
}
