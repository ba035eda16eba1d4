"""How much text an input file holds, found without reading it (and without importing the
readers): for the plans of who reads what (:mod:`tracekit.pipeline.shards`, the local executor)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pathlib import Path

#: The first two bytes of a gzip file.
GZIP_MAGIC: Final = b"\x1f\x8b"


def data_bytes(path: Path) -> int:
    """About how many bytes decoding ``path`` reads: a gzip file's uncompressed size (0 if unreadable)."""
    try:
        size = path.stat().st_size
        if size < 18:
            return size
        with path.open("rb") as handle:
            if handle.read(2) != GZIP_MAGIC:
                return size
            handle.seek(-4, os.SEEK_END)
            return max(size, int.from_bytes(handle.read(4), "little"))  # ISIZE: the size mod 2**32
    except OSError:
        return 0
