"""Analyzers: pure functions from a :class:`~tracekit.model.Run` to typed results.

The names below are imported when first used (PEP 562): ``tracekit compare`` of two saved
analyses imports :mod:`tracekit.analyzers.compare` alone, without polars and every analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.analyzers.compare import Noise, compare, evaluate_gate
from tracekit.lazy import lazy_exports

if TYPE_CHECKING:
    from tracekit.analyzers.analysis import Outcome, analyze, details_frame, run_analysis
    from tracekit.analyzers.annotations import AnnotationResult, annotation_breakdown
    from tracekit.analyzers.breakdown import BreakdownResult, gpu_breakdown
    from tracekit.analyzers.kernels import KernelResult, kernel_summary
    from tracekit.analyzers.overlap import OverlapResult, comm_overlap
    from tracekit.analyzers.steps import StepResult, analyze_steps, gpu_activity

#: Each lazily imported name, and its module.
_LAZY = {
    **dict.fromkeys(("Outcome", "analyze", "details_frame", "run_analysis"), "analysis"),
    **dict.fromkeys(("AnnotationResult", "annotation_breakdown"), "annotations"),
    **dict.fromkeys(("BreakdownResult", "gpu_breakdown"), "breakdown"),
    **dict.fromkeys(("KernelResult", "kernel_summary"), "kernels"),
    **dict.fromkeys(("OverlapResult", "comm_overlap"), "overlap"),
    **dict.fromkeys(("StepResult", "analyze_steps", "gpu_activity"), "steps"),
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "AnnotationResult",
    "BreakdownResult",
    "KernelResult",
    "Noise",
    "Outcome",
    "OverlapResult",
    "StepResult",
    "analyze",
    "analyze_steps",
    "annotation_breakdown",
    "comm_overlap",
    "compare",
    "details_frame",
    "evaluate_gate",
    "gpu_activity",
    "gpu_breakdown",
    "kernel_summary",
    "run_analysis",
]
