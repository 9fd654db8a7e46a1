"""Every limit of the fake servers, in one place: what a scenario and a request may hold.

A scenario past a scenario limit is refused when it is made or loaded, with a
``ScenarioError`` naming the file, the step, the field and the limit; nothing
is played. A request past a request limit is answered with a 4xx that names
the limit and is recorded in the ledger (it uses no script step). The limits
are far above what a test needs and low enough that the server stays
responsive: no value a scenario can hold makes one response stall the others.
``docs/scenario-format.md`` and ``docs/fake-servers.md`` list them.
"""

from __future__ import annotations

__all__ = [
    "BODY_TIMEOUT",
    "MAX_DEPTH",
    "MAX_ENDPOINTS",
    "MAX_EVENTS",
    "MAX_FILE_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_MILLISECONDS",
    "MAX_PARTS",
    "MAX_REQUEST_BYTES",
    "MAX_SCENARIO_BYTES",
    "MAX_SCRIPTED_BODY_BYTES",
    "MAX_SECONDS",
    "MAX_SEED",
    "MAX_STEPS",
    "MAX_WRITE_BYTES",
]

# -- a scenario (checked when a value is made, so also when a file is loaded) ----------
MAX_EVENTS = 1_000_000  # data events in one response; the planner makes them as it sends
MAX_STEPS = 1_000  # steps of one endpoint, after rate_limited/outage expand their times
MAX_ENDPOINTS = 1_000  # endpoints of one scenario
MAX_SECONDS = 86_400.0  # any duration: delays, gaps, stalls, keepalives, Retry-After (1 day)
MAX_MILLISECONDS = 86_400_000  # the same, where a script counts milliseconds (retry_ms)
MAX_SCRIPTED_BODY_BYTES = 8 * 1024 * 1024  # a respond step's body; a raw step's pieces
MAX_HEADER_BYTES = 8 * 1024  # a step's scripted headers, names and values together
MAX_SEED = 2**63 - 1  # the largest integer a TOML file can hold
MAX_SCENARIO_BYTES = 16 * 1024 * 1024  # a scenario file
MAX_DEPTH = 64  # nesting of a scenario file's tables and arrays (a body table included)

# -- a request (answered with a 4xx and recorded) --------------------------------------
MAX_REQUEST_BYTES = 32 * 1024 * 1024  # a request body: 413 (FakeServer(max_body_bytes=))
MAX_FILE_BYTES = 5 * 1024 * 1024  # one multipart file: 413 (FakeServer(max_file_bytes=))
MAX_PARTS = 100  # multipart parts: 413
MAX_JSON_DEPTH = 100  # nesting of a JSON body: 400
BODY_TIMEOUT = 10.0  # seconds for a whole request body to arrive: 408 (FakeServer(body_timeout=))

# -- playing -----------------------------------------------------------------------------
MAX_WRITE_BYTES = 64 * 1024  # gapless events share one write up to this size
