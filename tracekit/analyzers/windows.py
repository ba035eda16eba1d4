"""A rank analysed in windows of its steps (issue 48: a rank's peak set by a window, not its length).

A rank of 2 GB of JSON holds millions of events, and each per-rank analysis makes tables of
them (the device's segments, the idle gaps, the launching threads' calls) held beside the run:
the map's peak grows with the rank's length. Cut into windows of whole steps, each window's
events, intermediates and parts can be made and let go before the next window's, and the
parts folded into the rank's: the peak is then set by the largest window, not by the rank.

**A window** (:class:`~tracekit.analyzers.context.Window`) is a stretch [lo, hi) of the rank's
time. The windows of a rank cover all of its time, end to end (the first from the earliest
time, the last to the latest), and are cut only at the start of a measured frame that no
earlier frame reaches past (:func:`plan`): every frame lies in one window. An event *belongs*
to the window its start is in (:meth:`RankContext.owned
<tracekit.analyzers.context.RankContext.owned>`); a window's context holds every event that
*reaches into* it (:meth:`~tracekit.model.run.Run.within`): a kernel that starts before the
window and runs into its first frame is there, for the frame's segments. What a window cannot
see, the facts of the whole rank (its steps and their frames, which the step inference and the
warm-up judge over every step; each GPU activity's launch, which may lie windows earlier; the
rank's collective calls, each found from events that may lie windows away), its context takes
from the rank's (:class:`WindowContext`). An idle gap of the device may run across a cut (idle
at the end of one frame and at the start of the next, which touch): it is the window's it starts
in, whole (:attr:`WindowContext.idle_intervals`).

**An entry folds** when its :class:`~tracekit.analyzers.mapreduce.Entry` has a ``fold``: its
per-rank part, run on each window's context, gives parts that ``fold`` makes into the part the
whole rank gives: the rows of a step or an event concatenated, sums by name added, a rank's
totals and shares worked out again from its steps'. :func:`map_windows` runs the entries that
fold window by window and the others on the whole rank; the tests hold every fold to the whole
rank's part on real traces (``tests/analyzers/test_windows.py``); which do is :func:`folding`.
Every built-in one does.

**Where they are used.** The map analyses a rank of more than
:data:`~tracekit.pipeline.shards.WINDOWED_EVENTS` events in windows, its events first written to
a file of its own and the held run let go (:class:`~tracekit.readers.spilled.Spilled`): each
window's events are then read from the file as the window is analysed, and the whole rank's
facts a window takes (its steps, frames and GPU activity, the collective calls, the host ranges)
are made from selections of a few columns, so the map's peak is a window's and those facts'
(the 2 GB A100, DLRM and MI300 ranks: 400, 449 and 358 MB live against 665, 797 and 675 held
whole), for 2.6 to 3.4 times the CPU (``benchmarks/README.md``, stop 99): each window reads its
events, and those of the contexts around it (the gap across its end, the host's pauses beside
it, the gains' host time), from the file again, and its analyses' fixed costs are paid a window
at a time. Smaller ranks are analysed whole.
"""

from __future__ import annotations

import dataclasses
import itertools
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import polars as pl

from tracekit.analyzers.context import RankContext, Window
from tracekit.analyzers.host_causes import DISPATCH_GAP_NS, LAUNCH_CALLS, SYNC_SKEW_NS
from tracekit.analyzers.idle import CALL_COLUMNS, idle_gaps
from tracekit.analyzers.keys import CORRELATION_KEY, CORRELATION_LIMIT
from tracekit.analyzers.mapreduce import RankSummary, in_order
from tracekit.analyzers.stats import num
from tracekit.analyzers.timeline import LABELS
from tracekit.heap import trim_heap
from tracekit.model.by_kind import ROW, ByKind, Reach, reaching

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.analyzers.idle import IdleReads
    from tracekit.analyzers.mapreduce import Entry
    from tracekit.analyzers.memory_counters import Counted
    from tracekit.analyzers.parts import Parts
    from tracekit.analyzers.steps import StepResult
    from tracekit.model.run import Run
    from tracekit.results.vocab import IdleCause

