"""``analyze``: every per-rank analysis of a ``Run``, bundled into one frozen result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from tracekit.analyzers import evidence, timeline
from tracekit.analyzers.annotations import AnnotationResult, annotation_breakdown
from tracekit.analyzers.breakdown import BreakdownResult, gpu_breakdown
from tracekit.analyzers.collectives import CollectiveResult, match_collectives
from tracekit.analyzers.dataloader import DataLoaderResult, dataloader_gaps, fetch_ranges
from tracekit.analyzers.idle import IdleResult, idle_causes
from tracekit.analyzers.kernels import KernelResult, kernel_summary
from tracekit.analyzers.overlap import OverlapResult, comm_overlap
from tracekit.analyzers.steps import StepResult, analyze_steps, gpu_activity
from tracekit.analyzers.stragglers import StragglerResult, find_stragglers
from tracekit.analyzers.syncs import SyncResult, host_syncs
from tracekit.analyzers.verdict import Finding, Verdict, decide

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
    """Every analysis of one run, the verdict first among them."""

    facts: RunFacts
    verdict: Verdict
    steps: StepResult
    #: GPU time breakdown (empty on a CPU-only run)
    breakdown: BreakdownResult
    overlap: OverlapResult
    kernels: KernelResult
    annotations: AnnotationResult
    collectives: CollectiveResult
    stragglers: StragglerResult
    dataloader: DataLoaderResult
    syncs: SyncResult
    #: GPU idle by cause (None on a CPU-only run)
    idle: IdleResult | None
    #: the host's time breakdown on a CPU-only run (the host is the device there), else None
    host_breakdown: BreakdownResult | None


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
    """Run every analysis on ``run`` and decide the verdict.

    ``window``: measure GPU time over the profiler steps (default) or over each rank's
    whole GPU span (``"gpu_span"``, HTA's definition).
    """
    activity = gpu_activity(run)
    steps = analyze_steps(run, activity=activity)
    has_gpu = activity.height > 0
    device = activity if has_gpu else timeline.host_activity(run)
    frames = timeline.windows(device, steps, window)
    segments = timeline.segments(device, frames)
    measured = gpu_breakdown(segments, window=window)
    gpu_segments = segments if has_gpu else segments.clear()
    breakdown = measured if has_gpu else gpu_breakdown(gpu_segments, window=window)
    overlap = comm_overlap(gpu_segments)
    kernels = kernel_summary(activity)
    annotations = annotation_breakdown(run, steps, activity)
    facts = run_facts(run, activity)
    collectives = match_collectives(run, activity, steps)
    stragglers = find_stragglers(collectives, steps, annotations, span_ns=facts.span_ns)
    fetch = fetch_ranges(run)
    dataloader = dataloader_gaps(run, segments, frames, has_gpu=has_gpu, fetch=fetch)
    syncs = host_syncs(run, activity, frames)
    idle = idle_causes(run, segments, frames, fetch, syncs.calls) if has_gpu else None
    costs = evidence.costs(
        measured,
        measured_on="gpu" if has_gpu else "host (CPU-only run)",
        collectives=collectives,
        dataloader=dataloader,
        idle=idle,
        has_stragglers=bool(stragglers.stragglers),
    )
    lines = evidence.evidence(
        steps=steps,
        dataloader=dataloader,
        collectives=collectives,
        stragglers=stragglers,
        overlap=overlap if has_gpu else None,
        syncs=syncs,
        kernels=kernels,
    )
    extra: list[Finding] = [f for f in (evidence.sync_finding(syncs, has_gpu=has_gpu),) if f]
    verdict = decide(costs, stragglers=stragglers, evidence=lines, extra_findings=tuple(extra))
    comms_share = float(verdict.costs.filter(bound="comms-bound")["share_pct"].sum())
    low_overlap = evidence.overlap_finding(overlap, comms_share)
    if low_overlap is not None:
        verdict = Verdict(verdict.primary, (*verdict.secondary, low_overlap), verdict.costs, verdict.measured_on)
    return Analysis(
        facts=facts,
        verdict=verdict,
        steps=steps,
        breakdown=breakdown,
        overlap=overlap,
        kernels=kernels,
        annotations=annotations,
        collectives=collectives,
        stragglers=stragglers,
        dataloader=dataloader,
        syncs=syncs,
        idle=idle,
        host_breakdown=None if has_gpu else measured,
    )
