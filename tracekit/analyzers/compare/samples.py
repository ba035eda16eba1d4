"""What a comparison reads from one analysis: per-step values (each step the mean over ranks) and
the figures measured once per run (peaks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from tracekit.results.vocab import MeasuredOn, PeakSource, SyncMeasure

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.results.analysis import Analysis


def measured_on(analysis: Analysis) -> MeasuredOn:
    """The timeline the analysis's costs are shares of."""
    return analysis.verdict.measured_on


def steps_frame(analysis: Analysis) -> pl.DataFrame:
    """rank, key (the step number, or its ordinal on the rank), duration_ns of the measured steps."""
    rows = analysis.steps.per_step
    if not rows:
        return pl.DataFrame(schema={"rank": pl.Int64, "key": pl.Int64, "duration_ns": pl.Float64})
    df = pl.DataFrame(
        {
            "rank": [r.rank for r in rows],
            "step": [r.step for r in rows],
            "start_ns": [r.start_ns for r in rows],
            "duration_ns": [float(r.duration_ns) for r in rows],
        },
        schema={"rank": pl.Int64, "step": pl.Int64, "start_ns": pl.Int64, "duration_ns": pl.Float64},
    )
    ordinal = pl.col("start_ns").rank("ordinal").over("rank").cast(pl.Int64) - 1
    return df.with_columns(key=pl.coalesce("step", ordinal)).select("rank", "key", "duration_ns")


def per_step(df: pl.DataFrame, value: str, how: str = "mean") -> np.ndarray:
    """One value per step key: the mean (or max) over ranks, in step order."""
    if df.height == 0:
        return np.empty(0)
    agg = pl.col(value).mean() if how == "mean" else pl.col(value).max()
    out = df.group_by("key").agg(agg.alias("v")).sort("key")["v"].cast(pl.Float64)
    return np.asarray(out.drop_nulls().to_numpy(), dtype=float)


def _frame(rows: Sequence[Any], fields: Sequence[str]) -> pl.DataFrame:
    return pl.DataFrame([{f: getattr(r, f) for f in fields} for r in rows], infer_schema_length=None)


