"""Host syncs: where the host blocks until the device finishes, and the idle that follows.

A device-to-host synchronization empties the GPU's queue: after it returns the GPU waits
until the host launches again. Counted per step:

* blocking runtime calls: ``cudaStreamSynchronize``, ``cudaDeviceSynchronize``,
  ``cudaEventSynchronize``, synchronous ``cudaMemcpy``, their HIP twins;
* blocking copies: a copy call (``cudaMemcpyAsync``...) whose GPU copy goes to or from
  pageable memory (``Memcpy DtoH (Device -> Pageable)``: the Kineto name, kept by both
  Kineto schemas and given by tracekit's nsys reader). The driver stages such a copy through
  a pinned buffer and the call returns only when it is done, so it blocks the host like
  ``.cpu()``; its blocking span is the runtime call. Also counted as sync calls, and apart
  as ``blocking_copies``;
* the operators that cause them (``aten::item``, ``aten::_local_scalar_dense``);

``sync_calls`` counts sync *points*: the blocking calls one operator call makes (a pageable
copy and the stream sync after it, in ``.item()``) are one point where the host waited.
* GPU-side ``cuda_sync`` events.

Each blocking call is named by the operator that issued it: the innermost enclosing CPU
operator, found through ``external_id`` (Kineto), else by time on the calling thread.

tracekit capture's own wait for the device at each step's end (inside
:data:`~tracekit.results.vocab.CAPTURE_SYNC_RANGE`: it times the step) is a sync of the
measurement, not of the training: it is kept with the calls (``capture``), for the idle it
leaves (:class:`~tracekit.results.vocab.IdleCause` ``capture_sync``) and the re-timing, and
counted nowhere: not a sync point, not a source, not idle after a sync. A capture before
summary 1.6 wrote no range around it: there, on a rank with tracekit's phase ranges, it is the
last device synchronize of a step after every phase of the step has ended (:func:`_unmarked`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.results.vocab import CAPTURE_SYNC_RANGE, SyncKind

if TYPE_CHECKING:
    from tracekit.model.run import Run

#: Runtime calls that block the host until the device is done.
SYNC_CALLS: Final = r"^(?:cuda|hip)(?:Stream|Device|Event|Ctx)Synchronize|^(?:cuda|hip)Memcpy(?:_v\d+)?$"
#: Runtime or driver calls that may issue a copy (cudaMemcpyAsync, cuMemcpyDtoHAsync_v2...).
COPY_CALLS: Final = r"(?i)memcpy"
#: GPU copies that block the host: to or from pageable memory.
PAGEABLE_COPY: Final = r"\bPageable\b"
#: Operators whose result is read on the host (a sync on GPU tensors).
SYNC_OPS: Final = ("aten::item", "aten::_local_scalar_dense")
SYNC_OPS_PATTERN: Final = "^(?:" + "|".join(re.escape(op) for op in SYNC_OPS) + ")$"
#: Ranges whose ``.item()`` calls are not syncs: optimizers keep their step counters on the
#: host (unless ``capturable``), so AdamW's per-parameter ``step.item()`` never waits.
#: The blocking calls of a rank kept as intervals (the longest; :func:`longest_calls`).
KEPT_CALLS: Final = 5000
NOT_SYNC_RANGES: Final = r"^Optimizer\.step#|^tracekit\.phase/optim_step$"
#: The range of tracekit capture's own step-end sync.
CAPTURE_PATTERN: Final = "^" + re.escape(CAPTURE_SYNC_RANGE) + "$"


@dataclass(frozen=True)
class SyncResult:
    """Host syncs per rank and step."""

    #: rank, step, sync_calls, idle_after_ns, blocking_copies, sync_ops, gpu_sync_events
    per_step: pl.DataFrame
    #: rank, sync_calls, blocking_copies, sync_ops, gpu_sync_events, idle_after_ns,
    #: per_step_calls, per_step_ops
    per_rank: pl.DataFrame
    #: the blocking calls (see :func:`sync_calls`; the capture's own with ``capture``), for idle
    #: attribution and the re-timing
    calls: pl.DataFrame
    #: the host reads of tensor values counted as ``sync_ops``: rank, tid, start_ns, end_ns
    reads: pl.DataFrame


def sync_calls(run: Run) -> pl.DataFrame:
    """The host's blocking calls, syncs and blocking copies, in event order.

    Columns: rank, tid, start_ns, end_ns, name (the runtime call), kind (a :class:`SyncKind`:
    ``sync`` or ``blocking_copy``), op (the operator that issued it; null when none encloses it),
    op_start_ns, capture (inside tracekit capture's own step-end sync range).
    """
    columns = ("rank", "tid", "start_ns", "end_ns", pl.col("name").cast(pl.String), "correlation", "external_id")
    named = run.select(["runtime", "driver"], *columns, name=SYNC_CALLS)
    linked = pl.col("correlation").is_not_null()
    pageable = run.select(["memcpy"], "rank", "correlation", name=PAGEABLE_COPY, where=linked)
    copies = run.select(["runtime", "driver"], *columns, name=COPY_CALLS).join(
        pageable.unique(), on=["rank", "correlation"], how="semi"
    )
    calls = (
        pl.concat(
            [copies.with_columns(kind=pl.lit(SyncKind.BLOCKING_COPY)), named.with_columns(kind=pl.lit(SyncKind.SYNC))]
        )
        .unique(["rank", "tid", "start_ns", "name"], keep="first", maintain_order=True)
        .sort("rank", "start_ns")
    )
    calls = _issuing_op(run, calls).select("rank", "tid", "start_ns", "end_ns", "name", "kind", "op", "op_start_ns")
    return calls.with_columns(capture=_in_capture_range(run, calls))


def _in_capture_range(run: Run, calls: pl.DataFrame) -> pl.Series:
    """Per call (in order): whether it is tracekit capture's own step-end sync: inside its range,
    or on a rank of an older capture that wrote no range, at its place (:func:`_unmarked`)."""
    ranges = run.select(["annotation"], "rank", "start_ns", "end_ns", name=CAPTURE_PATTERN)
    indexed = calls.select("rank", "start_ns", "name").with_row_index("_i")
    if calls.height == 0:
        return pl.repeat(False, 0, dtype=pl.Boolean, eager=True).alias("capture")
    inside = (
        iv.locate(indexed, "start_ns", iv.union(ranges, ["rank"]), by=["rank"], keep=[], in_time_order=False)["_i"]
        if ranges.height
        else pl.Series("_i", [], dtype=pl.UInt32)
    )
    older = _unmarked(run, indexed.filter(~pl.col("rank").is_in(ranges["rank"].unique().implode())))
    return indexed["_i"].is_in(pl.concat([inside, older]).implode()).alias("capture")


#: tracekit's phase ranges: a rank that has them is a tracekit capture.
TRACEKIT_PHASE: Final = r"^tracekit\.phase/"
#: The call tracekit capture's step-end wait makes (``torch.cuda.synchronize()``).
DEVICE_SYNC: Final = r"^(?:cuda|hip)DeviceSynchronize(?:_v\d+)?$"


def _unmarked(run: Run, calls: pl.DataFrame) -> pl.Series:
    """The calls (rank, start_ns, name, _i) that are tracekit capture's step-end sync on ranks
    whose capture wrote no range around it (capture summaries before 1.6). Its phases tile
    each step, and the wait for the device follows the last of them: on a rank with tracekit's
    phase ranges, the last device synchronize of a step that starts after every phase of that
    step has ended is the capture's, and so is one after the last step (the capture stopping
    the profiler)."""
    phases = run.select(["annotation"], "rank", "start_ns", "end_ns", name=TRACEKIT_PHASE)
    steps = run.select(["step"], "rank", "start_ns", "end_ns")
    device = calls.filter(pl.col("name").str.contains(DEVICE_SYNC), pl.col("rank").is_in(phases["rank"].implode()))
    if device.height == 0 or steps.height == 0:
        return pl.Series("_i", [], dtype=pl.UInt32)
    steps = iv.union(steps.select("rank", "start_ns", "end_ns"), ["rank"]).with_row_index("_step")
    in_step = iv.locate(device, "start_ns", steps, by=["rank"], keep=["_step"], in_time_order=False)
    last_phase = (
        iv.locate(phases.select("rank", "start_ns", "end_ns"), "start_ns", steps, by=["rank"], keep=["_step"])
        .group_by("_step")
        .agg(phase_end=pl.col("end_ns").max())
    )
    after = in_step.join(last_phase, on="_step", how="inner").filter(pl.col("start_ns") >= pl.col("phase_end"))
    ends = after.sort("start_ns").group_by("_step").agg(pl.col("_i").last())["_i"]
    # after the last step: the capture's stop (the profiler's flush), no work of the training
    last = steps.group_by("rank").agg(last_end=pl.col("end_ns").max())
    stop = device.join(last, on="rank").filter(pl.col("start_ns") >= pl.col("last_end"))["_i"]
    found: pl.Series = pl.concat([ends, stop.cast(ends.dtype)])
    return found


def user_calls(calls: pl.DataFrame) -> pl.DataFrame:
    """The training's blocking calls of :func:`sync_calls`: without tracekit capture's own."""
    return calls.filter(~pl.col("capture"))


def capture_calls(calls: pl.DataFrame) -> pl.DataFrame:
    """tracekit capture's own blocking calls of :func:`sync_calls` (its step-end sync)."""
    return calls.filter(pl.col("capture"))


