"""A tiny threaded raw-socket HTTP/1.1 upstream for the fault proxy's tests.

Every response carries ``Connection: close`` and the server closes after it. Routes:

- ``GET /bytes?n=N``: ``N`` bytes of ``pattern(N)`` with a Content-Length.
- ``GET /stream?events=K&gap=S``: a chunked SSE-like body, one chunk per event, ``S`` s apart.
- anything else: 200 with the request body echoed back.

Each connection's raw request bytes are kept (``received``), complete or not, so a test
can see what reached the upstream.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

__all__ = ["EchoServer", "event", "pattern", "request"]

_POLL = 0.05  # how often blocked threads look at the stop flag
_SEND_TIMEOUT = 10.0


def pattern(n: int) -> bytes:
    """``n`` deterministic, non-repeating-looking bytes."""
    return bytes((i * 7 + i // 251) % 256 for i in range(n))


def event(i: int) -> bytes:
    """The ``i``-th event of a /stream body (0-based)."""
    return f"id: {i}\ndata: event {i}\n\n".encode()


def request(path: str, method: str = "GET", body: bytes = b"") -> bytes:
    """A raw HTTP/1.1 request for a raw-socket client."""
    head = f"{method} {path} HTTP/1.1\r\nHost: upstream\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


class EchoServer:
    """The upstream: a listener thread plus one thread per connection."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(_POLL)
        self.host, self.port = "127.0.0.1", self._listener.getsockname()[1]
        self._stopping = threading.Event()
        self._cond = threading.Condition()
        self._received: list[bytes] = []
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def received(self) -> tuple[bytes, ...]:
        """Raw bytes of every finished upstream connection, in the order they ended."""
        with self._cond:
            return tuple(self._received)

    def wait_received(self, count: int, timeout: float) -> tuple[bytes, ...]:
        """Wait until ``count`` connections have ended; AssertionError after ``timeout``."""
        self._wait(lambda: len(self._received) >= count, timeout, f"{count} upstream connection(s)")
        return self.received

    def start(self) -> EchoServer:
        self._spawn(self._accept_loop, "echo-accept")
        return self

    def stop(self) -> None:
        self._stopping.set()
        for thread in list(self._threads):
            thread.join(5)
        self._listener.close()

    def __enter__(self) -> EchoServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        with self._cond:
            if not self._cond.wait_for(ready, timeout):
                raise AssertionError(f"waited {timeout}s for {what}")

    def _spawn(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            self._spawn(self._serve, "echo-conn", conn)

    def _serve(self, conn: socket.socket) -> None:
        raw = b""
        try:
            conn.settimeout(_POLL)
            raw = self._read_request(conn)
            if _complete(raw):
                conn.settimeout(_SEND_TIMEOUT)  # a paced proxy may hold a send for a while
                self._answer(conn, raw)
        except OSError:
            pass  # the proxy cut us: that is what the tests do
        finally:
            conn.close()
            with self._cond:
                self._received.append(raw)
                self._cond.notify_all()

    def _read_request(self, conn: socket.socket) -> bytes:
        raw = b""
        while not self._stopping.is_set() and not _complete(raw):
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            if not data:
                break
            raw += data
        return raw

    def _answer(self, conn: socket.socket, raw: bytes) -> None:
        head, _, body = raw.partition(b"\r\n\r\n")
        target = urlsplit(head.split(b" ")[1].decode())
        query = {k: v[0] for k, v in parse_qs(target.query).items()}
        if target.path == "/stream":
            self._stream(conn, int(query.get("events", "3")), float(query.get("gap", "0")))
            return
        payload = pattern(int(query["n"])) if target.path == "/bytes" else body
        conn.sendall(_head("application/octet-stream", f"Content-Length: {len(payload)}") + payload)

    def _stream(self, conn: socket.socket, events: int, gap: float) -> None:
        conn.sendall(_head("text/event-stream", "Transfer-Encoding: chunked"))
        for i in range(events):
            if i and self._stopping.wait(gap):
                return
            data = event(i)
            conn.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        conn.sendall(b"0\r\n\r\n")


def _head(content_type: str, framing: str) -> bytes:
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{framing}\r\nConnection: close\r\n\r\n"
    ).encode()


def _complete(raw: bytes) -> bool:
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return True
