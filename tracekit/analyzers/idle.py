"""Idle-time causes: every GPU idle gap attributed to one cause, from the work that ends it.

A gap is a maximal stretch of a rank's measured windows with no kernel, copy or set on any
stream. The work that ends it (the first activity starting at its end; where several do, the
one launched first) says who the GPU was waiting for:

* **Launched before the gap began** (its launch call had returned when the GPU went idle):
  the GPU was not waiting for the host.

  1. ``back_to_back``: the work before it on its own stream ended as the gap began: it was
     queued and started as soon as the GPU moved on. The gap is the GPU's own switch time
     between back-to-back work (a microsecond or two), nothing waited;
  2. ``peer``: the ending work is a collective kernel, or runs on a stream that carries
     collectives (a communication stream: it waited for other ranks);
  3. ``dependency`` otherwise: an event or stream wait (``cudaStreamWaitEvent``, GPU ``Stream
     Wait Event``), another stream, the structure of a CUDA graph.

* **Launched after the gap began** (or still being launched when it began, or no ending work
  or launch recorded): the host was late, and the cause is what the host was doing during
  the gap (details in :mod:`tracekit.analyzers.host_causes`). Each instant of the gap goes to
  the first of these that covers it, and the one with the most time wins (ties: this order):

  1. ``data``: a DataLoader fetch or input preprocessing;
  2. ``blocking_collective``: a blocking host collective (gloo/MPI/UCC, barriers, waits; an
     asynchronous NCCL call is not one: it launches a kernel, and counts as a launch below);
  3. ``host_sync``: a blocking sync or blocking (pageable) copy; also any gap that began in
     one and is otherwise ``host_work``, ``launch`` or ``unexplained``;
  4. ``one_time``: autotuning, compilation, lazy init and module loading, allocator growth;
  5. ``host_work``: outermost operators on the launching thread that launch nothing;
  6. ``launch``: launching operators, runtime calls and short pauses between them on the
     launching thread: the host dispatching ops (launch-bound);
  7. ``unexplained``: time with no host activity recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.host_causes import LAUNCH_CALLS, late_causes
from tracekit.results.vocab import IdleCause

if TYPE_CHECKING:
    from tracekit.model.run import Run

#: Every cause, in the order of the module docstring.
CAUSES = tuple(c.value for c in IdleCause)
#: The columns of :attr:`IdleResult.intervals`.
INTERVAL_COLUMNS = (
    *("rank", "step", "start_ns", "end_ns", "length_ns", "cause"),
    *("ended_by", "launch_ns", "host_range", "launches"),
)


@dataclass(frozen=True)
class IdleResult:
    """GPU idle by cause."""

    #: one row per idle gap: rank, step, start_ns, end_ns, length_ns, cause, and what decided
    #: it: ended_by (the work that ended it; null at the end of a window), launch_ns (when
    #: that work was launched; null when unknown), host_range (the outermost host range on
    #: the launching thread in the middle of a host-side gap), launches (launch calls on the
    #: rank during the gap)
    intervals: pl.DataFrame
    #: rank, cause, idle_ns, count, share_pct (of the rank's idle)
    per_rank: pl.DataFrame


def idle_causes(
    run: Run,
    segments: pl.DataFrame,
    frames: pl.DataFrame,
    fetch: pl.DataFrame,
    syncs: pl.DataFrame,
    *,
    activity: pl.DataFrame | None = None,
) -> IdleResult:
    """Attribute each GPU idle gap (from the timeline segments) to one cause.

    ``frames``: the measured windows (rank, step, start_ns, end_ns) the segments were cut in;
    ``fetch``: the DataLoader fetch ranges; ``syncs``: the blocking calls (rank, start_ns,
    end_ns: :attr:`SyncResult.calls`); ``activity``: the GPU activity (rank, name, category,
    start_ns, end_ns, device, stream, correlation, in event order), read from ``run`` when
    not given.
    """
    if activity is None:
        columns = ("rank", "name", "category", "start_ns", "end_ns", "device", "stream", "correlation")
        activity = run.select(["kernel", "memcpy", "memset"], *columns)
    gaps = _gaps(segments, frames)
    ended = _ending_work(gaps, activity, run)
    queued = pl.col("launch_end_ns").is_not_null() & (pl.col("launch_end_ns") <= pl.col("start_ns"))
    back_to_back = pl.col("back_to_back")
    peer = (pl.col("ended_category") == "collective") | pl.col("comm_stream")
    late = ended.filter(~queued).select("idle_id", "rank", "tid", "start_ns", "end_ns", "launch_ns")
    host = late_causes(late, run, fetch=fetch, syncs=syncs)
    intervals = (
        ended.join(host, on="idle_id", how="left")
        .with_columns(
            cause=pl.when(queued & back_to_back)
            .then(pl.lit(IdleCause.BACK_TO_BACK.value))
            .when(queued & peer)
            .then(pl.lit(IdleCause.PEER.value))
            .when(queued)
            .then(pl.lit(IdleCause.DEPENDENCY.value))
            .otherwise(pl.col("cause")),
            launches=pl.col("launches").fill_null(0),
            length_ns=pl.col("end_ns") - pl.col("start_ns"),
        )
        .sort("rank", "start_ns")
        .select(INTERVAL_COLUMNS)
    )
    per_rank = (
        intervals.group_by("rank", "cause")
        .agg(idle_ns=pl.col("length_ns").sum(), count=pl.len())
        .with_columns(share_pct=100 * pl.col("idle_ns") / pl.col("idle_ns").sum().over("rank"))
        .sort("rank", "cause")
    )
    return IdleResult(intervals=intervals, per_rank=per_rank)


def _gaps(segments: pl.DataFrame, frames: pl.DataFrame) -> pl.DataFrame:
    """Idle gaps: idle_id, rank, step (of the window each starts in), start_ns, end_ns."""
    idle = segments.filter(~pl.col("compute") & ~pl.col("collective") & ~pl.col("memory"))
    merged = iv.union(idle.select("rank", "start_ns", "end_ns"), ["rank"])
    windows = frames.select("rank", "step", "start_ns", "end_ns")
    return (
        iv.locate(merged, "start_ns", windows, by=["rank"], keep=["step"])
        .drop("frame_end_ns")
        .sort("rank", "start_ns")
        .with_row_index("idle_id")
    )


def _ending_work(gaps: pl.DataFrame, activity: pl.DataFrame, run: Run) -> pl.DataFrame:
    """``gaps`` with the work that ends each and its launch.

    Adds ended_by, ended_category, back_to_back (the work before it on its stream ended as
    the gap began), comm_stream (its stream carries collectives), launch_ns, launch_end_ns
    and tid (of its launch call; else the rank's busiest launching thread, -1 when none).
    Joins on one packed integer per key (see :func:`_keys`): most rows are micro-gaps.
    """
    stream = ["rank", "device", "stream"]
    # one-column lookups first: most activity neither starts nor ends a gap
    work = activity.filter(pl.col("start_ns").is_in(gaps["end_ns"].implode())).select(
        *stream,
        "correlation",
        pl.col("start_ns").alias("end_ns"),
        pl.col("name").cast(pl.String).alias("ended_by"),
        pl.col("category").cast(pl.String).alias("ended_category"),
    )
    finished = activity.filter(pl.col("end_ns").is_in(gaps["start_ns"].implode())).select(
        *stream, pl.col("end_ns").alias("start_ns")
    )
    at_end, at_start, launched = _keys(gaps, work, finished)
    launches = _launches_of(run, work)
    ended = (
        gaps.with_columns(_key=at_end)
        .join(work.with_columns(_key=at_end).drop("rank", "end_ns"), on="_key", how="left")
        .with_columns(_key=launched)
        .join(launches.with_columns(_key=launched).drop("rank", "correlation"), on="_key", how="left")
    )
    if ended.height != gaps.height:  # several start as the gap ends: the first launched
        ended = ended.sort("idle_id", "launch_ns", nulls_last=True).unique("idle_id", keep="first", maintain_order=True)
    # the gap began as work on the ending work's stream ended: back to back
    same = finished.with_columns(_key=at_start).select("_key", "device", "stream", back_to_back=pl.lit(True))
    comm = activity.filter(pl.col("category") == "collective").select(stream).unique().with_columns(comm_stream=True)
    return (
        ended.with_columns(_key=at_start)
        .join(same.unique(), on=["_key", "device", "stream"], how="left")
        .join(comm, on=stream, how="left")
        .join(_busiest_thread(run), on="rank", how="left")
        .with_columns(
            pl.col("back_to_back", "comm_stream").fill_null(False),
            tid=pl.coalesce("tid", "busiest_tid", pl.lit(-1, dtype=pl.Int64)),
        )
        .drop("_key")
        .sort("idle_id")
    )


def _keys(gaps: pl.DataFrame, *frames: pl.DataFrame) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """Keys packing the rank with the gap end, the gap start, and a correlation id into one
    Int64 each (``rank * width + offset``), for one-column joins."""
    spans = [f.select(t=pl.col(c)) for f in (gaps, *frames) for c in ("start_ns", "end_ns") if c in f.columns]
    times = pl.concat(spans)
    low, high = times.select(low=pl.col("t").min(), high=pl.col("t").max()).row(0)
    width = (high - low + 1) if low is not None else 1
    rank = pl.col("rank").cast(pl.Int64)
    return (
        rank * width + (pl.col("end_ns") - low if low is not None else 0),
        rank * width + (pl.col("start_ns") - low if low is not None else 0),
        rank * _PACK + pl.col("correlation"),
    )


#: Correlation ids below this pack with the rank into one integer key.
_PACK: Final = 1 << 40


def _launches_of(run: Run, work: pl.DataFrame) -> pl.DataFrame:
    """The runtime and driver calls that launched ``work`` (rank, correlation): rank,
    correlation, tid, launch_ns, launch_end_ns. Matched on one integer packing the rank and
    the id (a lookup on one column costs a third of one on two); ids that do not pack
    (negative, or beyond 2**40) are not linked."""
    columns: tuple[str | pl.Expr, ...] = ("rank", "correlation", "tid", pl.col("start_ns").alias("launch_ns"))
    columns += (pl.col("end_ns").alias("launch_end_ns"),)
    packs = pl.col("correlation").is_between(0, _PACK - 1)
    key = pl.col("rank").cast(pl.Int64) * _PACK + pl.col("correlation")
    wanted = work.filter(packs).select(key.unique()).to_series().implode()
    calls = run.select(["runtime", "driver"], *columns, where=packs & key.is_in(wanted))
    # a correlation id launched more than once: the earliest launch
    return calls.sort("launch_ns").unique(["rank", "correlation"], keep="first", maintain_order=True)


def _busiest_thread(run: Run) -> pl.DataFrame:
    """rank, busiest_tid: the thread of each rank with the most launch calls."""
    calls = run.select(["runtime", "driver"], "rank", "tid", name=LAUNCH_CALLS)
    return (
        calls.group_by("rank", "tid")
        .agg(n=pl.len())
        .sort("rank", "n", "tid", descending=[False, True, False])
        .unique("rank", keep="first", maintain_order=True)
        .select("rank", busiest_tid="tid")
    )
