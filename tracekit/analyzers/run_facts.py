"""The run's facts as a registry entry: per rank, event counts, span and signs of the kind of
job (PyTorch or not, a GPU job, how it is data-parallel); across ranks, what the run is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers import run_kind
from tracekit.analyzers.parts import FactParts, table
from tracekit.analyzers.shared import SPAN
from tracekit.analyzers.stats import totals
from tracekit.analyzers.windows import stacked
from tracekit.model.schema import GPU_ACTIVITY_KINDS
from tracekit.model.taxonomy import HOST_KINDS
from tracekit.results.analysis import DroppedEvent, RankFacts, RankFound, RunFacts, RunWarning, SkippedFile
from tracekit.results.traits import TraceFormat
from tracekit.results.vocab import DropReason, Parallelism, RankSource, RunWarningKind

if TYPE_CHECKING:
    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.mapreduce import Reduced
    from tracekit.model.input_warnings import InputWarning


#: Consecutive CUDA calls (by correlation id) further apart than this had calls between them
#: that the trace dropped; when most consecutive pairs do, the trace is a sample (HTA's trace
#: filter, say) whose device timeline misses most of its work. Complete traces here: 0-6%.
SAMPLED_JUMP: Final = 20

#: Host events of a PyTorch program (a plain CUDA or MPI application has none).
PYTORCH_SIGNS: Final = r"^aten::|^autograd::|^ProfilerStep#|^Optimizer\.|^enumerate\(DataLoader\)|^c10d::|^tracekit\."
#: Kernels of PyTorch's own (ATen's, its copy of FlashAttention): a PyTorch program's, where the
#: trace holds no operator of it (an Nsight Systems export without NVTX ranges).
PYTORCH_KERNELS: Final = r"(?:^|[^\w:])(?:at::native::|at::cuda::|pytorch_flash::)"

#: A device activity that starts more than this before its launch call began is impossible but
#: for the clocks: the device's is ahead of the host's (complete traces: none, at 1 us).
EARLY_NS: Final = 1_000

#: A device synchronize returns once every device activity launched before it began has ended:
#: one that ends more than :data:`EARLY_NS` after the call returned is impossible but for the
#: clocks, the device's behind the host's (the shared traces' and samples' 147 device syncs: none,
#: the closest ending 5.8 us before its sync returned).
DEVICE_SYNC: Final = r"^(?:cuda|hip)DeviceSynchronize$"

#: Host events that only a GPU job records (its device events may have been left out).
GPU_JOB_SIGNS: Final = r"(?i)^nccl:|^rccl:|record_stream|cudnn|miopen|^cuda[A-Z]|^hip[A-Z]"


class FactPieces(FactParts):
    """A window's facts (:mod:`tracekit.analyzers.windows`): its :class:`FactParts`, and the runs of
    its runtime calls that :func:`facts_fold` needs to count the rank's jumps. Only the fold
    reads them: the rank's part it makes is a plain :class:`FactParts`, as the whole rank's is."""

    #: each run of the window's calls in order of correlation id, none further than
    #: :data:`SAMPLED_JUMP` from the one before it: its first and last id and how many it holds
    runs: pl.DataFrame = table("rank first last ids")


def parallelism_of(red: Reduced) -> Parallelism | None:
    """How the run is data-parallel, by the signs its ranks' host events hold (None: none; a
    capture's config may tell later, :func:`tracekit.analyzers.caveats.with_capture`)."""
    return run_kind.from_signs(totals(red.gather(FactParts).span, map(run_kind.column, run_kind.SIGNS)))


