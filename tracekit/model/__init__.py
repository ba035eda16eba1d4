"""The event schema, the ``Run``, the communication taxonomy and event classification (imports polars)."""

from __future__ import annotations

from tracekit.model.classify import category_expr, classify, classify_run
from tracekit.model.run import RankInfo, Run, SkippedFile
from tracekit.model.schema import (
    CATEGORIES,
    GPU_ACTIVITY_KINDS,
    GPU_KINDS,
    KINDS,
    SCHEMA,
    Category,
    Kind,
    empty_events,
)
from tracekit.model.taxonomy import COMM_PATTERNS, CommPattern, kernel_op_expr

__all__ = [
    "CATEGORIES",
    "COMM_PATTERNS",
    "GPU_ACTIVITY_KINDS",
    "GPU_KINDS",
    "KINDS",
    "SCHEMA",
    "Category",
    "CommPattern",
    "Kind",
    "RankInfo",
    "Run",
    "SkippedFile",
    "category_expr",
    "classify",
    "classify_run",
    "empty_events",
    "kernel_op_expr",
]
