"""SC-SSE, the request and the connection: headers, redirects, HTTP 204.

Ids SC-SSE-19 to SC-SSE-40 belong to this module, each written where its case is made.
"""

from __future__ import annotations

__all__: list[str] = []
