"""Mutants of backoff and jitter (SC-BACKOFF).

Policy mutants follow another backoff than the profile they claim. The others
change the reference client's retry bookkeeping (``RetryState``) or how its
independent clients get their randomness, each by exactly one mistake.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

from conformance.reference import ClientPolicy, StreamingClient
from conformance.reference._client import EventStream
from conformance.reference._policy import Failure, RetryState, backoff_delay, parse_retry_after
from fake_servers import now
from zoo import Expectation, Mutant, PolicyChange, _policy_mutant


def _backoff(**changes: Any) -> PolicyChange:
    return lambda p: replace(p, backoff=replace(p.backoff, **changes))


# -- the backoff the client actually follows ------------------------------------------

no_jitter = _policy_mutant("no_jitter", _backoff(family="none"))
jitter_too_wide = _policy_mutant("jitter_too_wide", _backoff(jitter=1.0))  # 0-100 %
no_cap = _policy_mutant("no_cap", _backoff(caps=((1, math.inf),)))
caps_never_widen = _policy_mutant(
    "caps_never_widen", lambda p: replace(p, backoff=replace(p.backoff, caps=p.backoff.caps[:1]))
)
# The cap is the base: every delay is base plus jitter, whatever the attempt.
constant_delay = _policy_mutant(
    "constant_delay",
    lambda p: replace(p, backoff=replace(p.backoff, caps=((1, p.backoff.base),))),
)

# Every instance waits exactly the middle of the first delay range, always: no jitter,
# no growth. Staggered by the harness, such a herd must still fail (issue 16).
fixed_delay = _policy_mutant(
    "fixed_delay",
    lambda p: replace(
        p,
        backoff=replace(
            p.backoff,
            family="none",
            base=p.backoff.base * 1.25,
            caps=((1, p.backoff.base * 1.25),),
        ),
    ),
)


# -- the retry bookkeeping ------------------------------------------------------------------


class _RetryMutant(Mutant):
    """A mutant whose independent clients are built by ``make_client``."""

    def _client(self, key: str) -> StreamingClient:
        client = self._clients.get(key)
        if client is None:
            client = self.make_client(random.Random(f"{self._seed}:{key}"), key)
            if self._offline:
                client.offline()
            self._clients[key] = client
        return client

    def make_client(self, rng: random.Random, key: str) -> StreamingClient:
        return StreamingClient(self._policy, rng=rng, on_state=self._on_state(key), clock=now)


class _CarriedCount(RetryState):
    """The client's attempt count outlives each stream, and a success never resets it."""

    def __init__(self, policy: ClientPolicy, rng: random.Random, client: _CarryingClient) -> None:
        super().__init__(policy, rng)
        self._client = client

    def on_attempt(self) -> None:
        self.attempts = max(self.attempts, self._client.carried) + 1
        self._client.carried = self.attempts

    def on_success(self) -> None:
        self.previous_delay = None  # the count is left as it is: the mistake

    def reset(self) -> None:
        super().reset()
        self._client.carried = 0


class _CarryingClient(StreamingClient):
    carried = 0

    def stream(self, url: str, **kwargs: Any) -> EventStream:
        stream = super().stream(url, **kwargs)
        stream._retry = _CarriedCount(self.policy, self._shared.rng, self)
        return stream


class count_never_resets(_RetryMutant):
    """Keeps counting attempts across streams: a success never starts the count over."""

    def make_client(self, rng: random.Random, key: str) -> StreamingClient:
        return _CarryingClient(self._policy, rng=rng, on_state=self._on_state(key), clock=now)


class _HintOnlyWhenShorter(RetryState):
    """Takes the smaller of the server's hint and the backoff: a longer hint is ignored."""

    def _delay(self, failure: Failure, now_epoch: float) -> float:
        policy = self.policy
        hint = None
        if policy.retry_after and failure.headers:
            cap = policy.retry_after_cap
            hint = parse_retry_after(failure.headers, now_epoch=now_epoch, cap=cap)
        retry = max(1, self.attempts)
        delay = backoff_delay(policy.backoff, retry, self._rng, self.previous_delay)
        if hint is not None:
            delay = min(hint, delay)
        self.previous_delay = delay
        return delay


class _HintClient(StreamingClient):
    def stream(self, url: str, **kwargs: Any) -> EventStream:
        stream = super().stream(url, **kwargs)
        stream._retry = _HintOnlyWhenShorter(self.policy, self._shared.rng)
        return stream


class retry_after_only_when_shorter(_RetryMutant):
    """Honours Retry-After only when it is shorter than its own backoff."""

    def make_client(self, rng: random.Random, key: str) -> StreamingClient:
        return _HintClient(self._policy, rng=rng, on_state=self._on_state(key), clock=now)


class _TripleJitter(RetryState):
    """0-200 % jitter on top of the capped exponential, where the profile says 0-50 %."""

    def _delay(self, failure: Failure, now_epoch: float) -> float:
        exp = self.policy.backoff.exponential(max(1, self.attempts))
        return exp + self._rng.random() * exp * 2.0


class _TripleJitterClient(StreamingClient):
    def stream(self, url: str, **kwargs: Any) -> EventStream:
        stream = super().stream(url, **kwargs)
        stream._retry = _TripleJitter(self.policy, self._shared.rng)
        return stream


class jitter_200(_RetryMutant):
    """Adds 0-200 % jitter instead of the declared 0-50 %: every envelope's end is
    overshot by up to twice its width (issue 16: slack must not hide it)."""

    def make_client(self, rng: random.Random, key: str) -> StreamingClient:
        return _TripleJitterClient(self._policy, rng=rng, on_state=self._on_state(key), clock=now)


# -- randomness shared by the herd -------------------------------------------------------------


class herd_in_lockstep(_RetryMutant):
    """Seeds every client's jitter alike: the herd draws the same delays (correlated)."""

    def make_client(self, rng: random.Random, key: str) -> StreamingClient:
        same = random.Random(self._seed)
        return StreamingClient(self._policy, rng=same, on_state=self._on_state(key), clock=now)


MUTANTS: dict[str, Expectation] = {
    "no_jitter": Expectation("SC-BACKOFF-9 or SC-BACKOFF-10"),
    "jitter_too_wide": Expectation("SC-BACKOFF-9 or SC-BACKOFF-10"),
    "jitter_200": Expectation("SC-BACKOFF-1 or SC-BACKOFF-2 or SC-BACKOFF-3 or SC-BACKOFF-4"),
    "no_cap": Expectation("SC-BACKOFF-3 or SC-BACKOFF-4"),
    "caps_never_widen": Expectation("SC-BACKOFF-3 or SC-BACKOFF-4"),
    "constant_delay": Expectation("SC-BACKOFF-2"),
    "count_never_resets": Expectation("SC-BACKOFF-5 or SC-BACKOFF-6"),
    "retry_after_only_when_shorter": Expectation("SC-BACKOFF-7 or SC-BACKOFF-8"),
    "herd_in_lockstep": Expectation("SC-BACKOFF-11"),
    "fixed_delay": Expectation("SC-BACKOFF-9 or SC-BACKOFF-10 or SC-BACKOFF-11"),
}