def facts_map(ctx: RankContext) -> FactParts:
    """Event counts, the span of each rank, signs of a GPU job, and the device's busy time in
    steps. On a window (:mod:`tracekit.analyzers.windows`): of the events that start in it, the
    busy time inside it, and the runs of its calls (:class:`FactPieces`) for :func:`facts_fold`."""
    run = ctx.run
    host = pl.col("kind").is_in(["cpu_op", "annotation", "runtime", "driver"])

    def signs(pattern: str) -> pl.Expr:  # the pattern is tested once per distinct name
        return host & pl.col("name").is_in(run.names_matching(pattern).implode())

    flags = {
        "gpu_events": pl.col("kind").is_in(GPU_ACTIVITY_KINDS),
        "gpu_signs": signs(GPU_JOB_SIGNS),
        "torch_ops": signs(PYTORCH_SIGNS)
        | (pl.col("kind") == "kernel") & pl.col("name").is_in(run.names_matching(PYTORCH_KERNELS).implode()),
        "comm_kernels": (pl.col("kind") == "kernel") & (pl.col("category") == "collective"),
        "comm_host": pl.col("kind").is_in(list(HOST_KINDS)) & (pl.col("category") == "collective"),
        **run_kind.sign_flags(run),
    }
    # flags first (each kind's events apart: the sums do not depend on the order), then plain
    # sums by rank: a grouped sum of a column is much cheaper than one of an expression
    counts = (
        run.unordered("rank", "start_ns", "end_ns", *(flag.alias(name) for name, flag in flags.items()))
        .filter(ctx.owned())
        .group_by("rank")
        .agg(
            events=pl.len(),
            gpu_events=pl.col("gpu_events").sum(),
            gpu_signs=pl.col("gpu_signs").sum(),
            torch_ops=pl.col("torch_ops").sum(),
            start_ns=pl.col("start_ns").min(),
            end_ns=pl.col("end_ns").max(),
            **{c: pl.col(c).sum() for c in ("comm_kernels", "comm_host", *map(run_kind.column, run_kind.SIGNS))},
        )
    )
    # rows sorted by rank: a difference within a rank is one whose previous row is of that rank
    jump = pl.when(pl.col("rank").shift(1) == pl.col("rank")).then(pl.col("correlation").diff())
    ids = iv.sort_within(  # ids mostly in order already: no sort then
        run.select(
            ["runtime", "driver"], "rank", "correlation", where=pl.col("correlation").is_not_null() & ctx.owned()
        ),
        ["rank"],
        "correlation",
    )
    calls = (
        ids.lazy()
        .select("rank", calls=jump.is_not_null(), jumps=jump >= SAMPLED_JUMP)
        .group_by("rank")
        .agg(pl.col("calls", "jumps").sum())
    )
    linked = pl.col("launch_pid").is_not_null()
    early = linked & (pl.col("start_ns") < pl.col("launch_ns") - EARLY_NS)
    launched = (  # device activities whose launch call was recorded, and those that start before it
        ctx.own(ctx.activity)
        .lazy()
        .group_by("rank")
        .agg(
            launched=linked.sum(),
            early=early.sum(),
            lead_ns=pl.when(early).then(pl.col("launch_ns") - pl.col("start_ns")).max(),
        )
    )
    activity = ctx.activity.select("rank", "start_ns", "end_ns")
    if (window := ctx.window) is not None:  # the busy time inside the window: the windows' add up
        activity = activity.with_columns(pl.col("start_ns", "end_ns").clip(window.lo, window.hi))
    busy = iv.total(activity, ["rank"])
    assert isinstance(busy, pl.DataFrame)
    steps = ctx.steps.steps.group_by("rank").len("steps")
    if window is not None:  # a window that owns no event may yet be busy, or own a step: a row
        counts = counts.join(
            pl.concat([busy.select("rank"), steps.select("rank")]).lazy().unique(),
            on="rank",
            how="full",
            coalesce=True,
        )
    facts = (
        counts.join(busy.rename({"total_ns": "busy_ns"}).lazy(), on="rank", how="left")
        .join(steps.lazy(), on="rank", how="left")
        .join(calls, on="rank", how="left")
        .join(launched, on="rank", how="left")
        .join(_device_syncs(ctx), on="rank", how="left")
        .with_columns(
            pl.col(
                "busy_ns", "steps", "calls", "jumps", "launched", "early", "lead_ns", "syncs", "behind", "lag_ns"
            ).fill_null(0)
        )
        .sort("rank")
        .collect()
    )
    if window is None:
        return FactParts(span=facts)
    return FactPieces(span=facts, runs=call_runs(ids))