def _with_key(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(key=pl.col("step").cast(pl.Int64)).filter(pl.col("key").is_not_null())


def _breakdown(analysis: Analysis) -> pl.DataFrame:
    section = analysis.gpu_breakdown if analysis.run.has_gpu else analysis.host_breakdown
    if section is None or not section.per_step:
        return pl.DataFrame()
    fields = ("rank", "step", "window_ns", "compute_ns", "comm_ns", "memory_ns", "idle_ns")
    return _with_key(_frame(section.per_step, fields))


def whole_share(analysis: Analysis, column: str) -> float | None:
    """``column``'s share of the measured windows of every rank (the whole trace when no steps)."""
    section = analysis.gpu_breakdown if analysis.run.has_gpu else analysis.host_breakdown
    if section is None or not section.per_rank:
        return None
    window = sum(r.window_ns for r in section.per_rank)
    return 100.0 * sum(getattr(r, column) for r in section.per_rank) / window if window else None


def share(column: str) -> Callable[[Analysis], np.ndarray]:
    """Per step: ``column``'s share of the step's windows over every rank, percent."""

    def values(analysis: Analysis) -> np.ndarray:
        df = _breakdown(analysis)
        if df.height == 0:
            return np.empty(0)
        per = df.group_by("key").agg(v=100.0 * pl.col(column).sum() / pl.col("window_ns").sum()).sort("key")
        return np.asarray(per["v"].drop_nulls().drop_nans().to_numpy(), dtype=float)

    return values


def overlap(column: str) -> Callable[[Analysis], np.ndarray]:
    """Per step: the mean over ranks of an overlap ``column`` (``overlap_pct``: of the step's comm)."""

    def values(analysis: Analysis) -> np.ndarray:
        rows = analysis.overlap.per_step
        if not rows:
            return np.empty(0)
        df = _with_key(_frame(rows, ("rank", "step", "comm_ns", "overlapped_ns", "exposed_ns")))
        expr: pl.Expr = pl.col(column).mean()
        if column == "overlap_pct":
            expr = pl.when(pl.col("comm_ns").sum() > 0).then(
                100.0 * pl.col("overlapped_ns").sum() / pl.col("comm_ns").sum()
            )
        per = df.group_by("key").agg(v=expr).sort("key")
        return np.asarray(per["v"].drop_nulls().to_numpy(), dtype=float)

    return values


def sync_measure(analysis: Analysis) -> SyncMeasure:
    """What counts as a sync of this run: the host's blocking calls on a GPU run, else host reads."""
    return SyncMeasure.SYNC_CALLS if measured_on(analysis) is MeasuredOn.GPU else SyncMeasure.HOST_READS


def syncs(analysis: Analysis) -> np.ndarray:
    """Per step: syncs (by :func:`sync_measure`), the mean over ranks."""
    rows = analysis.host_syncs.per_step
    if not rows:
        return np.empty(0)
    column = "sync_calls" if measured_on(analysis) is MeasuredOn.GPU else "sync_ops"
    df = _with_key(_frame(rows, ("rank", "step", column)))
    return per_step(df.rename({column: "v"}), "v")


def phase_names(runs: Sequence[Analysis]) -> list[str]:
    """The phases (outermost annotations) of ``runs``, most time first."""
    seen: dict[str, float] = {}
    for a in runs:
        for row in a.annotations.summary:
            seen[row.name] = seen.get(row.name, 0.0) + row.cpu_ns
    return sorted(seen, key=lambda n: (-seen[n], n))


def phase_series(analysis: Analysis) -> dict[str, np.ndarray]:
    """Each phase's time per step (the mean over ranks), in step order, from one pass over the rows."""
    rows = analysis.annotations.per_step
    if not rows:
        return {}
    df = pl.DataFrame(
        {"name": [r.name for r in rows], "key": [r.step for r in rows], "v": [float(r.cpu_ns) for r in rows]}
    )
    per = df.group_by("name", "key").agg(pl.col("v").mean()).sort("name", "key")
    return {str(part["name"][0]): part["v"].to_numpy().astype(float) for part in per.partition_by("name")}


def peak(analysis: Analysis) -> tuple[float | None, PeakSource | None]:
    """The worst rank's peak and where it was read: device memory allocated, else the capture's peak RSS."""
    memory = analysis.memory
    if memory is not None and memory.per_device:
        peaks = [r.peak_allocated_bytes for r in memory.per_device if r.peak_allocated_bytes is not None]
        if peaks:
            return float(max(peaks)), PeakSource.COUNTERS
    if analysis.capture is not None:
        values = [p.memory.peak_bytes for p in analysis.capture.per_rank if p.memory.peak_bytes is not None]
        if values:
            allocated = analysis.capture.per_rank[0].memory.peak_allocated_bytes is not None
            return float(max(values)), PeakSource.CAPTURE_ALLOCATED if allocated else PeakSource.CAPTURE_RSS
    return None, None


def reserved(analysis: Analysis) -> float | None:
    """The worst rank's peak of memory reserved."""
    memory = analysis.memory
    if memory is not None:
        peaks = [r.peak_reserved_bytes for r in memory.per_device if r.peak_reserved_bytes is not None]
        if peaks:
            return float(max(peaks))
    return None


def gap(analysis: Analysis) -> float | None:
    """The largest fragmentation gap at a peak (reserved minus allocated when allocated peaked)."""
    memory = analysis.memory
    gaps = [r.gap_at_peak_bytes for r in memory.per_device if r.gap_at_peak_bytes is not None] if memory else []
    return float(max(gaps)) if gaps else None


def samples_per_step(analysis: Analysis) -> int | None:
    """Samples of one step over every rank, from the capture summary."""
    capture = analysis.capture
    if capture is None or capture.throughput.samples_per_step_per_rank is None:
        return None
    return capture.throughput.samples_per_step_per_rank * max(1, capture.world_size)
