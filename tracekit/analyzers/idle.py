"""Idle-time causes: every GPU idle gap attributed to one cause, from the work that ends it.

A gap is a maximal stretch of a rank's measured windows with no kernel, copy or set on any
stream. The work that ends it (the first activity starting at its end; where several do, the
one launched first) says who the GPU was waiting for. The launch of that work is the runtime
or driver call of its correlation id: for a node of a CUDA or HIP graph, the one graph launch
(``cudaGraphLaunch``, ``hipGraphLaunch``) that every node of the replay correlates to.

* **Switch time.** ``back_to_back``: the work was queued (its launch call had returned when the
  GPU went idle), the GPU had just finished other work (some activity of the rank ended as
  the gap began), and the gap is no longer than :data:`SWITCH_NS`: the GPU moved on to work
  already queued for it. Whatever ordered the two (its stream's order, an event or stream
  wait on the other stream's work, an edge of a graph) was satisfied as the gap began.
  Nothing else waited.

* **The GPU waited, not on the host.** Every other gap ended by work that was queued goes to
  ``queued`` time, with the launch's thread's host range at the gap's middle and the launch
  calls during it kept as evidence (what the host was doing meanwhile: it did not cause the
  wait). Its cause is the first that holds of:

  1. ``unobservable``: no GPU activity of the rank is recorded before the gap: the work
     waited behind work the trace does not hold (launched before the profiler started, or
     a stream wait on such work), and the trace cannot show what;
  2. ``peer``: the ending work is a collective kernel, or runs on a stream that carries
     collectives (a communication stream: it waited for other ranks);
  3. ``dependency``, only where the trace shows what the work waited on:

     * an event or value wait put on its stream after the previous work of that stream was
       launched and before (or as) it was: a ``cudaStreamWaitEvent`` call (or ``hip``/``cu``
       ``StreamWaitEvent``/``StreamWaitValue``) of the rank, unless the GPU's record of that
       very call (``Stream Wait Event``, same correlation id) names another stream, or such a
       GPU record on its stream (it carries the call's time, not the wait's);
     * another stream: its own stream and its launch let it start at least :data:`SWITCH_NS`
       before the gap began, while work of another stream ran until the gap began: it did
       not start beside that work, so it waited for it, not for its own stream;
     * a node of a CUDA or HIP graph after an earlier node of the same replay: inside a
       replay the graph's edges order the nodes, and the trace shows neither the edges nor
       the nodes it does not record (host, event and memory nodes). On the shared replays
       (vLLM on ROCm) the device moves from node to node within 6 us; a longer gap there is
       a node waiting. The first node of a replay is ordered by its stream, like any work;
  4. ``device_gap``: none of these: the gap between work queued on one stream, ordered by
     that stream alone, is the device's own (a sampled trace's dropped work, another process
     sharing the GPU, which this trace cannot show); like a switch, it bounds nothing a
     change of the training could remove.

  Work launched while the gap ran but started more than :data:`SWITCH_NS` after its launch
  returned was queued from then on: that part of the gap is ``queued`` time too, and takes
  part in the host's vote below (a long launch latency is no launch cost).

* **Launched before the trace recorded the host.** ``unobservable``: the ending work's launch
  is not in the trace and it starts before the rank's first recorded runtime or driver call:
  it was launched before the profiler started, and whether the GPU was running or waiting on
  other such work cannot be seen.

* **Launched after the gap began** (or still being launched when it began, or no launch
  recorded): the host was late, and the cause is what the host was doing during the gap
  (details in :mod:`tracekit.analyzers.host_causes`). Each instant of the gap goes to the
  first of these that covers it:

  0. ``queued`` time (above): the cause is then the queued one;
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

The cause with the most time wins; ties go to the earlier of queued, data,
blocking_collective, host_sync, one_time, launch, host_work, unexplained. Every threshold and
name pattern is a constant here or of :mod:`tracekit.analyzers.host_causes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.host_causes import QUEUED, late_causes, launch_calls
from tracekit.analyzers.keys import CORRELATION_KEY, CORRELATION_LIMIT
from tracekit.results.vocab import IdleCause

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.model.run import Run

#: The longest the GPU takes to start work already queued for it: to switch from finished
#: work to the next queued kernel, copy or set, or to start work whose launch call has
#: returned (launch latency). Measured on the shared traces and the H200 captures (about
#: 55,000 gaps between back-to-back work on one stream, V100, A100, H100, H200, MI300 and
#: vLLM's HIP graph replays): a median of 1-2 us, the 99th percentile 2-9 us, the longest
#: 16 us (a V100 between element-wise kernels and device copies; 11-14 us where a HIP graph
#: replay hands over to the next eager kernel; on an H200 replaying CUDA graphs, 111 switches
#: of median 0.13 us and at most 12 us, where a replay takes over from a copy); launch
#: latency on an idle GPU at most 15 us.
#: Above it only waits: a sampled trace's dropped kernels, another process sharing the GPU
#: (340-420 us on the H200 two gloo ranks share). A longer gap ended by queued work is not
#: switching: the GPU waited, on what the trace shows (``dependency``) or, with nothing shown,
#: the device's own gap (``device_gap``).
SWITCH_NS: Final = 20_000
#: Runtime and driver calls that make a stream wait on an event or a value in memory.
WAIT_CALLS: Final = r"(?i:^(?:cuda|cu|hip)StreamWait(?:Event|Value))"
#: The GPU's record of a stream wait (Kineto ``cuda_sync``, Nsight's synchronization table):
#: its stream is the stream told to wait; its time is the call's.
WAIT_SYNC: Final = r"^Stream Wait Event$"
#: Launch calls that replay a CUDA or HIP graph: every node correlates to the one call.
GRAPH_LAUNCH: Final = r"(?i)GraphLaunch"
#: The runtime and driver calls' columns the idle model reads.
CALL_COLUMNS: Final = ("rank", "tid", "start_ns", "end_ns", "correlation", "name")
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
    #: the launching thread in the middle of any gap but a switch: what the host was doing,
    #: the cause or, where the GPU waited on something else, evidence), launches (launch
    #: calls on the rank during the gap). Names are categorical, as in the events.
    intervals: pl.DataFrame
    #: rank, cause, idle_ns, count, share_pct (of the rank's idle)
    per_rank: pl.DataFrame
    #: in the reduce: the longest intervals of every rank (:func:`longest_of_each`), which the
    #: run's longest are among; the same columns as ``intervals``
    longest: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: in the reduce: each rank's one-time idle by host range (:func:`one_time_by_range`)
    one_time: pl.DataFrame = field(default_factory=pl.DataFrame)


#: The host range of a one-time gap that recorded none, as :func:`one_time_by_range` names it.
NO_HOST_RANGE: Final = "(no host range recorded)"


def longest_of_each(intervals: pl.DataFrame, count: int) -> pl.DataFrame:
    """The intervals of each rank at least as long as its ``count``-th longest: the run's
    ``count`` longest (by length, then rank and start) are among them, so a rank's map sends
    these, not every interval, and the client finds the run's longest in them."""
    if intervals.height == 0:
        return intervals
    shortest = pl.col("length_ns").top_k(count).min().over("rank")
    return intervals.filter(pl.col("length_ns") >= shortest)


