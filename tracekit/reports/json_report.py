"""The JSON report: the typed analysis (or comparison) itself, under a versioned schema (:mod:`tracekit.results.io`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.reports.document import Document
from tracekit.results.analysis import Analysis
from tracekit.results.compare import dump_comparison
from tracekit.results.io import dump_analysis

if TYPE_CHECKING:
    from tracekit.results.compare import Comparison
    from tracekit.results.sweep import SweepMatrix


class JsonRenderer:
    """Every number of the analysis as JSON; loads back with :func:`tracekit.results.io.load_analysis`."""

    name = "json"

    def render(self, document: Document | Analysis) -> str:
        """The analysis (a document's source) as indented JSON text."""
        source = document.source if isinstance(document, Document) else document
        if not isinstance(source, Analysis):
            raise TypeError(f"no JSON for a {type(source).__name__} document")
        return dump_analysis(source)

    def render_comparison(self, comparison: Comparison) -> str:
        """The comparison as indented JSON text (loads back as a :class:`Comparison` with msgspec)."""
        return dump_comparison(comparison)

    def render_sweep(self, matrix: SweepMatrix) -> str:
        """The sweep's matrix as indented JSON text (loads back with :func:`tracekit.results.sweep.load_matrix`)."""
        from tracekit.results.sweep import dump_matrix  # noqa: PLC0415

        return dump_matrix(matrix)
