"""Any result as a document: the one entry the renderers draw from.

Each result type has one builder here; a renderer calls :func:`as_document` on what it is given,
so ``renderer(fmt).render(result)`` works for every result and every format, and a new format is
one class that draws :class:`~tracekit.reports.document.Document` s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tracekit.reports.document import Document, Format
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


def _lazy(module: str, name: str) -> Callable[[Any], Document]:
    """The builder ``name`` of ``tracekit.reports.<module>``, imported when first called: ``tracekit
    analyze`` draws analyses only, and need not import the tables of every other report."""

    def build(result: Any) -> Document:
        built: Document = getattr(importlib.import_module(f"tracekit.reports.{module}"), name)(result)
        return built

    return build


#: Every result type a report is made of, and its document's builder.
BUILDERS: dict[type, Callable[[Any], Document]] = {
    SweepMatrix: _lazy("sweep_render", "sweep_document"),
    CaptureSummary: _lazy("capture_tables", "capture_document"),
    ABCapture: _lazy("capture_tables", "ab_document"),
    LoaderProbe: _lazy("tool_reports", "loader_report"),
    ParamAudit: _lazy("tool_reports", "audit_report"),
    Doctor: _lazy("doctor_report", "doctor_report"),
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
        from tracekit.reports.layout import analysis_document, view_for  # noqa: PLC0415  (analyses only)

        return analysis_document(result, view_for(fmt, result, top=top))
    if isinstance(result, Comparison):
        from tracekit.reports.compare_document import comparison_document  # noqa: PLC0415  (compare only)

        return comparison_document(result, top=15 if top is None else top)
    builder = BUILDERS.get(type(result))
    if builder is None:
        raise TypeError(f"no report for a {type(result).__name__}")
    return builder(result)
