"""Any result as a document: the one entry the renderers draw from.

Each result type has one builder here; a renderer calls :func:`as_document` on what it is given,
so ``renderer(fmt).render(result)`` works for every result and every format, and a new format is
one class that draws :class:`~tracekit.reports.document.Document` s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit.reports.capture_tables import ab_document, capture_document
from tracekit.reports.compare_document import comparison_document
from tracekit.reports.doctor_report import doctor_report
from tracekit.reports.document import Document, Format
from tracekit.reports.layout import analysis_document, view_for
from tracekit.reports.sweep_render import sweep_document
from tracekit.reports.tool_reports import audit_report, loader_report
from tracekit.results.ab import ABCapture
from tracekit.results.analysis import Analysis
from tracekit.results.capture import CaptureSummary
from tracekit.results.compare import Comparison
from tracekit.results.doctor import Doctor
from tracekit.results.loader_probe import LoaderProbe
from tracekit.results.param_audit import ParamAudit
from tracekit.results.sweep import SweepMatrix

if TYPE_CHECKING:
    from collections.abc import Callable

#: Every result type a report is made of, and its document's builder.
BUILDERS: dict[type, Callable[[Any], Document]] = {
    SweepMatrix: sweep_document,
    CaptureSummary: capture_document,
    ABCapture: ab_document,
    LoaderProbe: loader_report,
    ParamAudit: audit_report,
    Doctor: doctor_report,
}

#: What a renderer is given: a document, or a result to make one of.
Renderable = (
    Document | Analysis | Comparison | SweepMatrix | CaptureSummary | ABCapture | LoaderProbe | ParamAudit | Doctor
)


def as_document(result: object, fmt: Format, *, top: int | None = None) -> Document:
    """``result`` as a document for ``fmt`` (a document is drawn as it is); ``top``: rows of the
    top-N tables."""
    if isinstance(result, Document):
        return result
    if isinstance(result, Analysis):
        return analysis_document(result, view_for(fmt, result, top=top))
    if isinstance(result, Comparison):
        return comparison_document(result, top=15 if top is None else top)
    builder = BUILDERS.get(type(result))
    if builder is None:
        raise TypeError(f"no report for a {type(result).__name__}")
    return builder(result)
