"""The JSON report: the typed result itself (a document's source), under its versioned schema."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit.reports.document import Document, Format
from tracekit.results.ab import ABCapture, dump_ab
from tracekit.results.analysis import Analysis
from tracekit.results.capture import CaptureSummary, dump_capture_summary
from tracekit.results.compare import Comparison, dump_comparison
from tracekit.results.io import dump_analysis
from tracekit.results.records import dump_record
from tracekit.results.sweep import SweepMatrix, dump_matrix

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.reports.documents import Renderable

#: How each result type is written (each loads back with its module's loader); others: as a record.
_DUMPS: dict[type, Callable[[Any], str]] = {
    Analysis: dump_analysis,
    Comparison: dump_comparison,
    SweepMatrix: dump_matrix,
    CaptureSummary: lambda s: dump_capture_summary(s).decode("utf-8"),
    ABCapture: lambda r: dump_ab(r).decode("utf-8"),
}


class JsonRenderer:
    """Every number of a result as JSON: the document's source, which loads back typed (an analysis
    with :func:`tracekit.results.io.load_analysis`, a comparison or a matrix with msgspec)."""

    name = "json"
    format = Format.JSON

    def render(self, document: Renderable) -> str:
        """The result (a document's source) as indented JSON text."""
        source = document.source if isinstance(document, Document) else document
        if source is None:
            raise TypeError(f"a {document.kind} document without its result has no JSON")  # type: ignore[union-attr]
        dump = _DUMPS.get(type(source))
        return dump(source) if dump is not None else dump_record(source).decode("utf-8")
