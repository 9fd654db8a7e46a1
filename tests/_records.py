"""Ledger records built by hand, for the tests of the pure checks.

Each test file's ``attempt()`` keeps the defaults its checks need (a 503, events at
given times, an ending) and leaves the request itself to ``request_record``.
"""

from __future__ import annotations

from typing import Any

from fake_servers import Attempt

__all__ = ["PATH", "request_record"]

PATH = "/v1/stream"


def request_record(
    seq: int = 1,
    *,
    number: int | None = None,
    method: str = "GET",
    path: str = PATH,
    headers: tuple[tuple[str, str], ...] = (),
    body: tuple[int, str] = (0, ""),
    arrived_at: float = 0.0,
    **fields: Any,
) -> Attempt:
    """The ledger's record of request ``seq`` (``number`` on its endpoint, ``seq`` unless
    given): a GET of PATH without headers or a body unless given (``body``: its size and
    SHA-256), with no query. ``fields`` are the record's other fields (``status``,
    ``events``, ``ended_at``, ``end``, ...), as ``Attempt`` takes them."""
    return Attempt(
        seq=seq,
        number=seq if number is None else number,
        method=method,
        path=path,
        query="",
        headers=headers,
        body_size=body[0],
        body_sha256=body[1],
        arrived_at=arrived_at,
        **fields,
    )