#: The events a window belongs to, about: a window ends at the first cut past this many.
WINDOW_EVENTS: Final = 1 << 19
#: The earliest and latest times a window reaches (the first and last windows' open ends).
EARLIEST: Final = -(2**63)
LATEST: Final = 2**63 - 1


def plan(ctx: RankContext, events: int = WINDOW_EVENTS) -> list[Window]:
    """The windows of the rank of ``ctx``, each with about ``events`` events or more (the last
    one fewer), cut at the starts of its measured frames that no earlier frame reaches past;
    one window of all time where the rank cannot be cut so (a shard of several ranks, frames
    that are no steps: a GPU span)."""
    whole = [Window(EARLIEST, LATEST)]
    frames = ctx.frames
    if len(ctx.run.rank_ids) != 1 or frames.height < 2 or frames.get_column("step").null_count():
        return whole
    ordered = frames.select("start_ns", "end_ns").sort("start_ns")
    starts = ordered.get_column("start_ns").to_numpy()
    reach = np.maximum.accumulate(ordered.get_column("end_ns").to_numpy())
    # a frame's start is a cut where every frame before it has ended
    cuts = starts[1:][reach[:-1] <= starts[1:]]
    before = np.zeros(cuts.size, dtype=np.int64)
    held = ctx.run.by_kind
    for kind in held.kinds():  # each kind in order of its starts (one rank)
        before += held.starting_before(kind, cuts)
    chosen, last = [], 0
    for cut, count in zip(cuts.tolist(), before.tolist(), strict=True):
        if count - last >= events:
            chosen.append(cut)
            last = count
    bounds = [EARLIEST, *chosen, LATEST]
    return [Window(lo, hi) for lo, hi in itertools.pairwise(bounds)]


class Shared:
    """What the windows of a rank read of its whole context, found once for them all: how each
    of its tables that a window reads the rows of that reach into it is read (by position where
    the table is in order of starts: :class:`~tracekit.model.by_kind.Reach`), and where the
    rank's idle gaps run across a time (:func:`_idle_across`)."""

    def __init__(self, whole: RankContext) -> None:
        self.whole = whole
        self._reaches: dict[str, Reach] = {}
        self._across: dict[int, int | None] = {}

    def reaching(self, table: str, lo: int, hi: int, *, closed: bool = False) -> pl.DataFrame:
        """The rows of the whole context's ``table`` (the name of one of its frames) that reach
        into [``lo``, ``hi``) (``closed``: [``lo``, ``hi``]), in its order."""
        frame = getattr(self.whole, table)
        if (reach := self._reaches.get(table)) is None:
            reach = self._reaches[table] = Reach.of(frame)
        return reach.within(frame, lo, hi, closed=closed)

    def idle_across(self, at: int) -> int | None:
        """:func:`_idle_across` of the whole rank at ``at``."""
        if at not in self._across:
            self._across[at] = _idle_across(self.whole, at)
        return self._across[at]


