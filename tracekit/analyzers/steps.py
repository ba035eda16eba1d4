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
from typing import TYPE_CHECKING

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

    Columns: rank, name, category, start_ns, end_ns, device, stream, correlation, launch_ns.
    """
    events = run.events
    launches = (
        events.filter(pl.col("kind").is_in(["runtime", "driver"]), pl.col("correlation").is_not_null())
        .group_by("rank", "correlation")
        .agg(
            pl.col("start_ns").min().alias("launch_ns"),
            pl.col("tid").first().alias("launch_tid"),
            pl.col("pid").first().alias("launch_pid"),
        )
    )
    return (
        events.filter(pl.col("kind").is_in(GPU_ACTIVITY_KINDS))
        .select("rank", "kind", "name", "category", "start_ns", "end_ns", "device", "stream", "correlation")
        .join(launches, on=["rank", "correlation"], how="left")
        .with_columns(pl.col("launch_ns").fill_null(pl.col("start_ns")))
    )


def _step_number(name: pl.Expr) -> pl.Expr:
    return name.cast(pl.String).str.extract(r"#(\d+)").cast(pl.Int64)


def analyze_steps(run: Run, *, activity: pl.DataFrame | None = None) -> StepResult:
    """Find the profiler steps of every rank and their GPU windows."""
    activity = gpu_activity(run) if activity is None else activity
    host = (
        run.events.filter(pl.col("kind") == "step")
        .select("rank", pl.col("name").cast(pl.String), "start_ns", "end_ns")
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