def longest_calls(calls: pl.DataFrame, *, kept: int = KEPT_CALLS) -> pl.DataFrame:
    """The longest ``kept`` blocking calls of each rank (of :func:`sync_calls`), in time order, each
    with ``calls``: how many the rank has (more than kept: the rest were left out)."""
    return (
        calls.with_columns(calls=pl.len().over("rank"), _length=pl.col("end_ns") - pl.col("start_ns"))
        .sort(["rank", "_length", "start_ns"], descending=[False, True, False])
        .group_by("rank", maintain_order=True)
        .head(kept)
        .sort("rank", "start_ns")
        .select("rank", "start_ns", "end_ns", "name", pl.col("kind").cast(pl.String), "op", "calls")
    )


def sync_points(calls: pl.DataFrame) -> pl.DataFrame:
    """One row per point where the host waited: the blocking calls of one operator call are one
    (``.item()`` is a pageable copy and a stream sync); a call no operator encloses is its own."""
    issued = pl.col("op_start_ns").is_not_null()
    return pl.concat(
        [
            calls.filter(issued).unique(["rank", "tid", "op_start_ns"], keep="first", maintain_order=True),
            calls.filter(~issued),
        ]
    ).sort("rank", "start_ns")


def _issuing_op(run: Run, calls: pl.DataFrame) -> pl.DataFrame:
    """``calls`` with ``op``: the operator with their external id, else the latest operator
    on the same thread that started before the call and was still open when it returned."""
    ids = calls["external_id"].drop_nulls().unique()
    with_id = pl.col("external_id").is_in(ids.implode())
    by_id = (
        run.select(
            ["cpu_op"],
            "rank",
            "external_id",
            pl.col("name").alias("op"),
            pl.col("start_ns").alias("op_start_ns"),
            where=with_id,
        )
        .unique(["rank", "external_id"], keep="first", maintain_order=True)
        .with_columns(pl.col("op").cast(pl.String))
    )
    named = calls.join(by_id, on=["rank", "external_id"], how="left")
    unnamed = named.filter(pl.col("op").is_null())
    if unnamed.height == 0:
        return named
    unnamed = unnamed.with_row_index("_call")
    by_time = unnamed.drop("op", "op_start_ns").join(
        _open_ops(run, unnamed), on="_call", how="left", maintain_order="left"
    )
    return pl.concat([named.filter(pl.col("op").is_not_null()), by_time.select(named.columns)]).sort("rank", "start_ns")