class WindowContext(RankContext):
    """The context of one window of a rank: the events that reach into it, and what it takes
    from the whole rank's context (the steps and their frames, the GPU activity with each
    activity's launch, the collective calls); ``shared``: what the windows of the rank find of
    its whole context once (one a window where not given)."""

    def __init__(self, whole: RankContext, window: Window, *, shared: Shared | None = None) -> None:
        super().__init__(whole.run.within(window.lo, window.hi), whole.options)
        self.whole = whole
        self._window = window
        self._shared = shared if shared is not None and shared.whole is whole else Shared(whole)

    @property
    def window(self) -> Window:
        """The stretch of time this context's parts are of."""
        return self._window

    def _reaches(self) -> pl.Expr:
        return reaching(self._window.lo, self._window.hi)

    def _reaching(self, table: str, *, closed: bool = False) -> pl.DataFrame:
        """The rows of the whole context's ``table`` that reach into the window (:meth:`Shared.reaching`)."""
        return self._shared.reaching(table, self._window.lo, self._window.hi, closed=closed)

    @cached_property
    def activity(self) -> pl.DataFrame:
        """The whole rank's GPU activity that reaches into the window (each with its launch,
        which may be windows earlier)."""
        return self._reaching("activity")

    @cached_property
    def steps(self) -> StepResult:
        """The whole rank's steps whose windows start in this one (each step's rows; the
        rank's statistics and how its steps were found are the whole rank's)."""
        s = self.whole.steps
        mine = self.owned("win_start_ns")
        return dataclasses.replace(
            s, steps=s.steps.filter(mine), all_steps=s.all_steps.filter(mine), warmup=s.warmup.filter(mine)
        )

    @cached_property
    def frames(self) -> pl.DataFrame:
        """The whole rank's measured frames that start in the window (every one lies in it)."""
        return self.whole.frames.filter(self.owned())

    @property
    def rank_frames(self) -> pl.DataFrame:
        """The whole rank's measured frames (its measured span)."""
        return self.whole.frames

    def widened(self, margin: int) -> RankContext:
        """The context of this window with ``margin`` more of the rank's time on either side."""
        w = self._window
        lo = w.lo if w.lo == EARLIEST else max(EARLIEST, w.lo - margin)
        hi = w.hi if w.hi == LATEST else min(LATEST, w.hi + margin)
        return WindowContext(self.whole, Window(lo, hi), shared=self._shared)

    @cached_property
    def host_cuts(self) -> list[int]:
        """The whole rank's (the pieces its host time is cut in)."""
        return self.whole.host_cuts

    @cached_property
    def graph_launches(self) -> pl.DataFrame:
        """The whole rank's graph replays (a few calls): a kernel of the window may be replayed
        by a call that ended windows earlier."""
        return self.whole.graph_launches

    def beside(
        self, kinds: Sequence[str], count: int, threads: pl.DataFrame, *columns: str
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The ``columns`` of the ``count`` events of ``kinds`` of each of ``threads`` (rank, tid)
        nearest the window on either side, in the rank's order, read from the whole rank's events
        around its ends (no more of them than the threads need)."""
        held = self.whole.run.by_kind
        present = [k for k in held.kinds() if k in kinds]
        if not present or not threads.height:
            return super().beside(kinds, count, threads, *columns)
        w = self._window
        return (
            _nearest(held, present, w.lo, count, threads=threads, columns=columns, after=False),
            _nearest(held, present, w.hi, count, threads=threads, columns=columns, after=True),
        )

    @property
    def memory(self) -> Counted:
        """The whole rank's memory as its counters tell it (read once, from the counters alone:
        a window's run holds them whole)."""
        return self.whole.memory

    @cached_property
    def top_level(self) -> pl.DataFrame:
        """The whole rank's outermost annotations of its training threads (a few a step). A
        window's own events cannot tell them: which threads are the training threads, whether
        the rank carries tracekit's phases, and whether a range that starts before the window
        is nested in one that ended before it are facts of the whole rank; and a launch or a
        sync in the window is placed in the range of its thread that started last before it,
        which may lie windows earlier."""
        return self.whole.top_level

    @cached_property
    def launched(self) -> pl.DataFrame:
        """The whole rank's GPU activity launched from the window's start to the end of its
        steps and of the top-level ranges that start in them: every launch of the ranges and
        steps that are the window's (an activity launched in the window may run windows
        later)."""
        lo = self._window.lo
        end = _latest(self.steps.steps, self._window.hi)
        end = _latest(self.top_level.filter(pl.col("start_ns").is_between(lo, end, closed="left")), end)
        return self.whole.activity.filter(pl.col("launch_ns").is_between(lo, end, closed="left"))

    @cached_property
    def sync_calls(self) -> pl.DataFrame:
        """The whole rank's blocking calls that reach into the window, and those before them
        of the operator calls they are in (the first of an operator call's calls is its sync
        point). Which operator issued a call (the last of its thread that started before it),
        and which call is tracekit capture's own (the last of a step's, or one after the
        rank's last step), the window's own events cannot tell."""
        calls = self.whole.sync_calls.filter(pl.col("start_ns") < self._window.hi).with_row_index("_i")
        reach = self._reaches()
        keys = ["rank", "tid", "op_start_ns"]
        ops = calls.filter(reach & pl.col("op_start_ns").is_not_null()).select(keys).unique()
        earlier = calls.filter(~reach).join(ops, on=keys, how="semi")
        return pl.concat([earlier, calls.filter(reach)]).sort("_i").drop("_i")  # in the rank's order

    @cached_property
    def sync_idle(self) -> pl.DataFrame:
        """The whole rank's idle after blocking calls that reaches into the window or ends at
        its start: those the window's idle is the union of (the idle after a call that returned
        windows earlier may last into this one, and what starts there is not the window's)."""
        # of those that reach into the window, its ends included (read by position where they can)
        w = self._window
        return self._reaching("sync_idle", closed=True).filter((pl.col("end_ns") >= w.lo) & (pl.col("start_ns") < w.hi))

    @cached_property
    def sync_reads(self) -> pl.DataFrame:
        """The whole rank's host reads that reach into the window (one a read): a thread's reads
        that touch are one, and one that ended at the window's start (not among its events)
        takes in one that starts there."""
        return self._reaching("sync_reads")

    @property
    def rank_steps(self) -> StepResult:
        """The whole rank's steps (a call of the window may be launched in a step of an earlier one)."""
        return self.whole.steps

    @cached_property
    def collective_calls(self) -> pl.DataFrame:
        """The whole rank's collective calls that reach into the window: a call's group and
        arguments are found from events that may lie windows away (the op that launched it, the
        other kernels of its stream), so the rank's calls are found once, from all of its events
        (one row a call: a small table beside the events)."""
        return self._reaching("collective_calls")

    @cached_property
    def idle_activity(self) -> pl.DataFrame:
        """The whole rank's GPU activity that starts or ends in the window, its ends included:
        the work that starts as one of its gaps ends (at its end, a frame's), or ends as one
        begins (at its start)."""
        return self._reaching("activity", closed=True)

    @cached_property
    def first_work(self) -> pl.DataFrame:
        """The whole rank's first GPU work (a gap's work may wait behind work windows earlier)."""
        return self.whole.first_work

    @cached_property
    def first_call(self) -> pl.DataFrame:
        """The whole rank's first runtime or driver call (work launched before it was launched
        before the trace recorded the host)."""
        return self.whole.first_call

    @cached_property
    def comm_streams(self) -> pl.DataFrame:
        """The whole rank's streams that carry collectives (a stream's collectives may all lie
        in other windows)."""
        return self.whole.comm_streams

    @cached_property
    def stream_waits(self) -> pl.DataFrame:
        """The whole rank's stream waits (one row a wait: the wait a gap's work waited on may
        have been put on its stream windows earlier)."""
        return self.whole.stream_waits

    @cached_property
    def launch_calls(self) -> pl.DataFrame:
        """The window's launch calls, with the last of each launching thread of the rank before
        it and the first at or after its end (read from the whole rank's calls around its ends):
        whether an operator reaching into the window launched (a launch of its thread may lie
        before or after the window), and the rank's first launch after a gap began (windows
        later, where the window has none after it)."""
        own = super().launch_calls
        threads = self.whole.launch_threads
        held = self.whole.run.by_kind
        present = [k for k in held.kinds() if k in ("runtime", "driver")]
        if not present or not threads.height:
            return own
        where = pl.col("name").is_in(self.whole.run.names_matching(LAUNCH_CALLS).implode())
        w, columns = self._window, own.columns
        before = _nearest(held, present, w.lo, 1, threads=threads, columns=columns, after=False, where=where)
        after = _nearest(held, present, w.hi, 1, threads=threads, columns=columns, after=True, where=where)
        return pl.concat([before, own, after], how="vertical_relaxed").sort("start_ns", maintain_order=True)

    @cached_property
    def host_ranges(self) -> dict[IdleCause, pl.DataFrame]:
        """The whole rank's process-wide host ranges that reach into the window or end within
        :data:`~tracekit.analyzers.host_causes.SYNC_SKEW_NS` before it, with those that start
        after it and return before the latest of these (what a gap that began in a sync is
        matched with: the call of the first return at or after the gap began). Whether one-time
        work recurs, and which call is an operator's first, are facts of the whole rank's."""
        w = self._window
        reach = pl.col("end_ns") + SYNC_SKEW_NS
        found = {}
        for cause, ranges in self.whole.host_ranges.items():
            near = ranges.filter(reach >= w.lo)
            latest = near.filter(pl.col("start_ns") < w.hi).get_column("end_ns").max()
            inside = pl.col("start_ns") < w.hi
            found[cause] = near.filter(inside if latest is None else inside | (pl.col("end_ns") <= latest))
        return found

    @cached_property
    def idle_intervals(self) -> pl.DataFrame:
        """The rank's idle gaps that start in the window, whole, with their causes: the rank's
        gaps are unions of the idle segments of its frames, so one runs across a cut where the
        device is idle on both sides of it. The window's own frames end such a gap at its end:
        the gaps are found in the window stretched to the first frame that starts after the
        gap crossing its end has ended (its frames and the events that reach into them), and
        the piece of the gap that began in the window before it, at its start, is left out."""
        w = self._window
        end = self._shared.idle_across(w.hi)
        stretched = None if end is None else Window(w.lo, _next_frame(self.whole.frames, end))
        ctx = self if stretched is None else WindowContext(self.whole, stretched, shared=self._shared)
        start = pl.col("start_ns")
        mine = (start >= w.lo) & (start < w.hi)
        if self._shared.idle_across(w.lo) is not None:
            mine &= start != w.lo
        return ctx.idle.intervals.filter(mine)

    @property
    def idle_beyond(self) -> pl.DataFrame:
        """The device's segments of the frames from the window's end to the first that starts
        after the gap across its end has ended (those :attr:`idle_intervals` was found in past
        the window; none where no gap runs across its end): that gap's time in the next window's
        frames is counted with the gap, in their steps. Found in a context of those frames alone."""
        w = self._window
        end = self._shared.idle_across(w.hi)
        if end is None:
            return super().idle_beyond
        beyond = Window(w.hi, _next_frame(self.whole.frames, end))
        return WindowContext(self.whole, beyond, shared=self._shared).segments

    @cached_property
    def idle_host(self) -> tuple[Run, pl.DataFrame, pl.DataFrame | None]:
        """The whole rank's events that reach into the window or within
        :data:`~tracekit.analyzers.host_causes.DISPATCH_GAP_NS` of it, and its gaps around the
        window that its launching threads' operators and calls there reach into
        (:func:`_gaps_beside`): a thread's pauses are found between its events that overlap any
        of the rank's gaps, so one that reaches into a gap of the window may begin at an event
        of a gap windows earlier, or end at one of a gap after it."""
        w = self._window
        lo = w.lo if w.lo == EARLIEST else max(EARLIEST, w.lo - DISPATCH_GAP_NS)
        hi = w.hi if w.hi == LATEST else min(LATEST, w.hi + DISPATCH_GAP_NS)
        run = self.whole.run.within(lo, hi)
        return run, run.select(["runtime", "driver"], *CALL_COLUMNS), _gaps_beside(self._shared, run, w)

    @property
    def idle_reads(self) -> IdleReads:
        """What the window's gaps read of the rank around them, from the whole rank's: its facts;
        the launches of the work they read by correlation id (from the whole rank's calls: a
        launch may lie windows earlier); the work before a gap's work on its stream (the
        stream's last before the window, and its work since); the nodes of a graph replay (its
        first may have run windows earlier)."""
        whole = self.whole
        return dataclasses.replace(
            super().idle_reads,
            launches_of=lambda work: _launches(whole.run, work),
            before=lambda rows: _before(whole.activity, rows, self._window),
            nodes=lambda _: whole.activity,
        )


def _gaps_beside(shared: Shared, run: Run, window: Window) -> pl.DataFrame | None:
    """The gaps of the rank of ``shared``'s whole context (rank, start_ns, end_ns) before and
    after ``window`` that the operators and calls of its launching threads in ``run`` (the
    events around the window) reach into, besides others: found in the frames those events
    reach into (the gaps of frames that start before the window from the first of them, those
    after it to the last), with what cuts a gap at the window's ends (the piece of a gap across
    them in the window is the window's). None where the window is all time or its threads'
    events reach no further."""
    whole = shared.whole
    threads = whole.launch_threads
    if not threads.height:
        return None
    host = run.select(["cpu_op", "runtime", "driver"], "rank", "tid", "start_ns", "end_ns")
    host = host.join(threads, on=["rank", "tid"], how="semi")
    first = host.get_column("start_ns").min() if window.lo != EARLIEST else None
    last = host.get_column("end_ns").max() if window.hi != LATEST else None
    frames, found = whole.frames, []
    start, end = pl.col("start_ns"), pl.col("end_ns")
    if first is not None and first < window.lo:  # type: ignore[operator]
        before = frames.filter((end > first) & (start < window.lo)).get_column("start_ns").min()
        if before is not None:
            found.append(Window(int(before), window.lo))  # type: ignore[arg-type]
    if last is not None and last > window.hi:  # type: ignore[operator]
        after = frames.filter((start >= window.hi) & (start < last)).get_column("start_ns").max()
        if after is not None:
            found.append(Window(window.hi, _next_frame(frames, int(after))))  # type: ignore[arg-type]
    if not found:
        return None
    contexts = (WindowContext(whole, w, shared=shared) for w in found)
    gaps = [idle_gaps(ctx.segments, ctx.frames) for ctx in contexts]
    return pl.concat(gaps, how="vertical_relaxed").select("rank", "start_ns", "end_ns")


def _idle_across(ctx: RankContext, at: int) -> int | None:
    """The end of the idle gap of ``ctx``'s rank that runs across ``at`` (a window's end, a frame's
    start), None where none does: where a frame ends at ``at`` and no work of the device
    (:data:`~tracekit.analyzers.timeline.LABELS`) runs at it, its ends included, the idle
    segments on either side of it are one gap, which ends where the device's next work starts
    or the frames that touch from ``at`` on end."""
    if at in (EARLIEST, LATEST):
        return None
    frames = ctx.frames
    start, end = pl.col("start_ns"), pl.col("end_ns")
    if frames.filter((start < at) & (end == at)).is_empty():
        return None
    work = ctx.device.filter(pl.col("category").is_in(LABELS) & (end > start))
    if not work.filter((start <= at) & (end >= at)).is_empty():
        return None
    reach = at
    for lo, hi in frames.filter(start >= at).select("start_ns", "end_ns").sort("start_ns").iter_rows():
        if lo > reach:
            break
        reach = max(reach, hi)
    after = work.filter(start > at).get_column("start_ns").min()
    return reach if after is None else min(reach, int(after))  # type: ignore[arg-type]


def _next_frame(frames: pl.DataFrame, at: int) -> int:
    """The first start of ``frames`` after ``at`` (the latest time where none is)."""
    found = frames.filter(pl.col("start_ns") > at).get_column("start_ns").min()
    return LATEST if found is None else int(found)  # type: ignore[arg-type]


def _launches(run: Run, work: pl.DataFrame) -> pl.DataFrame:
    """The runtime and driver calls (:data:`~tracekit.analyzers.idle.CALL_COLUMNS`) of ``run``
    whose correlation ids (rank, correlation) are ``work``'s, of the ids that pack."""
    fits = pl.col("correlation").is_between(0, CORRELATION_LIMIT - 1)
    wanted = work.filter(fits).select(CORRELATION_KEY.unique()).to_series().implode()
    return run.select(["runtime", "driver"], *CALL_COLUMNS, where=fits & CORRELATION_KEY.is_in(wanted))


def _before(activity: pl.DataFrame, rows: pl.DataFrame, window: Window) -> pl.DataFrame:
    """The ``activity`` (in its order) of the streams of ``rows`` (rank, device, stream) from the
    last start of each before ``window`` to its end: each row's work before it on its stream."""
    stream = ["rank", "device", "stream"]
    wanted = rows.select(stream).unique()
    start = pl.col("start_ns")
    last = (
        activity.lazy()
        .filter(start < window.lo)
        .join(wanted.lazy(), on=stream, how="semi")
        .group_by(stream)
        .agg(_since=start.max())
        .collect()
    )
    bounds = wanted.join(last, on=stream, how="left").with_columns(pl.col("_since").fill_null(window.lo))
    return (
        activity.join(bounds, on=stream, maintain_order="left")
        .filter(start >= pl.col("_since"), start < window.hi)
        .drop("_since")
    )


def _nearest(
    held: ByKind,
    kinds: list[str],
    edge: int,
    count: int,
    *,
    threads: pl.DataFrame,
    columns: Sequence[str],
    after: bool,
    where: pl.Expr | None = None,
) -> pl.DataFrame:
    """The ``columns`` of the ``count`` events of each of ``threads`` nearest ``edge`` on one side
    (those that start at or after it, or before it) among the events of ``kinds`` of ``held``
    (each kind's in the order of their starts: one rank's), in their order. Each kind is read
    out from ``edge`` in growing stretches until every thread has ``count`` events in it or the
    kind has no more: an event farther out than a thread's ``count`` nearest of its kind is not
    among its ``count`` nearest of all."""
    keys = ["rank", "tid"]
    at_edge = np.array([edge], dtype=np.int64)
    ats = [int(held.starting_before(k, at_edge)[0]) for k in kinds]
    size = 16 * count
    while True:
        pieces, enough = [], True
        for kind, at in zip(kinds, ats, strict=True):
            rows = held.rows_of(kind)
            lo, hi = (at, min(rows, at + size)) if after else (max(0, at - size), at)
            piece = held.part_slice(kind, lo, hi - lo)
            piece = (piece if where is None else piece.filter(where)).select(*columns, ROW)
            pieces.append(piece)
            if hi < rows if after else lo > 0:  # the kind has more: do its threads have enough?
                have = piece.join(threads, on=keys, how="semi").group_by(keys).len()
                enough = enough and have.height == threads.height and num(have["len"].min()) >= count
        if enough:
            break
        size *= 8
    found = pl.concat(pieces).join(threads, on=keys, how="semi").sort(ROW)
    place = pl.int_range(pl.len()).over(keys)
    near = place < count if after else place >= pl.len().over(keys).cast(pl.Int64) - count  # (unsigned)
    return found.filter(near).drop(ROW)


def _latest(ranges: pl.DataFrame, end: int) -> int:
    """The latest of ``end`` and the ends of ``ranges``."""
    last = ranges.get_column("end_ns").max()
    return end if last is None else max(end, int(last))  # type: ignore[arg-type]


def stacked(tables: list[pl.DataFrame]) -> pl.DataFrame:
    """One table of the windows' ``tables`` (in time order), one under the other, in one piece;
    a window that has none of it (no columns) left out."""
    found = [t for t in tables if t.width]
    if not found:
        return pl.DataFrame()
    return found[0] if len(found) == 1 else pl.concat(found, how="vertical", rechunk=True)


def folding(entries: Sequence[Entry[Any]]) -> list[Entry[Any]]:
    """The entries with a per-rank part that folds (in the map's order)."""
    return [e for e in in_order(entries) if e.per_rank is not None and e.fold is not None]


def map_windows(ctx: RankContext, entries: Sequence[Entry[Any]], windows: Sequence[Window]) -> RankSummary:
    """:func:`~tracekit.analyzers.mapreduce.map_ranks` of ``ctx``'s rank, the entries that fold
    run on each of ``windows`` (:func:`plan`) in turn and their parts folded, the others on the
    whole rank: the same parts as the whole rank's map."""
    ordered = [e for e in in_order(entries) if e.per_rank is not None]
    folds = {e.name for e in folding(entries)} if len(windows) > 1 else set()
    pieces: dict[str, list[Parts]] = {name: [] for name in folds}
    shared = Shared(ctx)
    for window in windows if folds else ():
        part_ctx = WindowContext(ctx, window, shared=shared)
        for entry in ordered:
            if entry.name in folds:
                assert entry.per_rank is not None
                pieces[entry.name].append(entry.per_rank(part_ctx))
        del part_ctx
        trim_heap()
    del shared
    parts: dict[str, Parts] = {}
    for entry in ordered:
        assert entry.per_rank is not None
        if entry.name in folds:
            assert entry.fold is not None
            parts[entry.name] = entry.fold(pieces.pop(entry.name))
        else:
            parts[entry.name] = entry.per_rank(ctx)
        trim_heap()
    return RankSummary(ranks=tuple(ctx.run.rank_ids), parts=parts)
