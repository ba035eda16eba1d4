"""Kernel summary: GPU activities by name with count, total, mean, share and category."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import polars as pl

from tracekit.analyzers.stats import grouped, share


@dataclass(frozen=True)
class KernelResult:
    """Kernels (and copies, sets) by name, over the run and per rank, largest first."""

    #: name, kind, category, count, ranks, total_ns, mean_ns, max_ns, share_pct
    top: pl.DataFrame
    #: category, count, total_ns, share_pct (over the run)
    by_category: pl.DataFrame
    #: what :attr:`per_rank` is worked out from (:func:`kernels_by_rank`'s rows)
    by_rank: pl.DataFrame = field(repr=False)

    @property
    def per_rank(self) -> pl.DataFrame:
        """rank, name, kind, category, count, total_ns, mean_ns, share_pct (of the rank's
        kernel time), by rank and largest first: worked out when asked for (no analysis reads
        it; at 1,024 ranks it was a table as large as the ranks' own, held to the end)."""
        return (
            _as_text(self.by_rank)
            .select(
                "rank", "name", "kind", "category", "count", "total_ns", mean_ns=pl.col("total_ns") / pl.col("count")
            )
            .with_columns(rank_total=pl.col("total_ns").sum().over("rank"))
            .with_columns(share("total_ns", "rank_total", "share_pct"))
            .drop("rank_total")
            .sort(["rank", "total_ns", "name"], descending=[False, True, False])
        )


def kernel_summary(activity: pl.DataFrame) -> KernelResult:
    """Summarize GPU activities (from :func:`tracekit.analyzers.steps.gpu_activity`).

    Shares are of the summed duration of all GPU activities (kernel time, not wall time).
    """
    return summarize_kernels(kernels_by_rank(activity))


def kernels_by_rank(activity: pl.DataFrame) -> pl.DataFrame:
    """The per-rank part: rank, name, kind, category, count, total_ns, max_ns (one pass).

    The names stay categorical (and the kinds and categories enums) until the cross-rank part
    has grouped them: a rank repeats the run's kernel names, hundreds of characters each, so at
    1,024 ranks they were 45 MB as text against 0.6 MB as codes. Categories order as text.
    """
    dur = pl.col("end_ns") - pl.col("start_ns")
    return grouped(activity, ["rank", "name", "kind", "category"], count=pl.len(), total_ns=dur.sum(), max_ns=dur.max())


#: The columns of the kernel tables that name something, given as text in the results.
_NAMED: Final = ("name", "kind", "category")


def _as_text(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its naming columns as text (they are categorical or enums per rank)."""
    return df.with_columns(pl.col(c).cast(pl.String) for c in _NAMED if c in df.columns)


def summarize_kernels(by_rank: pl.DataFrame) -> KernelResult:
    """The cross-rank part: the run-wide and per-category rows add up the per-rank ones."""
    grand = pl.col("total_ns").sum()
    top = (
        _as_text(
            by_rank.group_by("name", "kind", "category").agg(
                count=pl.col("count").sum(),
                ranks=pl.col("rank").n_unique(),
                total_ns=pl.col("total_ns").sum(),
                max_ns=pl.col("max_ns").max(),
            )
        )
        .select(
            "name",
            "kind",
            "category",
            "count",
            "ranks",
            "total_ns",
            mean_ns=pl.col("total_ns") / pl.col("count"),
            max_ns="max_ns",
        )
        .with_columns(share_pct=pl.when(grand > 0).then(100.0 * pl.col("total_ns") / grand))
        .sort(["total_ns", "name"], descending=[True, False])
    )
    by_category = (
        top.group_by("category")
        .agg(count=pl.col("count").sum(), total_ns=pl.col("total_ns").sum())
        .with_columns(share_pct=pl.when(grand > 0).then(100.0 * pl.col("total_ns") / grand))
        .sort(["total_ns", "category"], descending=[True, False])
    )
    return KernelResult(top=top, by_category=by_category, by_rank=by_rank)
