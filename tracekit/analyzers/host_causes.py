"""Why the host was late: the host-side cause of a GPU idle gap that ended with work launched
after the gap began (see :mod:`tracekit.analyzers.idle` for the whole model).

A gap's time is split by what the host was doing; each instant goes to the first category, in
this order, whose ranges cover it:

0. ``queued`` (:data:`QUEUED`): from ``queued_from`` on, the work that ends the gap had been
   launched and could have run: the GPU was not waiting for the host then (the caller names
   what it waited for);
1. ``data``: a DataLoader fetch (:func:`~tracekit.analyzers.dataloader.fetch_ranges`) or input
   preprocessing (:data:`INPUT_RANGES`), on any thread of the process;
2. ``blocking_collective``: a host collective that blocks (:data:`BLOCKING_COLLECTIVE`: gloo,
   MPI and UCC operations, barriers, c10d waits), on any thread. An asynchronous NCCL call
   (``c10d::allreduce_``, ``nccl:all_reduce``) is none of these: it launches a kernel, so it
   is dispatch like any other operator; nor is any collective of a rank alone in its world
   (its trace records a world size of 1): with no peer to wait for, the host runs it, as its
   own work;
3. ``host_sync``: a blocking sync or blocking copy call (:func:`~tracekit.analyzers.syncs.sync_calls`);
   ``capture_sync`` for tracekit capture's own sync at a step's end (it times the step: not
   the training's);
4. ``one_time``: autotuning, compilation, lazy init and module loading (:data:`ONE_TIME_RANGES`),
   allocator growth and set-up calls (:data:`ONE_TIME_CALLS`: ``cudaMalloc``, ``cudaFree``,
   ``cudaHostAlloc``, module loads, graph instantiation), launch calls slower than
   :data:`SLOW_LAUNCH_NS` (lazy module loading, JIT), and the first call of an operator that
   took :data:`FIRST_CALL_RATIO` times its shortest call (cuDNN set-up and autotuning in the
   first convolution), on any thread;
5. ``host_work``: on the launching thread, operators (at any depth) that run at least
   :data:`DISPATCH_GAP_NS` and launch nothing: CPU work;
6. ``launch``: on the launching thread, operators that launch GPU work (with everything
   they run) and shorter ones that launch nothing (views, reshapes), runtime calls, the
   pauses shorter than :data:`DISPATCH_GAP_NS` between recorded host events (Python between
   operators), and the time from the launch of the work that ends the gap to its start
   (launch latency): the host dispatching work. An asynchronous NCCL call is such an
   operator;
7. ``host_work``: on the launching thread, user annotations, Python frames and its steps
   around the longer stretches without an operator: Python that ran that long without
   launching anything (inside a step the thread is running the training loop: the host was
   late, in code the trace does not record, such as a loop's own bookkeeping);

and the rest (nothing recorded on the launching thread, not even a step) votes for
``unexplained``. The cause is the one with the most time (ties go to the earlier one in
this list); except that a gap that began while the host was blocked in a sync (or within
:data:`SYNC_SKEW_NS` of its return) is ``host_sync`` (``capture_sync`` after the capture's
own) when its time is otherwise ``launch``
(the sync drained the queue that the host's dispatching would have kept full), or CPU work or
unexplained no longer than twice the time the host sat blocked in the sync (a sync costs the
overlap it prevented: at most its blocked time). A host that spends a gap in far more of its
own work than it sat blocked would have left the GPU idle without the sync too: that work is
the cause.

Past a first filter, only host events that overlap a late gap are read, so the cost follows
the events, not the gaps times the events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, cast

import numpy as np
import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.dataloader import FETCH_PATTERN
from tracekit.analyzers.syncs import capture_calls, user_calls
from tracekit.analyzers.timeline import with_peers
from tracekit.model.frames import columns, kept
from tracekit.model.run import row_slices
from tracekit.model.taxonomy import ONE_TIME_CALLS, ONE_TIME_RANGES
from tracekit.results.vocab import IdleCause

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tracekit.model.run import Run

#: Host ranges that preprocess input outside a DataLoader fetch.
INPUT_RANGES: Final = (
    FETCH_PATTERN + r"|(?i:preprocess|image_?processor|feature_?extract|video_?(?:decod|read)|decord|tokeniz)"
)
#: Host collectives that block the host: CPU backends' own operations, barriers, waits.
BLOCKING_COLLECTIVE: Final = (
    r"^(?:gloo|mpi|ucc):|(?i:barrier)|^_?c10d(?:_functional)?::\w*wait"
    r"|^MPI_(?:I?[SR]end|I?[Rr]ecv|Sendrecv|Wait|Test|Probe|Barrier|I?Bcast|I?All|I?Reduce|I?Gather|I?Scatter)\w*$"
)
#: Runtime and driver calls that put work on the GPU.
LAUNCH_CALLS: Final = r"(?i)^(?:cuda|cu|hip)\w*(?:Launch|Memcpy|Memset)"
#: A launch call this slow on an idle GPU is loading a module or compiling, not dispatching.
SLOW_LAUNCH_NS: Final = 1_000_000
#: A first call this many times slower than the operator's shortest, and at least
#: ``FIRST_CALL_MIN_NS`` long, is set-up.
FIRST_CALL_RATIO: Final = 100
FIRST_CALL_MIN_NS: Final = 1_000_000
#: Host time of the launching thread without an operator, or in an operator that launches
#: nothing, up to this long is dispatch overhead (Python between operators); longer is other
#: work.
DISPATCH_GAP_NS: Final = 50_000
#: A gap this soon after a sync returned began in it (host and device clocks differ a little).
SYNC_SKEW_NS: Final = 5_000
#: The vote of the time when the work that ends a gap was already queued: not the host's.
QUEUED: Final = "queued"
#: The host categories, in priority order; unrecorded time votes for ``unexplained``.
ORDER: Final = (
    IdleCause.DATA,
    IdleCause.BLOCKING_COLLECTIVE,
    IdleCause.HOST_SYNC,
    IdleCause.CAPTURE_SYNC,
    IdleCause.ONE_TIME,
    IdleCause.LAUNCH,
    IdleCause.HOST_WORK,
    IdleCause.UNEXPLAINED,
)
#: The categories of :func:`process_ranges`: ranges on any thread of the process.
PROCESS_CAUSES: Final = ORDER[:5]
_AFTER_SYNC: Final = [IdleCause.LAUNCH.value]
#: The host's own work after a sync (CPU work, nothing recorded): the sync's when the host sat
#: blocked in it at least this share of the gap (the overlap the sync prevented).
_OWN_WORK: Final = [c.value for c in (IdleCause.HOST_WORK, IdleCause.UNEXPLAINED)]
SYNC_OVERLAP_SHARE: Final = 0.5
#: Annotations and Python frames that name a gap's host range (operators always do).
_NAMED: Final = f"{INPUT_RANGES}|{BLOCKING_COLLECTIVE}|{ONE_TIME_RANGES}"
SPAN: Final = ("start_ns", "end_ns")
#: The events of a rank (or shard) whose launching threads are read in pieces of time (the idle
#: model's gaps, :func:`late_causes`; the gains' host time,
#: :func:`tracekit.analyzers.host_time.host_time`): the events a piece reads of those threads,
#: and their unions and sweeps, are then bounded by a piece's, not the whole run's (a 2 GB
#: rank's 420 to 550 MB at once).
PIECE_EVENTS: Final = 1_000_000


def launch_calls(run: Run, calls: pl.DataFrame) -> pl.DataFrame:
    """The launch calls (:data:`LAUNCH_CALLS`) among ``calls`` (the runtime and driver calls of
    ``run``): rank, tid, start_ns, in their order. Read once per shard and shared (the idle
    model's pieces and the gains' host time each filtered every call again: on a 2 GB rank,
    24 passes over a million calls)."""
    return calls.filter(pl.col("name").is_in(run.names_matching(LAUNCH_CALLS).implode())).select(
        "rank", "tid", "start_ns"
    )


def cuts(calls: pl.DataFrame, events: int) -> list[int]:
    """Where to cut the time of a shard of ``events`` events into pieces of about
    :data:`PIECE_EVENTS` each: at quantiles of the ``calls``' starts (where the host works);
    none for fewer events."""
    count = -(-events // PIECE_EVENTS)
    starts = calls.get_column("start_ns")
    if count <= 1 or starts.len() < count:
        return []
    starts = starts.sort()  # once: a quantile of a series not known sorted sorts a copy of it (19 of 1.8M: 65 ms)
    return sorted({int(starts.quantile(k / count, "nearest") or 0) for k in range(1, count)})


def late_causes(
    owned: list[pl.DataFrame],
    run: Run,
    *,
    fetch: pl.DataFrame,
    syncs: pl.DataFrame,
    calls: pl.DataFrame | None = None,
    frames: pl.DataFrame | None = None,
    process: dict[IdleCause, pl.DataFrame] | None = None,
    launches: pl.DataFrame | None = None,
    beside: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The host-side cause of each gap.

    ``owned``: a list of one frame of the gaps, which this empties (the gaps are let go once
    read: a Python call keeps its arguments alive until it returns): idle_id, rank, tid (the
    launching thread), start_ns, end_ns, launch_ns (of the work that ends the gap; null when
    unknown), queued_from (from when that work was queued: the time after it votes
    :data:`QUEUED`; null when never), disjoint per rank. ``fetch``:
    the DataLoader fetch ranges; ``syncs``: the blocking calls (rank, start_ns, end_ns);
    ``calls``: the runtime and driver calls (rank, tid, start_ns, end_ns, name), read from
    ``run`` when not given; ``process``: :func:`process_ranges` of the same arguments, when
    already computed; ``frames``: the measured windows (rank, step, start_ns, end_ns), which
    tell one-time work from work that recurs (:func:`_recurring`); ``launches``:
    :func:`launch_calls` of ``calls``, when already found; ``beside``: more of the rank's gaps
    (rank, start_ns, end_ns), none of them overlapping those given, whose host events are read
    with theirs: the pauses of a thread are found between its events that overlap a gap, so an
    event of a gap beside (a window's neighbour's, whose events ``run`` holds) may end a pause
    that reaches into one of these. Returns idle_id, cause (:class:`IdleCause` values, or
    :data:`QUEUED`), host_range (the outermost range on the launching thread at the gap's
    middle), launches (launch calls on the rank during the gap).
    """
    gaps = owned.pop()
    threads = gaps.select("rank", "tid").unique().sort("rank", "tid").with_row_index("thread")
    threaded = gaps.join(threads, on=["rank", "tid"])
    del gaps
    keyed = iv.sort_within(threaded.select("idle_id", "rank", "thread", *SPAN), ["rank"], "start_ns")
    held = keyed.select("rank", *SPAN)
    if beside is not None and beside.height:
        held = pl.concat([held, beside.select("rank", *SPAN)], how="vertical_relaxed").sort("rank", "start_ns")
    if calls is None:
        calls = run.select(["runtime", "driver"], "rank", "tid", "start_ns", "end_ns", "name")
    if process is None:
        process = process_ranges(run, fetch=fetch, syncs=syncs, calls=calls, frames=frames)
    if launches is None:
        launches = launch_calls(run, calls)
    every = [(c.value, per_thread(process[c], threads)) for c in PROCESS_CAUSES]
    bounds = cuts(calls, run.height)
    reads = Reads.of(calls, launches, threads)
    if not bounds:
        return _late(threaded, held, run, threads=threads, reads=reads, every=every, process=process, window=None)
    # gaps by the piece of time they start in; each piece reads the events around its gaps
    piece = pl.Series(bounds, dtype=pl.Int64).search_sorted(keyed.get_column("start_ns"), side="right")
    found = []
    for _, ids in keyed.select("idle_id").with_columns(piece=piece).group_by("piece", maintain_order=True):
        mine = threaded.join(ids, on="idle_id", how="semi")
        lo, hi = mine.select(pl.col("start_ns").min(), pl.col("end_ns").max()).row(0)
        window = (lo - DISPATCH_GAP_NS, hi + DISPATCH_GAP_NS)
        found.append(_late(mine, held, run, threads=threads, reads=reads, every=every, process=process, window=window))
    order = keyed.select("idle_id").with_row_index("_order")
    return pl.concat(found).join(order, on="idle_id").sort("_order").drop("_order")


