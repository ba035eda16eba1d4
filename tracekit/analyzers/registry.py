"""The registry of analyses: the entries the map and the reduce run.

To add an analysis: write its module (a per-rank function of a ``RankContext`` returning
frames, a cross-rank function of the ``Reduced`` shards returning its typed result, the
result's Struct) and add one line to :data:`ANALYSES` (the built-ins' list,
:mod:`tracekit.analyzers.builtin`) with its ``title``: the result goes to
``Analysis.sections`` and every report shows it (``tracekit/analyzers/launches.py`` is one).
Name what it reads in ``requires`` (an intermediate of :mod:`tracekit.analyzers.shared`, or
another entry) and read it with ``red.result(entry)``: the reduce runs it first, so the list's
order carries no dependency.

This module and :mod:`tracekit.analyzers.mapreduce` are the core: they import no analysis
(a contract of ``.importlinter``). The built-ins are loaded by the module's name, as any other
list of entries would be, the first time :data:`ANALYSES` is read; a test or a tool may set it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from tracekit.analyzers.mapreduce import Entry

    #: The entries the map and the reduce run (the built-ins unless set).
    ANALYSES: tuple[Entry[Any], ...]

#: The module whose ``ANALYSES`` are the built-in analyses.
BUILTIN: Final = "tracekit.analyzers.builtin"


def __getattr__(name: str) -> Any:
    """:data:`ANALYSES`, the built-ins loaded on first use (and kept: a set value stands)."""
    if name != "ANALYSES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    entries: tuple[Entry[Any], ...] = importlib.import_module(BUILTIN).ANALYSES
    globals()["ANALYSES"] = entries
    return entries