def _open_ops(run: Run, calls: pl.DataFrame) -> pl.DataFrame:
    """For each of ``calls`` (``_call``, rank, tid, start_ns, end_ns), the operator of its
    thread that started last at or before it (the last in the trace's order among equal
    starts), where it was still open when the call returned: ``_call``, op, op_start_ns.

    A thread at a time, by binary search over its operators in time order: the as-of join by
    (rank, tid) before held every operator of the threads twice (a 2 GB rank's 4.6M: +590 MB at
    once), and took the calls to be in time order on each thread, which the join before it does
    not promise (out of order, a call took an operator that started after it: the test)."""
    found = []
    for (rank, tid), mine in calls.group_by("rank", "tid", maintain_order=True):
        if rank is None or tid is None:
            continue
        ops = run.select(
            ["cpu_op"], "start_ns", "end_ns", "name", where=(pl.col("rank") == rank) & (pl.col("tid") == tid)
        )
        last = ops.get_column("start_ns").search_sorted(mine.get_column("start_ns"), side="right").cast(pl.Int64) - 1
        picked = ops.select(pl.all().gather(last.clip(lower_bound=0))) if ops.height else ops.clear(mine.height)
        is_open = (last >= 0) & (picked.get_column("end_ns") >= mine.get_column("end_ns"))
        found.append(
            mine.select("_call").with_columns(
                op=pl.when(is_open).then(picked.get_column("name").cast(pl.String)),
                op_start_ns=pl.when(is_open).then(picked.get_column("start_ns")),
            )
        )
    schema = {"_call": pl.get_index_type(), "op": pl.String, "op_start_ns": pl.Int64}
    return pl.concat(found) if found else pl.DataFrame(schema=schema)


