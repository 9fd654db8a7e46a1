"""A listener closed while clients connect leaves none of them hanging and no socket open.

asyncio hands each accepted socket to a task of its own; one that had not started when
the server closed failed to attach (CPython 3.11) and never closed its socket. Beside a
second suite that surfaced as a ResourceWarning in a later test; here, 30 stops while 20
clients connected left 23 sockets open, and their clients waiting for an answer that
never came (``fake_servers._listen.close_listener``).
"""

from __future__ import annotations

import contextlib
import gc
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator

import pytest

from fake_servers import FakeServer, FaultProxy

ROUNDS = 30
CLIENTS = 20
# How long a client may wait to learn its connection is gone: a reset or a close arrives
# in microseconds on loopback; a socket nobody closes never answers at all.
ANSWER = 2.0


def _connect_while(port: int, close: Callable[[], None], round_: int) -> list[socket.socket]:
    socks: list[socket.socket] = []

    def connect() -> None:
        for _ in range(CLIENTS):
            with contextlib.suppress(OSError):  # refused: the listener had closed
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=ANSWER))

    thread = threading.Thread(target=connect)
    thread.start()
    time.sleep(0.001 * (round_ % 5))  # close at varying points of the connects
    close()
    thread.join()
    return socks


def _hung(socks: list[socket.socket]) -> int:
    """How many clients heard nothing (an answer, a close, a reset) within ANSWER.

    Each sends a request first, as a client would: a handshake the closing listener
    never completed leaves a client that only reads waiting, with no peer to reset it
    (the kernel's, not the kit's: its socket is nowhere in the process).
    """
    hung = 0
    for sock in socks:
        try:
            sock.sendall(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            sock.recv(1)
        except TimeoutError:
            hung += 1
        except OSError:
            pass  # reset
        finally:
            sock.close()
    return hung


@pytest.fixture
def unclosed() -> Iterator[Callable[[], list[str]]]:
    """The "unclosed" ResourceWarnings so far, after a collection, as a call."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)

        def seen() -> list[str]:
            gc.collect()
            return [str(w.message) for w in caught if "unclosed" in str(w.message)]

        yield seen


def test_a_server_stopped_while_clients_connect_answers_each(
    unclosed: Callable[[], list[str]],
) -> None:
    hung = 0
    for round_ in range(ROUNDS):
        server = FakeServer().start()
        port = int(server.url.rsplit(":", 1)[1])
        hung += _hung(_connect_while(port, server.stop, round_))
    assert hung == 0
    left = unclosed()
    assert not left, left[:3]


def test_a_proxy_going_offline_while_clients_connect_answers_each(
    fake_server: FakeServer, unclosed: Callable[[], list[str]]
) -> None:
    hung = 0
    with FaultProxy(fake_server.url).start() as proxy:
        for round_ in range(ROUNDS):
            hung += _hung(_connect_while(proxy.port, proxy.offline, round_))
            proxy.online()
    assert hung == 0
    left = unclosed()
    assert not left, left[:3]
