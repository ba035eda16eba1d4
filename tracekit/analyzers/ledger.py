"""The ledger: every nanosecond of each rank's measured window under exactly one entry.

The verdict, the time breakdown and the idle causes are all read from here, so one report
cannot say "57% of the step is GPU idle waiting for data" in one table and "compute-bound" in
its verdict.

**Per rank, in the map.** The device timeline is already cut into elementary segments, each
flagged compute / collective / memory / transfer (:mod:`tracekit.analyzers.timeline`); every
idle segment lies in exactly one idle gap, whose cause :mod:`tracekit.analyzers.idle` decided.
A segment's entry is, by priority: ``compute``; ``comms`` (a collective, not under compute);
``transfer`` (a host<->device or peer copy under neither); ``memory`` (another copy or a set);
else its gap's cause, as :data:`IDLE_ENTRY` maps it (a gap where the device waited for a peer
or a blocking host collective is ``comms``). On a CPU-only run the host is the device:
``comms`` (collectives and the training thread waiting on them), then ``data`` (a batch being
fetched), then ``compute`` (operators), else ``other``.

A rank alone in its world (its trace records a world size of 1) has no ``comms`` on the host:
a collective there exchanges with no peer and waits for none (``c10d::allreduce_`` of DDP on
one process copies at most), so it cannot be what bounds the run. Its host collectives are
its own operators, ``compute``; the training thread's stretches without an operator are not
waits on them but ``other``; a blocking host collective (gloo, a barrier) under GPU idle is
the host's own work, not ``comms`` (:func:`~tracekit.analyzers.timeline.host_activity`,
:func:`~tracekit.analyzers.host_causes.process_ranges`). Each segment also carries the phase
the training thread was in (the outermost annotation holding it: the segments are cut at every
phase boundary), so that the straggler's own slow phase can be found below.

**Across ranks, in the reduce: stragglers.** Of a rank's ``comms`` time, the part inside its
waits for a named straggler (from its arrival at a collective for as long as the straggler's
lateness explains: :mod:`tracekit.analyzers.stragglers`) becomes ``straggler``. On the
straggler itself, its extra time in the phase that makes it late (the cause's excess over
the other ranks, per step, at most what that phase holds) becomes ``straggler`` too, taken
from the entries of that phase in proportion: removing the straggler's excess gives both
back, the others' wait and its own extra work.

**The run.** The ranks that set the pace are those whose mean measured step is within
:data:`PACE_SHARE` of the longest (in a synchronous job, every rank); the run's ledger is the
mean of their shares, per entry, and per step for the verdict's step-to-step variation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, cast

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers import timeline
from tracekit.analyzers.collectives import INSTANCE, OWN_ARRIVAL
from tracekit.analyzers.parts import LedgerParts
from tracekit.analyzers.stats import grouped
from tracekit.analyzers.windows import stacked
from tracekit.results.vocab import BoundKind, IdleCause, LedgerEntry, StragglerCause

if TYPE_CHECKING:
    from tracekit.analyzers.collectives import CollectiveResult
    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.stragglers import StragglerResult
    from tracekit.results.rows import Straggler

#: The entry of GPU idle time, by the cause of its gap.
IDLE_ENTRY: Final = {
    IdleCause.DATA.value: LedgerEntry.DATA,
    IdleCause.HOST_SYNC.value: LedgerEntry.HOST_SYNC,
    IdleCause.CAPTURE_SYNC.value: LedgerEntry.CAPTURE_SYNC,
    IdleCause.BLOCKING_COLLECTIVE.value: LedgerEntry.COMMS,
    IdleCause.PEER.value: LedgerEntry.COMMS,
    IdleCause.ONE_TIME.value: LedgerEntry.ONE_TIME,
    IdleCause.LAUNCH.value: LedgerEntry.LAUNCH,
    IdleCause.HOST_WORK.value: LedgerEntry.HOST_WORK,
    IdleCause.DEPENDENCY.value: LedgerEntry.DEPENDENCY,
    IdleCause.BACK_TO_BACK.value: LedgerEntry.SWITCH,
    IdleCause.DEVICE_GAP.value: LedgerEntry.SWITCH,
    IdleCause.UNOBSERVABLE.value: LedgerEntry.UNOBSERVABLE,
    IdleCause.UNEXPLAINED.value: LedgerEntry.UNEXPLAINED,
}

#: The bound each entry is evidence for; None: work where it belongs (compute is the bound a
#: run should have) or time that bounds nothing a user can change.
ENTRY_BOUND: Final[dict[LedgerEntry, BoundKind | None]] = {
    LedgerEntry.COMPUTE: BoundKind.GPU_COMPUTE,
    LedgerEntry.COMMS: BoundKind.COMMS,
    LedgerEntry.STRAGGLER: BoundKind.STRAGGLER,
    LedgerEntry.TRANSFER: BoundKind.TRANSFER,
    LedgerEntry.MEMORY: None,  # on-device copies and sets: device work like kernels
    LedgerEntry.DATA: BoundKind.DATA,
    LedgerEntry.HOST_SYNC: BoundKind.SYNC,
    LedgerEntry.CAPTURE_SYNC: None,  # tracekit capture's own step-end sync: the measurement's, not the training's
    LedgerEntry.LAUNCH: BoundKind.LAUNCH,
    LedgerEntry.HOST_WORK: BoundKind.HOST,
    LedgerEntry.ONE_TIME: None,  # warm-up: not the steady state (a note, and no verdict when it is most of the window)
    LedgerEntry.DEPENDENCY: BoundKind.DEPENDENCY,
    LedgerEntry.SWITCH: None,  # the device's own time between queued work (switches, its own gaps)
    LedgerEntry.UNOBSERVABLE: None,  # queued before the trace saw it: nothing to judge
    LedgerEntry.UNEXPLAINED: BoundKind.IDLE,
    LedgerEntry.OTHER: None,  # CPU-only: host time with no operator recorded
}

#: Ranks whose mean measured step is at least this share of the longest set the pace.
PACE_SHARE: Final = 0.95
#: Entries that are a rank waiting on others: never the straggler's own work.
_WAITING: Final = (LedgerEntry.COMMS.value, LedgerEntry.STRAGGLER.value)
_KEYS: Final = ["rank", "step"]


#: The entries as a polars enum: segments carry a one-byte code, grouped without strings.
ENTRY_DTYPE: Final = pl.Enum([e.value for e in LedgerEntry])


def _code(entry: LedgerEntry) -> pl.Expr:
    return pl.lit(entry.value, dtype=ENTRY_DTYPE)


def ledger_map(ctx: RankContext) -> LedgerParts:
    """The per-rank part: ``entries`` (rank, step, phase, entry, ns), and ``per_step``, them
    summed over the phases (a rank's alone: summed here, not over every rank's in the reduce, 9M
    rows at 1,024 ranks of a GB); ``comms`` (rank, start_ns, end_ns: the union of each rank's
    ``comms`` time, where a straggler's wait is carved from) and ``frames`` (the measured windows).
    The reduce reads ``entries`` and ``comms`` only to carve a named straggler's cost
    (:func:`reduce_ledger`)."""
    segs = _gpu_segments(ctx) if ctx.has_gpu else _host_segments(ctx)
    entries = _by_phase(segs, ctx.top_level).with_columns(pl.col("entry").cast(pl.String))
    comms = iv.union(
        segs.filter(pl.col("entry") == LedgerEntry.COMMS.value).select("rank", "start_ns", "end_ns"), ["rank"]
    )
    return LedgerParts(
        entries=entries,
        per_step=summed(entries),
        comms=comms,
        frames=ctx.frames.select("rank", "step", "start_ns", "end_ns"),
    )


def ledger_fold(parts: list[LedgerParts]) -> LedgerParts:
    """The rank's ledger from its windows': the time of each (rank, step, phase, entry) summed
    over them (a gap across a cut is the window's it starts in, whole, and its time in the next
    window's frames is counted there, in their steps: a step's rows may come from two windows),
    the phases summed again; the communication intervals merged again (one may touch a cut from
    either side); the frames stacked."""
    entries = stacked([p.entries for p in parts])
    if not entries.width:
        return LedgerParts()
    keys = ["rank", "step", "phase", "entry"]
    entries = entries.group_by(keys).agg(pl.col("ns").sum()).select(*keys, "ns")
    return LedgerParts(
        entries=entries,
        per_step=summed(entries),
        comms=iv.union(stacked([p.comms for p in parts]), ["rank"]),
        frames=stacked([p.frames for p in parts]),
    )


def _gpu_segments(ctx: RankContext) -> pl.DataFrame:
    """The device's segments (rank, step, start_ns, end_ns, length_ns) with their entry: work
    by its flags, idle by its gap's cause."""
    segs = ctx.segments
    causes = {k: v.value for k, v in IDLE_ENTRY.items()}
    gaps = ctx.idle_intervals.select(
        "rank",
        "start_ns",
        "end_ns",
        entry=pl.col("cause")
        .cast(pl.String)
        .replace_strict(causes, default=LedgerEntry.UNEXPLAINED.value, return_dtype=pl.String)
        .cast(ENTRY_DTYPE),
    )
    idle = ~pl.col("compute") & ~pl.col("collective") & ~pl.col("memory")
    columns = ("rank", "step", "start_ns", "end_ns", "length_ns")
    entry = (
        pl.when(pl.col("compute"))
        .then(_code(LedgerEntry.COMPUTE))
        .when(pl.col("collective"))
        .then(_code(LedgerEntry.COMMS))
        .when(pl.col("transfer"))
        .then(_code(LedgerEntry.TRANSFER))
        .otherwise(_code(LedgerEntry.MEMORY))
    )
    busy = segs.filter(~idle).select(*columns, entry=entry)
    idle_segs = segs.filter(idle).select(columns)
    beyond = ctx.idle_beyond
    if beyond.height:  # a window's gap across its end: its time in the next window's frames
        idle_segs = pl.concat([idle_segs, beyond.filter(idle).select(columns)])
    waiting = iv.locate(idle_segs, "start_ns", gaps, by=["rank"], keep=["entry"], in_time_order=False)
    return pl.concat([busy, waiting.select(*columns, "entry")])


def _host_segments(ctx: RankContext) -> pl.DataFrame:
    """A CPU-only run's host timeline cut with the DataLoader fetches, with its entry."""
    device = ctx.device
    parts = {
        "compute": device.filter(pl.col("category") == "compute").select("rank", "start_ns", "end_ns"),
        "collective": device.filter(pl.col("category") == "collective").select("rank", "start_ns", "end_ns"),
        "fetch": ctx.fetch.select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns"),
    }
    frames = ctx.frames
    windows = {"window": frames.select("rank", "start_ns", "end_ns")}
    cut = iv.sweep({**parts, **timeline.boundaries(ctx.top_level), **windows}, ["rank"])
    located = iv.locate(cut.filter(pl.col("window")), "start_ns", frames, by=["rank"], keep=["step"])
    entry = (
        pl.when(pl.col("collective"))
        .then(_code(LedgerEntry.COMMS))
        .when(pl.col("fetch"))
        .then(_code(LedgerEntry.DATA))
        .when(pl.col("compute"))
        .then(_code(LedgerEntry.COMPUTE))
        .otherwise(_code(LedgerEntry.OTHER))
    )
    return located.select(
        "rank", "step", "start_ns", "end_ns", length_ns=pl.col("end_ns") - pl.col("start_ns"), entry=entry
    )


def _by_phase(segs: pl.DataFrame, top: pl.DataFrame) -> pl.DataFrame:
    """rank, step, phase, entry, ns: the segments' time by the outermost annotation of the
    training thread holding them, by its name (phase null outside every one). The segments never straddle
    a phase boundary: each one's phase is found by binary search (no join), and the time outside
    every phase is what no phase holds."""
    keys = ["rank", "step", "entry"]
    if top.height == 0 or segs.height == 0:
        totals = grouped(segs, keys, ns=pl.col("length_ns").sum())
        return totals.with_columns(phase=pl.lit(None, dtype=pl.String)).select("rank", "step", "phase", "entry", "ns")
    phases = iv.outermost(top.select("rank", "start_ns", "end_ns", "name"), ["rank"]).with_row_index("_phase")
    names = phases.select("_phase", phase=pl.col("name").cast(pl.String))
    # each segment's phase as one column beside its own (no copy of the segments: located, a 2 GB
    # rank's 1.4M were copied, +100 MB); the time outside every phase is that of null
    sums = grouped(
        segs.select(*keys, "length_ns").with_columns(
            iv.containing(segs, "start_ns", phases, by=["rank"]).alias("_phase")
        ),
        [*keys, "_phase"],
        ns=pl.col("length_ns").sum(),
    )
    # by the phases' names: two ranges of one name (a step's two forward passes) are one phase
    phased = (
        sums.filter(pl.col("_phase").is_not_null())
        .join(names, on="_phase")
        .group_by("rank", "step", "phase", "entry")
        .agg(pl.col("ns").sum())
    )
    outside = sums.filter(pl.col("_phase").is_null() & (pl.col("ns") > 0)).with_columns(
        phase=pl.lit(None, dtype=pl.String)
    )
    return pl.concat(
        [phased.select("rank", "step", "phase", "entry", "ns"), outside.select("rank", "step", "phase", "entry", "ns")]
    )


@dataclass(frozen=True)
class LedgerResult:
    """The ledger per (rank, step), per rank and for the run, in ns and shares."""

    #: rank, step, entry, ns (every entry with time)
    per_step: pl.DataFrame
    #: rank, entry, ns
    per_rank: pl.DataFrame
    #: rank, window_ns: each rank's measured time (the sum of its entries)
    windows: pl.DataFrame
    #: the ranks that set the pace
    pace_ranks: list[int]
    #: entry, share_pct (the mean over the pace ranks), max_rank_share_pct, worst_rank
    run: pl.DataFrame
    #: step, entry, share_pct: the pace ranks' mean share in each step (for the step-to-step variation)
    run_steps: pl.DataFrame

    def share(self, entry: LedgerEntry) -> float:
        """The run's share of ``entry``, percent (0 when it holds nothing)."""
        found = self.run.filter(pl.col("entry") == entry.value)["share_pct"]
        return float(found[0]) if found.len() else 0.0


def reduce_ledger(
    entries: pl.DataFrame,
    comms: pl.DataFrame,
    frames: pl.DataFrame,
    *,
    collectives: CollectiveResult,
    stragglers: StragglerResult,
    per_step: pl.DataFrame | None = None,
) -> LedgerResult:
    """The ledger of the run from the ranks' parts (see :func:`ledger_map`), with the
    stragglers' share carved out of communication and out of their own slow phase.

    ``per_step``: ``entries`` summed (:func:`summed`) where the ranks' parts did (else here);
    then ``comms`` is read only where a straggler is named (:func:`straggler_reads`), and
    ``entries`` only where a straggler's cause is a phase."""
    if entries.height == 0:
        entries = pl.DataFrame(
            schema={"rank": pl.Int32, "step": pl.Int64, "phase": pl.String, "entry": pl.String, "ns": pl.Int64}
        )
    named = [s.rank for s in stragglers.stragglers]
    waited = _straggler_waits(comms, frames, collectives, named)
    per_step = summed(entries) if per_step is None or per_step.width == 0 else per_step
    per_step = _carve(per_step, waited)
    per_step = _own_excess(per_step, entries, stragglers)
    per_step = in_ledger_order(per_step.filter(pl.col("ns") > 0))
    per_rank = per_step.group_by("rank", "entry").agg(pl.col("ns").sum()).sort("rank", "entry")
    windows = per_step.group_by("rank").agg(window_ns=pl.col("ns").sum()).sort("rank")
    steps = per_step.group_by(_KEYS).agg(window_ns=pl.col("ns").sum())
    pace = _pace_ranks(steps)
    shares = per_rank.join(windows, on="rank").with_columns(share_pct=100 * pl.col("ns") / pl.col("window_ns"))
    run = _run_shares(shares, pace)
    step_shares = (
        per_step.filter(pl.col("rank").is_in(pace))
        .join(steps, on=_KEYS, nulls_equal=True)
        .with_columns(share_pct=100 * pl.col("ns") / pl.col("window_ns"))
    )
    ranks_in_step = step_shares.group_by("step").agg(n=pl.col("rank").n_unique())
    run_steps = (
        step_shares.group_by("step", "entry")
        .agg(pl.col("share_pct").sum())
        .join(ranks_in_step, on="step", nulls_equal=True)
        .select("step", "entry", share_pct=pl.col("share_pct") / pl.col("n"))
        .sort("step", "entry", nulls_last=True)
    )
    return LedgerResult(
        per_step=per_step, per_rank=per_rank, windows=windows, pace_ranks=pace, run=run, run_steps=run_steps
    )


def in_ledger_order(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` (rank, step, entry, unique together) sorted by rank, step and entry, nulls last:
    on one integer that packs the three (the entries' codes in their sorted order), where it
    fits in 62 bits; a sort on the three columns encodes every row's (0.56 against 0.11 s for
    the 1.4M rows of 1,024 dense ranks). Rows already in that order are returned as they are."""
    packed = _Packed.of(df)
    if packed is None:
        return df.sort("rank", "step", "entry", nulls_last=True)
    key = packed.key(df)
    return df if key.is_sorted() else df.sort(key)


def summed(df: pl.DataFrame) -> pl.DataFrame:
    """rank, step, entry, ns: ``df``'s ns summed by rank, step and entry, in ledger order
    (:func:`in_ledger_order`): the rows sorted on the one integer that packs the three, each
    run of one key summed (a grouping on the three hashes the entry's text of every row:
    1.0 against 0.3 s of CPU for the 1.6M phase rows of 1,024 dense ranks)."""
    packed = _Packed.of(df)
    if packed is None:
        return in_ledger_order(df.group_by("rank", "step", "entry").agg(pl.col("ns").sum()))
    keyed = pl.DataFrame([packed.key(df).alias("_key"), df.get_column("ns")]).sort("_key")
    runs = keyed.group_by(pl.col("_key").rle_id().alias("_run"), maintain_order=True).agg(
        pl.col("_key").first(), pl.col("ns").sum()
    )
    return packed.unpacked(runs.get_column("_key"), df.schema).with_columns(runs.get_column("ns"))


@dataclass(frozen=True)
class _Packed:
    """rank, step and entry packed in one integer that sorts as the three (nulls last)."""

    names: pl.Series
    low: int
    first: int
    steps: int

    @classmethod
    def of(cls, df: pl.DataFrame) -> _Packed | None:
        """The packing of ``df``'s keys; None where a rank is null or the product does not fit."""
        if df.height == 0 or df.get_column("rank").null_count():
            return None
        ranks, stepped = df.get_column("rank"), df.get_column("step").drop_nulls()
        names = df.get_column("entry").unique().drop_nulls().sort().cast(pl.String)
        low, high = cast("int", ranks.min()), cast("int", ranks.max())
        first, last = cast("int", stepped.min() or 0), cast("int", stepped.max() or 0)
        steps = last - first + 2  # a slot past the last for nulls
        if (high - low + 1) * steps * (names.len() + 1) >= 1 << 62:
            return None
        return cls(names=names, low=low, first=first, steps=steps)

    @property
    def codes(self) -> int:
        return self.names.len() + 1  # a slot past the last for nulls

    def key(self, df: pl.DataFrame) -> pl.Series:
        entry, step = df.get_column("entry"), df.get_column("step").cast(pl.Int64)
        code = entry.cast(pl.String).cast(pl.Enum(self.names)).to_physical().cast(pl.Int64)
        ranks = df.get_column("rank").cast(pl.Int64)
        position = (step - self.first).fill_null(self.steps - 1)
        key: pl.Series = ((ranks - self.low) * self.steps + position) * self.codes + code.fill_null(self.names.len())
        return key

    def unpacked(self, key: pl.Series, schema: pl.Schema) -> pl.DataFrame:
        """rank, step and entry of each ``key``, of the types of ``schema``'s."""
        code, rest = key % self.codes, key // self.codes
        position, rank = rest % self.steps, rest // self.steps + self.low
        parts = pl.DataFrame([position.alias("p"), code.alias("c")]).select(
            step=pl.when(pl.col("p") != self.steps - 1).then(pl.col("p") + self.first),
            code=pl.when(pl.col("c") < self.names.len()).then("c"),
        )
        step, entry = parts.get_column("step"), self.names.gather(parts.get_column("code"))
        return pl.DataFrame(
            [
                rank.cast(schema["rank"]).alias("rank"),
                step.cast(schema["step"]).alias("step"),
                entry.cast(schema["entry"]).alias("entry"),
            ]
        )


def _pace_ranks(steps: pl.DataFrame) -> list[int]:
    """The ranks whose mean measured step is within :data:`PACE_SHARE` of the longest."""
    means = steps.group_by("rank").agg(pl.col("window_ns").mean())
    if means.height == 0:
        return []
    longest = float(means["window_ns"].max())  # type: ignore[arg-type]
    return sorted(int(r) for r in means.filter(pl.col("window_ns") >= PACE_SHARE * longest)["rank"])


def _run_shares(shares: pl.DataFrame, pace: list[int]) -> pl.DataFrame:
    """entry, share_pct (mean over the pace ranks; an entry a rank lacks counts 0 there),
    max_rank_share_pct, worst_rank; largest first."""
    n = max(1, len(pace))
    in_pace = shares.filter(pl.col("rank").is_in(pace))
    worst = (
        shares.sort(["share_pct", "rank"], descending=[True, False])
        .group_by("entry", maintain_order=True)
        .agg(max_rank_share_pct=pl.col("share_pct").first(), worst_rank=pl.col("rank").first())
    )
    return (
        in_pace.group_by("entry")
        .agg(share_pct=pl.col("share_pct").sum() / n)
        .join(worst, on="entry", how="left")
        .sort(["share_pct", "entry"], descending=[True, False])
    )


def _straggler_waits(
    comms: pl.DataFrame, frames: pl.DataFrame, collectives: CollectiveResult, named: list[int]
) -> pl.DataFrame:
    """rank, step, ns: the ``comms`` time of each rank inside its waits for a named straggler."""
    empty = pl.DataFrame(schema={"rank": pl.Int32, "step": pl.Int64, "ns": pl.Int64})
    if not named or comms.height == 0 or collectives.per_rank.height == 0:
        return empty
    inst = collectives.instances.filter(pl.col("matched") & pl.col("complete")).select(INSTANCE, "last_rank")
    calls = collectives.per_rank.join(inst, on=INSTANCE, how="inner").filter(
        pl.col("last_rank").is_in(named), pl.col("rank") != pl.col("last_rank"), pl.col("explained_wait_ns") > 0
    )
    # on the rank's own clock, as its comms are: ``arrival_ns`` is on the corrected clocks
    waits = calls.select(
        pl.col("rank").cast(pl.Int32),
        OWN_ARRIVAL.cast(pl.Int64).alias("start_ns"),
        (OWN_ARRIVAL + pl.col("explained_wait_ns")).cast(pl.Int64).alias("end_ns"),
    )
    if waits.height == 0:
        return empty
    both = iv.intersect(
        iv.union(waits, ["rank"]), comms.select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns"), ["rank"]
    )
    located = iv.locate(
        both, "start_ns", frames.with_columns(pl.col("rank").cast(pl.Int32)), by=["rank"], keep=["step"]
    )
    return located.group_by(_KEYS).agg(ns=(pl.col("end_ns") - pl.col("start_ns")).sum())


def _carve(per_step: pl.DataFrame, waited: pl.DataFrame) -> pl.DataFrame:
    """``comms`` time inside a straggler wait moved to ``straggler`` (never more than there is)."""
    if waited.height == 0:
        return per_step
    comms = per_step.filter(pl.col("entry") == LedgerEntry.COMMS.value).select(*_KEYS, comms="ns")
    moved = (
        waited.with_columns(pl.col("rank").cast(per_step.schema["rank"]))
        .join(comms, on=_KEYS, how="inner", nulls_equal=True)
        .select(*_KEYS, moved=pl.min_horizontal("ns", "comms"))
    )
    return _take(per_step, moved.select(*_KEYS, entry=pl.lit(LedgerEntry.COMMS.value), take="moved"))


def straggler_reads(stragglers: StragglerResult) -> tuple[bool, bool]:
    """Whether :func:`reduce_ledger` reads ``comms`` (a straggler is named: its waits are carved
    from the others' communication) and ``entries`` (a named straggler's cause is a phase: its
    excess there is carved from that phase's entries)."""
    named = stragglers.stragglers
    return bool(named), any(_own_cost(s) for s in named)


def _own_cost(s: Straggler) -> bool:
    """Whether the named straggler ``s``'s excess in its own slow phase is carved (:func:`_own_excess`)."""
    return s.cause is StragglerCause.PHASE and s.phase is not None and s.cause_excess_ns > 0


def _own_excess(per_step: pl.DataFrame, entries: pl.DataFrame, stragglers: StragglerResult) -> pl.DataFrame:
    """On each named straggler whose cause is a phase, its excess in that phase per step moved
    to ``straggler`` from that phase's entries (but waiting), in proportion."""
    out = per_step
    for s in stragglers.stragglers:
        if not _own_cost(s):
            continue
        own = (
            entries.filter(pl.col("rank") == s.rank, pl.col("phase") == s.phase, ~pl.col("entry").is_in(_WAITING))
            .group_by([*_KEYS, "entry"])
            .agg(pl.col("ns").sum())
        )
        held = own.group_by(_KEYS).agg(held=pl.col("ns").sum())
        moved = held.select(*_KEYS, moved=pl.min_horizontal(pl.col("held"), pl.lit(int(s.cause_excess_ns))))
        share = own.join(held, on=_KEYS, nulls_equal=True).join(moved, on=_KEYS, nulls_equal=True)
        taken = share.select(
            *_KEYS, "entry", take=(pl.col("ns") * pl.col("moved") / pl.col("held")).round().cast(pl.Int64)
        )
        out = _take(out, taken)
    return out


def _take(per_step: pl.DataFrame, taken: pl.DataFrame) -> pl.DataFrame:
    """``taken`` (rank, step, entry, take) subtracted from its entries and added to ``straggler``."""
    if taken.height == 0:
        return per_step
    taken = taken.with_columns(pl.col("rank").cast(per_step.schema["rank"]), pl.col("take").cast(pl.Int64))
    less = (
        per_step.join(taken, on=[*_KEYS, "entry"], how="left", nulls_equal=True)
        .with_columns(ns=pl.col("ns") - pl.col("take").fill_null(0))
        .drop("take")
    )
    gained = taken.group_by(_KEYS).agg(ns=pl.col("take").sum()).with_columns(entry=pl.lit(LedgerEntry.STRAGGLER.value))
    combined = pl.concat([less, gained.select(*_KEYS, "entry", "ns")], how="vertical_relaxed")
    return combined.group_by([*_KEYS, "entry"]).agg(pl.col("ns").sum())
