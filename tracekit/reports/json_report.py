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
from tracekit.errors import InputError

if TYPE_CHECKING:
    import polars as pl

    from tracekit.analyzers.analysis import Analysis
    from tracekit.analyzers.verdict import Finding
    from tracekit.results.capture import CaptureSummary

SCHEMA: Final = "tracekit.analysis"
SCHEMA_VERSION: Final = "1.2"
#: The longest GPU idle intervals listed (all are summed in ``idle_causes.per_rank``).
IDLE_INTERVALS: Final = 50


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 4)
    return value


def _rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in row.items()} for row in df.to_dicts()]


def to_document(
    analysis: Analysis,
    *,
    top: int | None = None,
    capture: CaptureSummary | None = None,
    analysis_seconds: float | None = None,
) -> dict[str, Any]:
    """The report as plain Python data (dicts keep the schema's key order).

    ``capture`` is the ``summary.json`` of ``tracekit capture`` when the traces came with one;
    ``analysis_seconds`` how long reading and analyzing took.
    """
    facts = asdict(analysis.facts)
    facts["skipped"] = [{"path": p, "reason": r} for p, r in analysis.facts.skipped]
    kernels = analysis.kernels.top if top is None else analysis.kernels.top.head(top)
    verdict = analysis.verdict
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tracekit_version": __version__,
        "verdict": {
            "measured_on": verdict.measured_on,
            "primary": _finding(verdict.primary),
            "secondary": [_finding(f) for f in verdict.secondary],
            "costs": _rows(verdict.costs),
        },
        "run": facts,
        "analysis_seconds": _clean(analysis_seconds),
        "capture": None if capture is None else msgspec.to_builtins(capture),
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
        "collectives": {
            "instances": _rows(analysis.collectives.instances),
            "per_rank": _rows(analysis.collectives.per_rank),
        },
        "stragglers": {
            "stragglers": [_clean_dict(asdict(s)) for s in analysis.stragglers.stragglers],
            "per_rank": _rows(analysis.stragglers.per_rank),
            "lateness_matrix": _rows(analysis.stragglers.matrix),
        },
        "dataloader": {
            "measure": analysis.dataloader.measure,
            "per_rank": _rows(analysis.dataloader.per_rank),
            "per_step": _rows(analysis.dataloader.per_step),
        },
        "host_syncs": {"per_rank": _rows(analysis.syncs.per_rank), "per_step": _rows(analysis.syncs.per_step)},
        "idle_causes": None
        if analysis.idle is None
        else {
            "per_rank": _rows(analysis.idle.per_rank),
            "longest": _rows(
                analysis.idle.intervals.sort(["length_ns", "rank", "start_ns"], descending=[True, False, False]).head(
                    IDLE_INTERVALS
                )
            ),
        },
        "host_breakdown": None
        if analysis.host_breakdown is None
        else {"per_rank": _rows(analysis.host_breakdown.per_rank), "per_step": _rows(analysis.host_breakdown.per_step)},
    }


def _clean_dict(data: dict[str, Any]) -> dict[str, Any]:
    return {k: _clean(v) for k, v in data.items()}


def _finding(finding: Finding) -> dict[str, Any]:
    return {
        "kind": finding.kind,
        "title": finding.title,
        "share_pct": _clean(finding.share_pct),
        "confidence": finding.confidence,
        "evidence": list(finding.evidence),
        "recommendations": list(finding.recommendations),
        "numbers": _clean_dict(dict(finding.numbers)),
    }


def render_json(analysis: Analysis, *, top: int | None = None) -> str:
    """The JSON report as text (indented, keys in schema order, ends with a newline)."""
    return dump_document(to_document(analysis, top=top))


def dump_document(doc: dict[str, Any]) -> str:
    """A report document as JSON text."""
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"


def load_document(text: str | bytes, *, source: str) -> dict[str, Any]:
    """Parse a saved JSON report; a file that is not one is an InputError naming it."""
    try:
        doc = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise InputError(f"not valid JSON ({exc})", path=source) from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise InputError(f'not a tracekit report (no "schema": "{SCHEMA}")', path=source)
    major = str(doc.get("schema_version", "")).split(".")[0]
    if major != SCHEMA_VERSION.split(".")[0]:
        raise InputError(
            f"report schema version {doc.get('schema_version')} is not readable by this tracekit "
            f"(reads {SCHEMA_VERSION.split('.')[0]}.x)",
            path=source,
        )
    return doc
