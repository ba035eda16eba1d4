"""Idle-time causes: every GPU idle interval attributed to one cause.

In priority order, an idle interval (a maximal stretch inside a window with no kernel,
copy or set on any stream) is caused by

* ``data``: it overlaps a host DataLoader fetch;
* ``host_sync``: it begins during a blocking sync call, or within ``SYNC_FOLLOW_NS`` after
  one returned (the queue was drained and the host has not launched yet);
* ``peer``: it overlaps a host-side collective (the host blocked on other ranks);
* ``launch``: the host was busy (operators, runtime calls) for at least
  ``LAUNCH_MIN_BUSY_SHARE`` of it, yet the GPU starved: launch-bound;
* ``unexplained`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv

if TYPE_CHECKING:
    from tracekit.model.run import Run

CAUSES: Final = ("data", "host_sync", "peer", "launch", "unexplained")
#: Idle starting this soon after a sync returned is the sync's.
SYNC_FOLLOW_NS: Final = 50_000
#: Idle is launch-bound when the host was busy for at least this share of it.
LAUNCH_MIN_BUSY_SHARE: Final = 0.5


@dataclass(frozen=True)
class IdleResult:
    """GPU idle by cause."""

    #: rank, step, start_ns, end_ns, length_ns, cause (one row per idle interval)
    intervals: pl.DataFrame
    #: rank, cause, idle_ns, count, share_pct (of the rank's idle)
    per_rank: pl.DataFrame


def idle_causes(
    run: Run, segments: pl.DataFrame, frames: pl.DataFrame, fetch: pl.DataFrame, syncs: pl.DataFrame
) -> IdleResult:
    """Attribute each GPU idle interval (from the timeline segments) to one cause.

    ``frames``: the measured windows (rank, step, start_ns, end_ns) the segments were cut in.
    """
    idle = segments.filter(~pl.col("compute") & ~pl.col("collective") & ~pl.col("memory"))
    intervals = iv.union(idle.select("rank", "start_ns", "end_ns"), ["rank"])
    intervals = (
        iv.locate(
            intervals, "start_ns", frames.select("rank", "step", "start_ns", "end_ns"), by=["rank"], keep=["step"]
        )
        .drop("frame_end_ns")
        .sort("rank", "start_ns")
        .with_row_index("idle_id")
    )
    columns = ("rank", "start_ns", "end_ns")
    host_coll = run.select(["cpu_op", "annotation"], *columns, where=pl.col("category") == "collective")
    busy = run.select(["cpu_op", "runtime", "driver", "python"], *columns)
    sync_zone = syncs.with_columns(pl.col("end_ns") + SYNC_FOLLOW_NS)
    labels = {"data": fetch, "peer": host_coll, "launch": busy}
    length = pl.col("end_ns") - pl.col("start_ns")
    overlap = {f"{name}_ns": iv.covered(intervals, cover, ["rank"]) for name, cover in labels.items()}
    after_sync = iv.locate(intervals.select("rank", "idle_id", "start_ns"), "start_ns", sync_zone, by=["rank"], keep=[])
    intervals = (
        intervals.with_columns(**overlap, length_ns=length)
        .with_columns(sync=pl.col("idle_id").is_in(after_sync["idle_id"].implode()))
        .with_columns(
            cause=pl.when(pl.col("data_ns") > 0)
            .then(pl.lit("data"))
            .when(pl.col("sync"))
            .then(pl.lit("host_sync"))
            .when(pl.col("peer_ns") > 0)
            .then(pl.lit("peer"))
            .when(pl.col("launch_ns") >= LAUNCH_MIN_BUSY_SHARE * pl.col("length_ns"))
            .then(pl.lit("launch"))
            .otherwise(pl.lit("unexplained"))
        )
        .select("rank", "step", "start_ns", "end_ns", "length_ns", "cause")
    )
    per_rank = (
        intervals.group_by("rank", "cause")
        .agg(idle_ns=pl.col("length_ns").sum(), count=pl.len())
        .with_columns(share_pct=100 * pl.col("idle_ns") / pl.col("idle_ns").sum().over("rank"))
        .sort("rank", "cause")
    )
    return IdleResult(intervals=intervals, per_rank=per_rank)