def host_syncs(
    run: Run,
    activity: pl.DataFrame,
    frames: pl.DataFrame,
    *,
    every: pl.DataFrame | None = None,
    stretches: pl.DataFrame | None = None,
    reads: pl.DataFrame | None = None,
) -> SyncResult:
    """Count syncs per step and measure the GPU idle after the blocking calls (the training's:
    tracekit capture's own are kept in ``calls`` and counted nowhere).

    ``every``: the blocking calls (:func:`sync_calls` of ``run`` when not given); ``stretches``:
    the idle after them (:func:`idle_stretches` of their training's calls and ``activity`` when
    not given); ``reads``: the host reads (:func:`host_reads` of ``run`` when not given). A
    window of a rank gives all three from the whole rank's: a window's events cannot tell which
    operator call a call's sync point is of, where the idle after a call that returned before
    the window ends, nor whether a read at its start runs on from one that ended there
    (:mod:`tracekit.analyzers.windows`).
    """
    every = sync_calls(run) if every is None else every
    calls = user_calls(every)
    stretches = idle_stretches(calls, activity) if stretches is None else stretches
    ops = host_reads(run) if reads is None else reads
    gpu_syncs = run.select(["sync"], "rank", "start_ns", "end_ns")
    parts = [
        _count(sync_points(calls), frames, "sync_calls"),
        _idle_after(stretches, frames),
        _count(calls.filter(kind=SyncKind.BLOCKING_COPY), frames, "blocking_copies"),
        _count(ops, frames, "sync_ops"),
        _count(gpu_syncs, frames, "gpu_sync_events"),
    ]
    per_step = frames.select("rank", "step").unique()
    for part in parts:
        per_step = per_step.join(part, on=["rank", "step"], how="left", nulls_equal=True)
    counts = ("sync_calls", "blocking_copies", "sync_ops", "gpu_sync_events")
    per_step = per_step.with_columns(pl.col(*counts).fill_null(0).cast(pl.Int64), pl.col("idle_after_ns").fill_null(0))
    per_step = per_step.select("rank", "step", "sync_calls", "idle_after_ns", *counts[1:]).sort("rank", "step")
    return SyncResult(per_step=per_step, per_rank=per_rank_of(per_step), calls=every, reads=ops)


