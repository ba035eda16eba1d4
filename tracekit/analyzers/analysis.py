"""``analyze``: every per-rank analysis of a ``Run``, bundled into one frozen result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from tracekit.analyzers import timeline
from tracekit.analyzers.annotations import AnnotationResult, annotation_breakdown
from tracekit.analyzers.breakdown import BreakdownResult, gpu_breakdown
from tracekit.analyzers.kernels import KernelResult, kernel_summary
from tracekit.analyzers.overlap import OverlapResult, comm_overlap
from tracekit.analyzers.steps import StepResult, analyze_steps, gpu_activity

if TYPE_CHECKING:
    from tracekit.model.run import Run


@dataclass(frozen=True)
class RankFacts:
    """What is known about one rank, for reports."""

    rank: int
    source: str
    rank_source: str
    world_size: int | None
    backend: str | None
    devices: tuple[str, ...]
    events: int
    gpu_events: int


@dataclass(frozen=True)
class RunFacts:
    """What the run is: ranks, devices, files, what was skipped and why."""

    ranks: tuple[RankFacts, ...]
    world_size: int | None
    backend: str | None
    devices: tuple[str, ...]
    has_gpu: bool
    span_ns: int
    skipped: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Analysis:
    """All per-rank analyses of one run."""

    facts: RunFacts
    steps: StepResult
    breakdown: BreakdownResult
    overlap: OverlapResult
    kernels: KernelResult
    annotations: AnnotationResult


def run_facts(run: Run, activity: pl.DataFrame) -> RunFacts:
    """Facts of ``run`` for reports (no events)."""
    counts = run.events.group_by("rank").agg(pl.len().alias("n"))
    gpu_counts = activity.group_by("rank").agg(pl.len().alias("n"))
    n = dict(counts.iter_rows())
    g = dict(gpu_counts.iter_rows())
    span = run.events.select(pl.col("end_ns").max() - pl.col("start_ns").min()).item()
    warnings = list(run.warnings)
    if activity.height == 0:
        warnings.append(
            "no GPU activity in these traces: a CPU-only run; GPU breakdown, overlap "
            "and kernel tables are empty, host-side steps and phases are reported"
        )
    return RunFacts(
        ranks=tuple(
            RankFacts(
                rank=r.rank,
                source=r.source,
                rank_source=r.rank_source,
                world_size=r.world_size,
                backend=r.backend,
                devices=r.devices,
                events=int(n.get(r.rank, 0)),
                gpu_events=int(g.get(r.rank, 0)),
            )
            for r in run.ranks
        ),
        world_size=run.world_size,
        backend=run.backend,
        devices=tuple(run.devices),
        has_gpu=activity.height > 0,
        span_ns=int(span or 0),
        skipped=tuple((s.path, s.reason) for s in run.skipped),
        warnings=tuple(warnings),
    )


def analyze(run: Run, *, window: timeline.Window = "steps") -> Analysis:
    """Run every per-rank analysis on ``run``.

    ``window``: measure GPU time over the profiler steps (default) or over each rank's
    whole GPU span (``"gpu_span"``, HTA's definition).
    """
    activity = gpu_activity(run)
    steps = analyze_steps(run, activity=activity)
    segments = timeline.segments(activity, timeline.windows(activity, steps, window))
    return Analysis(
        facts=run_facts(run, activity),
        steps=steps,
        breakdown=gpu_breakdown(segments, window=window),
        overlap=comm_overlap(segments),
        kernels=kernel_summary(activity),
        annotations=annotation_breakdown(run, steps, activity),
    )
