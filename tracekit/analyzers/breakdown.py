"""GPU time breakdown: compute, non-overlapped communication, memory operations and idle.

Each instant of a window is counted once, by priority: compute if any compute kernel runs
on any stream, else communication if a collective runs, else memory if a copy or set runs,
else idle. The four parts therefore sum to the window: shares sum to 100%. GPU syncs
(``cuda_sync``) are waits, not work: they count as idle.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracekit.analyzers.stats import share
from tracekit.results.vocab import WindowKind

PARTS = ("compute", "comm", "memory", "idle")


@dataclass(frozen=True)
class BreakdownResult:
    """Per-step and per-rank GPU time, in ns and shares of the window."""

    #: rank, step, window_ns, compute_ns, comm_ns, memory_ns, idle_ns, *_pct
    per_step: pl.DataFrame
    #: rank, window_ns, compute_ns, comm_ns, memory_ns, idle_ns, *_pct
    per_rank: pl.DataFrame
    #: what the window of each rank is
    window: WindowKind


def _with_shares(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(share(f"{p}_ns", "window_ns", f"{p}_pct") for p in PARTS)


def gpu_breakdown(segments: pl.DataFrame, *, window: WindowKind = WindowKind.STEPS) -> BreakdownResult:
    """Break down GPU time from the segments of :func:`tracekit.analyzers.timeline.segments`."""
    compute, coll, mem = pl.col("compute"), pl.col("collective"), pl.col("memory")
    length = pl.col("length_ns")
    per_step = (
        segments.group_by("rank", "step")
        .agg(
            window_ns=length.sum(),
            compute_ns=length.filter(compute).sum(),
            comm_ns=length.filter(~compute & coll).sum(),
            memory_ns=length.filter(~compute & ~coll & mem).sum(),
            transfer_ns=length.filter(~compute & ~coll & pl.col("transfer")).sum(),
            idle_ns=length.filter(~compute & ~coll & ~mem).sum(),
        )
        .sort("rank", "step")
    )
    return BreakdownResult(per_step=_with_shares(per_step), per_rank=per_rank_of(per_step), window=window)


def per_rank_of(per_step: pl.DataFrame) -> pl.DataFrame:
    """Each rank's totals and shares (:attr:`BreakdownResult.per_rank`) from its steps' rows."""
    totals = ("window", *PARTS, "transfer")
    return _with_shares(per_step.group_by("rank").agg(pl.col(f"{p}_ns").sum() for p in totals).sort("rank"))
