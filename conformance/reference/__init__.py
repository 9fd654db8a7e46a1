"""The reference client: a sans-IO core (decoder, retry policy, breaker, stall watch)
under an httpx shell (``StreamingClient``), plus a blocking façade.

A library of its own: it needs httpx and nothing of the kit (``fake_servers``,
``pytest_streamcheck`` or the rest of ``conformance``), and takes its clock and sleep
from the caller. Its policy type, ``ClientPolicy`` with ``RetryMatrix``,
``BackoffConfig`` and ``BreakerConfig``, is public here; the kit's profiles build
values of it. Public names are re-exported here and resolved on first use, so
importing the policy data or the decoder does not import httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conformance.reference._exports import lazy_getattr

if TYPE_CHECKING:
    from conformance.reference._breaker import (
        Admit,
        BreakerState,
        CircuitBreaker,
        NoBreaker,
        RatioBreaker,
        Reject,
        make_breaker,
    )
    from conformance.reference._client import (
        Clock,
        EventStream,
        Sleep,
        StateCallback,
        StreamingClient,
        default_terminal,
    )
    from conformance.reference._config import (
        BackoffConfig,
        BackoffFamily,
        BreakerConfig,
        BreakerKind,
        ClientPolicy,
        IdleRule,
        PolicyError,
        RetryMatrix,
    )
    from conformance.reference._errors import (
        CircuitOpen,
        GaveUp,
        NonRetryableStatus,
        NotIdempotent,
        Offline,
        Stalled,
        StreamError,
        Truncated,
    )
    from conformance.reference._policy import (
        Failure,
        GiveUp,
        Retry,
        RetryState,
        Surface,
        backoff_delay,
        parse_retry_after,
    )
    from conformance.reference._sse import SSEComment, SSEDecoder, SSEEvent
    from conformance.reference._states import State, StateChange
    from conformance.reference._sync import SyncStreamingClient
    from conformance.reference._watch import StallWatch

# name -> private module
_EXPORTS = {
    "Admit": "_breaker",
    "BreakerState": "_breaker",
    "CircuitBreaker": "_breaker",
    "NoBreaker": "_breaker",
    "RatioBreaker": "_breaker",
    "Reject": "_breaker",
    "make_breaker": "_breaker",
    "Clock": "_client",
    "EventStream": "_client",
    "Sleep": "_client",
    "StateCallback": "_client",
    "StreamingClient": "_client",
    "default_terminal": "_client",
    "BackoffConfig": "_config",
    "BackoffFamily": "_config",
    "BreakerConfig": "_config",
    "BreakerKind": "_config",
    "ClientPolicy": "_config",
    "IdleRule": "_config",
    "PolicyError": "_config",
    "RetryMatrix": "_config",
    "CircuitOpen": "_errors",
    "GaveUp": "_errors",
    "NonRetryableStatus": "_errors",
    "NotIdempotent": "_errors",
    "Offline": "_errors",
    "Stalled": "_errors",
    "StreamError": "_errors",
    "Truncated": "_errors",
    "Failure": "_policy",
    "GiveUp": "_policy",
    "Retry": "_policy",
    "RetryState": "_policy",
    "Surface": "_policy",
    "backoff_delay": "_policy",
    "parse_retry_after": "_policy",
    "SSEComment": "_sse",
    "SSEDecoder": "_sse",
    "SSEEvent": "_sse",
    "State": "_states",
    "StateChange": "_states",
    "SyncStreamingClient": "_sync",
    "StallWatch": "_watch",
}

__all__ = [
    "Admit",
    "BackoffConfig",
    "BackoffFamily",
    "BreakerConfig",
    "BreakerKind",
    "BreakerState",
    "CircuitBreaker",
    "CircuitOpen",
    "ClientPolicy",
    "Clock",
    "EventStream",
    "Failure",
    "GaveUp",
    "GiveUp",
    "IdleRule",
    "NoBreaker",
    "NonRetryableStatus",
    "NotIdempotent",
    "Offline",
    "PolicyError",
    "RatioBreaker",
    "Reject",
    "Retry",
    "RetryMatrix",
    "RetryState",
    "SSEComment",
    "SSEDecoder",
    "SSEEvent",
    "Sleep",
    "StallWatch",
    "Stalled",
    "State",
    "StateCallback",
    "StateChange",
    "StreamError",
    "StreamingClient",
    "Surface",
    "SyncStreamingClient",
    "Truncated",
    "backoff_delay",
    "default_terminal",
    "make_breaker",
    "parse_retry_after",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS)
