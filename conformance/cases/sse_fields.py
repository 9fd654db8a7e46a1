"""SC-SSE, field parsing: event types, fields, ids, retry, BOM, blank lines, large events,
and comments handed to a consumer that asks for them.

Ids SC-SSE-41 to SC-SSE-80 belong to this module, each written where its case is made.
"""

from __future__ import annotations

__all__: list[str] = []
