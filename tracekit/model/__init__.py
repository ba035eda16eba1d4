"""The event schema, the ``Run`` and event classification (imports polars only)."""

from __future__ import annotations

from tracekit.model.classify import category_expr, classify
from tracekit.model.run import ProcessGroup, RankInfo, Run, SkippedFile
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

__all__ = [
    "CATEGORIES",
    "GPU_ACTIVITY_KINDS",
    "GPU_KINDS",
    "KINDS",
    "SCHEMA",
    "Category",
    "Kind",
    "ProcessGroup",
    "RankInfo",
    "Run",
    "SkippedFile",
    "category_expr",
    "classify",
    "empty_events",
]
