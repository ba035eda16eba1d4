"""The GPU timeline of each rank cut into segments, each flagged compute/collective/memory.

Built once (one sweep over every GPU activity of every rank) and shared by the GPU time
breakdown and the comm/compute overlap, so both measure the same wall-clock unions over all
streams and devices of a rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import polars as pl

from tracekit.analyzers import intervals as iv

if TYPE_CHECKING:
    from tracekit.analyzers.steps import StepResult
    from tracekit.model.run import Run

Window = Literal["steps", "gpu_span"]
LABELS = ("compute", "collective", "memory")


def windows(activity: pl.DataFrame, steps: StepResult, window: Window = "steps") -> pl.DataFrame:
    """The windows measured on each rank: rank, step (null for a whole span), start_ns, end_ns.

    ``steps``: the step windows where a rank has steps, else its GPU span. ``gpu_span``: from
    the first GPU activity of the rank to its last end, the definition HTA uses.
    """
    span = (
        activity.group_by("rank")
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
        .with_columns(step=pl.lit(None, dtype=pl.Int64))
    )
    if window == "gpu_span" or not steps.has_steps:
        return span.select("rank", "step", "start_ns", "end_ns").sort("rank")
    stepped = steps.steps.select(
        "rank", "step", pl.col("win_start_ns").alias("start_ns"), pl.col("win_end_ns").alias("end_ns")
    )
    stepped = stepped.filter(pl.col("rank").is_in(span["rank"].implode()))
    with_steps = stepped["rank"].unique().implode()
    rest = span.filter(~pl.col("rank").is_in(with_steps)).select("rank", "step", "start_ns", "end_ns")
    return pl.concat([stepped, rest]).sort("rank", "start_ns")


def segments(activity: pl.DataFrame, frames: pl.DataFrame) -> pl.DataFrame:
    """Elementary segments inside ``frames`` (from :func:`windows`).

    Columns: rank, step, start_ns, end_ns, length_ns, compute, collective, memory.
    """
    parts = {
        label: activity.filter(pl.col("category") == label).select("rank", "start_ns", "end_ns") for label in LABELS
    }
    cut = iv.sweep({**parts, "window": frames.select("rank", "start_ns", "end_ns")}, ["rank"])
    return (
        iv.locate(cut.filter(pl.col("window")), "start_ns", frames, by=["rank"], keep=["step"])
        .with_columns(length_ns=pl.col("end_ns") - pl.col("start_ns"))
        .select("rank", "step", "start_ns", "end_ns", "length_ns", *LABELS)
    )


#: Host operations that are collectives' own work on CPU backends (their spans include waits).
HOST_COLLECTIVE = r"^(?:gloo|mpi|ucc):"


def host_activity(run: Run) -> pl.DataFrame:
    """The host as the device of a CPU-only run: operators as compute, backend collectives
    (``gloo:all_reduce``...) as collectives. Same columns as GPU activity where it matters."""
    columns = ("rank", "kind", "name", pl.col("category").cast(pl.String), "start_ns", "end_ns")
    compute = run.select(["cpu_op"], *columns, where=pl.col("category") != "collective").with_columns(
        category=pl.lit("compute")
    )
    collective = run.select(["cpu_op", "annotation"], *columns, name=HOST_COLLECTIVE)
    return pl.concat([compute, collective]).with_columns(launch_ns=pl.col("start_ns"))
