"""The JSON report: every number the other reports show, under a versioned schema.

Keys come in a fixed order; times are integer nanoseconds (``*_ns``), shares are
percentages (``*_pct``) rounded to 4 decimals. ``schema`` and ``schema_version`` say how
to read it; a consumer should refuse a major version it does not know.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Final

import msgspec

from tracekit import __version__

if TYPE_CHECKING:
    import polars as pl

    from tracekit.analyzers.analysis import Analysis

SCHEMA: Final = "tracekit.analysis"
SCHEMA_VERSION: Final = "1.0"


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 4)
    return value


def _rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in row.items()} for row in df.to_dicts()]


def to_document(analysis: Analysis, *, top: int | None = None) -> dict[str, Any]:
    """The report as plain Python data (dicts keep the schema's key order)."""
    facts = asdict(analysis.facts)
    facts["skipped"] = [{"path": p, "reason": r} for p, r in analysis.facts.skipped]
    kernels = analysis.kernels.top if top is None else analysis.kernels.top.head(top)
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tracekit_version": __version__,
        "run": facts,
        "steps": {
            "per_step": _rows(analysis.steps.steps),
            "per_rank": _rows(analysis.steps.stats),
        },
        "gpu_breakdown": {
            "window": analysis.breakdown.window,
            "per_rank": _rows(analysis.breakdown.per_rank),
            "per_step": _rows(analysis.breakdown.per_step),
        },
        "overlap": {
            "per_rank": _rows(analysis.overlap.per_rank),
            "per_step": _rows(analysis.overlap.per_step),
        },
        "kernels": {
            "by_category": _rows(analysis.kernels.by_category),
            "top": _rows(kernels),
        },
        "annotations": {
            "level": analysis.annotations.level,
            "summary": _rows(analysis.annotations.summary),
            "per_rank": _rows(analysis.annotations.per_rank),
        },
    }


def render_json(analysis: Analysis, *, top: int | None = None) -> str:
    """The JSON report as text (indented, keys in schema order, ends with a newline)."""
    encoded = msgspec.json.encode(to_document(analysis, top=top))
    return msgspec.json.format(encoded, indent=2).decode() + "\n"
