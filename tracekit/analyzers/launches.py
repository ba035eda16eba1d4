"""Kernel launches: how many kernels each rank launches per step, how long they run, how long
each waits in the queue after its launch, and how many run for less than their launch cost.

The figures an engineer reads to tell a launch-bound step from a compute-bound one (HTA's
kernel launch statistics, the TensorBoard plugin's kernel view): many kernels per step, most of
them shorter than the host's launch call, and a queue delay near zero (the GPU starves waiting
for the next launch) point to CUDA graphs, fusion or ``torch.compile``; a long queue delay means
the host is far ahead and launches are not what bounds the step.

A registered section without a field of its own: this module, its result Structs
(:mod:`tracekit.results.launches`, where reports may read them) and one line in
:mod:`tracekit.analyzers.builtin` are all it takes (reports show its fields).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.convert import rows
from tracekit.analyzers.parts import Parts, table
from tracekit.analyzers.windows import stacked
from tracekit.results.launches import LaunchRank, LaunchStats

if TYPE_CHECKING:
    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.mapreduce import Reduced


class LaunchParts(Parts):
    """Each rank's figures (:class:`LaunchRank`'s columns): they are the rank's alone, so the map
    computes them and the reduce only gathers them (not a row per kernel: 40k a rank of 125 MB)."""

    per_rank: pl.DataFrame = table(
        "rank kernels steps median_kernel_ns p95_kernel_ns median_queue_ns p95_queue_ns median_launch_call_ns"
        " shorter_than_launch with_call kernels_per_step shorter_than_launch_pct"
    )


class LaunchPieces(LaunchParts):
    """A window's figures (:mod:`tracekit.analyzers.windows`): its :class:`LaunchParts`, and what
    :func:`launches_fold` needs to work out the rank's medians and step count again. Only the
    fold reads them: the rank's part it makes is a plain :class:`LaunchParts`, as the whole rank's is."""

    #: how many of the window's kernels have each value of each measure (:data:`MEASURES`): a
    #: median is of the rank's kernels, not of the windows' medians (kernels of one step often
    #: last alike, so a window has far fewer values than kernels)
    values: pl.DataFrame = table("rank measure value count")
    #: the steps the window's kernels ran in
    steps: pl.DataFrame = table("rank step")


#: The measures of each kernel whose median (and 95th percentile) a rank's figures give.
MEASURES: Final = ("kernel_ns", "queue_ns", "call_ns")


def launches_map(ctx: RankContext) -> LaunchParts:
    """Each rank's figures over the kernels of its measured windows (duration, queue delay, launch
    call). On a window (:mod:`tracekit.analyzers.windows`): over those of its frames (every one
    starts in it), with what :func:`launches_fold` needs (:class:`LaunchPieces`)."""
    if not ctx.has_gpu:
        return LaunchParts()
    kernels = ctx.activity.filter(pl.col("kind") == "kernel").select(
        "rank", "start_ns", "end_ns", "launch_ns", "launch_pid", pl.col("launch_call_ns").alias("call_ns")
    )
    frames = ctx.frames.select("rank", "step", "start_ns", "end_ns")
    located = iv.locate(kernels, "start_ns", frames, by=["rank"], keep=["step"], in_time_order=False).select(
        "rank",
        "step",
        (pl.col("end_ns") - pl.col("start_ns")).alias("kernel_ns"),
        pl.when(pl.col("launch_pid").is_not_null()).then(pl.col("start_ns") - pl.col("launch_ns")).alias("queue_ns"),
        "call_ns",
    )
    per_rank = _per_rank(located)
    if ctx.window is None:
        return LaunchParts(per_rank=per_rank)
    values = [
        located.filter(pl.col(m).is_not_null())
        .group_by("rank", pl.col(m).alias("value"))
        .agg(measure=pl.lit(m), count=pl.len())
        for m in MEASURES
    ]
    return LaunchPieces(per_rank=per_rank, values=pl.concat(values), steps=located.select("rank", "step").unique())


def launches_fold(parts: list[LaunchParts]) -> LaunchParts:
    """The rank's figures from its windows' (:class:`LaunchPieces`): the counts added, the steps
    counted once each, the medians and 95th percentiles of every kernel's values again."""
    found = stacked([p.per_rank for p in parts])
    if not found.height:
        return LaunchParts(per_rank=found)
    pieces = [p for p in parts if isinstance(p, LaunchPieces)]
    values = stacked([p.values for p in pieces]).group_by("rank", "measure", "value").agg(pl.col("count").sum())
    steps = stacked([p.steps for p in pieces]).group_by("rank").agg(steps=pl.col("step").n_unique())
    per_rank = found.group_by("rank").agg(pl.col("kernels", "shorter_than_launch", "with_call").sum())
    per_rank = per_rank.join(steps, on="rank", how="left")
    for m, name in zip(MEASURES, ("kernel", "queue", "launch_call"), strict=True):
        every = (
            values.filter(pl.col("measure") == m).select("rank", pl.col("value").repeat_by("count")).explode("value")
        )
        figures = every.group_by("rank").agg(
            pl.col("value").median().alias(f"median_{name}_ns"),
            *([] if m == "call_ns" else [pl.col("value").quantile(0.95, "nearest").alias(f"p95_{name}_ns")]),
        )
        per_rank = per_rank.join(figures, on="rank", how="left")
    per_rank = per_rank.cast({c: t for c, t in found.schema.items() if c in per_rank.columns}).with_columns(_shares())
    return LaunchParts(per_rank=per_rank.select(found.columns).sort("rank"))


def _per_rank(kernels: pl.DataFrame) -> pl.DataFrame:
    shorter = (pl.col("kernel_ns") < pl.col("call_ns")).sum()
    return (
        kernels.group_by("rank")
        .agg(
            kernels=pl.len(),
            steps=pl.col("step").n_unique(),
            median_kernel_ns=pl.col("kernel_ns").median(),
            p95_kernel_ns=pl.col("kernel_ns").quantile(0.95, "nearest"),
            median_queue_ns=pl.col("queue_ns").median(),
            p95_queue_ns=pl.col("queue_ns").quantile(0.95, "nearest"),
            median_launch_call_ns=pl.col("call_ns").median(),
            shorter_than_launch=shorter,
            with_call=pl.col("call_ns").is_not_null().sum(),
        )
        .with_columns(_shares())
        .sort("rank")
    )


def _shares() -> list[pl.Expr]:
    """A rank's kernels per step, and the share of those with a launch call that ran shorter than it."""
    return [
        (pl.col("kernels") / pl.col("steps").cast(pl.Float64)).alias("kernels_per_step"),
        pl.when(pl.col("with_call") > 0)
        .then(100.0 * pl.col("shorter_than_launch") / pl.col("with_call"))
        .alias("shorter_than_launch_pct"),
    ]


def launches_reduce(red: Reduced) -> LaunchStats | None:
    """Kernel launches per rank; None on a CPU-only run or when no kernel ran in a measured step."""
    per_rank = red.gather(LaunchParts).per_rank
    if not red.has_gpu or per_rank.is_empty():
        return None
    return LaunchStats(per_rank=rows(per_rank, LaunchRank))
