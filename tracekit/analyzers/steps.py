"""Profiler steps: each ``ProfilerStep#N`` range, its GPU work and its window on the GPU.

A step's GPU work is the GPU activity launched while the step's range was open on the host
(linked through correlation ids; activity with no recorded launch counts where it starts).
A step's *window* is the stretch of time the step costs: from the earlier of its host start
and its first GPU activity to the start of the next step's window (the last step ends at
the later of its host end and its last GPU activity). Windows of one rank tile time without
overlap, so per-step measures add up to the run's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.stats import summary_exprs
from tracekit.model.schema import GPU_ACTIVITY_KINDS

if TYPE_CHECKING:
    from tracekit.model.run import Run


@dataclass(frozen=True)
class StepResult:
    """Per-step rows and per-rank step-time statistics."""

    #: rank, step, name, start_ns, end_ns, duration_ns, gpu_start_ns, gpu_end_ns,
    #: gpu_ops, win_start_ns, win_end_ns
    steps: pl.DataFrame
    #: rank, count, mean_ns, median_ns, p95_ns, min_ns, max_ns (of host step duration)
    stats: pl.DataFrame

    @property
    def has_steps(self) -> bool:
        """Whether any rank recorded profiler steps."""
        return self.steps.height > 0


def gpu_activity(run: Run) -> pl.DataFrame:
    """GPU activities (kernels, copies, sets) with ``launch_ns``: when the host launched them.

    Columns: rank, kind, name, category, start_ns, end_ns, device, stream, correlation,
    launch_ns, launch_pid (the process that launched it; null when no launch was recorded).
    """
    launches = run.select(
        ["runtime", "driver"],
        "rank",
        "correlation",
        pl.col("start_ns").alias("launch_ns"),
        pl.col("pid").alias("launch_pid"),
        where=pl.col("correlation").is_not_null(),
    )
    activity = run.select(
        GPU_ACTIVITY_KINDS, "rank", "kind", "name", "category", "start_ns", "end_ns", "device", "stream", "correlation"
    )
    return _link(activity, launches).with_columns(pl.col("launch_ns").fill_null(pl.col("start_ns")))


#: Correlation ids below this pack with the rank into one join key.
_CORRELATION_LIMIT: Final = 1 << 40


def _link(activity: pl.DataFrame, launches: pl.DataFrame) -> pl.DataFrame:
    """``activity`` with the launch (rank, correlation) of each row: launch_ns, launch_pid.

    Joins on one integer, ``rank * 2**40 + correlation``, when the ids allow it (a join on
    two columns costs twice as much), and skips grouping the launches by id unless some id
    was launched more than once (then the earliest launch counts).
    """
    both = pl.concat([activity.select("correlation"), launches.select("correlation")])
    low, high = both.select(pl.col("correlation").min().alias("a"), pl.col("correlation").max().alias("b")).row(0)
    packs = low is None or (low >= 0 and high < _CORRELATION_LIMIT)
    keys = ["_key"] if packs else ["rank", "correlation"]

    def keyed(df: pl.DataFrame) -> pl.DataFrame:
        key = pl.col("rank").cast(pl.Int64) * _CORRELATION_LIMIT + pl.col("correlation")
        return df.with_columns(key.alias("_key")) if packs else df

    right = keyed(launches).select(*keys, "launch_ns", "launch_pid")
    joined = keyed(activity).join(right, on=keys, how="left")
    if joined.height != activity.height:  # an id launched more than once: the earliest launch
        right = right.group_by(keys).agg(pl.col("launch_ns").min(), pl.col("launch_pid").first())
        joined = keyed(activity).join(right, on=keys, how="left")
    return joined.drop("_key", strict=False)


def _step_number(name: pl.Expr) -> pl.Expr:
    return name.cast(pl.String).str.extract(r"#(\d+)").cast(pl.Int64)


def analyze_steps(run: Run, *, activity: pl.DataFrame | None = None) -> StepResult:
    """Find the profiler steps of every rank and their GPU windows."""
    activity = gpu_activity(run) if activity is None else activity
    host = (
        run.select(["step"], "rank", pl.col("name").cast(pl.String), "start_ns", "end_ns")
        .with_columns(step=_step_number(pl.col("name")), duration_ns=pl.col("end_ns") - pl.col("start_ns"))
        .unique(["rank", "start_ns", "name"])
        .sort("rank", "start_ns")
    )
    owned = (
        iv.locate(activity, "launch_ns", host, by=["rank"], keep=["step"])
        .group_by("rank", "step")
        .agg(gpu_start_ns=pl.col("start_ns").min(), gpu_end_ns=pl.col("end_ns").max(), gpu_ops=pl.len())
    )
    steps = (
        host.join(owned, on=["rank", "step"], how="left")
        .with_columns(pl.col("gpu_ops").fill_null(0).cast(pl.Int64))
        .with_columns(win_start_ns=pl.min_horizontal("start_ns", "gpu_start_ns"))
        .sort("rank", "win_start_ns")
        .with_columns(
            win_end_ns=pl.col("win_start_ns")
            .shift(-1)
            .over("rank")
            .fill_null(pl.max_horizontal("end_ns", "gpu_end_ns"))
        )
        .select(
            "rank",
            "step",
            "name",
            "start_ns",
            "end_ns",
            "duration_ns",
            "gpu_start_ns",
            "gpu_end_ns",
            "gpu_ops",
            "win_start_ns",
            "win_end_ns",
        )
    )
    stats = steps.group_by("rank").agg(summary_exprs("duration_ns")).sort("rank")
    return StepResult(steps=steps, stats=stats)