def host_reads(run: Run) -> pl.DataFrame:
    """The host reads of tensor values (:data:`SYNC_OPS` outside the optimizers' ranges): rank,
    tid, start_ns, end_ns; the reads of a thread that overlap or touch are one."""
    ops = run.select(["cpu_op"], "rank", "tid", "start_ns", "end_ns", name=SYNC_OPS_PATTERN)
    # a read recorded with no duration (1 us resolution) is a read: 1 ns long, so that the union
    # keeps it; and it counts aten::item once, not again for the _local_scalar_dense it calls
    ops = iv.union(ops.with_columns(end_ns=pl.max_horizontal("end_ns", pl.col("start_ns") + 1)), ["rank", "tid"])
    optimizer = run.select(["cpu_op", "annotation"], "rank", "start_ns", "end_ns", name=NOT_SYNC_RANGES)
    inside = iv.locate(ops, "start_ns", iv.union(optimizer, ["rank"]), by=["rank"], keep=[])
    return ops.join(inside.select("rank", "start_ns"), on=["rank", "start_ns"], how="anti")


def per_rank_of(per_step: pl.DataFrame) -> pl.DataFrame:
    """Each rank's syncs from its steps' (:attr:`SyncResult.per_step`): the counts and the idle
    summed, the calls and reads a step on average."""
    counts = ("sync_calls", "blocking_copies", "sync_ops", "gpu_sync_events")
    return (
        per_step.group_by("rank")
        .agg(
            pl.col(*counts, "idle_after_ns").sum(),
            per_step_calls=pl.col("sync_calls").mean(),
            per_step_ops=pl.col("sync_ops").mean(),
        )
        .sort("rank")
    )


def idle_stretches(calls: pl.DataFrame, activity: pl.DataFrame) -> pl.DataFrame:
    """The GPU idle after each of the blocking ``calls``: rank, start_ns (the call's return),
    end_ns (the start of the next GPU activity, where one starts after it)."""
    starts = activity.select("rank", pl.col("start_ns").alias("next_ns")).sort("rank", "next_ns")
    return (
        calls.sort("rank", "end_ns")
        .join_asof(starts, left_on="end_ns", right_on="next_ns", by="rank", strategy="forward", check_sortedness=False)
        .filter(pl.col("next_ns") > pl.col("end_ns"))
        .select("rank", pl.col("end_ns").alias("start_ns"), pl.col("next_ns").alias("end_ns"))
    )


def _idle_after(stretches: pl.DataFrame, frames: pl.DataFrame) -> pl.DataFrame:
    """GPU idle after blocking calls per rank and step: the ``stretches`` of
    :func:`idle_stretches` within the window each call returned in; counted once where the
    stretches of several calls overlap (``.item()`` is a copy and a stream sync)."""
    # the idle counts in the window where the call returned, up to that window's end
    located = iv.locate(iv.union(stretches, ["rank"]), "start_ns", frames, by=["rank"], keep=["step"])
    idle = pl.min_horizontal("end_ns", "frame_end_ns") - pl.col("start_ns")
    return located.group_by("rank", "step").agg(idle.sum().alias("idle_after_ns"))


def _count(events: pl.DataFrame, frames: pl.DataFrame, name: str) -> pl.DataFrame:
    located = iv.locate(events.select("rank", "start_ns"), "start_ns", frames, by=["rank"], keep=["step"])
    return located.group_by("rank", "step").agg(pl.len().alias(name))