def one_time_by_range(intervals: pl.DataFrame) -> pl.DataFrame:
    """rank, name, ns: each rank's one-time idle summed by the host range its gaps name
    (:data:`NO_HOST_RANGE` where a gap recorded none)."""
    gaps = intervals.filter(pl.col("cause") == IdleCause.ONE_TIME.value)
    name = pl.col("host_range").cast(pl.String).fill_null(NO_HOST_RANGE)
    return gaps.group_by("rank", name=name).agg(ns=pl.col("length_ns").sum()).sort("rank", "name")


@dataclass(frozen=True)
class IdleReads:
    """What the idle model reads of the rank around its gaps, beyond the activity that starts or
    ends them: the rank's few facts, and lookups of the work and calls that may lie far from a
    gap (:func:`rank_reads` on a whole rank; a window of it reads them from the whole rank's,
    :class:`~tracekit.analyzers.windows.WindowContext`)."""

    #: rank, first_work: the start of each rank's first GPU activity
    first_work: pl.DataFrame
    #: rank, first_call: the start of each rank's first runtime or driver call
    first_call: pl.DataFrame
    #: rank, device, stream: the streams that carry collectives
    comm: pl.DataFrame
    #: the runtime and driver calls (:data:`CALL_COLUMNS`), every call of the correlation ids
    #: of the work given (rank, correlation) among them
    launches_of: Callable[[pl.DataFrame], pl.DataFrame]
    #: the activity (in event order) holding, for each row given (rank, device, stream,
    #: end_ns), the work of its stream that started last before its end_ns
    before: Callable[[pl.DataFrame], pl.DataFrame]
    #: the activity holding every node of the graph replays given (rank, correlation)
    nodes: Callable[[pl.DataFrame], pl.DataFrame]
    #: the rank's stream waits (:func:`stream_waits`)
    waits: Callable[[], pl.DataFrame]


