"""The work of the measured steps, by name: what a comparison of two runs matches.

Per rank, inside the measured steps (the whole trace when a rank has no steps):

* ``kernels``: GPU activities (kernels, copies, sets) starting in a measured window, by name;
* ``host_ops``: CPU operators starting in a measured step's host range, by name (nested
  operators count under their own names: ``aten::linear`` and the ``aten::addmm`` it calls);
* ``syncs``: the points where the host waited for the device (blocking sync calls and copies),
  and the host reads of tensor values (``.item()``, ``bool(t)``: a sync on a GPU, the only
  trace of one on a CPU-only run), each named by the outermost operator that issued it and
  the phase (outermost annotation) it was issued in.

Collectives per step come from the collectives analysis (its per-rank rows carry the step).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.host_causes import on_thread
from tracekit.analyzers.parts import CollectiveParts, WorkParts
from tracekit.analyzers.shared import STEPS
from tracekit.analyzers.stats import grouped
from tracekit.analyzers.syncs import sync_points, user_calls
from tracekit.results.vocab import SyncKind, WorkKind

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.mapreduce import Reduced

#: The most rows of each kind kept in the result, largest total time first (a trace of
#: generated Triton kernels can hold thousands of names; the rest are counted as left out).
MAX_ROWS: Final = 2000


def _named(points: pl.DataFrame, ctx: RankContext) -> pl.DataFrame:
    """``points`` (rank, tid, start_ns, sync_kind) with ``op`` (the outermost operator of its
    thread holding it) and ``phase``."""
    if points.height == 0:
        return points.with_columns(op=pl.lit(None, pl.String), phase=pl.lit(None, pl.String))
    points = points.with_row_index("_i")
    threads = points.select("rank", "tid").unique().sort("rank", "tid").with_row_index("thread")
    mine = on_thread(points.select("_i", "rank", "tid", "start_ns"), threads)

    def slices() -> Iterator[pl.DataFrame]:
        for part in ctx.run.select_slices(["cpu_op"], "rank", "tid", "start_ns", "end_ns", "name"):
            yield on_thread(part, threads)

    # of the threads' operators (a 2 GB rank's millions, for a few thousand syncs), those an
    # answer depends on, a slice of the events at a time
    ops = iv.holders(slices, mine, "start_ns", by=["thread"])
    # a parent and its child can share both times (``aten::item`` and the ``_local_scalar_dense``
    # it calls, at 1 us resolution): the first in event order, whatever the shard; the names of
    # the operators found only made strings (a 2 GB rank's 1.4M outermost: 60 MB)
    by_op = iv.outermost_at(mine, "start_ns", ops, by=["thread"], keep=["name"])
    by_op = by_op.select("_i", op=pl.col("name").cast(pl.String))
    phases = ctx.top_level.select("rank", "tid", "start_ns", "end_ns", pl.col("name").alias("phase"))
    by_phase = iv.locate(points, "start_ns", phases, by=["rank", "tid"], keep=["phase"])
    return points.join(by_op, on="_i", how="left").join(by_phase.select("_i", "phase"), on="_i", how="left")


def work_map(ctx: RankContext) -> WorkParts:
    """Kernels, host operators and sync points of the measured steps, by name, per rank (a
    window's: the kernels and sync points of its frames, the host operators that start in it
    within any of the rank's steps)."""
    frames = ctx.frames
    dur = pl.col("end_ns") - pl.col("start_ns")
    # grouped on the names' codes, which are as many as the names; they stay codes until the
    # cross-rank part has grouped the ranks' rows (each rank repeats the run's long names)
    activity = ctx.activity.select("rank", "start_ns", "end_ns", "name", "kind", "category")
    located = iv.locate(activity, "start_ns", frames, by=["rank"], keep=[])
    kernels = grouped(located, ["rank", "name", "kind", "category"], count=pl.len(), total_ns=dur.sum())
    del located
    # a slice of the operators at a time (a 2 GB rank's 4.6M held at once: +100 MB), each
    # grouped; the slices' counts and times then summed
    # (a step's host range may start in the window before its frame's: of the rank's steps)
    steps = ctx.rank_steps
    by_slice = []
    for part in ctx.run.select_slices(["cpu_op"], "rank", "start_ns", "end_ns", "name"):
        mine = ctx.own(part)
        ops = mine.filter(iv.within(mine, "start_ns", steps.steps, by=["rank"])) if steps.has_steps else mine
        by_slice.append(ops.group_by("rank", "name").agg(count=pl.len(), total_ns=dur.sum()))
    host_ops = pl.concat(by_slice).group_by("rank", "name").agg(pl.col("count").sum(), pl.col("total_ns").sum())
    calls = sync_points(user_calls(ctx.syncs.calls)).select(
        "rank", "tid", "start_ns", pl.col("kind").alias("sync_kind")
    )
    reads = ctx.syncs.reads.select("rank", "tid", "start_ns", sync_kind=pl.lit(SyncKind.HOST_READ))
    points = pl.concat([calls, reads], how="vertical_relaxed")
    points = iv.locate(points, "start_ns", frames, by=["rank"], keep=[]).drop("frame_end_ns")
    syncs = (
        _named(points, ctx)
        .group_by("rank", "sync_kind", pl.col("op").fill_null("(no operator)"), "phase")
        .agg(count=pl.len())
    )
    return WorkParts(kernels=kernels, host_ops=host_ops, syncs=syncs)


def work_fold(parts: list[WorkParts]) -> WorkParts:
    """The rank's work from its windows' (:mod:`tracekit.analyzers.windows`): each counts the
    kernels, host operators and sync points it owns, so each table is the sums of the windows'
    by name."""
    if not any(p.kernels.width for p in parts):
        return WorkParts()
    return WorkParts(
        kernels=_added([p.kernels for p in parts], ["rank", "name", "kind", "category"]),
        host_ops=_added([p.host_ops for p in parts], ["rank", "name"]),
        syncs=_added([p.syncs for p in parts], ["rank", "sync_kind", "op", "phase"]),
    )


def _added(tables: list[pl.DataFrame], keys: list[str]) -> pl.DataFrame:
    """The windows' ``tables`` (rows by ``keys``) in one, the other columns summed by ``keys``."""
    found = pl.concat([t for t in tables if t.width], how="vertical")
    summed = found.group_by(keys).agg(pl.exclude(keys).sum())
    return summed.select(found.columns).cast(found.schema)


def work_tables(red: Reduced) -> dict[WorkKind, pl.DataFrame]:
    """The cross-rank part: each table summed over ranks (count, total_ns, ranks), largest first."""
    out: dict[WorkKind, pl.DataFrame] = {}
    specs = {
        WorkKind.KERNEL: (red.gather(WorkParts).kernels, ["name", "kind", "category"]),
        WorkKind.HOST_OP: (red.gather(WorkParts).host_ops, ["name"]),
    }
    for kind, (table, keys) in specs.items():
        if table.height == 0:
            continue
        out[kind] = (
            table.group_by(keys)
            .agg(pl.col("count").sum(), pl.col("total_ns").sum(), ranks=pl.col("rank").n_unique())
            .with_columns(_ties(keys))
            .sort(["total_ns", *keys], descending=[True, *[False] * len(keys)])
        )
    found = red.gather(CollectiveParts).found
    if found.height:
        if red.result(STEPS).has_steps:
            found = found.filter(pl.col("step").is_not_null())
        out[WorkKind.COLLECTIVE] = (
            found.group_by(pl.col("op").cast(pl.String).alias("name"))
            .agg(
                count=pl.len(),
                total_ns=(pl.col("end_ns") - pl.col("start_ns")).sum(),
                ranks=pl.col("rank").n_unique(),
            )
            .sort(["total_ns", "name"], descending=[True, False])
        )
    syncs = red.gather(WorkParts).syncs
    if syncs.height:
        out[WorkKind.SYNC] = (
            syncs.group_by("sync_kind", pl.col("op").alias("name"), "phase")
            .agg(pl.col("count").sum(), ranks=pl.col("rank").n_unique())
            .with_columns(total_ns=pl.lit(0, pl.Int64))
            .sort(["count", *_ties(["name", "sync_kind", "phase"])], descending=[True, False, False, False])
        )
    return out


def _ties(keys: list[str]) -> list[pl.Expr]:
    """The group keys as text (the ranks' rows name them with codes), which also orders rows
    tied on their figure the same way in every process, however the ranks were sharded."""
    return [pl.col(k).cast(pl.String) for k in keys]