def _device_syncs(ctx: RankContext) -> pl.LazyFrame:
    """Per rank: its device synchronize calls (:data:`DEVICE_SYNC`, ``syncs``), those after whose
    return a device activity launched before them ends (``behind``: its device's clock is behind
    its host's), and by how much the latest ends after (``lag_ns``). Each call counts in the
    window it starts in; a window's activities are some of the rank's: what it misses can only
    hide a contradiction, never make one."""
    syncs = ctx.run.select(
        ["runtime", "driver"],
        "rank",
        "start_ns",
        "end_ns",
        where=pl.col("name").cast(pl.String).str.contains(DEVICE_SYNC) & ctx.owned(),
    )
    if not syncs.height:
        return pl.LazyFrame(
            schema={"rank": syncs.schema["rank"], "syncs": pl.UInt32, "behind": pl.UInt32, "lag_ns": pl.Int64}
        )
    # the latest end of the activities launched before each time, by the launches' order
    done = (
        ctx.activity.filter(pl.col("launch_pid").is_not_null())
        .select(pl.col("rank").cast(syncs.schema["rank"]), pl.col("launch_ns").alias("start_ns"), "end_ns")
        .sort("rank", "start_ns")
    )
    done = done.select("rank", "start_ns", done=pl.col("end_ns").cum_max().over("rank"))
    met = syncs.sort("rank", "start_ns").join_asof(
        done, on="start_ns", by="rank", strategy="backward", allow_exact_matches=False, check_sortedness=False
    )
    lag = pl.col("done") - pl.col("end_ns")
    late = (lag > EARLY_NS).fill_null(False)
    return met.lazy().group_by("rank").agg(syncs=pl.len(), behind=late.sum(), lag_ns=pl.when(late).then(lag).max())


def facts_fold(parts: list[FactParts]) -> FactParts:
    """The rank's facts from its windows' (:class:`FactPieces`): the counts, steps and busy
    time added (each event counted in the window it starts in, the busy time of each window
    inside it), the span from the first start to the last end, and the calls and jumps of the
    runs of every window's calls taken in order of their first id.

    Two consecutive calls (by correlation id) of the rank lie in one run of a window unless a
    jump parts them, or they are of two windows (a window's ids need not all come before the
    next one's, where threads call at once): the rank's jumps are the runs whose first id lies
    :data:`SAMPLED_JUMP` or more past every earlier run's last, and its calls (pairs of
    consecutive ids) one fewer than its ids."""
    span = stacked([p.span for p in parts])
    if not span.width:
        return FactParts()
    runs = stacked([p.runs for p in parts if isinstance(p, FactPieces)])
    total = {
        c: pl.col(c).max() if c in ("lead_ns", "lag_ns") else pl.col(c).sum()
        for c in span.columns
        if c not in ("rank", "start_ns", "end_ns", "calls", "jumps")
    }
    facts = span.group_by("rank").agg(start_ns=pl.col("start_ns").min(), end_ns=pl.col("end_ns").max(), **total)
    if runs.width:
        facts = facts.join(runs_calls(runs), on="rank", how="left")
    else:
        facts = facts.with_columns(calls=pl.lit(None), jumps=pl.lit(None))
    facts = facts.with_columns(pl.col("calls", "jumps").fill_null(0))
    return FactParts(span=facts.select(span.columns).cast(span.schema).sort("rank"))


