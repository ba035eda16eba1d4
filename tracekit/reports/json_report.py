"""The JSON report: the typed analysis itself, under a versioned schema (see :mod:`tracekit.results.io`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.results.io import dump_analysis

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis


class JsonRenderer:
    """Every number of the analysis as JSON; loads back with :func:`tracekit.results.io.load_analysis`."""

    name = "json"

    def render(self, analysis: Analysis) -> str:
        """The analysis as indented JSON text."""
        return dump_analysis(analysis)
