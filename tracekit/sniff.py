"""What a file says in its first bytes: the ``schema`` of a tracekit record.

Shared ground (every layer may import it, and it imports nothing of tracekit): the readers tell
tracekit's own outputs in a folder by it, and ``compare`` tells a saved analysis from traces
without importing the readers (whose package imports polars, a fifth of ``compare``'s time on
saved analyses).
"""

from __future__ import annotations

from typing import Final

__all__ = ["HEAD_BYTES", "schema_in"]

#: How much of a file's (gunzipped) start is read to tell whether tracekit wrote it.
HEAD_BYTES: Final = 4096


def schema_in(head: bytes) -> str | None:
    """The ``schema`` a JSON document declares as its first field (tracekit's records do), if any."""
    marker = b'"schema":'
    at = head.find(marker)
    if at < 0 or head[:at].strip(b" \t\r\n{") != b"":
        return None
    rest = head[at + len(marker) :].lstrip()
    if not rest.startswith(b'"'):
        return None
    end = rest.find(b'"', 1)
    return rest[1:end].decode("utf-8", "replace") if end > 0 else None
