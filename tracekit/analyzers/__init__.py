"""Analyzers: pure functions from a :class:`~tracekit.model.Run` to typed results."""

from __future__ import annotations

from tracekit.analyzers.analysis import Outcome, analyze, details_frame, run_analysis
from tracekit.analyzers.annotations import AnnotationResult, annotation_breakdown
from tracekit.analyzers.breakdown import BreakdownResult, gpu_breakdown
from tracekit.analyzers.compare import Noise, compare, evaluate_gate
from tracekit.analyzers.kernels import KernelResult, kernel_summary
from tracekit.analyzers.overlap import OverlapResult, comm_overlap
from tracekit.analyzers.steps import StepResult, analyze_steps, gpu_activity

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
