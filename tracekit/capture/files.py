"""File names and atomic writes shared by the capture stage (no torch here)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

SUMMARY = "summary.json"


def trace_name(rank: int) -> str:
    """The trace file of one rank."""
    return f"rank{rank}.pt.trace.json.gz"


def phases_name(rank: int) -> str:
    """The per-step phase timings of one rank."""
    return f"phases.rank{rank}.json"


def error_name(rank: int) -> str:
    """Where a crashed rank leaves its traceback."""
    return f".rank{rank}.error.txt"


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` under a temporary name, then rename: readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON atomically (see :func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def gzip_atomic(source: Path, target: Path) -> None:
    """Gzip ``source`` into ``target`` (temporary name, then rename) and remove ``source``."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with source.open("rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, length=1 << 20)
    tmp.replace(target)
    source.unlink()
