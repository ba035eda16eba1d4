"""Comm/compute overlap: the share of collective time during which compute kernels run.

``overlap_pct = |collective ∩ compute| / |collective|`` on wall-clock unions over all
streams of a rank; null where a rank has no collective time.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracekit.analyzers.stats import share


@dataclass(frozen=True)
class OverlapResult:
    """Per-step and per-rank collective time and how much of it compute hides."""

    #: rank, step, comm_ns, overlapped_ns, exposed_ns, overlap_pct
    per_step: pl.DataFrame
    #: rank, comm_ns, overlapped_ns, exposed_ns, overlap_pct
    per_rank: pl.DataFrame


def comm_overlap(segments: pl.DataFrame) -> OverlapResult:
    """Overlap from the segments of :func:`tracekit.analyzers.timeline.segments`."""
    length, coll = pl.col("length_ns"), pl.col("collective")
    per_step = (
        segments.group_by("rank", "step")
        .agg(comm_ns=length.filter(coll).sum(), overlapped_ns=length.filter(coll & pl.col("compute")).sum())
        .sort("rank", "step")
    )
    return OverlapResult(per_step=_finish(per_step), per_rank=per_rank_of(per_step))


def per_rank_of(per_step: pl.DataFrame) -> pl.DataFrame:
    """Each rank's collective time and overlap (:attr:`OverlapResult.per_rank`) from its steps' rows."""
    return _finish(per_step.group_by("rank").agg(pl.col("comm_ns", "overlapped_ns").sum()).sort("rank"))


def _finish(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(exposed_ns=pl.col("comm_ns") - pl.col("overlapped_ns")).with_columns(
        share("overlapped_ns", "comm_ns", "overlap_pct")
    )