def first_work(activity: pl.DataFrame) -> pl.DataFrame:
    """rank, first_work: the start of each rank's first GPU activity."""
    return activity.group_by("rank").agg(first_work=pl.col("start_ns").min())


def first_call(calls: pl.DataFrame) -> pl.DataFrame:
    """rank, first_call: the start of each rank's first call among ``calls``."""
    return calls.group_by("rank").agg(first_call=pl.col("start_ns").min())


def comm_streams(activity: pl.DataFrame) -> pl.DataFrame:
    """rank, device, stream: the streams that carry collectives."""
    return activity.filter(pl.col("category") == "collective").select("rank", "device", "stream").drop_nulls().unique()


def rank_reads(run: Run, activity: pl.DataFrame, calls: pl.DataFrame) -> IdleReads:
    """The reads of whole ranks: every lookup answered from all of ``activity`` and ``calls``."""
    return IdleReads(
        first_work=first_work(activity),
        first_call=first_call(calls),
        comm=comm_streams(activity),
        launches_of=lambda _: calls,
        before=lambda _: activity,
        nodes=lambda _: activity,
        waits=lambda: stream_waits(run),
    )


def idle_causes(
    run: Run,
    segments: pl.DataFrame,
    frames: pl.DataFrame,
    fetch: pl.DataFrame,
    syncs: pl.DataFrame,
    *,
    activity: pl.DataFrame | None = None,
    calls: pl.DataFrame | None = None,
    process: dict[IdleCause, pl.DataFrame] | None = None,
    launches: pl.DataFrame | None = None,
    reads: IdleReads | None = None,
    beside: pl.DataFrame | None = None,
) -> IdleResult:
    """Attribute each GPU idle gap (from the timeline segments) to one cause.

    ``frames``: the measured windows (rank, step, start_ns, end_ns) the segments were cut in;
    ``fetch``: the DataLoader fetch ranges; ``syncs``: the blocking calls (rank, start_ns,
    end_ns: :attr:`SyncResult.calls`); ``activity``: the GPU activity (rank, name, category,
    start_ns, end_ns, device, stream, correlation, in event order), read from ``run`` when
    not given; ``calls``: the runtime and driver calls (:data:`CALL_COLUMNS`) and ``process``
    (:func:`~tracekit.analyzers.host_causes.process_ranges`) and ``launches``
    (:func:`~tracekit.analyzers.host_causes.launch_calls`), likewise, when already read;
    ``reads``: what the gaps read of the rank around them (:func:`rank_reads` of ``activity``
    and ``calls`` when not given); ``beside``: the rank's gaps beside those of ``segments``
    (rank, start_ns, end_ns: a window's neighbours', :mod:`~tracekit.analyzers.windows`) whose
    host events ``run`` holds (:func:`~tracekit.analyzers.host_causes.late_causes`).
    """
    if activity is None:
        columns = ("rank", "name", "category", "start_ns", "end_ns", "device", "stream", "correlation")
        activity = run.select(["kernel", "memcpy", "memset"], *columns)
    if calls is None:
        calls = run.select(["runtime", "driver"], *CALL_COLUMNS)
    if launches is None:
        launches = launch_calls(run, calls)
    if reads is None:
        reads = rank_reads(run, activity, calls)
    gaps = idle_gaps(segments, frames)
    ended = _ending_work(gaps, activity, launches, reads)
    # the host's causes are found from the waits (in a list, which ``late_causes`` empties) and
    # the gaps are not read again: neither is held through them, the idle model's peak (a 2 GB
    # DLRM rank's 599k gaps: 23 MB less, live)
    waits = [
        ended.filter(~pl.col("switch")).select(
            "idle_id", "rank", "tid", "start_ns", "end_ns", "launch_ns", "queued_from"
        )
    ]
    del gaps
    # what the intervals read of the gaps; the rest let go before the host's causes are found
    # (a 2 GB DLRM rank's 599k gaps: 8 of 18 columns, 36 MB)
    ended = ended.select(
        "idle_id", "rank", "step", "start_ns", "end_ns", "ended_by", "launch_ns", "switch", "pretrace", "queued_cause"
    )
    host = late_causes(
        waits,
        run,
        fetch=fetch,
        syncs=syncs,
        calls=calls,
        frames=frames,
        process=process,
        launches=launches,
        beside=beside,
    )
    cause = (
        pl.when(pl.col("switch"))
        .then(pl.lit(IdleCause.BACK_TO_BACK.value))
        .when(pl.col("pretrace"))
        .then(pl.lit(IdleCause.UNOBSERVABLE.value))
        .when(pl.col("cause") == QUEUED)
        .then(pl.col("queued_cause"))
        .otherwise(pl.col("cause"))
    )
    # one query: the columns of the result chosen before the rows are put in order
    intervals = (
        ended.lazy()
        .join(host.lazy(), on="idle_id", how="left")
        .with_columns(
            cause=cause,
            launches=pl.col("launches").fill_null(0),
            length_ns=pl.col("end_ns") - pl.col("start_ns"),
        )
        .sort("rank", "start_ns")
        .select(INTERVAL_COLUMNS)
        .collect()
    )
    del ended, host
    intervals = intervals.rechunk()  # one piece a column, as its readers take it (a query may leave several)
    return IdleResult(intervals=intervals, per_rank=per_rank_of(intervals))


