"""The small HTTP server a browser adapter opens its page from.

It serves the client page's directory on 127.0.0.1 (any free port) and the kit's own
files (the native EventSource page) under the reserved prefix ``/__streamcheck/``.
Files only, GET and HEAD, no listing; it runs in a daemon thread of its own.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from importlib.resources import files
from pathlib import Path
from typing import Any

__all__ = ["KIT_DIR", "KIT_PREFIX", "PageServer"]

KIT_PREFIX = "/__streamcheck/"
KIT_DIR = Path(str(files("pytest_streamcheck") / "browser"))


class _Handler(http.server.SimpleHTTPRequestHandler):
    # Keep-alive: a page of ES modules is a dozen requests, each a connection in HTTP/1.0.
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: a response goes out as two writes (head, then file), and on a kept-alive
    # connection Nagle held the file back until the browser's delayed ACK of the head,
    # about 40 ms a module; the example page's load took 290 ms, now 147 ms (medians of
    # 3 runs of 30 resets, benchmarks/browser_reset.py).
    disable_nagle_algorithm = True

    def __init__(self, *args: Any, root: Path | None, **kwargs: Any) -> None:
        self._page_root = root
        super().__init__(*args, directory=str(root or KIT_DIR), **kwargs)

    def translate_path(self, path: str) -> str:
        clean = path.split("?", 1)[0].split("#", 1)[0]
        if clean.startswith(KIT_PREFIX):
            rest = clean[len(KIT_PREFIX) :]
            return str(KIT_DIR / os.path.normpath("/" + rest).lstrip("/"))
        if self._page_root is None:
            return str(KIT_DIR / "__none__")  # only the kit's files: everything else 404s
        return super().translate_path(path)

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(404, "no directory listings")

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")  # a page edited between runs is fresh
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a page's requests are not the run's output."""


class PageServer:
    """Serves ``root`` (the client page's directory; None: the kit's files only)."""

    def __init__(self, root: Path | None) -> None:
        handler = functools.partial(_Handler, root=root)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="streamcheck-pages", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5.0)
