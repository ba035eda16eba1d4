"""Each analysis as a registry entry: its per-rank part and its cross-rank part (a typed section).

The per-rank parts read the shared intermediates of a :class:`RankContext`; the cross-rank
parts read the :class:`Reduced` shards and return the section of the typed result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec
import polars as pl

from tracekit import __version__
from tracekit.analyzers import intervals as iv
from tracekit.analyzers.annotations import annotations_per_step, every_name
from tracekit.analyzers.breakdown import gpu_breakdown
from tracekit.analyzers.breakdown import per_rank_of as breakdown_per_rank
from tracekit.analyzers.collectives import keyed, located
from tracekit.analyzers.convert import DECIMALS, rows, untracked
from tracekit.analyzers.dataloader import dataloader_gaps
from tracekit.analyzers.dataloader import per_rank_of as dataloader_per_rank
from tracekit.analyzers.idle import longest_of_each, one_time_by_range
from tracekit.analyzers.idle import per_rank_of as idle_per_rank
from tracekit.analyzers.kernels import kernels_by_rank
from tracekit.analyzers.ledger import in_ledger_order
from tracekit.analyzers.left_out import excluded_reason, left_out, left_out_of, recorded_span, run_left_out
from tracekit.analyzers.overlap import comm_overlap
from tracekit.analyzers.overlap import per_rank_of as overlap_per_rank
from tracekit.analyzers.parts import (
    AnnotationParts,
    BreakdownParts,
    CollectiveParts,
    DataLoaderParts,
    IdleParts,
    KernelParts,
    OverlapParts,
    StepParts,
    SyncParts,
)
from tracekit.analyzers.parts import table as declared
from tracekit.analyzers.shared import (
    ANNOTATIONS,
    COLLECTIVES,
    DATALOADER,
    IDLE,
    KERNELS,
    LEDGER,
    MEASURED,
    OVERLAP,
    STEPS,
    STRAGGLERS,
    SYNCS,
)
from tracekit.analyzers.stats import grouped, num
from tracekit.analyzers.syncs import KEPT_CALLS, longest_calls, sync_points, user_calls
from tracekit.analyzers.syncs import per_rank_of as syncs_per_rank
from tracekit.analyzers.verdict import bound_names
from tracekit.analyzers.windows import stacked
from tracekit.analyzers.work import MAX_ROWS as WORK_ROWS
from tracekit.analyzers.work import work_tables
from tracekit.results import rows as r
from tracekit.results.analysis import (
    BreakdownSection,
    CollectivesSection,
    DataLoaderSection,
    IdleSection,
    KernelsSection,
    LedgerSection,
    OverlapSection,
    PhasesSection,
    StepsSection,
    StragglersSection,
    SyncsSection,
    WorkSection,
)
from tracekit.results.vocab import (
    LeftOutReason,
    MeasuredOn,
    WorkKind,
)

if TYPE_CHECKING:
    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.mapreduce import Reduced

#: The longest GPU idle intervals kept in the result (all of them are in the details).
IDLE_INTERVALS: Final = 50


class StepPieces(StepParts):
    """A window's steps (:mod:`tracekit.analyzers.windows`): its :class:`StepParts` but the time
    left out, and what :func:`steps_fold` works that out again from. Only the fold reads them: the
    rank's part it makes is a plain :class:`StepParts`, as the whole rank's is."""

    #: the first start and the last end of the events that start in the window (its share of
    #: the rank's recorded span: :func:`~tracekit.analyzers.left_out.recorded_span`), and why the
    #: rank's steps kept out of the steady state are left out (a ``LeftOutReason`` value)
    recorded: pl.DataFrame = declared("rank first_ns last_ns excluded")
    #: the window's measured frames (every one lies in a window)
    frames: pl.DataFrame = declared("rank step start_ns end_ns")


def steps_map(ctx: RankContext) -> StepParts:
    """Steps and step-time statistics. On a window (:mod:`tracekit.analyzers.windows`): its
    steps, the rank's statistics and how its steps were found, and, for :func:`steps_fold`, the
    span of its events and its frames (:class:`StepPieces`) in place of the time left out."""
    s = ctx.steps
    found = {"steps": s.steps, "stats": s.stats, "all_steps": s.all_steps, "warmup": s.warmup, "how_found": s.how_found}
    if ctx.window is None:
        return StepParts(**found, left_out=left_out(ctx.run, s, ctx.frames))
    recorded = recorded_span(ctx.run, ctx.owned()).with_columns(excluded=pl.lit(excluded_reason(s).value))
    return StepPieces(**found, recorded=recorded, frames=ctx.frames.select("rank", "step", "start_ns", "end_ns"))


def steps_fold(parts: list[StepParts]) -> StepParts:
    """The rank's steps from its windows' (:class:`StepPieces`): their steps stacked (each step in
    the window its window starts in), the rank's statistics and how its steps were found (each
    window carries them), and the time left out worked out again from the rank's steps, frames
    and recorded span (from the first start of the windows' events to the last end)."""
    if not parts:
        return StepParts()
    pieces = [p for p in parts if isinstance(p, StepPieces)]
    first = parts[0]
    steps, all_steps = stacked([p.steps for p in parts]), stacked([p.all_steps for p in parts])
    outside = first.left_out
    recorded = stacked([p.recorded for p in pieces])
    if recorded.width:  # (a rank without events has no span, and so none left out, for any reason)
        span = recorded.group_by("rank").agg(first_ns=pl.col("first_ns").min(), last_ns=pl.col("last_ns").max())
        excluded = LeftOutReason(recorded.get_column("excluded")[0]) if recorded.height else LeftOutReason.WARMUP
        frames = stacked([p.frames for p in pieces])
        outside = left_out_of(span, all_steps, steps, frames, excluded)
    return StepParts(
        steps=steps,
        stats=first.stats,
        all_steps=all_steps,
        warmup=stacked([p.warmup for p in parts]),
        how_found=first.how_found,
        left_out=outside,
    )


def steps_reduce(red: Reduced) -> StepsSection:
    """Per-step rows and per-rank statistics."""
    s = red.result(STEPS)
    outside = red.gather(StepParts).left_out
    return StepsSection(
        per_step=rows(s.steps, r.StepRow),
        per_rank=rows(s.stats, r.StepStats),
        found=rows(s.how_found, r.StepsFound),
        warmup=rows(s.warmup, r.WarmupStep),
        selection=s.selection,
        include_warmup=s.include_warmup,
        left_out=rows(outside, r.LeftOut),
        left_out_run=rows(run_left_out(outside), r.LeftOut),
    )


def breakdown_map(ctx: RankContext) -> BreakdownParts:
    """Device time by what it did, per step and per rank."""
    result = gpu_breakdown(ctx.segments, window=ctx.options.window)
    return BreakdownParts(per_step=result.per_step, per_rank=result.per_rank)


def breakdown_fold(parts: list[BreakdownParts]) -> BreakdownParts:
    """The rank's breakdown from its windows': their steps, and the rank's totals of them."""
    per_step = stacked([p.per_step for p in parts])
    if not per_step.width:
        return BreakdownParts()
    return BreakdownParts(per_step=per_step, per_rank=breakdown_per_rank(per_step))


def _breakdown(red: Reduced) -> BreakdownSection:
    m = red.result(MEASURED)
    return BreakdownSection(
        window=m.window,
        per_rank=rows(m.per_rank, r.BreakdownRow),
        per_step=rows(m.per_step, r.BreakdownRow),
    )


def gpu_breakdown_reduce(red: Reduced) -> BreakdownSection:
    """The GPU breakdown (empty on a CPU-only run)."""
    if red.has_gpu:
        return _breakdown(red)
    return BreakdownSection(window=red.options.window, per_rank=[], per_step=[])


def host_breakdown_reduce(red: Reduced) -> BreakdownSection | None:
    """The host's breakdown on a CPU-only run, else None."""
    return None if red.has_gpu else _breakdown(red)


def overlap_map(ctx: RankContext) -> OverlapParts:
    """Comm/compute overlap on the GPU."""
    result = comm_overlap(ctx.gpu_segments)
    return OverlapParts(per_step=result.per_step, per_rank=result.per_rank)


def overlap_fold(parts: list[OverlapParts]) -> OverlapParts:
    """The rank's overlap from its windows': their steps, and the rank's totals of them."""
    per_step = stacked([p.per_step for p in parts])
    if not per_step.width:
        return OverlapParts()
    return OverlapParts(per_step=per_step, per_rank=overlap_per_rank(per_step))


def overlap_reduce(red: Reduced) -> OverlapSection:
    """Overlap per rank and step."""
    o = red.result(OVERLAP)
    return OverlapSection(per_rank=rows(o.per_rank, r.OverlapRow), per_step=rows(o.per_step, r.OverlapRow))


def kernels_map(ctx: RankContext) -> KernelParts:
    """GPU activities by rank and name."""
    return KernelParts(by_rank=kernels_by_rank(ctx.own(ctx.activity)))


def kernels_fold(parts: list[KernelParts]) -> KernelParts:
    """The rank's GPU activities by name from its windows' (each activity counted in the window
    it starts in)."""
    found = stacked([p.by_rank for p in parts])
    if not found.width:
        return KernelParts()
    count, total, longest = pl.col("count").sum(), pl.col("total_ns").sum(), pl.col("max_ns").max()
    by_rank = grouped(found, ["rank", "name", "kind", "category"], count=count, total_ns=total, max_ns=longest)
    return KernelParts(by_rank=by_rank.cast(found.schema))


def kernels_reduce(red: Reduced) -> KernelsSection:
    """Kernels over the run and by category."""
    k = red.result(KERNELS)
    return KernelsSection(by_category=rows(k.by_category, r.CategoryRow), top=rows(k.top, r.KernelRow))


def annotations_map(ctx: RankContext) -> AnnotationParts:
    """Top-level annotations per rank and step (a window's: of its steps, each range in the
    step it starts in, with the GPU time of what it launched, wherever that ran)."""
    return AnnotationParts(per_step=annotations_per_step(ctx.run, ctx.steps, ctx.launched, top=ctx.top_level))


def annotations_fold(parts: list[AnnotationParts]) -> AnnotationParts:
    """The rank's annotations from its windows': their steps, each with every name of the rank
    (a window's steps have rows for the names found in the window alone)."""
    per_step = stacked([p.per_step for p in parts])
    if not per_step.width:
        return AnnotationParts()
    return AnnotationParts(per_step=every_name(per_step))


def annotations_reduce(red: Reduced) -> PhasesSection:
    """Phases over the run and per rank."""
    a = red.result(ANNOTATIONS)
    per_step = a.per_step.filter(pl.col("step").is_not_null()) if a.per_step.height else a.per_step
    return PhasesSection(
        level=a.level,
        summary=rows(a.summary, r.PhaseRow),
        per_rank=rows(a.per_rank, r.PhaseRow),
        per_step=rows(per_step, r.PhaseStepRow) if per_step.height else [],
    )


def collectives_map(ctx: RankContext) -> CollectiveParts:
    """Every collective of each rank (in a window, those that start in it, each placed in the
    rank's steps)."""
    return CollectiveParts(found=located(ctx.own(ctx.collective_calls), ctx.rank_steps))


def collectives_fold(parts: list[CollectiveParts]) -> CollectiveParts:
    """The rank's collectives from its windows' (each call in the window it starts in), keyed
    again over the rank: a call's order in its group and its stream's slot count the calls of
    every window before it."""
    found = stacked([p.found for p in parts])
    if not found.width:
        return CollectiveParts()
    return CollectiveParts(found=keyed(found))


def collectives_reduce(red: Reduced) -> CollectivesSection:
    """Instances matched across ranks (per-rank rows are details)."""
    c = red.result(COLLECTIVES)
    return CollectivesSection(
        instances=rows(c.instances, r.CollectiveInstance),
        count=c.instances.height,
        ranks_present=c.ranks_present,
        world_size=c.world_size,
        match=c.match,
        clocks=rows(c.clocks, r.ClockOffset),
        misaligned=rows(c.misaligned, r.MisalignedStep),
    )


def stragglers_reduce(red: Reduced) -> StragglersSection:
    """Who arrives last, and the stragglers named."""
    s = red.result(STRAGGLERS)
    named = [
        msgspec.structs.replace(
            x,
            score=round(x.score, 4),
            caused_wait_ns=round(x.caused_wait_ns, 4),
            cause_excess_ns=round(x.cause_excess_ns, 4),
        )
        for x in s.stragglers
    ]
    return StragglersSection(
        stragglers=named, per_rank=rows(s.per_rank, r.StragglerRank), lateness_matrix=rows(s.matrix, r.LatenessCell)
    )


def dataloader_map(ctx: RankContext) -> DataLoaderParts:
    """DataLoader gaps per rank and step."""
    result = dataloader_gaps(ctx.run, ctx.segments, ctx.frames, has_gpu=ctx.has_gpu, fetch=ctx.fetch)
    return DataLoaderParts(per_step=result.per_step, per_rank=result.per_rank)


def dataloader_fold(parts: list[DataLoaderParts]) -> DataLoaderParts:
    """The rank's DataLoader gaps from its windows': their steps (each window's frames are its
    own, and the fetches and idle segments it cuts them by lie in them), and the rank's totals of
    them."""
    per_step = stacked([p.per_step for p in parts])
    if not per_step.width:
        return DataLoaderParts()
    return DataLoaderParts(per_step=per_step, per_rank=dataloader_per_rank(per_step))


def dataloader_reduce(red: Reduced) -> DataLoaderSection:
    """DataLoader gaps."""
    d = red.result(DATALOADER)
    return DataLoaderSection(
        measure=d.measure, per_rank=rows(d.per_rank, r.DataLoaderRow), per_step=rows(d.per_step, r.DataLoaderRow)
    )


def syncs_map(ctx: RankContext) -> SyncParts:
    """Host syncs per rank and step (a window's: the sync points and calls that start in it)."""
    calls = user_calls(ctx.syncs.calls)
    points = ctx.own(sync_points(calls))
    calls = ctx.own(calls)
    phases = ctx.top_level.select("rank", "tid", "start_ns", "end_ns", pl.col("name").cast(pl.String).alias("phase"))
    located = iv.locate(points.with_row_index("_i"), "start_ns", phases, by=["rank", "tid"], keep=["phase"])
    points = points.with_row_index("_i").join(located.select("_i", "phase"), on="_i", how="left")
    by_op = points.group_by("rank", pl.col("op").fill_null("(no operator)"), "kind", "phase").agg(points=pl.len())
    return SyncParts(per_step=ctx.syncs.per_step, per_rank=ctx.syncs.per_rank, by_op=by_op, calls=longest_calls(calls))


def syncs_fold(parts: list[SyncParts]) -> SyncParts:
    """The rank's syncs from its windows': their steps, and the rank's totals of them; the
    points by operator added; the longest calls of the windows' longest (each window keeps its
    longest :data:`~tracekit.analyzers.syncs.KEPT_CALLS`), each with how many the rank has."""
    per_step = stacked([p.per_step for p in parts])
    if not per_step.width:
        return SyncParts()
    by_op = stacked([p.by_op for p in parts])
    if by_op.width:
        keys = ["rank", "op", "kind", "phase"]
        by_op = by_op.group_by(keys).agg(pl.col("points").sum()).cast(by_op.schema)
    calls = stacked([p.calls for p in parts])
    if calls.width:
        # each window's count of its calls (on each of its rows), added up
        counts = stacked([p.calls.group_by("rank").agg(pl.col("calls").first()) for p in parts])
        counts = counts.group_by("rank").agg(pl.col("calls").sum().cast(calls.schema["calls"]))
        # the longest of each window's longest, as :func:`longest_calls` takes them
        length = pl.col("end_ns") - pl.col("start_ns")
        calls = (
            calls.drop("calls")
            .join(counts, on="rank")
            .with_columns(_length=length)
            .sort(["rank", "_length", "start_ns"], descending=[False, True, False])
            .group_by("rank", maintain_order=True)
            .head(KEPT_CALLS)
            .sort("rank", "start_ns")
            .select(calls.columns)
        )
    return SyncParts(per_step=per_step, per_rank=syncs_per_rank(per_step), by_op=by_op, calls=calls)


def syncs_reduce(red: Reduced) -> SyncsSection:
    """Host syncs."""
    s = red.result(SYNCS)
    return SyncsSection(per_rank=rows(s.per_rank, r.SyncRow), per_step=rows(s.per_step, r.SyncRow))


def idle_map(ctx: RankContext) -> IdleParts:
    """GPU idle intervals and their causes (nothing on a CPU-only run)."""
    if not ctx.has_gpu:
        return IdleParts()
    intervals = ctx.idle_intervals
    return IdleParts(
        intervals=intervals,
        per_rank=idle_per_rank(intervals),
        longest=longest_of_each(intervals, IDLE_INTERVALS),
        one_time=one_time_by_range(intervals),
    )


def idle_fold(parts: list[IdleParts]) -> IdleParts:
    """The rank's idle from its windows': their intervals (each gap is the window's it starts in,
    whole where it runs across the window's end, :attr:`WindowContext.idle_intervals
    <tracekit.analyzers.windows.WindowContext.idle_intervals>`, and its cause is the whole rank's:
    a window reads what lies beyond it of the rank,
    :attr:`~tracekit.analyzers.context.RankContext.idle_reads`), and the rank's totals, longest
    intervals and one-time idle worked out again from them."""
    intervals = stacked([p.intervals for p in parts])
    if not intervals.width:
        return IdleParts()
    intervals = intervals.sort("rank", "start_ns")
    return IdleParts(
        intervals=intervals,
        per_rank=idle_per_rank(intervals),
        longest=longest_of_each(intervals, IDLE_INTERVALS),
        one_time=one_time_by_range(intervals),
    )


def idle_reduce(red: Reduced) -> IdleSection | None:
    """GPU idle by cause, and the longest intervals."""
    idle = red.result(IDLE)
    if idle is None:
        return None
    longest = longest_intervals(idle.longest, IDLE_INTERVALS)
    return IdleSection(per_rank=rows(idle.per_rank, r.IdleCauseRow), longest=rows(longest, r.IdleInterval))


def longest_intervals(intervals: pl.DataFrame, count: int) -> pl.DataFrame:
    """The ``count`` longest ``intervals`` (length_ns, rank, start_ns...), the longest first, ties
    by rank and start: those at least as long as the ``count``-th longest, sorted (a top_k on
    the three keys took 0.1 s of the reduce at 1,024 ranks; a top_k of the lengths, 0.01)."""
    keys = ["length_ns", "rank", "start_ns"]
    shortest = intervals.get_column("length_ns").top_k(count).min()
    if shortest is None:  # no intervals
        return intervals.clear()
    return intervals.filter(pl.col("length_ns") >= shortest).sort(keys, descending=[True, False, False]).head(count)


def ledger_reduce(red: Reduced) -> LedgerSection:
    """The ledger: each rank's window by entry, per step and over the measured steps, and the run's."""
    led = red.result(LEDGER)
    measured_on = MeasuredOn.GPU if red.has_gpu else MeasuredOn.HOST
    run = led.run.with_columns(bound=pl.col("entry").replace_strict(bound_names(measured_on), return_dtype=pl.String))
    no_step = pl.lit(None, dtype=pl.Int64).alias("step")
    return LedgerSection(
        measured_on=measured_on,
        pace_ranks=led.pace_ranks,
        run=rows(run, r.LedgerShare),
        per_rank=_ledger_rows(led.per_rank.with_columns(no_step), led.windows.with_columns(no_step)),
        per_step=_ledger_rows(led.per_step, None),  # a step's window is the sum of its entries
    )


def _ledger_rows(entries: pl.DataFrame, windows: pl.DataFrame | None) -> list[r.LedgerRow]:
    """One row per (rank, step): the entries' ns and shares as maps, of the window of its rank
    and step in ``windows`` (None: the sum of its entries).

    The rows are written as JSON by polars and decoded by msgspec (a row per rank and step:
    1,024 ranks of 300 steps are 300k rows, which a loop in Python took seconds to build)."""
    joined = entries if windows is None else entries.join(windows, on=["rank", "step"], nulls_equal=True)
    # in ledger order each rank's step is one run of rows (a join on the two keys, or a
    # grouping by them, hashes every row's: 0.52 against 0.21 s of 1.4M entries)
    keyed = in_ledger_order(joined).with_columns(_row=pl.struct("rank", "step").rle_id())
    if windows is None:
        keyed = keyed.with_columns(window_ns=pl.col("ns").sum().over("_row"))
    if keyed.height == 0:
        return []
    window = pl.col("window_ns")
    # the share as Python's round(100 * ns / window, 4) gives it (polars rounds alike)
    pct = pl.when(window != 0).then((100 * pl.col("ns") / window).round(DECIMALS)).otherwise(0.0)
    entry = pl.col("entry").cast(pl.String)
    pairs = keyed.select(
        "_row",
        "rank",
        "step",
        "window_ns",
        ns=pl.concat_str(pl.lit('"'), entry, pl.lit('":'), pl.col("ns")),
        pct=pl.concat_str(pl.lit('"'), entry, pl.lit('":'), pct),
    )
    # each row's pairs as lists, then joined (a str.join in the aggregation: 1.36 against 0.19 s
    # of CPU for the 1.4M entries of 1,024 dense ranks)
    grouped = (
        pairs.group_by("_row", maintain_order=True)
        .agg(pl.col("rank", "step", "window_ns").first(), "ns", "pct")
        .with_columns(pl.col("ns").list.join(","), pl.col("pct").list.join(","))
    )
    text = grouped.select(
        pl.concat_str(
            pl.lit('{"rank":'),
            "rank",
            pl.lit(',"step":'),
            pl.col("step").cast(pl.String).fill_null("null"),
            pl.lit(',"window_ns":'),
            "window_ns",
            pl.lit(',"ns":{'),
            "ns",
            pl.lit('},"pct":{'),
            "pct",
            pl.lit("}}"),
        ).str.join(",")
    ).item()
    with untracked():
        return msgspec.json.decode(f"[{text}]", type=list[r.LedgerRow])


def work_reduce(red: Reduced) -> WorkSection:
    """The work of the measured steps by name (what a comparison matches)."""
    measured = red.result(MEASURED).per_rank
    window_ns = int(num(measured["window_ns"].sum())) if measured.height else 0
    rank_steps = red.result(STEPS).steps.height if red.result(STEPS).has_steps else 0
    out: list[r.WorkRow] = []
    left_out: dict[WorkKind, int] = {}
    for kind, table in work_tables(red).items():
        if table.height > WORK_ROWS:
            left_out[kind] = table.height - WORK_ROWS
        for row in table.head(WORK_ROWS).iter_rows(named=True):
            out.append(
                r.WorkRow(
                    kind=kind,
                    name=row["name"],
                    category=row.get("category"),
                    sync_kind=row.get("sync_kind"),
                    phase=row.get("phase"),
                    count=int(row["count"]),
                    total_ns=int(row["total_ns"]),
                    ranks=int(row["ranks"]),
                )
            )
    return WorkSection(rank_steps=rank_steps, window_ns=window_ns, rows=out, left_out=left_out)


def version(_: Reduced) -> str:
    """The tracekit version that made the result."""
    return __version__
