"""Host syncs: where the host blocks until the device finishes, and the idle that follows.

A device-to-host synchronization empties the GPU's queue: after it returns the GPU waits
until the host launches again. Counted per step: blocking runtime calls
(``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, synchronous
``cudaMemcpy``, their HIP twins), the operators that cause them (``aten::item``,
``aten::_local_scalar_dense``) and GPU-side ``cuda_sync`` events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv

if TYPE_CHECKING:
    from tracekit.model.run import Run

#: Runtime calls that block the host until the device is done.
SYNC_CALLS: Final = r"^(?:cuda|hip)(?:Stream|Device|Event|Ctx)Synchronize|^(?:cuda|hip)Memcpy(?:_v\d+)?$"
#: Operators whose result is read on the host (a sync on GPU tensors).
SYNC_OPS: Final = ("aten::item", "aten::_local_scalar_dense")
SYNC_OPS_PATTERN: Final = "^(?:" + "|".join(re.escape(op) for op in SYNC_OPS) + ")$"
#: Ranges whose ``.item()`` calls are not syncs: optimizers keep their step counters on the
#: host (unless ``capturable``), so AdamW's per-parameter ``step.item()`` never waits.
NOT_SYNC_RANGES: Final = r"^Optimizer\.step#|^tracekit\.phase/optim_step$"


@dataclass(frozen=True)
class SyncResult:
    """Host syncs per rank and step."""

    #: rank, step, sync_calls, sync_ops, gpu_sync_events, idle_after_ns
    per_step: pl.DataFrame
    #: rank, sync_calls, sync_ops, gpu_sync_events, idle_after_ns, per_step_calls
    per_rank: pl.DataFrame
    #: the blocking calls: rank, start_ns, end_ns (for idle attribution)
    calls: pl.DataFrame


def sync_calls(run: Run) -> pl.DataFrame:
    """The host's blocking sync calls (rank, start_ns, end_ns)."""
    return run.select(["runtime", "driver"], "rank", "start_ns", "end_ns", name=SYNC_CALLS)


def host_syncs(run: Run, activity: pl.DataFrame, frames: pl.DataFrame) -> SyncResult:
    """Count syncs per step and measure the GPU idle after each blocking call."""
    calls = sync_calls(run)
    # idle after a sync: from its return to the next GPU activity starting after it
    starts = activity.select("rank", pl.col("start_ns").alias("next_ns")).sort("rank", "next_ns")
    after = (
        calls.sort("rank", "end_ns")
        .join_asof(starts, left_on="end_ns", right_on="next_ns", by="rank", strategy="forward", check_sortedness=False)
        .with_columns(idle=(pl.col("next_ns") - pl.col("end_ns")).clip(lower_bound=0).fill_null(0))
    )
    ops = run.select(["cpu_op"], "rank", "start_ns", "end_ns", name=SYNC_OPS_PATTERN)
    # count aten::item once, not again for the _local_scalar_dense it calls
    ops = iv.union(ops, ["rank"])
    optimizer = run.select(["cpu_op", "annotation"], "rank", "start_ns", "end_ns", name=NOT_SYNC_RANGES)
    inside = iv.locate(ops, "start_ns", iv.union(optimizer, ["rank"]), by=["rank"], keep=[])
    ops = ops.join(inside.select("rank", "start_ns"), on=["rank", "start_ns"], how="anti")
    gpu_syncs = run.select(["sync"], "rank", "start_ns", "end_ns")
    parts = [
        _count(after.select("rank", "start_ns", "end_ns", "idle"), frames, "sync_calls", idle=True),
        _count(ops, frames, "sync_ops"),
        _count(gpu_syncs, frames, "gpu_sync_events"),
    ]
    per_step = frames.select("rank", "step").unique()
    for part in parts:
        per_step = per_step.join(part, on=["rank", "step"], how="left", nulls_equal=True)
    per_step = per_step.with_columns(
        pl.col("sync_calls", "sync_ops", "gpu_sync_events").fill_null(0).cast(pl.Int64),
        pl.col("idle_after_ns").fill_null(0),
    ).sort("rank", "step")
    per_rank = (
        per_step.group_by("rank")
        .agg(
            pl.col("sync_calls", "sync_ops", "gpu_sync_events", "idle_after_ns").sum(),
            per_step_calls=pl.col("sync_calls").mean(),
            per_step_ops=pl.col("sync_ops").mean(),
        )
        .sort("rank")
    )
    return SyncResult(per_step=per_step, per_rank=per_rank, calls=calls)


def _count(events: pl.DataFrame, frames: pl.DataFrame, name: str, *, idle: bool = False) -> pl.DataFrame:
    located = iv.locate(events, "start_ns", frames, by=["rank"], keep=["step"])
    aggs = [pl.len().alias(name)]
    if idle:
        aggs.append(
            pl.col("idle")
            .clip(upper_bound=pl.col("frame_end_ns") - pl.col("end_ns"))
            .clip(0)
            .sum()
            .alias("idle_after_ns")
        )
    return located.group_by("rank", "step").agg(aggs)
