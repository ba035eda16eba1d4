"""Kernel summary: GPU activities by name with count, total, mean, share and category."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracekit.analyzers.stats import share


@dataclass(frozen=True)
class KernelResult:
    """Kernels (and copies, sets) by name, over the run and per rank, largest first."""

    #: name, kind, category, count, ranks, total_ns, mean_ns, max_ns, share_pct
    top: pl.DataFrame
    #: rank, name, kind, category, count, total_ns, mean_ns, share_pct
    per_rank: pl.DataFrame
    #: category, count, total_ns, share_pct (over the run)
    by_category: pl.DataFrame


def kernel_summary(activity: pl.DataFrame) -> KernelResult:
    """Summarize GPU activities (from :func:`tracekit.analyzers.steps.gpu_activity`).

    Shares are of the summed duration of all GPU activities (kernel time, not wall time).
    """
    dur = (pl.col("end_ns") - pl.col("start_ns")).alias("dur")
    acts = activity.with_columns(dur, pl.col("name").cast(pl.String))
    grand = pl.col("total_ns").sum()
    top = (
        acts.group_by("name", "kind", "category")
        .agg(
            count=pl.len(),
            ranks=pl.col("rank").n_unique(),
            total_ns=pl.col("dur").sum(),
            mean_ns=pl.col("dur").mean(),
            max_ns=pl.col("dur").max(),
        )
        .with_columns(share_pct=pl.when(grand > 0).then(100.0 * pl.col("total_ns") / grand))
        .sort(["total_ns", "name"], descending=[True, False])
    )
    per_rank = (
        acts.group_by("rank", "name", "kind", "category")
        .agg(count=pl.len(), total_ns=pl.col("dur").sum(), mean_ns=pl.col("dur").mean())
        .with_columns(rank_total=pl.col("total_ns").sum().over("rank"))
        .with_columns(share("total_ns", "rank_total", "share_pct"))
        .drop("rank_total")
        .sort(["rank", "total_ns", "name"], descending=[False, True, False])
    )
    by_category = (
        acts.group_by("category")
        .agg(count=pl.len(), total_ns=pl.col("dur").sum())
        .with_columns(share_pct=pl.when(grand > 0).then(100.0 * pl.col("total_ns") / grand))
        .sort(["total_ns", "category"], descending=[True, False])
    )
    return KernelResult(top=top, per_rank=per_rank, by_category=by_category)
