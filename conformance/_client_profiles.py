"""Profiles of the real client libraries the kit ships adapters for.

Each is the library's documented (and read in its source) policy, at the version the
adapters pin; the closing notes of issue 9 compare them with behaviour measured by a
probe against the plain fake server. None of these clients can take a policy from the
kit, so the suite runs them at their real timing.
"""

from __future__ import annotations

from dataclasses import replace

from conformance.reference import BackoffConfig, BreakerConfig, ClientPolicy, RetryMatrix

__all__ = ["CLIENT_POLICIES", "CLIENT_PROFILE_ROWS"]

# The Stainless SDKs (openai, anthropic; Python and Node): 2 retries of
# min(0.5 * 2**n, 8) * U(0.75, 1]; 408, 409, 429 and every 5xx retried, with network
# errors and timeouts; Retry-After / retry-after-ms honoured when at most 60 s. Only
# the request is retried: once the response's head is in, a failure reaches the
# application. No breaker; the 600 s read timeout is the only silence check.
_STAINLESS_MATRIX = RetryMatrix(extra=frozenset({408, 409}))
_STAINLESS = ClientPolicy(
    name="stainless",
    matrix=_STAINLESS_MATRIX,
    backoff=BackoffConfig(family="proportional", base=0.5, caps=((1, 8.0),), jitter=0.25),
    breaker=BreakerConfig(kind="none"),
    max_attempts=3,
    retry_after=True,
    retry_after_cap=60.0,
    stall_timeout=600.0,
    stall_check_interval=1.0,
    connect_timeout=5.0,
    resume=False,
)
_NO_STATUS = RetryMatrix(never=frozenset(), always=frozenset(), retry_5xx=False)

# name -> (title, source, policy, transports)
CLIENT_PROFILE_ROWS: dict[str, tuple[str, str, ClientPolicy, frozenset[str]]] = {
    "openai-python": (
        "openai-python's streaming chat completions (the SDK's own retries)",
        "openai-python 3.x, _base_client.py (_calculate_retry_timeout, _should_retry)",
        # openai-python 3.x honours a hint up to 120 s (MAX_RETRY_AFTER_DELAY) and does
        # not retry a longer one; the probe saw a 150 s hint given up at once.
        replace(_STAINLESS, name="openai-python", retry_after_cap=120.0),
        frozenset({"post"}),
    ),
    "anthropic-python": (
        "anthropic-sdk-python's streaming messages (the SDK's own retries)",
        "anthropic-sdk-python 2.x, _base_client.py (_calculate_retry_timeout, _should_retry)",
        # anthropic-sdk-python 2.x waits whatever a hint asks (min(hint, 4_294_967 s)):
        # no cap, so the longest a profile may state; the probe saw a 150 s hint waited.
        replace(_STAINLESS, name="anthropic-python", retry_after_cap=3600.0),
        frozenset({"post"}),
    ),
    "openai-node": (
        "openai-node's streaming chat completions (the SDK's own retries)",
        "openai-node, src/client.ts (retryRequest, calculateDefaultRetryTimeoutMillis)",
        # openai-node 7.x honours a hint up to 60 s; a longer one is not clamped but
        # dropped for its own backoff (probe: a 90 s hint, retried after 0.5 s), which
        # no cap can say; the cases' hints stay under 60 s, where the row holds.
        replace(_STAINLESS, name="openai-node"),
        frozenset({"post"}),
    ),
    "anthropic-node": (
        "@anthropic-ai/sdk's streaming messages (the SDK's own retries)",
        "@anthropic-ai/sdk, src/client.ts (retryRequest, calculateDefaultRetryTimeoutMillis)",
        # @anthropic-ai/sdk 1.x waits whatever a hint asks (up to 2**31 - 1 ms): no 60 s
        # limit, so the longest a profile may state; the probe saw a 90 s hint waited.
        replace(_STAINLESS, name="anthropic-node", retry_after_cap=3600.0),
        frozenset({"post"}),
    ),
    # httpx-sse parses a response; it never retries anything.
    "httpx-sse": (
        "httpx-sse over httpx's default client: one attempt, no retry, a 5 s read timeout",
        "httpx-sse 0.4 (connect_sse, aconnect_sse): a parser, no reconnection",
        ClientPolicy(
            name="httpx-sse",
            matrix=RetryMatrix(
                never=frozenset(), always=frozenset(), retry_5xx=False, retry_network=False
            ),
            backoff=BackoffConfig(family="none", base=1.0, caps=((1, 1.0),), jitter=0.0),
            breaker=BreakerConfig(kind="none"),
            max_attempts=1,
            retry_after=False,
            retry_after_cap=0.0,
            # httpx's default client times every read out after 5 s (Timeout(5.0)), the
            # connect too: a silence of 5 s ends the stream with ReadTimeout (measured
            # 5.03 s); every byte restarts it.
            stall_timeout=5.0,
            stall_check_interval=0.1,
            idle_rule="bytes",
            connect_timeout=5.0,
            resume=False,
        ),
        frozenset({"get", "post"}),
    ),
    # @microsoft/fetch-event-source: every error (a non-OK status or a wrong content
    # type thrown by the default onopen included) reaches onerror, which by default
    # retries after retryInterval (1 s; a retry: field sets it), forever, with the
    # Last-Event-ID it saw. Retry-After is never read. No stall timer.
    "fetch-event-source": (
        "@microsoft/fetch-event-source 2.0.1 with its default callbacks",
        "@microsoft/fetch-event-source 2.0.1, src/fetch.ts (DefaultRetryInterval, onerror)",
        ClientPolicy(
            name="fetch-event-source",
            matrix=RetryMatrix(
                never=frozenset(), always=frozenset(), extra=frozenset(range(400, 500))
            ),
            backoff=BackoffConfig(family="none", base=1.0, caps=((1, 1.0),), jitter=0.0),
            breaker=BreakerConfig(kind="none"),
            retry_after=False,
            retry_after_cap=0.0,
            stall_timeout=3600.0,
            stall_check_interval=3600.0,
            resume=True,
        ),
        frozenset({"get", "post"}),
    ),
    # eventsource 4 (npm): the WHATWG algorithm in Node: a network error reconnects
    # after the reconnection time (3 s, a retry: field sets it); any other status or
    # content type fails the connection for good.
    "eventsource-npm": (
        "eventsource 4 (npm), the WHATWG EventSource for Node",
        "eventsource 4.x (npm), src/EventSource.ts; WHATWG HTML §9.2",
        ClientPolicy(
            name="eventsource-npm",
            matrix=_NO_STATUS,
            backoff=BackoffConfig(family="none", base=3.0, caps=((1, 3.0),), jitter=0.0),
            breaker=BreakerConfig(kind="none"),
            retry_after=False,
            retry_after_cap=0.0,
            stall_timeout=3600.0,
            stall_check_interval=3600.0,
            resume=True,
        ),
        frozenset({"get"}),
    ),
}

CLIENT_POLICIES: dict[str, ClientPolicy] = {
    name: row[2] for name, row in CLIENT_PROFILE_ROWS.items()
}
