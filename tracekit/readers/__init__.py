"""Readers: trace files on disk -> a :class:`~tracekit.model.Run` (imports model only)."""

from __future__ import annotations

from tracekit.readers.discover import discover, parse_rank_spec, rank_from_name
from tracekit.readers.kineto import KinetoTrace, read_kineto
from tracekit.readers.load import load_run

__all__ = ["KinetoTrace", "discover", "load_run", "parse_rank_spec", "rank_from_name", "read_kineto"]
