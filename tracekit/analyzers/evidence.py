"""The verdict's inputs: per-rank costs of each bound and the evidence lines behind them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tracekit.analyzers.stats import num
from tracekit.analyzers.stragglers import StragglerResult, describe_cause
from tracekit.analyzers.verdict import COMMS_MIN_SHARE, LOW_OVERLAP_PCT, Costs, Finding

if TYPE_CHECKING:
    from tracekit.analyzers.breakdown import BreakdownResult
    from tracekit.analyzers.collectives import CollectiveResult
    from tracekit.analyzers.dataloader import DataLoaderResult
    from tracekit.analyzers.idle import IdleResult
    from tracekit.analyzers.kernels import KernelResult
    from tracekit.analyzers.overlap import OverlapResult
    from tracekit.analyzers.steps import StepResult
    from tracekit.analyzers.syncs import SyncResult


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.2f} ms"


def costs(
    breakdown: BreakdownResult,
    *,
    measured_on: str,
    collectives: CollectiveResult,
    dataloader: DataLoaderResult,
    idle: IdleResult | None,
    has_stragglers: bool,
) -> Costs:
    """Per-rank ns of each candidate bound over the measured windows.

    Waiting inside collectives is the stragglers' cost when the straggler analysis names
    one; otherwise (no rank systematically last) it is jitter of the collectives: comms.
    """
    waits = collectives.per_rank.group_by("rank").agg(pl.col("wait_ns").sum().alias("wait_ns"))
    idle_by = (
        idle.per_rank.pivot(on="cause", index="rank", values="idle_ns")
        if idle is not None and idle.per_rank.height
        else pl.DataFrame(schema={"rank": pl.Int32})
    )
    for cause in ("host_sync", "launch", "peer", "unexplained"):
        if cause not in idle_by.columns:
            idle_by = idle_by.with_columns(pl.lit(0, dtype=pl.Int64).alias(cause))
    df = (
        breakdown.per_rank.select("rank", "window_ns", "compute_ns", "comm_ns")
        .join(waits, on="rank", how="left")
        .join(dataloader.per_rank.select("rank", pl.col("idle_ns").alias("data_ns")), on="rank", how="left")
        .join(idle_by.select("rank", "host_sync", "launch", "peer", "unexplained"), on="rank", how="left")
        .fill_null(0)
        .with_columns(waiting=pl.min_horizontal("wait_ns", "comm_ns") if has_stragglers else pl.lit(0))
        .select(
            "rank",
            "window_ns",
            "data_ns",
            (pl.col("comm_ns") - pl.col("waiting") + (0 if has_stragglers else pl.col("peer"))).alias("comms_ns"),
            (pl.col("waiting") + (pl.col("peer") if has_stragglers else 0)).alias("straggler_ns"),
            pl.col("host_sync").alias("sync_ns"),
            pl.col("launch").alias("host_ns"),
            pl.col("unexplained").alias("idle_ns"),
            "compute_ns",
        )
    )
    return Costs(per_rank=df, measured_on=measured_on)


def evidence(
    *,
    steps: StepResult,
    dataloader: DataLoaderResult,
    collectives: CollectiveResult,
    stragglers: StragglerResult,
    overlap: OverlapResult | None,
    syncs: SyncResult,
    kernels: KernelResult,
) -> dict[str, tuple[str, ...]]:
    """Human-readable evidence per bound, with the numbers that support it."""
    n_steps = max(1, int(num(steps.steps.group_by("rank").len()["len"].max()))) if steps.has_steps else 1
    out: dict[str, tuple[str, ...]] = {}
    dl = dataloader.per_step
    if dl.height:
        worst = dl.sort("share_pct", descending=True, nulls_last=True).row(0, named=True)
        fetch = num(dataloader.per_rank["fetch_ns"].mean())
        out["data-bound"] = (
            f"measured as {dataloader.measure}; host fetch time {_ms(fetch / n_steps)} per step per rank",
            f"worst step: rank {worst['rank']} step {worst['step']}: {worst['share_pct'] or 0:.1f}% of the step",
        )
    inst = collectives.instances
    if inst.height:
        by_op = inst.group_by("op").agg(pl.len().alias("n"), pl.col("floor_ns").sum(), pl.col("mean_wait_ns").sum())
        ops = ", ".join(
            f"{r['op']} x{r['n']} (latency {_ms(r['floor_ns'])}, mean wait {_ms(r['mean_wait_ns'])})"
            for r in by_op.sort("floor_ns", descending=True).head(4).iter_rows(named=True)
        )
        lines = [f"collectives matched across ranks: {ops}"]
        if overlap is not None and overlap.per_rank.height:
            mean_overlap = overlap.per_rank["overlap_pct"].mean()
            if mean_overlap is not None:
                lines.append(f"compute hides {num(mean_overlap):.1f}% of collective time on average")
        out["comms-bound"] = tuple(lines)
    if stragglers.stragglers:
        lines = []
        for s in stragglers.stragglers:
            cause = describe_cause(s)
            lines.append(
                f"rank {s.rank} arrived last at {s.times_last} of {s.instances} collectives; the others waited "
                f"{_ms(s.caused_wait_ns / n_steps)} per step for it ({100 * s.score:.1f}% of a step); cause: {cause}"
            )
        out["straggler-bound"] = tuple(lines)
    elif inst.height:
        out["straggler-bound"] = ("no rank arrives last systematically: the waiting is spread over ranks",)
    per = syncs.per_rank
    if per.height:
        out["sync-bound"] = (
            f"{num(per['per_step_calls'].mean()):.1f} blocking sync calls and {num(per['per_step_ops'].mean()):.1f} "
            f".item()-style reads per step per rank; GPU idle after syncs "
            f"{_ms(num(per['idle_after_ns'].mean()) / n_steps)} per step",
        )
    top = kernels.top.filter(pl.col("category") == "compute").head(3)
    if top.height:
        out["gpu-compute-bound"] = tuple(
            f"top kernel: {r['name'][:80]} ({r['share_pct']:.1f}% of GPU time)" for r in top.iter_rows(named=True)
        )
    out["host-bound"] = ("GPU idle while the host was busy in operators and runtime calls (launch-bound idle)",)
    out["gpu-idle"] = ("GPU idle with no DataLoader fetch, host sync, collective or busy host in the trace around it",)
    return out


def sync_finding(syncs: SyncResult, *, has_gpu: bool) -> Finding | None:
    """A finding for per-step host reads (``.item()``) even where they cost nothing yet."""
    if not syncs.per_rank.height:
        return None
    ops = num(syncs.per_rank["per_step_ops"].mean())
    if ops < 1:
        return None
    if has_gpu:
        note = "each forces the host to wait for the GPU and drains its queue"
        confidence = "medium"
    else:
        note = "free on this CPU-only run, but on GPU tensors each one stalls the host until the GPU is done"
        confidence = "low"
    return Finding(
        "host-syncs",
        f"{ops:.1f} host reads of device values (.item()) per step outside the optimizer",
        None,
        confidence,
        (f"aten::item / aten::_local_scalar_dense outside Optimizer.step: {ops:.1f} per step per rank; {note}",),
        (
            "Keep per-step metrics on the device (accumulate in a tensor) and read them every N steps.",
            "Find the callers with torch.cuda.set_sync_debug_mode('warn').",
        ),
        {"per_step": ops},
    )


def overlap_finding(overlap: OverlapResult, comms_share: float) -> Finding | None:
    """Low comm/compute overlap where communication matters."""
    if not overlap.per_rank.height or comms_share < 100 * COMMS_MIN_SHARE:
        return None
    if overlap.per_rank["overlap_pct"].null_count() == overlap.per_rank.height:
        return None
    mean = num(overlap.per_rank["overlap_pct"].mean())
    if mean >= LOW_OVERLAP_PCT:
        return None
    return Finding(
        "low-overlap",
        f"Compute hides only {mean:.1f}% of collective time",
        None,
        "medium",
        (f"overlap per rank: {', '.join(f'{v:.0f}%' for v in overlap.per_rank['overlap_pct'].fill_null(0))}",),
        (
            "Overlap gradient all-reduce with backward (DDP buckets, no find_unused_parameters), and "
            "prefetch parameters in FSDP (forward_prefetch / backward_prefetch).",
        ),
    )
