"""The catalog: importing this package registers every case, area by area."""

from conformance.cases import (
    backoff,
    breaker,
    cancel,
    commit,
    offline,
    post,
    retry,
    sse,
    sse_fields,
    sse_request,
    stall,
)

__all__ = [
    "backoff",
    "breaker",
    "cancel",
    "commit",
    "offline",
    "post",
    "retry",
    "sse",
    "sse_fields",
    "sse_request",
    "stall",
]
