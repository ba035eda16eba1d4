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
  the first of these that covers it:

  1. ``data``: a DataLoader fetch or input preprocessing;
  2. ``blocking_collective``: a blocking host collective (gloo/MPI/UCC, barriers, waits; an
     asynchronous NCCL call is not one: it launches a kernel, and counts as a launch below);
  3. ``host_sync``: a blocking sync or blocking (pageable) copy; also any gap that began in
     one and is otherwise ``host_work``, ``launch`` or ``unexplained``;
  4. ``one_time``: autotuning, compilation, lazy init and module loading, allocator growth,
     an operator's first call when 100 times slower than its others (cuDNN set-up);
  5. ``host_work``: an operator that ran 50 us or more without launching anything (CPU work);
  6. ``launch``: the host dispatching ops: operators that launch, short ones, runtime calls,
     pauses under 50 us between them (Python between ops), the ending work's launch latency,
     all on the launching thread (launch-bound);
  7. ``host_work`` again: longer stretches with no operator, inside a user annotation, a
     Python frame or a step of the launching thread (Python that launches nothing);
  8. ``unexplained``: the rest: no host activity recorded on the launching thread.

The cause with the most time wins; ties go to the earlier of data, blocking_collective,
host_sync, one_time, launch, host_work, unexplained. Every threshold and name pattern is a
constant of :mod:`tracekit.analyzers.host_causes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.host_causes import LAUNCH_CALLS, ORDER, late_causes
from tracekit.results.vocab import IdleCause

if TYPE_CHECKING:
    from tracekit.model.run import Run

#: Every cause: those of queued work, then the host's in their order of ties.
CAUSES: Final = (
    *(c.value for c in (IdleCause.BACK_TO_BACK, IdleCause.PEER, IdleCause.DEPENDENCY)),
    *(c.value for c in ORDER),
)
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
    #: rank during the gap). Names are categorical, as in the events.
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
    calls = run.select(["runtime", "driver"], "rank", "tid", "start_ns", "end_ns", "correlation", "name")
    gaps = _gaps(segments, frames)
    ended = _ending_work(gaps, activity, calls)
    late = ended.filter(pl.col("late")).select("idle_id", "rank", "tid", "start_ns", "end_ns", "launch_ns")
    host = late_causes(late, run, fetch=fetch, syncs=syncs, calls=calls)
    intervals = (
        ended.join(host, on="idle_id", how="left")
        .with_columns(
            cause=pl.when(pl.col("late")).then(pl.col("cause")).otherwise(pl.col("queued_cause")),
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


def _ending_work(gaps: pl.DataFrame, activity: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """``gaps`` with the work that ends each, its launch, and who the GPU waited for.

    Adds ended_by, launch_ns, launch_end_ns, tid (of the launch call; else the thread of the
    rank's first launch call after the gap began, else -1), late (no launch call had
    returned when the gap began) and queued_cause (the cause when not late). Joins on one
    packed integer per key (see :func:`_keys`): most gaps are micro-gaps, so these joins run
    on many rows.
    """
    stream = ["rank", "device", "stream"]
    # one-column lookups first: most activity neither starts nor ends a gap
    work = activity.filter(pl.col("start_ns").is_in(gaps["end_ns"].implode())).select(
        *stream,
        "correlation",
        pl.col("start_ns").alias("end_ns"),
        pl.col("name").alias("ended_by"),
        (pl.col("category") == "collective").alias("collective"),
    )
    finished = activity.filter(pl.col("end_ns").is_in(gaps["start_ns"].implode())).select(
        *stream, pl.col("end_ns").alias("start_ns")
    )
    at_end, at_start, launched = _keys(gaps, work, finished)
    launches = _launches_of(calls, work)
    ended = _exact(gaps.with_columns(_key=at_end), work.with_columns(_key=at_end).drop("rank", "end_ns"))
    launches = launches.select(launched.alias("_key"), "tid", "launch_ns", "launch_end_ns")
    ended = ended.with_columns(_key=launched).join(launches, on="_key", how="left")
    if ended.height != gaps.height:  # several start as the gap ends: the first launched
        ended = ended.sort("idle_id", "launch_ns", nulls_last=True).unique("idle_id", keep="first", maintain_order=True)
    late = pl.col("launch_end_ns").is_null() | (pl.col("launch_end_ns") > pl.col("start_ns"))
    ended = _next_launcher(ended.with_columns(late=late), calls)
    queued = _queued_causes(ended.filter(~pl.col("late")), activity, finished, at_start)
    return ended.join(queued, on="idle_id", how="left").drop("_key")


def _queued_causes(
    queued: pl.DataFrame, activity: pl.DataFrame, finished: pl.DataFrame, at_start: pl.Expr
) -> pl.DataFrame:
    """idle_id, queued_cause of the gaps whose ending work was launched before they began:
    back_to_back where work on the ending work's stream ended as the gap began, else peer
    where the ending work is a collective or runs on a stream that carries collectives,
    else dependency."""
    stream = ["rank", "device", "stream"]
    before = finished.select(_key=at_start, before_device="device", before_stream="stream").sort("_key")
    same = (pl.col("device") == pl.col("before_device")) & (pl.col("stream") == pl.col("before_stream"))
    flagged = _exact(queued.select("idle_id", *stream, "collective", _key=at_start), before)
    flagged = flagged.with_columns(back_to_back=same.fill_null(False))
    if flagged.height != queued.height:  # several ended as the gap began: any on the same stream
        flagged = flagged.group_by("idle_id", *stream, "collective").agg(pl.col("back_to_back").any())
    comm = activity.filter(pl.col("category") == "collective").select(stream).unique().with_columns(comm=True)
    waiting = flagged.filter(~pl.col("back_to_back")).join(comm, on=stream, how="left")
    cause = pl.when(pl.col("collective") | pl.col("comm").fill_null(False))
    return pl.concat(
        [
            flagged.filter("back_to_back").select("idle_id", queued_cause=pl.lit(IdleCause.BACK_TO_BACK.value)),
            waiting.select(
                "idle_id",
                queued_cause=cause.then(pl.lit(IdleCause.PEER.value)).otherwise(pl.lit(IdleCause.DEPENDENCY.value)),
            ),
        ]
    )


def _exact(left: pl.DataFrame, right: pl.DataFrame) -> pl.DataFrame:
    """``left`` joined with the rows of ``right`` of equal ``_key`` (both sorted on it): a
    merge (an exact as-of join) where ``right``'s keys are unique, else a hash join, which
    repeats the rows of ``left`` that match several."""
    keys = right.get_column("_key")
    if keys.is_sorted() and left.get_column("_key").is_sorted() and not (keys.diff() == 0).any():
        return left.join_asof(right, on="_key", strategy="forward", tolerance=0, check_sortedness=False)
    return left.join(right, on="_key", how="left")


def _keys(gaps: pl.DataFrame, *frames: pl.DataFrame) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """Keys packing the rank with the gap end, the gap start, and a correlation id into one
    Int64 each (``rank * width + offset``), for one-column joins."""
    spans = [f.select(t=pl.col(c)) for f in (gaps, *frames) for c in ("start_ns", "end_ns") if c in f.columns]
    low, high = pl.concat(spans).select(low=pl.col("t").min(), high=pl.col("t").max()).row(0)
    low, high = (0, 0) if low is None else (low, high)
    rank = pl.col("rank").cast(pl.Int64)
    width = high - low + 1
    return (
        rank * width + (pl.col("end_ns") - low),
        rank * width + (pl.col("start_ns") - low),
        rank * _PACK + pl.col("correlation"),
    )


#: Correlation ids below this pack with the rank into one integer key.
_PACK: Final = 1 << 40


def _launches_of(calls: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """The runtime and driver calls that launched ``work`` (rank, correlation): rank,
    correlation, tid, launch_ns, launch_end_ns (an id launched twice: both).
    Matched on one integer packing the rank and the id (a lookup on one column costs a third
    of one on two); ids that do not pack (negative, or beyond 2**40) are not linked."""
    packs = pl.col("correlation").is_between(0, _PACK - 1)
    key = pl.col("rank").cast(pl.Int64) * _PACK + pl.col("correlation")
    wanted = work.filter(packs).select(key.unique()).to_series().implode()
    return calls.filter(packs & key.is_in(wanted)).select(
        "rank", "correlation", "tid", launch_ns="start_ns", launch_end_ns="end_ns"
    )


def _next_launcher(ended: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """``ended`` with ``tid`` filled where no launch was found: the thread of the rank's first
    launch call after the gap began (the thread that went on feeding the GPU), else -1."""
    unknown = ended.filter(pl.col("tid").is_null())
    if unknown.height == 0:
        return ended
    names = calls.get_column("name").unique().cast(pl.String).drop_nulls()
    launch = pl.col("name").is_in(names.filter(names.str.contains(LAUNCH_CALLS)).implode())
    launches = calls.filter(launch).select("rank", "start_ns", next_tid="tid")
    found = unknown.select("idle_id", "rank", "start_ns").join_asof(
        launches, on="start_ns", by="rank", strategy="forward", check_sortedness=False
    )
    tids = found.select("idle_id", "next_tid")
    return (
        ended.join(tids, on="idle_id", how="left")
        .with_columns(tid=pl.coalesce("tid", "next_tid", pl.lit(-1, dtype=pl.Int64)))
        .drop("next_tid")
    )
