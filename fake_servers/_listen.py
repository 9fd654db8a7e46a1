"""The listening socket the fake server and the fault proxy bind before they serve, and
how they close it."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
import struct
from typing import Any

__all__ = ["close_listener", "listening_socket", "rst_on_close"]


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


def close_listener(server: asyncio.Server) -> None:
    """``server.close()``, resetting each connection it accepted and has not handed on.

    asyncio hands an accepted socket to a task of its own (``_accept_connection2``) that
    makes the transport. One that has not started when the server closes fails to
    attach to it (an AssertionError in ``Server._attach``, shown only in debug mode) and
    never closes the socket: its client hangs until the collector closes it, with a
    ResourceWarning (in 30 stops while 20 clients connected: 23 sockets). Called on the
    server's loop; such a task is cancelled before it starts, and its socket reset.
    """
    with contextlib.suppress(RuntimeError):  # no running loop: nothing waits to start
        for task in asyncio.all_tasks():
            conn = _unhanded(task, server)
            if conn is not None:
                task.cancel()
                rst_on_close(conn)
                conn.close()
    server.close()


def _unhanded(task: asyncio.Task[Any], server: asyncio.Server) -> socket.socket | None:
    """The socket ``task`` would hand to ``server``'s protocol, if it has not started."""
    coro = task.get_coro()
    if getattr(coro, "__name__", "") != "_accept_connection2":
        return None
    if not inspect.iscoroutine(coro) or inspect.getcoroutinestate(coro) != inspect.CORO_CREATED:
        return None  # started: it has attached its transport, and the protocol gets it
    frame = coro.cr_frame
    if frame is None:
        return None
    args = frame.f_locals
    conn = args.get("conn")
    return conn if args.get("server") is server and isinstance(conn, socket.socket) else None


def rst_on_close(sock: socket.socket) -> None:
    """Make closing ``sock`` send an RST (SO_LINGER 0), so its peer learns at once."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
