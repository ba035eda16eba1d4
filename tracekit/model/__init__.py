"""The event schema, the counters table, the ``Run``, the communication taxonomy and classification."""

from __future__ import annotations

from tracekit.model.classify import category_expr, classify, classify_run
from tracekit.model.counters import COUNTER_SCHEMA, DEVICE_TYPES, DeviceType, empty_counters
from tracekit.model.run import ProcessGroup, RankInfo, Run, RunMeta, SkippedFile
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
    "COUNTER_SCHEMA",
    "DEVICE_TYPES",
    "GPU_ACTIVITY_KINDS",
    "GPU_KINDS",
    "KINDS",
    "SCHEMA",
    "Category",
    "CommPattern",
    "DeviceType",
    "Kind",
    "ProcessGroup",
    "RankInfo",
    "Run",
    "RunMeta",
    "SkippedFile",
    "category_expr",
    "classify",
    "classify_run",
    "empty_counters",
    "empty_events",
    "kernel_op_expr",
]
