"""The event schema, the counters table, the ``Run`` and event classification (imports polars only)."""

from __future__ import annotations

from tracekit.model.classify import category_expr, classify
from tracekit.model.counters import COUNTER_SCHEMA, DEVICE_TYPES, DeviceType, empty_counters
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

__all__ = [
    "CATEGORIES",
    "COUNTER_SCHEMA",
    "DEVICE_TYPES",
    "GPU_ACTIVITY_KINDS",
    "GPU_KINDS",
    "KINDS",
    "SCHEMA",
    "Category",
    "DeviceType",
    "Kind",
    "RankInfo",
    "Run",
    "SkippedFile",
    "category_expr",
    "classify",
    "empty_counters",
    "empty_events",
]
