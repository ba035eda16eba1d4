"""Readers: trace files on disk -> a :class:`~tracekit.model.Run` (imports model only)."""

from __future__ import annotations

from tracekit.readers.discover import capture_summary, discover, parse_rank_spec, rank_from_name
from tracekit.readers.kineto import read_kineto
from tracekit.readers.load import load_run, read_file
from tracekit.readers.trace import RankTrace

__all__ = [
    "RankTrace",
    "capture_summary",
    "discover",
    "load_run",
    "parse_rank_spec",
    "rank_from_name",
    "read_file",
    "read_kineto",
]
