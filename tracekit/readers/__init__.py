"""Readers: trace files on disk -> a :class:`~tracekit.model.Run` (imports model only)."""

from __future__ import annotations

from tracekit.readers.discover import discover
from tracekit.readers.formats import FORMATS, InputFormat, format_of, read_file
from tracekit.readers.kineto import read_kineto
from tracekit.readers.load import load_run
from tracekit.readers.ranks import parse_rank_spec, rank_from_name
from tracekit.readers.trace import RankTrace

__all__ = [
    "FORMATS",
    "InputFormat",
    "RankTrace",
    "discover",
    "format_of",
    "load_run",
    "parse_rank_spec",
    "rank_from_name",
    "read_file",
    "read_kineto",
]