def _late(
    threaded: pl.DataFrame,
    held: pl.DataFrame,
    run: Run,
    *,
    threads: pl.DataFrame,
    reads: Reads,
    every: list[tuple[str, pl.DataFrame]],
    process: dict[IdleCause, pl.DataFrame],
    window: tuple[int, int] | None,
) -> pl.DataFrame:
    """:func:`late_causes` of the gaps of ``threaded`` (some of ``held``'s, every gap and
    those beside: which events are read), their events read inside ``window`` (lo, hi) only
    where given.

    A piece's gaps get what the whole gives them: the events read are those of the whole that
    reach into ``window``, which holds the gaps and ``DISPATCH_GAP_NS`` around them, so the
    pauses reaching into a gap and every range holding its middle are read; the covers are each
    gap's own."""
    mine = iv.sort_within(threaded.select("idle_id", "rank", "thread", *SPAN), ["rank"], "start_ns")
    queued = threaded.filter(pl.col("queued_from") < pl.col("end_ns"))
    queued = queued.select("thread", start_ns=pl.max_horizontal("start_ns", "queued_from"), end_ns="end_ns")
    events = thread_events(run, held, threads, reads, within=window)
    latency = threaded.filter(pl.col("launch_ns").is_not_null())
    latency = latency.select("thread", start_ns=pl.max_horizontal("start_ns", "launch_ns"), end_ns="end_ns")
    if window is not None:
        near = (pl.col("end_ns") > window[0]) & (pl.col("start_ns") < window[1])
        every = [(c, f.filter(near)) for c, f in every]
    covers: list[tuple[str, pl.DataFrame]] = [(QUEUED, queued), *every]
    covers += [
        (IdleCause.HOST_WORK.value, events.cpu_work),
        (IdleCause.LAUNCH.value, pl.concat([events.dispatch, latency])),
        (IdleCause.HOST_WORK.value, events.recorded),
    ]
    numbered = reads.numbered
    launches = _count_before(mine, "end_ns", numbered, ["rank"]) - _count_before(mine, "start_ns", numbered, ["rank"])
    middle = mine.select("idle_id", "thread", t=(pl.col("start_ns") + pl.col("end_ns")) // 2)
    return (
        _vote(mine, covers, process[IdleCause.HOST_SYNC], process[IdleCause.CAPTURE_SYNC])
        .with_columns(launches=launches)
        .join(_range_at(middle, events.named), on="idle_id", how="left")
        .join(_range_at(middle, events.annotations).rename({"host_range": "annotation"}), on="idle_id", how="left")
        .with_columns(host_range=pl.coalesce("host_range", "annotation"))
        .select("idle_id", "cause", "host_range", "launches")
    )


def _vote(
    gaps: pl.DataFrame, covers: list[tuple[str, pl.DataFrame]], syncs: pl.DataFrame, capture: pl.DataFrame
) -> pl.DataFrame:
    """``gaps`` (idle_id, rank, thread, start_ns, end_ns) with ``cause``: the one whose covers
    take the most of the gap (ties: the earlier of ``QUEUED`` and ``ORDER``), or
    ``host_sync`` for a gap that began in a blocking call (``syncs``) and is otherwise
    dispatch, CPU work or unexplained (``capture_sync`` where that call is tracekit capture's
    own, in ``capture``)."""
    names = [QUEUED, *(c.value for c in ORDER)]
    length = pl.col("end_ns") - pl.col("start_ns")
    timed = gaps.with_columns(_exclusive(gaps, covers))
    timed = timed.with_columns((length - pl.sum_horizontal(names[:-1])).alias(names[-1]))
    most = pl.max_horizontal(names)
    voted = pl.coalesce([pl.when(pl.col(n) == most).then(pl.lit(n)) for n in names])
    by_sync, by_capture = _blocked_at_start(gaps, syncs), _blocked_at_start(gaps, capture)
    blocked = by_sync.zip_with(by_sync >= by_capture, by_capture)
    # dispatch after a sync: the queue it drained would have stayed full; the host's own work
    # after it: the sync cost the overlap it prevented, at most the time the host sat blocked
    own_work = voted.is_in(_OWN_WORK) & (blocked >= SYNC_OVERLAP_SHARE * length)
    after_sync = (blocked > 0) & (voted.is_in(_AFTER_SYNC) | own_work)
    # the capture's own sync: what a training sync would be blamed for is the measurement's
    ours = pl.lit(by_capture > 0)
    sync = IdleCause.HOST_SYNC.value
    cause = (
        pl.when(ours & (after_sync | (voted == sync)))
        .then(pl.lit(IdleCause.CAPTURE_SYNC.value))
        .when(after_sync)
        .then(pl.lit(sync))
        .otherwise(voted)
    )
    return timed.with_columns(cause=cause)


def _blocked_at_start(gaps: pl.DataFrame, syncs: pl.DataFrame) -> pl.Series:
    """Per gap (in order): how long the host had been blocked in the sync it began in (0: none)."""
    calls = (
        syncs.select("rank", "start_ns", "end_ns")
        .with_columns(reach=pl.col("end_ns") + SYNC_SKEW_NS)
        .sort("rank", "reach")
    )
    found = (
        gaps.select("rank", "start_ns")
        .with_row_index("_i")
        .sort("rank", "start_ns")
        .join_asof(
            calls.rename({"start_ns": "call_start", "end_ns": "call_end"}),
            left_on="start_ns",
            right_on="reach",
            by="rank",
            strategy="forward",
            check_sortedness=False,
        )
        .with_columns(
            blocked=pl.when(pl.col("call_start") <= pl.col("start_ns"))
            .then(pl.col("call_end") - pl.col("call_start"))
            .otherwise(0)
            .fill_null(0)
        )
        .sort("_i")
    )
    return found["blocked"]


@dataclass(frozen=True)
class _ThreadEvents:
    """What the launching threads did around the gaps (``thread``, start_ns, end_ns rows)."""

    #: operators of at least ``DISPATCH_GAP_NS`` that launch nothing
    cpu_work: pl.DataFrame
    #: operators that launch or are short, calls, and the short pauses between host events
    dispatch: pl.DataFrame
    #: user annotations, steps and Python frames (every operator is CPU work or dispatch)
    recorded: pl.DataFrame
    #: the outermost-range candidates, with their name: operators, and annotations and
    #: Python frames of data, collective or one-time work
    named: pl.DataFrame
    #: user annotations with their name: the outermost range where no operator is recorded
    #: (an Nsight Systems export, whose operators are NVTX ranges)
    annotations: pl.DataFrame


@dataclass(frozen=True)
class Reads:
    """What :func:`thread_events` reads besides the run's events, read once by its caller
    (:meth:`of`): the same for every piece of time it reads (a 2 GB rank's 6 pieces each
    numbered and sorted its million launch calls again)."""

    #: the runtime and driver calls (rank, tid, start_ns, end_ns, name)
    calls: pl.DataFrame
    #: the launch calls (:func:`launch_calls`) of the launching threads: thread, next_launch
    #: (its start), in time order within a thread
    by_thread: pl.DataFrame
    #: every launch call of a rank numbered in time order (rank, t: its start, n: from 1), for
    #: counting the launches before a time (:func:`_count_before`)
    numbered: pl.DataFrame

    @classmethod
    def of(cls, calls: pl.DataFrame, launches: pl.DataFrame, threads: pl.DataFrame) -> Reads:
        """The reads of the launching ``threads`` (rank, tid, thread) from the ``calls`` and
        their ``launches`` (:func:`launch_calls`)."""
        mine = on_thread(launches, threads.select("rank", "tid", "thread")).select("thread", next_launch="start_ns")
        return cls(
            calls=calls,
            by_thread=iv.sort_within(mine, ["thread"], "next_launch"),
            numbered=_numbered(launches.select("rank", "start_ns"), ["rank"]),
        )


def thread_events(
    run: Run,
    gaps: pl.DataFrame,
    threads: pl.DataFrame,
    reads: Reads,
    *,
    within: tuple[int, int] | None = None,
) -> _ThreadEvents:
    """The host events of the launching threads that overlap a gap (see :class:`_ThreadEvents`);
    ``within``: of those, the ones that reach into this stretch (lo, hi) only."""
    cols = ("rank", "tid", "start_ns", "end_ns")
    keys = threads.select("rank", "tid", "thread")
    near = None if within is None else (pl.col("end_ns") > within[0]) & (pl.col("start_ns") < within[1])

    def overlapping(part: pl.DataFrame) -> pl.DataFrame:
        found = iv.overlapping(part, gaps, by=["rank"])
        return found if near is None else found.filter(near)

    def on_threads(parts: Iterable[pl.DataFrame]) -> pl.DataFrame:
        # slice by slice, each kind's events of a slice kept or not before the kinds are merged:
        # of millions of operators or Python calls, a few overlap the gaps
        return on_thread(pl.concat(parts, how="vertical"), keys)

    def kinds(names: list[str], *columns: str) -> pl.DataFrame:
        return on_threads(run.select_slices(names, *cols, *columns, within=within, kept=overlapping))

    ops = kinds(["cpu_op"], "name")
    scopes = kinds(["annotation", "python", "step"], "kind", "name")
    calls = on_threads(overlapping(part) for part in row_slices(reads.calls.select(*cols))).select("thread", *SPAN)
    ops = _launching(ops, reads.by_thread)
    long = (pl.col("end_ns") - pl.col("start_ns")) >= DISPATCH_GAP_NS
    busy = iv.union(pl.concat([ops.filter(pl.col("launching") | ~long).select("thread", *SPAN), calls]), ["thread"])
    named = scopes.filter(pl.col("name").cast(pl.String).str.contains(_NAMED)).drop("kind")
    named = pl.concat([ops.drop("launching"), named])
    return _ThreadEvents(
        cpu_work=ops.filter(~pl.col("launching") & long).select("thread", *SPAN),
        dispatch=pl.concat([busy, _pauses(pl.concat([ops.select("thread", *SPAN), calls]))]),
        recorded=scopes.select("thread", *SPAN),
        named=named,
        annotations=scopes.filter(kind="annotation").drop("kind"),
    )


#: The most keys :func:`on_thread` looks its threads up in an array of (4 MB).
_LOOKUP_KEYS: Final = 1 << 20


def on_thread(df: pl.DataFrame, threads: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``df`` on one of the ``threads`` (rank, tid, thread), with its ``thread`` in
    place of their rank and tid, in ``df``'s order.

    The rank and the tid pack into one integer (``rank * width + tid - lowest``, the rows of a
    rank or tid beyond the threads' left out first) where the threads' tids span few enough
    values: each row's thread is then read from an array of every key's thread (the tids of
    a process lie close together), else joined on that key; a join on the pair would encode
    both columns row by row first (three times the work of one key). Else joined on the pair.
    """
    tids, ranks, number = (threads.get_column(c) for c in ("tid", "rank", "thread"))
    packed = threads.height > 0 and not tids.null_count() and not ranks.null_count()
    low, high, top = (cast("int", x) for x in (tids.min(), tids.max(), ranks.max())) if packed else (0, 0, 0)
    if not packed or (high - low + 1) * (top + 1) >= 1 << 62 or low < -(1 << 62):
        return df.join(threads, on=["rank", "tid"], maintain_order="left").drop("rank", "tid")
    width = high - low + 1

    def key(rank: pl.Series, tid: pl.Series) -> pl.Series:
        packed: pl.Series = rank.cast(pl.Int64) * width + (tid.cast(pl.Int64) - low)
        return packed.alias("_thread_key")

    # the rows of another rank or tid match none, nor overflow (column by column: no query)
    tid, rank = df.get_column("tid"), df.get_column("rank")
    inside = kept(df, (tid >= low) & (tid <= high) & (rank >= 0) & (rank <= top))
    rest = columns(inside, *(c for c in inside.columns if c not in ("rank", "tid")))
    keys = key(inside.get_column("rank"), inside.get_column("tid"))
    if width * (top + 1) <= _LOOKUP_KEYS:
        table = np.full(width * (top + 1), -1, dtype=np.int64)
        table[key(ranks, tids).to_numpy()] = number.cast(pl.Int64).to_numpy()
        found = table[keys.to_numpy()]
        hit = found >= 0
        return kept(rest, pl.Series(hit)).hstack([pl.Series("thread", found[hit]).cast(number.dtype)])
    joined = rest.hstack([keys]).join(pl.DataFrame([key(ranks, tids), number]), on="_thread_key", maintain_order="left")
    return joined.drop("_thread_key")


def _launching(ops: pl.DataFrame, launches: pl.DataFrame) -> pl.DataFrame:
    """``ops`` with ``launching``: whether a launch call of its thread (``launches``: thread,
    next_launch) starts inside it; the rows in time order within a thread. The next launch of
    each is found by a binary search (:func:`~tracekit.analyzers.intervals.first_at_or_after`),
    else by an as-of join."""
    ordered = iv.sort_within(ops, ["thread"], "start_ns")
    following = iv.first_at_or_after(ordered, "start_ns", launches, "next_launch", by=["thread"])
    if following is not None:
        return ordered.with_columns(launching=(following < ordered.get_column("end_ns")).fill_null(False))
    found = ordered.join_asof(
        iv.sort_within(launches, ["thread"], "next_launch"),
        left_on="start_ns",
        right_on="next_launch",
        by="thread",
        strategy="forward",
        check_sortedness=False,
    )
    return found.with_columns(launching=(pl.col("next_launch") < pl.col("end_ns")).fill_null(False)).drop("next_launch")


def _pauses(events: pl.DataFrame) -> pl.DataFrame:
    """The stretches shorter than ``DISPATCH_GAP_NS`` between host events of one thread."""
    busy = iv.union(events, ["thread"])
    same = pl.col("thread").shift(-1) == pl.col("thread")
    return (
        busy.with_columns(following=pl.when(same).then(pl.col("start_ns").shift(-1)))
        .filter(pl.col("following") - pl.col("end_ns") < DISPATCH_GAP_NS)
        .select("thread", start_ns="end_ns", end_ns="following")
    )


def process_ranges(
    run: Run, *, fetch: pl.DataFrame, syncs: pl.DataFrame, calls: pl.DataFrame, frames: pl.DataFrame | None = None
) -> dict[IdleCause, pl.DataFrame]:
    """The process-wide categories: rank, start_ns, end_ns ranges of each (one selection of
    the named ranges, whose few names are then told apart). One-time evidence that recurs in
    the measured steps is not one-time (:func:`_recurring`); a device free that recurs
    (``cudaFree`` synchronizes the device: an allocator whose caching is off frees in every
    step) is a sync."""
    named = run.select(["cpu_op", "annotation", "python"], "rank", "kind", *SPAN, "name", name=_NAMED)
    slow = (pl.col("end_ns") - pl.col("start_ns")) >= SLOW_LAUNCH_NS

    def both(*frames: pl.DataFrame) -> pl.DataFrame:
        spans = [pl.DataFrame([f.get_column("rank").cast(pl.Int32), *(f.get_column(c) for c in SPAN)]) for f in frames]
        return pl.concat(spans, how="vertical_relaxed")

    # on a rank alone in its world a collective blocks on no peer: the host runs it, its own work
    collective = _matching(named, BLOCKING_COLLECTIVE).filter(
        pl.col("kind").is_in(["cpu_op", "annotation"]), with_peers(run)
    )
    once = [
        _matching(named, ONE_TIME_RANGES),
        _matching(calls, ONE_TIME_CALLS),
        _matching(calls.filter(slow), LAUNCH_CALLS),
    ]
    recurring = [_recurring(f, frames) for f in once]
    frees = _matching(pl.concat([r.select("rank", *SPAN, "name") for r in recurring]), RECURRING_SYNC)
    return {
        IdleCause.DATA: both(fetch, _matching(named, INPUT_RANGES)),
        IdleCause.BLOCKING_COLLECTIVE: both(collective),
        IdleCause.HOST_SYNC: both(user_calls(syncs), frees),
        IdleCause.CAPTURE_SYNC: both(capture_calls(syncs)),
        IdleCause.ONE_TIME: both(
            *(
                f.join(r.select("rank", *SPAN), on=["rank", *SPAN], how="anti")
                for f, r in zip(once, recurring, strict=True)
            ),
            _first_calls(run),
        ),
    }


#: Device frees, which synchronize the device (a sync when they recur in every step).
RECURRING_SYNC: Final = r"^(?:cuda|hip)Free(?:Host)?(?:_v\d+)?$|^cuMemFree\w*$"
#: One-time evidence under a name seen in at least this share of a rank's measured windows
#: (and in two of them at least) recurs: it is the steady state's, not set-up.
RECURRING_SHARE: Final = 0.5


def _recurring(events: pl.DataFrame, frames: pl.DataFrame | None) -> pl.DataFrame:
    """The rows of ``events`` (rank, start_ns, end_ns, name) whose name recurs in the measured
    windows: in :data:`RECURRING_SHARE` of its rank's windows and in two at least."""
    empty = events.clear()
    if frames is None or frames.height == 0 or events.height == 0:
        return empty
    windows = frames.select(pl.col("rank").cast(pl.Int32), "step", "start_ns", "end_ns")
    counted = windows.group_by("rank").agg(n=pl.len())
    keyed = events.with_columns(pl.col("rank").cast(pl.Int32)).with_row_index("_e")
    located = iv.locate(keyed.select("_e", "rank", "start_ns"), "start_ns", windows, by=["rank"], keep=["step"])
    seen = (
        located.join(keyed.select("_e", "name"), on="_e").group_by("rank", "name").agg(steps=pl.col("step").n_unique())
    )
    often = seen.join(counted, on="rank").filter(
        pl.col("steps") >= 2,
        pl.col("steps") >= RECURRING_SHARE * pl.col("n"),
    )
    return (
        keyed.join(often.select("rank", "name"), on=["rank", "name"], how="semi")
        .drop("_e")
        .with_columns(pl.col("rank").cast(events.schema["rank"]))
    )


def _matching(events: pl.DataFrame, pattern: str) -> pl.DataFrame:
    """The rows of ``events`` whose name matches ``pattern`` (tested once per distinct name)."""
    names = events.get_column("name").unique().cast(pl.String).drop_nulls()
    return events.filter(pl.col("name").is_in(names.filter(names.str.contains(pattern)).implode()))


def _first_calls(run: Run) -> pl.DataFrame:
    """First calls of operators that took ``FIRST_CALL_RATIO`` times as long as their shortest
    call, and at least ``FIRST_CALL_MIN_NS``: one-time set-up no name shows (cuDNN and cuBLAS
    initialization and autotuning inside the first convolution or matmul, lazy loading).
    rank, start_ns, end_ns."""
    length = pl.col("end_ns") - pl.col("start_ns")
    slow = run.select(["cpu_op"], "name", where=length >= FIRST_CALL_MIN_NS)["name"].unique()
    calls = run.select(["cpu_op"], "rank", "name", "start_ns", "end_ns", where=pl.col("name").is_in(slow.implode()))
    first = calls.group_by("rank", "name").agg(
        pl.col("start_ns").min(),
        pl.col("end_ns").sort_by("start_ns").first(),
        shortest=length.min(),
        calls=pl.len(),
    )
    return first.filter(
        pl.col("calls") > 1, length >= FIRST_CALL_MIN_NS, length >= FIRST_CALL_RATIO * pl.col("shortest")
    ).select("rank", *SPAN)


def per_thread(ranges: pl.DataFrame, threads: pl.DataFrame) -> pl.DataFrame:
    """Process-wide ranges repeated for every launching thread of their rank (thread, start_ns,
    end_ns): each range, in order, once for each thread of its rank. Gathered in NumPy (no join)."""
    mine, theirs = ranges.get_column("rank"), threads.get_column("rank")
    if mine.null_count() or theirs.null_count():
        return ranges.join(columns(threads, "rank", "thread"), on="rank").select("thread", *SPAN)
    order = np.argsort(theirs.to_numpy(), kind="stable")
    ranks = theirs.to_numpy()[order]
    wanted = mine.to_numpy()
    first = np.searchsorted(ranks, wanted, side="left")
    count = np.searchsorted(ranks, wanted, side="right") - first
    row = np.repeat(np.arange(wanted.size), count)
    # the k-th copy of a range takes the k-th thread of its rank
    nth = np.arange(row.size) - np.repeat(np.cumsum(count) - count, count)
    thread = order[np.repeat(first, count) + nth]
    rows = pl.Series(row, dtype=pl.Int64)
    return pl.DataFrame(
        [threads.get_column("thread")[pl.Series(thread, dtype=pl.Int64)], *(ranges.get_column(c)[rows] for c in SPAN)]
    )


def _numbered(events: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """``events`` (``by`` columns, start_ns) as ``by``, t (the start) and n: each event's number
    in its group in time order, from 1 (what :func:`_count_before` counts with)."""
    return iv.sort_within(events.select(*by, t="start_ns"), by, "t").with_columns(
        n=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(by)
    )


def _count_before(df: pl.DataFrame, column: str, counted: pl.DataFrame, by: list[str]) -> pl.Series:
    """For each row of ``df``, how many events of its group start before its ``column``
    (``counted``: the events, :func:`_numbered`)."""
    if df.height == 0:
        return pl.Series("n", [], dtype=pl.Int64)
    before = iv.count_before(df, column, counted, "t", by=by)
    if before is not None:
        return before.alias("n")
    found = iv.sort_within(df.select(*by, column).with_row_index("_row"), by, column).join_asof(
        counted,
        left_on=column,
        right_on="t",
        by=by,
        strategy="backward",
        allow_exact_matches=False,
        check_sortedness=False,
    )
    return found.sort("_row")["n"].fill_null(0).alias("n")


def _exclusive(gaps: pl.DataFrame, covers: list[tuple[str, pl.DataFrame]]) -> list[pl.Series]:
    """Time of each gap that each cause's covers take, earlier covers taking it first (one
    series per cause that has covers, named for it)."""
    taken = iv.covered_first(
        columns(gaps, "thread", *SPAN), [columns(cover, "thread", *SPAN) for _, cover in covers], ["thread"]
    )
    times = {cause: pl.Series(values=[0] * gaps.height, dtype=pl.Int64) for cause, _ in covers}
    for (cause, _), time in zip(covers, taken, strict=True):
        times[cause] = times[cause] + time
    return [series.alias(cause) for cause, series in times.items()]


def _range_at(points: pl.DataFrame, ranges: pl.DataFrame) -> pl.DataFrame:
    """For each point (idle_id, thread, t), the name of the outermost range on its thread
    holding it: of the ranges holding it, the one that starts first (the longest of those that
    start together).

    ``ranges`` holds every range that overlaps a gap, so every range holding a gap's point. A
    thread's ranges in order of start, each with the latest end so far: the first whose latest
    end passes the point holds it, if it starts by then (ranges that overlap without nesting,
    siblings 1 ns apart as rounded clocks write them, hide nothing).
    """
    if ranges.height == 0:
        return points.select("idle_id", host_range=pl.lit(None, dtype=pl.Categorical))
    ordered = (
        ranges.select("thread", *SPAN)
        .with_row_index("_range")
        .sort("thread", "start_ns", "end_ns", descending=[False, False, True], maintain_order=True)
        .select("thread", "_range", first="start_ns", reach=pl.col("end_ns").cum_max().over("thread"))
    )
    found = (
        points.sort("thread", "t")
        .join_asof(
            ordered,
            left_on="t",
            right_on="reach",
            by="thread",
            strategy="forward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .select("idle_id", _range=pl.when(pl.col("first") <= pl.col("t")).then(pl.col("_range")))
    )
    return found.select("idle_id").with_columns(host_range=ranges.get_column("name").gather(found["_range"]))
