"""The listening socket the fake server and the fault proxy bind before they serve."""

from __future__ import annotations

import socket

__all__ = ["listening_socket"]


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking TCP listener on ``host:port`` (0: a free port), bound here so that
    the port is known at once and early connects wait in the backlog.

    IPPROTO_TCP is named: asyncio sets TCP_NODELAY on accepted sockets only for a
    listener that says so (proto 0 left Nagle on: 40 ms on every small response).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