def call_runs(ids: pl.DataFrame) -> pl.DataFrame:
    """The runs of the calls ``ids`` (rank, correlation; sorted by both) in which no id lies
    :data:`SAMPLED_JUMP` or more past the one before it: rank, first and last id, and ids (how many)."""
    jump = pl.col("correlation").diff() >= SAMPLED_JUMP
    new = pl.col("rank").shift(1).ne_missing(pl.col("rank")) | (pl.col("rank").shift(1) == pl.col("rank")) & jump
    return (
        ids.lazy()
        .with_columns(run=new.cum_sum())
        .group_by("rank", "run")
        .agg(first=pl.col("correlation").min(), last=pl.col("correlation").max(), ids=pl.len())
        .drop("run")
        .collect()
    )


def runs_calls(runs: pl.DataFrame) -> pl.DataFrame:
    """The calls (pairs of consecutive ids) and jumps of each rank whose calls are in ``runs``
    (:func:`call_runs` of any parts of them, in any order): a jump starts each run whose first
    id lies :data:`SAMPLED_JUMP` or more past the last of every run that starts before it (an
    id between them would be in one of those), and the calls are one fewer than the ids."""
    reach = pl.col("last").cum_max().shift(1).over("rank")  # the last id of the runs before
    return (
        runs.sort("rank", "first")
        .with_columns(jump=pl.col("first") >= reach + SAMPLED_JUMP)
        .group_by("rank")
        .agg(calls=pl.col("ids").sum() - 1, jumps=pl.col("jump").sum())
    )


def run_warning(w: InputWarning) -> RunWarning:
    """A reader's warning about the input as the analysis reports it."""
    e = w.example
    return RunWarning(
        kind=RunWarningKind(w.kind),
        path=w.path,
        rank=w.rank,
        world_size=w.world_size,
        count=w.count,
        key=w.key,
        value=w.value,
        reasons={DropReason(r): n for r, n in w.reasons},
        example=None
        if e is None
        else DroppedEvent(name=e.name, reason=DropReason(e.reason), unit=e.unit, start=e.start, duration=e.duration),
        ranges=list(w.ranges),
        more=w.more,
    )


def trace_format(clock: str) -> TraceFormat | None:
    """The profiler a rank's trace came from, as its reader names it first in the clock it
    reports (``kineto: host clock, us -> ns``, ``nsys: ns from session start ...``); None for
    another (a memory timeline)."""
    name = clock.split(":", 1)[0] if ":" in clock else ""
    return TraceFormat(name) if name in TraceFormat.__members__.values() else None


def facts_reduce(red: Reduced) -> RunFacts:
    """What the run is."""
    run = red.run_meta
    counts = {row["rank"]: row for row in red.gather(FactParts).span.iter_rows(named=True)}
    warnings = [run_warning(w) for w in run.warnings]
    unread = any(w.kind is RunWarningKind.DEVICE_EVENTS_UNREAD for w in warnings)
    if not red.has_gpu and not unread:  # device events not read are no CPU-only run
        warnings.append(RunWarning(kind=RunWarningKind.CPU_ONLY))
    return RunFacts(
        ranks=[
            RankFacts(
                rank=i.rank,
                source=i.source,
                rank_source=RankFound(
                    kind=RankSource(i.rank_source.kind),
                    key=i.rank_source.key,
                    processes=i.rank_source.processes,
                    pid=i.rank_source.pid,
                ),
                world_size=i.world_size,
                backend=i.backend,
                devices=list(i.devices),
                events=int(counts.get(i.rank, {}).get("events") or 0),
                gpu_events=int(counts.get(i.rank, {}).get("gpu_events") or 0),
                format=trace_format(i.clock),
            )
            for i in run.ranks
        ],
        world_size=run.world_size,
        backend=run.backend,
        devices=run.devices,
        has_gpu=red.has_gpu,
        span_ns=red.result(SPAN),
        skipped=[SkippedFile(path=s.path, reason=s.reason) for s in run.skipped],
        warnings=warnings,
        parallelism=parallelism_of(red),
    )
