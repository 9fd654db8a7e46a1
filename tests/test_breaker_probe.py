"""SC-BREAKER-3/4's one probe, on hand-built records: a probe is over for the client when
the client closes its connection, even while the server still holds the request (CI:
the loaded server's delayed 503 outlived the client's own timer, and a correct client's
next probe, a cooldown later, was counted as a second one in flight)."""

from __future__ import annotations

from conformance._evidence import Evidence
from conformance.cases.breaker import _check_single_probe
from conformance.reference import ClientPolicy
from conformance.timing._noise import Noise
from fake_servers import Attempt, Connection

POLICY = ClientPolicy()  # the seeds' breaker: a 60 s cooldown
COOL = POLICY.breaker.cooldown


def _attempt(seq: int, number: int, path: str, at: float, end: float, port: int) -> Attempt:
    return Attempt(
        seq=seq,
        number=number,
        method="GET",
        path=path,
        query="",
        headers=(),
        body_size=0,
        body_sha256="",
        arrived_at=at,
        ended_at=end,
        peer_port=port,
        status=503,
    )


def _connection(seq: int, opened: float, port: int, closed: float, by: str) -> Connection:
    return Connection(
        seq=seq,
        opened_at=opened,
        peer=("127.0.0.1", 40000 + seq),
        fault="",
        upstream_port=port,
        closed_at=closed,
        closed_by=by,  # type: ignore[arg-type]
    )


def _evidence(probe_closed_by: str) -> Evidence:
    """Two callers fail; a cooldown later one probes, and the server holds the probe 3 s;
    the client closes the probe's connection at +1 s (or not at all), and the other caller's
    request comes at +2 s."""
    probe_at = COOL + 0.5
    attempts = (
        _attempt(1, 1, "/w0", 0.0, 0.2, 5001),
        _attempt(2, 1, "/w1", 0.0, 0.2, 5002),
        _attempt(3, 2, "/w0", probe_at, probe_at + 3.0, 5003),
        _attempt(4, 2, "/w1", probe_at + 2.0, probe_at + 2.2, 5004),
    )
    closed = probe_at + 1.0 if probe_closed_by == "client" else probe_at + 3.0
    connections = (
        _connection(1, -0.01, 5001, 0.2, "upstream"),
        _connection(2, -0.01, 5002, 0.2, "upstream"),
        _connection(3, probe_at - 0.01, 5003, closed, probe_closed_by),
        _connection(4, probe_at + 1.99, 5004, probe_at + 2.2, "upstream"),
    )
    return Evidence(attempts=attempts, connections=connections, noise=Noise(exact=True))


def test_a_probe_the_client_gave_up_on_is_over_when_it_closed_its_connection() -> None:
    outcome = _check_single_probe(_evidence("client"), POLICY)
    assert outcome.ok, outcome


def test_a_second_request_while_the_probe_is_open_is_two_probes() -> None:
    outcome = _check_single_probe(_evidence("upstream"), POLICY)
    assert not outcome.ok
    assert "2 requests while the probe was in flight" in outcome.observed
