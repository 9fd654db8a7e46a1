"""The scenario ``serve`` plays when given none: something a newcomer can hit at once.

A healthy stream for each transport (GET, as EventSource does, and a POST that
streams, OpenAI style) and one endpoint per common failure, named after it. The
failures that a client can recover from alternate with a healthy stream, so a
resilient client gets through on its next attempt.
"""

from __future__ import annotations

from fake_servers._builders import abort, endpoint, respond, scenario, stall, stream, truncate
from fake_servers._script import Scenario

__all__ = ["DEFAULT_SCENARIO", "TRY"]

_GAP = 0.05  # events 50 ms apart: a stream you can watch arrive
_HEALTHY = stream(10, gap=_GAP, ids=True)

DEFAULT_SCENARIO: Scenario = scenario(
    endpoint("/v1/stream", stream(20, gap=_GAP, ids=True), method="GET"),
    endpoint("/v1/chat/completions", stream(20, gap=_GAP), method="POST"),
    endpoint("/fail/503", respond(503, retry_after=1), _HEALTHY, then="cycle"),
    endpoint("/fail/401", respond(401)),
    endpoint("/fail/drop", abort(3, gap=_GAP, ids=True), _HEALTHY, then="cycle"),
    endpoint("/fail/stall", stall(2, events=10, gap=_GAP, ids=True), _HEALTHY, then="cycle"),
    endpoint("/fail/truncate", truncate(3, gap=_GAP, ids=True), _HEALTHY, then="cycle"),
)

# Commands to try, with {url} for the base URL.
TRY = (
    "curl -N {url}/v1/stream",
    "curl -N {url}/v1/chat/completions -H 'content-type: application/json' "
    """-d '{{"stream": true}}'""",
    "curl -i {url}/fail/503",
)
