"""Annotation (phase) breakdown: user ranges with their host time and their GPU time.

One level is reported, so that shares never double count: the *outermost* user annotations
(``record_function``, NVTX ranges) on each rank's training thread, the thread that records
``ProfilerStep#N`` or that steps were inferred on (every thread when a rank has no steps). A
range nested in another is folded into its outermost parent. On a rank that carries
tracekit's own phase ranges (``tracekit.phase/...``), those are the rows, whatever encloses
them: a framework's ranges are not (Lightning runs forward and backward inside torch's
``Optimizer.step`` range). Within steps, the time no top-level range covers is the
``(unannotated)`` row, so host shares sum to 100% of step time.

GPU time of a range is the wall-clock union of the GPU activity launched while it was open,
by any thread of the same process (backward kernels are launched from autograd's thread
while the training thread waits inside the ``backward`` range).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.stats import share, summary_exprs
from tracekit.results.vocab import PHASE_PREFIX, PhaseLevel

if TYPE_CHECKING:
    from tracekit.analyzers.steps import StepResult
    from tracekit.model.run import Run

UNANNOTATED: Final = "(unannotated)"


@dataclass(frozen=True)
class AnnotationResult:
    """Top-level annotations by name, per rank and over the run."""

    #: rank, name, count, cpu_ns, gpu_ns, cpu_pct (of step time), per-step cpu stats
    per_rank: pl.DataFrame
    #: name, ranks, count, cpu_ns, gpu_ns, cpu_pct, per-step (rank x step) cpu stats
    summary: pl.DataFrame
    #: rank, step, name, cpu_ns, gpu_ns
    per_step: pl.DataFrame
    #: which level of nesting is reported
    level: PhaseLevel


def top_level(run: Run, steps: StepResult) -> pl.DataFrame:
    """The outermost annotations of the training threads: rank, pid, tid, name, start_ns, end_ns, ann_id."""
    ann = run.select(["annotation"], "rank", "pid", "tid", pl.col("name").cast(pl.String), "start_ns", "end_ns")
    if steps.has_steps:
        # the threads with step markers, and the thread inferred steps are on
        threads = pl.concat([run.select(["step"], "rank", "pid", "tid"), steps.threads]).unique()
        ann = ann.join(threads, on=["rank", "pid", "tid"], how="semi")
    ours = pl.col("name").str.starts_with(PHASE_PREFIX)
    marked = ann.filter(ours).select("rank").unique()
    if marked.height:  # tracekit's phases are the rows of the ranks that carry them
        ann = pl.concat([ann.join(marked, on="rank", how="anti"), ann.filter(ours)])
    return iv.outermost(ann, ["rank", "pid", "tid"]).with_row_index("ann_id")


def _launched(activity: pl.DataFrame) -> pl.DataFrame:
    """GPU activity with its launch: rank, pid (the launching process), launch_ns, start_ns, end_ns."""
    return activity.filter(pl.col("launch_pid").is_not_null()).select(
        "rank", pl.col("launch_pid").alias("pid"), "launch_ns", "start_ns", "end_ns"
    )


def _gpu_time(top: pl.DataFrame, activity: pl.DataFrame) -> pl.DataFrame:
    """ann_id, gpu_ns: union of GPU activity launched inside each top-level annotation."""
    gpu = iv.locate(_launched(activity), "launch_ns", top, by=["rank", "pid"], keep=["ann_id"])
    totals = iv.total(gpu.select("ann_id", "start_ns", "end_ns"), ["ann_id"])
    assert isinstance(totals, pl.DataFrame)
    return totals.rename({"total_ns": "gpu_ns"})


def _unannotated_gpu(top: pl.DataFrame, steps: StepResult, activity: pl.DataFrame) -> pl.DataFrame:
    """rank, step, gpu_ns: union of the GPU activity launched inside each step while no
    top-level range of its process was open (the ``(unannotated)`` row's GPU time)."""
    launched = _launched(activity).with_row_index("launch_id")
    inside = iv.locate(launched, "launch_ns", top, by=["rank", "pid"], keep=[], in_time_order=False)
    rest = launched.join(inside.select("launch_id"), on="launch_id", how="anti")
    in_step = iv.locate(rest, "launch_ns", steps.steps, by=["rank"], keep=["step"], in_time_order=False)
    totals = iv.total(in_step.select("rank", "step", "start_ns", "end_ns"), ["rank", "step"])
    assert isinstance(totals, pl.DataFrame)
    return totals.rename({"total_ns": "gpu_ns"})


def annotation_breakdown(run: Run, steps: StepResult, activity: pl.DataFrame) -> AnnotationResult:
    """Break step time down by top-level annotation, per rank and over the run."""
    return summarize_annotations(annotations_per_step(run, steps, activity), steps)


def annotations_per_step(
    run: Run, steps: StepResult, activity: pl.DataFrame, *, top: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The per-rank part: rank, step, name, cpu_ns, gpu_ns, count of each top-level range.

    ``top``: the ranges of :func:`top_level`, found from ``run`` when not given.
    """
    top = top_level(run, steps) if top is None else top
    top = top.join(_gpu_time(top, activity), on="ann_id", how="left").with_columns(
        pl.col("gpu_ns").fill_null(0), cpu_ns=pl.col("end_ns") - pl.col("start_ns")
    )
    if steps.has_steps:
        # a range running past its step's end counts up to that end only
        top = iv.locate(top, "start_ns", steps.steps, by=["rank"], keep=["step"]).with_columns(
            cpu_ns=pl.min_horizontal("end_ns", "frame_end_ns") - pl.col("start_ns")
        )
    else:
        top = top.with_columns(step=pl.lit(None, dtype=pl.Int64))
    per_step = top.group_by("rank", "step", "name").agg(pl.col("cpu_ns", "gpu_ns").sum(), count=pl.len())
    if steps.has_steps:
        per_step = _complete(per_step, steps, _unannotated_gpu(top, steps, activity))
    return per_step.sort("rank", "step", "name")


def every_name(per_step: pl.DataFrame) -> pl.DataFrame:
    """Rows of :func:`annotations_per_step` (of the windows of a rank, one under the other)
    with a row of every name of the rank in each of its steps, zero where a name is absent:
    the rows the rank's part has, where a window's has the names found in it alone."""
    names = per_step.filter(pl.col("name") != UNANNOTATED).select("rank", "name").unique()
    grid = per_step.select("rank", "step").unique().join(names, on="rank")
    absent = grid.join(per_step, on=["rank", "step", "name"], how="anti", nulls_equal=True)
    zero = absent.with_columns(cpu_ns=0, gpu_ns=0, count=0).select(per_step.columns).cast(per_step.schema)
    return pl.concat([per_step, zero]).sort("rank", "step", "name")


def summarize_annotations(per_step: pl.DataFrame, steps: StepResult) -> AnnotationResult:
    """The cross-rank part: per-rank and run-wide rows from every rank's per-step rows."""
    # ties in time are ordered by name, so that the same input always gives the same report
    per_rank = _summarize(per_step, ["rank", "name"], steps).sort(
        ["rank", "cpu_ns", "name"], descending=[False, True, False]
    )
    summary = _summarize(per_step, ["name"], steps).sort(["cpu_ns", "name"], descending=[True, False])
    level = PhaseLevel.TRAINING_THREAD if steps.has_steps else PhaseLevel.EVERY_THREAD
    return AnnotationResult(per_rank=per_rank, summary=summary, per_step=per_step, level=level)


def _complete(per_step: pl.DataFrame, steps: StepResult, rest_gpu: pl.DataFrame) -> pl.DataFrame:
    """Every (rank, step, name), zero where a name is absent; plus the unannotated rest, whose
    GPU time is ``rest_gpu``'s (rank, step, gpu_ns)."""
    grid = (
        steps.steps.select("rank", "step", "duration_ns")
        .join(per_step.select("rank", "name").unique(), on="rank", how="left")
        .filter(pl.col("name").is_not_null())
    )
    full = grid.join(per_step, on=["rank", "step", "name"], how="left").with_columns(
        pl.col("cpu_ns", "gpu_ns", "count").fill_null(0)
    )
    rest = (
        steps.steps.select("rank", "step", "duration_ns")
        .join(
            per_step.group_by("rank", "step").agg(pl.col("cpu_ns").sum().alias("covered")),
            on=["rank", "step"],
            how="left",
        )
        .join(rest_gpu, on=["rank", "step"], how="left")
        .select(
            "rank",
            "step",
            pl.lit(UNANNOTATED).alias("name"),
            (pl.col("duration_ns") - pl.col("covered").fill_null(0)).clip(lower_bound=0).alias("cpu_ns"),
            pl.col("gpu_ns").fill_null(0).cast(pl.Int64),
            pl.lit(0, dtype=pl.UInt32).alias("count"),
        )
    )
    return pl.concat([full.drop("duration_ns").select(rest.columns), rest], how="vertical_relaxed")


def _summarize(per_step: pl.DataFrame, keys: list[str], steps: StepResult) -> pl.DataFrame:
    out = (
        per_step.group_by(keys)
        .agg(
            pl.col("count").sum(),
            pl.col("cpu_ns").sum(),
            pl.col("gpu_ns").sum(),
            pl.col("rank").n_unique().alias("ranks"),
            *summary_exprs("cpu_ns", "step_"),
        )
        .drop("step_count")
    )
    if not steps.has_steps:
        return out.with_columns(cpu_pct=pl.lit(None, dtype=pl.Float64))
    total_key = [k for k in keys if k == "rank"]
    step_total = (
        steps.steps.group_by(total_key).agg(pl.col("duration_ns").sum().alias("step_total_ns"))
        if total_key
        else pl.DataFrame({"step_total_ns": [int(steps.steps["duration_ns"].sum())]})
    )
    out = out.join(step_total, on=total_key, how="left") if total_key else out.join(step_total, how="cross")
    return out.with_columns(share("cpu_ns", "step_total_ns", "cpu_pct")).drop("step_total_ns")