def per_rank_of(intervals: pl.DataFrame) -> pl.DataFrame:
    """rank, cause, idle_ns, count, share_pct: the ``intervals`` of each rank by cause."""
    return (
        intervals.group_by("rank", "cause")
        .agg(idle_ns=pl.col("length_ns").sum(), count=pl.len())
        .with_columns(share_pct=100 * pl.col("idle_ns") / pl.col("idle_ns").sum().over("rank"))
        .sort("rank", "cause")
    )


def idle_gaps(segments: pl.DataFrame, frames: pl.DataFrame) -> pl.DataFrame:
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


def _ending_work(
    gaps: pl.DataFrame, activity: pl.DataFrame, launch_calls: pl.DataFrame, reads: IdleReads
) -> pl.DataFrame:
    """``gaps`` with the work that ends each, its launch, and who the GPU waited for.

    Adds ended_by, launch_ns, launch_end_ns, tid (of the launch call; else the thread of the
    rank's first launch call after the gap began, else -1), late (no launch call had
    returned when the gap began), and the columns of :func:`_waits` (``reads``: the rank's
    facts and lookups, the stream waits read only where a gap needs them). ``activity`` holds
    the work that starts as a gap ends or ends as it begins. Joins on one
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
        "rank", pl.col("end_ns").alias("start_ns")
    )
    at_end, at_start, launched = _keys(gaps, work, finished)
    launches = _launches_of(reads.launches_of(work), work)
    ended = _exact(gaps.with_columns(_key=at_end), work.with_columns(_key=at_end).drop("rank", "end_ns"))
    launches = launches.select(launched.alias("_key"), "tid", "launch_ns", "launch_end_ns", "graph")
    ended = ended.with_columns(_key=launched).join(launches, on="_key", how="left")
    if ended.height != gaps.height:  # several start as the gap ends: the first launched
        ended = ended.sort("idle_id", "launch_ns", nulls_last=True).unique("idle_id", keep="first", maintain_order=True)
    late = pl.col("launch_end_ns").is_null() | (pl.col("launch_end_ns") > pl.col("start_ns"))
    ended = _next_launcher(ended.with_columns(late=late), launch_calls)
    after = at_start.is_in(finished.select(at_start).to_series().implode())
    ended = _waits(ended.with_columns(after=after), reads)
    return _waited_on(ended, reads).drop("_key", "after", "graph")


def _waits(ended: pl.DataFrame, reads: IdleReads) -> pl.DataFrame:
    """``ended`` (with ``after``: some activity of the rank ended as the gap began) with what
    the GPU did while the work that ends each gap waited:

    * switch: queued work started within ``SWITCH_NS`` of other work ending (``back_to_back``);
    * queued_from: from when that work was queued (the gap's start where its launch had
      returned by then, else ``SWITCH_NS`` after it returned; null with no launch recorded);
    * queued_cause: who the queued work waited for: unobservable where no GPU activity of
      the rank is recorded before the gap, else peer where it is a collective or runs on a
      stream that carries collectives, else null (:func:`_waited_on` decides);
    * pretrace: its launch is not in the trace and it starts before the rank's first
      recorded runtime or driver call (launched before the profiler started).
    """
    stream = ["rank", "device", "stream"]
    # what each gap reads of the rank's and its stream's few facts, looked up by key: joins on
    # them copied every gap's every column, three times (a 2 GB rank's 600k gaps: 80 MB each)
    comm = reads.comm
    on_comm = pl.struct(stream).is_in(comm.select(pl.struct(stream)).to_series().implode())
    first, called = reads.first_work, reads.first_call
    first_work = pl.col("rank").replace_strict(first["rank"], first["first_work"], default=None)
    first_called = pl.col("rank").replace_strict(called["rank"], called["first_call"], default=None)
    length = pl.col("end_ns") - pl.col("start_ns")
    returned, start = pl.col("launch_end_ns"), pl.col("start_ns")
    queued_cause = (
        pl.when(pl.col("end_ns") <= first_work)
        .then(pl.lit(IdleCause.UNOBSERVABLE.value))
        .when(pl.col("collective").fill_null(False) | on_comm.fill_null(False))
        .then(pl.lit(IdleCause.PEER.value))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    unlaunched = pl.col("ended_by").is_not_null() & pl.col("launch_ns").is_null()
    return ended.with_columns(
        switch=~pl.col("late") & pl.col("after") & (length <= SWITCH_NS),
        queued_from=pl.when(returned <= start).then(start).otherwise(returned + SWITCH_NS),
        queued_cause=queued_cause,
        pretrace=(unlaunched & (pl.col("end_ns") < first_called)).fill_null(False),
    )


def _waited_on(ended: pl.DataFrame, reads: IdleReads) -> pl.DataFrame:
    """``ended`` with the queued cause filled where :func:`_waits` left it open: ``dependency``
    where the trace shows what the work waited on (an event or value wait on its stream,
    another stream, an earlier node of its graph replay: see the module's docstring), else
    ``device_gap``. Read only for the gaps whose queued time may decide: no switch, queued
    before the gap ended, and no cause yet."""
    undecided = ~pl.col("switch") & ~pl.col("pretrace") & (pl.col("queued_from") < pl.col("end_ns"))
    rows = ended.filter(undecided & pl.col("queued_cause").is_null()).select(
        *("idle_id", "rank", "device", "stream", "start_ns", "end_ns"),
        *("correlation", "launch_ns", "launch_end_ns", "after", "graph"),
    )
    gap = pl.lit(IdleCause.DEVICE_GAP.value)
    if rows.height == 0:
        return ended.with_columns(queued_cause=pl.col("queued_cause").fill_null(gap))
    rows = _event_waits(_own_stream(rows, reads), reads.waits())
    # another stream: ready on its own stream a switch before the gap began, yet held past it
    ready = pl.max_horizontal("prev_end", "launch_end_ns")
    other = (pl.col("after") & (ready + SWITCH_NS <= pl.col("start_ns"))).fill_null(False)
    waited = _inside_replay(rows, reads).select(
        "idle_id",
        waited=pl.when(pl.col("event") | other | pl.col("inside"))
        .then(pl.lit(IdleCause.DEPENDENCY.value))
        .otherwise(gap),
    )
    return (
        ended.join(waited, on="idle_id", how="left")
        .with_columns(queued_cause=pl.coalesce("queued_cause", "waited", gap))
        .drop("waited")
    )


def _own_stream(rows: pl.DataFrame, reads: IdleReads) -> pl.DataFrame:
    """``rows`` (the work ending each gap) with the work before it on its stream: prev_end
    (when its stream let it start) and since_ns (that work's launch, else its start: a wait
    put on the stream after it is the ending work's); null where it is the stream's first.
    The activity (:attr:`IdleReads.before`) is in event order: sorted by start within each stream."""
    stream = ["rank", "device", "stream"]
    own = reads.before(rows).select(*stream, prev_start="start_ns", prev_end="end_ns", prev_corr="correlation")
    rows = rows.sort("end_ns").join_asof(
        own,
        left_on="end_ns",
        right_on="prev_start",
        by=stream,
        strategy="backward",
        allow_exact_matches=False,
        check_sortedness=False,
    )
    prev = rows.select("rank", correlation="prev_corr").drop_nulls().unique()
    launched = (
        _launches_of(reads.launches_of(prev), prev)
        .group_by("rank", prev_corr="correlation")
        .agg(prev_launch=pl.min("launch_ns"))
    )
    return (
        rows.join(launched, on=["rank", "prev_corr"], how="left")
        .with_columns(since_ns=pl.coalesce("prev_launch", "prev_start"))
        .drop("prev_start", "prev_corr", "prev_launch")
    )


def _event_waits(rows: pl.DataFrame, waits: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (with since_ns) with ``event``: a stream wait (:func:`stream_waits`) was put
    on the ending work's stream, or on a stream the trace does not name, after since_ns and
    no later than the work's launch."""
    waits = waits.with_columns(pl.col(c).cast(rows.schema[c]) for c in ("rank", "device", "stream"))
    known = waits.filter(pl.col("stream").is_not_null()).sort("wait_ns")
    unknown = waits.filter(pl.col("stream").is_null()).select("rank", any_wait_ns="wait_ns").sort("any_wait_ns")
    rows = rows.sort("launch_ns")
    rows = rows.join_asof(
        known, left_on="launch_ns", right_on="wait_ns", by=["rank", "device", "stream"], check_sortedness=False
    )
    rows = rows.join_asof(unknown, left_on="launch_ns", right_on="any_wait_ns", by="rank", check_sortedness=False)
    since = pl.col("since_ns")
    event = pl.any_horizontal(
        pl.col(t).is_not_null() & (since.is_null() | (pl.col(t) > since)) for t in ("wait_ns", "any_wait_ns")
    )
    return rows.with_columns(event=event).drop("wait_ns", "any_wait_ns")


def _inside_replay(rows: pl.DataFrame, reads: IdleReads) -> pl.DataFrame:
    """``rows`` with ``inside``: the ending work is a node of a graph replay after an earlier
    node of the same replay (same rank and correlation id) had started."""
    nodes = rows.filter("graph").select("rank", "correlation").unique()
    if nodes.height == 0:
        return rows.with_columns(inside=pl.lit(value=False))
    wanted = reads.nodes(nodes).filter(pl.col("correlation").is_in(nodes["correlation"].implode()))
    first = (
        wanted.join(nodes, on=["rank", "correlation"])
        .group_by("rank", "correlation")
        .agg(first_node=pl.min("start_ns"))
    )
    inside = pl.col("graph").fill_null(False) & (pl.col("first_node") < pl.col("end_ns")).fill_null(False)
    return rows.join(first, on=["rank", "correlation"], how="left").with_columns(inside=inside)


def stream_waits(run: Run) -> pl.DataFrame:
    """The rank's stream waits: rank, device, stream (null where the trace does not say which
    stream waited), wait_ns (the call's start; the GPU record's where no call is recorded).
    A call's stream is that of the GPU's record of the same correlation id."""
    columns = ("kind", "rank", "device", "stream", "correlation", "start_ns")
    both = run.select(["runtime", "driver", "sync"], *columns, name=f"{WAIT_CALLS}|{WAIT_SYNC}")
    gpu = both.filter(pl.col("kind") == "sync").drop("kind")
    issued = both.filter(pl.col("kind") != "sync").select("rank", "correlation", call_ns="start_ns")
    seen = gpu.join(issued, on=["rank", "correlation"], how="left").select(
        "rank", "device", "stream", wait_ns=pl.coalesce("call_ns", "start_ns")
    )
    blind = issued.join(gpu, on=["rank", "correlation"], how="anti").select(
        "rank", *(pl.lit(None, dtype=gpu.schema[c]).alias(c) for c in ("device", "stream")), wait_ns="call_ns"
    )
    return pl.concat([seen, blind])


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
        CORRELATION_KEY,
    )


def _launches_of(calls: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """The runtime and driver calls that launched ``work`` (rank, correlation): rank,
    correlation, tid, launch_ns, launch_end_ns (an id launched twice: both).
    Matched on one integer packing the rank and the id (a lookup on one column costs a third
    of one on two); ids that do not pack (negative, or beyond 2**40) are not linked."""
    fits = pl.col("correlation").is_between(0, CORRELATION_LIMIT - 1)
    wanted = work.filter(fits).select(CORRELATION_KEY.unique()).to_series().implode()
    return calls.filter(fits & CORRELATION_KEY.is_in(wanted)).select(
        "rank",
        "correlation",
        "tid",
        launch_ns="start_ns",
        launch_end_ns="end_ns",
        graph=pl.col("name").cast(pl.String).str.contains(GRAPH_LAUNCH),
    )


def _next_launcher(ended: pl.DataFrame, launch_calls: pl.DataFrame) -> pl.DataFrame:
    """``ended`` with ``tid`` filled where no launch was found: the thread of the rank's first
    launch call (``launch_calls``: rank, tid, start_ns) after the gap began (the thread that
    went on feeding the GPU), else -1."""
    unknown = ended.filter(pl.col("tid").is_null())
    if unknown.height == 0:
        return ended
    launches = launch_calls.select("rank", "start_ns", next_tid="tid")
    found = unknown.select("idle_id", "rank", "start_ns").join_asof(
        launches, on="start_ns", by="rank", strategy="forward", check_sortedness=False
    )
    tids = found.select("idle_id", "next_tid")
    return (
        ended.join(tids, on="idle_id", how="left")
        .with_columns(tid=pl.coalesce("tid", "next_tid", pl.lit(-1, dtype=pl.Int64)))
        .drop("next_tid")
    )
