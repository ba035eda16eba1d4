"""Readers: trace files on disk -> a :class:`~tracekit.model.Run` (imports model only).

The names below are imported on first use, so that a light module of the package (such as
:mod:`tracekit.readers.compressed`) is imported without the readers' dependencies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from tracekit.readers.discover import capture_summary, discover
    from tracekit.readers.formats import FORMATS, InputFormat, format_of, read_file
    from tracekit.readers.kineto import read_kineto
    from tracekit.readers.load import load_run
    from tracekit.readers.ranks import parse_rank_spec, rank_from_name
    from tracekit.readers.trace import RankTrace

#: Each public name -> the module that defines it.
_EXPORTS: Final = {
    "FORMATS": "formats",
    "InputFormat": "formats",
    "RankTrace": "trace",
    "capture_summary": "discover",
    "discover": "discover",
    "format_of": "formats",
    "load_run": "load",
    "parse_rank_spec": "ranks",
    "rank_from_name": "ranks",
    "read_file": "formats",
    "read_kineto": "kineto",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "FORMATS",
    "InputFormat",
    "RankTrace",
    "capture_summary",
    "discover",
    "format_of",
    "load_run",
    "parse_rank_spec",
    "rank_from_name",
    "read_file",
    "read_kineto",
]
