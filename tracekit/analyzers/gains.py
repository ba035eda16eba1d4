"""What a fix is worth: each waste's share of the ledger, and its gain re-timed.

* **Share**: the waste's share of the ledger on the ranks that set the pace
  (:mod:`tracekit.analyzers.ledger`): what the time is.
* **Gain**: the ranks re-timed along their dependencies with that waste removed
  (:mod:`tracekit.analyzers.retime`): the host's order, launch to kernel, stream order, blocking
  syncs and collectives across ranks: what removing it is worth.

Neither bounds the other. A gain below the share is time the fix gives to other work (a host
that, once the DataLoader no longer holds it, is still slower than the GPU; ranks that still
wait at a collective for the next-latest one); a gain above it is other waste the fix removes
too (freed from dispatching, the host fetches the next batch while queued work runs). Why the
two differ is read off the re-timing by :mod:`tracekit.analyzers.gain_why`.

Each waste has one what-if, the change its fix makes:

==================  ============================================================================
waste               what is removed
==================  ============================================================================
data                the DataLoader fetches and input preprocessing on the host (the batch is
                    ready when asked for)
sync                the blocking syncs' waits (a sync call returns after its own cost)
comms               each collective's own time after the last rank arrives (fully overlapped);
                    not modeled when ranks of the world are absent (their arrivals are unknown)
straggler           the straggler's excess in the phase that makes it late (or before its
                    step starts, when it starts late; with neither named, spread over its step)
launch              the host's dispatching: operators that launch, runtime calls, the Python
                    between them (what CUDA graphs' one launch for many saves); and each
                    kernel so launched starts a graph's gap after the last, not its launch
                    latency after its launch (:data:`~tracekit.analyzers.gains_scenarios.GRAPH_GAP_NS`)
host                the host's own CPU work: long operators that launch nothing, Python
                    that runs long without launching
transfer            host<->device copies on the device (pinned memory, ``non_blocking``)
compute             every waste above at once: what is left to gain outside compute
==================  ============================================================================

Idle with no named cause (a cross-stream dependency, one-time work, unexplained) has no
what-if: its gain is not estimated. What every estimate cannot see is listed with it
(:class:`~tracekit.results.worth.GainLimit`). Several wastes removed at once are one scenario
(:meth:`WhatIfs.gains`): the gains of fixes that overlap are never added.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

import msgspec
import numpy as np
import polars as pl

from tracekit.analyzers import gains_held, retime_parallel
from tracekit.analyzers import intervals as iv
from tracekit.analyzers.gains_held import RunFacts
from tracekit.analyzers.gains_memo import decode, encode, hex_of, new_digest, plans_digest, scenario_key
from tracekit.analyzers.gains_plan import TASK_KEYS, crossing, plans
from tracekit.analyzers.gains_scenarios import (
    COMPUTE,
    built,
    computed,
    everything,
    modeled_kinds,
    present,
    scenario_of,
    straggler_cut,
    straggler_scenario,
)
from tracekit.analyzers.host_causes import DISPATCH_GAP_NS
from tracekit.analyzers.host_time import host_time
from tracekit.analyzers.parts import Parts, table
from tracekit.analyzers.retime import Scenario, Shapes
from tracekit.analyzers.retime_parallel import place, simulate_each
from tracekit.analyzers.shared import COLLECTIVES, LEDGER
from tracekit.analyzers.timeline import COLLECTIVE_WAIT, TRANSFER_COPY, host_collective_waits
from tracekit.analyzers.windows import EARLIEST, stacked
from tracekit.results.vocab import BoundKind, IdleCause
from tracekit.results.worth import NOTE_BOUND, Gain, GainLimit

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.gains_held import Held, Kinds
    from tracekit.analyzers.gains_memo import Memo
    from tracekit.analyzers.gains_plan import GainRun
    from tracekit.analyzers.gains_scenarios import StragglerCut
    from tracekit.analyzers.ledger import LedgerResult
    from tracekit.analyzers.mapreduce import Reduced
    from tracekit.analyzers.retime_parallel import Placed, Spread
    from tracekit.results.analysis import Finding

K = TypeVar("K")


class GainParts(Parts):
    """One rank's events for re-timing, inside its measured window."""

    #: the device's work (launch_ns null: not launched by the host)
    tasks: pl.DataFrame = table("rank stream launch_ns start_ns end_ns transfer")
    #: where the host waits (syncs, waits on host collectives), and until when the work it waits
    #: for was launched (see :class:`~tracekit.analyzers.retime.RankPlan`)
    blocks: pl.DataFrame = table("rank start_ns end_ns until on_collectives kept")
    #: DataLoader fetches and input preprocessing
    fetch: pl.DataFrame = table("rank start_ns end_ns")
    #: the host dispatching work (the idle model's ``launch`` time)
    launches: pl.DataFrame = table("rank start_ns end_ns")
    #: the host's own CPU work (the idle model's ``host_work`` time)
    host_free: pl.DataFrame = table("rank start_ns end_ns")
    #: the training thread's phases
    phases: pl.DataFrame = table("rank name start_ns end_ns")
    #: the measured windows
    frames: pl.DataFrame = table("rank step start_ns end_ns")


def _inside(df: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """Rows of ``df`` that start inside their rank's measured span (``spans``: rank, _lo, _hi; a
    rank of none is left out), in their order, ``rank`` as Int32."""
    return df.lazy().with_columns(pl.col("rank").cast(pl.Int32)).filter(*_starts_inside(spans)).collect().rechunk()


def _starts_inside(spans: pl.DataFrame) -> list[pl.Expr]:
    """The conditions of a row (with ``rank``, ``start_ns``) that starts inside its rank's span:
    each row's bounds looked up by its rank, where a join on the rank copied every row first
    (the device tasks of a 2 GB rank: a million rows)."""
    rank = pl.col("rank").cast(pl.Int32)
    lo = rank.replace_strict(spans["rank"], spans["_lo"], default=None)
    hi = rank.replace_strict(spans["rank"], spans["_hi"], default=None)
    return [pl.col("start_ns") >= lo, pl.col("start_ns") <= hi]


class GainPieces(GainParts):
    """A window's gains (:mod:`tracekit.analyzers.windows`): the rows of the rank's tables that
    start in it, and apart, for :func:`gains_fold` alone, what the rank's fetch, host time and
    its gate are made of: the union of the fetches that start in the window, its input ranges,
    its launching threads' time by cause (cut at the window's ends and at the whole rank's
    pieces), where it is cut at its start, and the idle its gaps blame on the host."""

    #: the union of the DataLoader fetches that start in the window
    fetched: pl.DataFrame = table("rank start_ns end_ns")
    #: the process's input ranges that start in the window, inside the rank's measured span
    inputs: pl.DataFrame = table("rank start_ns end_ns")
    #: the launching threads' time by cause inside the window (:func:`_host_time`, every rank's)
    host: pl.DataFrame = table("rank cause start_ns end_ns")
    #: the window's start, where the host time is cut at it (and the whole rank's is not)
    seams: pl.DataFrame = table("rank at")
    #: the idle of the window's gaps the host's dispatching or own work caused
    held: pl.DataFrame = table("rank idle_ns")


def gains_map(ctx: RankContext) -> GainParts:
    """The per-rank part: the device tasks, host blocks and removable host time in the window.
    On a window (:mod:`tracekit.analyzers.windows`): the rows that start in it, with what
    :func:`gains_fold` makes the rank's fetch and host time of (:class:`GainPieces`)."""
    rank_frames = ctx.rank_frames.select(pl.col("rank").cast(pl.Int32), "step", "start_ns", "end_ns")
    if rank_frames.height == 0:
        return GainParts()
    frames = ctx.own(rank_frames)
    spans = rank_frames.group_by("rank").agg(_lo=pl.col("start_ns").min(), _hi=pl.col("end_ns").max())
    window = spans.select("rank", start_ns="_lo", end_ns="_hi")
    fetched = iv.union(ctx.own(ctx.fetch).select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns"), ["rank"])
    phases = _inside(ctx.own(ctx.top_level).select("rank", pl.col("name").cast(pl.String), "start_ns", "end_ns"), spans)
    if not ctx.has_gpu:
        waits = ctx.own(ctx.device.filter(pl.col("name").cast(pl.String) == COLLECTIVE_WAIT)).select(
            "rank", "start_ns", "end_ns", until="end_ns", on_collectives=pl.lit(True), kept=pl.lit(False)
        )
        if ctx.window is not None:
            return GainPieces(blocks=_inside(waits, spans), fetched=fetched, phases=phases, frames=frames)
        return GainParts(blocks=_inside(waits, spans), fetch=_inside(fetched, spans), phases=phases, frames=frames)
    act = ctx.activity
    # each distinct name tested once (every activity's name as text: 20 MB on a 125 MB rank)
    copies = (pl.col("kind") == "memcpy") & pl.col("name").is_in(ctx.run.names_matching(TRANSFER_COPY).implode())
    tasks = (
        act.lazy()
        .select(
            pl.col("rank").cast(pl.Int32),
            pl.col("stream").fill_null(-1),
            launch_ns=pl.when(pl.col("launch_pid").is_not_null()).then(pl.col("launch_ns")),
            start_ns="start_ns",
            end_ns="end_ns",
            transfer=copies,
        )
        .filter(*_starts_inside(spans), ctx.owned())
        .unique(TASK_KEYS, keep="first", maintain_order=True)  # one task a stream and span (the re-timing's identity)
        .collect()
        .rechunk()  # one piece a column, as the re-timing reads them (the query's filter leaves several)
    )
    # tracekit capture's own step-end sync is kept in every what-if: the fix is the training's
    syncs = ctx.own(ctx.syncs.calls).select(
        pl.col("rank").cast(pl.Int32),
        "start_ns",
        "end_ns",
        until="start_ns",
        on_collectives=pl.lit(False),
        kept="capture",
    )
    parts = [syncs]
    if ctx.run.select(["cpu_op", "annotation"], "rank", name=HOST_BACKEND).height:  # a GPU run on gloo/MPI
        waits = ctx.own(host_collective_waits(ctx.run)).select(
            pl.col("rank").cast(pl.Int32),
            "start_ns",
            "end_ns",
            until="end_ns",
            on_collectives=pl.lit(True),
            kept=pl.lit(False),
        )
        parts.append(waits)
    blocks = _inside(pl.concat(parts).sort("rank", "start_ns"), spans)
    data = ctx.host_ranges[IdleCause.DATA].select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns")
    inputs = _inside(ctx.own(data), spans)
    if ctx.window is not None:
        return GainPieces(
            tasks=tasks,
            blocks=blocks,
            phases=phases,
            frames=frames,
            fetched=fetched,
            inputs=inputs,
            host=_window_host_time(ctx, window),
            seams=_seams(ctx, rank_frames),
            held=_held(ctx.idle_intervals),
        )
    fetch = _inside(fetched, spans)
    host = _host_time(ctx, window)
    return _with_host(host, fetch, inputs, tasks=tasks, blocks=blocks, phases=phases, frames=frames)


def _with_host(
    host: pl.DataFrame,
    fetch: pl.DataFrame,
    inputs: pl.DataFrame,
    *,
    tasks: pl.DataFrame,
    blocks: pl.DataFrame,
    phases: pl.DataFrame,
    frames: pl.DataFrame,
) -> GainParts:
    """The rank's part on a GPU, its host time by cause (:func:`_host_time`) given."""

    def cause(c: IdleCause) -> pl.DataFrame:
        return host.filter(pl.col("cause") == c.value).select("rank", "start_ns", "end_ns")

    data = iv.union(pl.concat([fetch, inputs], how="vertical_relaxed"), ["rank"])
    launches, host_free = cause(IdleCause.LAUNCH), cause(IdleCause.HOST_WORK)
    return GainParts(
        tasks=tasks, blocks=blocks, fetch=data, launches=launches, host_free=host_free, phases=phases, frames=frames
    )


def gains_fold(parts: list[GainParts]) -> GainParts:
    """The rank's part from its windows' (:class:`GainPieces`): their rows stacked (each table in
    the rank's order: the windows' in time order), the fetches' unions joined again, the host
    time cut at the windows' starts joined again, on a rank whose host left the GPU idle
    (:data:`HOST_IDLE_SHARE` of its window: the windows' gaps' idle added)."""
    pieces = [p for p in parts if isinstance(p, GainPieces)]
    frames = stacked([p.frames for p in pieces])
    if not frames.width:
        return GainParts()
    spans = frames.group_by("rank").agg(_lo=pl.col("start_ns").min(), _hi=pl.col("end_ns").max())
    window = spans.select("rank", start_ns="_lo", end_ns="_hi")
    fetch = _inside(iv.union(stacked([p.fetched for p in pieces]), ["rank"]), spans)
    blocks, phases = (stacked([getattr(p, name) for p in pieces]) for name in ("blocks", "phases"))
    inputs = stacked([p.inputs for p in pieces])
    if not inputs.width:  # not a GPU's
        return GainParts(blocks=blocks, fetch=fetch, phases=phases, frames=frames)
    held = stacked([p.held for p in pieces])
    ranks = _idle_ranks(held.group_by("rank").agg(pl.col("idle_ns").sum()), window)
    host = _joined(stacked([p.host for p in pieces]), stacked([p.seams for p in pieces]))
    host = host.filter(pl.col("rank").is_in(ranks.implode()))
    tasks = stacked([p.tasks for p in pieces])
    return _with_host(host, fetch, inputs, tasks=tasks, blocks=blocks, phases=phases, frames=frames)


def _joined(host: pl.DataFrame, seams: pl.DataFrame) -> pl.DataFrame:
    """``host`` (rank, cause, start_ns, end_ns) with the intervals of a cause that touch at one
    of the ``seams`` (rank, at) joined, in the order of rank and start."""
    if not seams.height or not host.height:
        return host
    same = (pl.col("rank") == pl.col("rank").shift(1)) & (pl.col("cause") == pl.col("cause").shift(1))
    touch = same & (pl.col("start_ns") == pl.col("end_ns").shift(1)) & pl.col("start_ns").is_in(seams["at"].implode())
    return (
        host.sort("rank", "cause", "start_ns")
        .with_columns(_island=(~touch.fill_null(False)).cum_sum())
        .group_by("_island", maintain_order=True)
        .agg(pl.col("rank").first(), pl.col("cause").first(), pl.col("start_ns").first(), pl.col("end_ns").last())
        .select(host.columns)
        .sort("rank", "start_ns")
    )


def _seams(ctx: RankContext, rank_frames: pl.DataFrame) -> pl.DataFrame:
    """Where the window's host time is cut and the whole rank's is not: its start (none for the
    first window, nor at a cut of the rank's pieces)."""
    w = ctx.window
    ranks = rank_frames.get_column("rank").unique()
    if w is None or w.lo == EARLIEST or w.lo in ctx.host_cuts:
        return pl.DataFrame({"rank": ranks.clear(), "at": pl.Series([], dtype=pl.Int64)})
    return pl.DataFrame({"rank": ranks, "at": pl.Series([w.lo] * ranks.len(), dtype=pl.Int64)})


def _held(intervals: pl.DataFrame) -> pl.DataFrame:
    """rank, idle_ns: the idle of the gaps (the idle model's ``intervals``) the host's
    dispatching or own work caused."""
    causes = [IdleCause.LAUNCH.value, IdleCause.HOST_WORK.value]
    idle = intervals.filter(pl.col("cause").cast(pl.String).is_in(causes))
    return idle.group_by(pl.col("rank").cast(pl.Int32)).agg(idle_ns=pl.col("length_ns").sum())


def _idle_ranks(held: pl.DataFrame, window: pl.DataFrame) -> pl.Series:
    """The ranks whose host left the GPU idle (``held``: rank, idle_ns) at least
    :data:`HOST_IDLE_SHARE` of their ``window``."""
    lengths = window.select("rank", length=pl.col("end_ns") - pl.col("start_ns"))
    return held.join(lengths, on="rank").filter(pl.col("idle_ns") >= HOST_IDLE_SHARE * pl.col("length"))["rank"]


#: Host collectives that block the training thread (CPU backends' own operations).
HOST_BACKEND: Final = r"^(?:gloo|mpi|ucc):"
#: The host's time is classified only on ranks where it left the GPU idle at least this share
#: of the window dispatching or in its own CPU work: elsewhere the GPU did not wait on either,
#: and removing them gives nothing a re-timing would show. (Data needs no classification: the
#: fetches and input ranges are the process's, :func:`host_causes.process_ranges`.)
HOST_IDLE_SHARE: Final = 0.01


def _host_time(ctx: RankContext, window: pl.DataFrame) -> pl.DataFrame:
    """The launching threads' time by cause (:func:`host_time.host_time`), on the ranks where
    the host left the GPU idle (:data:`HOST_IDLE_SHARE`); none elsewhere."""
    causes = [IdleCause.LAUNCH.value, IdleCause.HOST_WORK.value]
    idle = ctx.idle.per_rank.filter(pl.col("cause").cast(pl.String).is_in(causes))
    held = idle.group_by(pl.col("rank").cast(pl.Int32)).agg(pl.col("idle_ns").sum())
    ranks = _idle_ranks(held, window)
    if ranks.len() == 0:
        return pl.DataFrame(schema={"rank": pl.Int32, "cause": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64})
    return host_time(
        ctx.run,
        window.filter(pl.col("rank").is_in(ranks.implode())),
        fetch=ctx.fetch,
        syncs=ctx.syncs.calls,
        calls=ctx.calls,
        frames=ctx.frames,
        process=ctx.host_ranges,
        launches=ctx.launch_calls,
    )


def _window_host_time(ctx: RankContext, window: pl.DataFrame) -> pl.DataFrame:
    """The launching threads' time by cause inside a window of the rank (every rank's: the fold
    tells which the gains keep), as the rank's measured ``window`` classifies it: read from the
    window widened by :data:`~tracekit.analyzers.host_causes.DISPATCH_GAP_NS` (every pause that
    reaches into it), cut where the rank's own is (:attr:`RankContext.host_cuts
    <tracekit.analyzers.context.RankContext.host_cuts>`) and at the window's ends."""
    w = ctx.window
    assert w is not None
    wide = ctx.widened(DISPATCH_GAP_NS)
    return host_time(
        wide.run,
        window,
        fetch=ctx.fetch,
        syncs=ctx.syncs.calls,
        calls=wide.calls,
        frames=ctx.frames,
        process=wide.host_ranges,
        launches=wide.launch_calls,
        bounds=ctx.host_cuts,
        within=(w.lo, w.hi),
    )


# -- the reduce --------------------------------------------------------------------------------


def _limits(bound: BoundKind, run: RunFacts, modeled: bool, *, cores_shared: bool = False) -> list[GainLimit]:
    if not modeled:
        return [GainLimit.NOT_MODELED]
    out = []
    if run.has_gpu:
        out.append(GainLimit.EVENT_WAITS_KEPT)
    if run.matched:
        out.append(GainLimit.ONE_CLOCK)
    if run.ranks > 1 and not run.matched:
        out.append(GainLimit.UNMATCHED_COLLECTIVES)
    if not run.has_gpu:
        out.append(GainLimit.CORES_SHARED if cores_shared else GainLimit.CPU_SHARED)
    extra: dict[BoundKind, GainLimit] = {
        BoundKind.SYNC: GainLimit.VALUE_NOT_NEEDED,
        BoundKind.COMMS: GainLimit.FULLY_OVERLAPPED,
        BoundKind.STRAGGLER: GainLimit.EXCESS_SPREAD,
        BoundKind.HOST: GainLimit.HOST_THREADS_AS_ONE,
        BoundKind.LAUNCH: GainLimit.HOST_THREADS_AS_ONE,
    }
    if bound in extra:
        out.append(extra[bound])
    return out


def _partial(red: Reduced) -> bool:
    """Whether ranks of the world are absent: a collective's wait for them cannot be re-timed."""
    c = red.result(COLLECTIVES)
    return c.world_size is not None and c.world_size > 1 and c.ranks_present < c.world_size


#: What the memo's keys of several wastes at once begin with (:meth:`WhatIfs._key`).
_SETS_KEY: Final = b"wastes at once 1"
#: ... and of a compute waste, every other at once (:meth:`WhatIfs._kind_key`).
_COMPUTED_KEY: Final = b"compute of 1"


@dataclass
class WhatIfs:
    """The run's what-ifs: one scenario per waste it can model, re-timed on demand, alone or
    several at once; a gain is the mean over the pace ranks of how much earlier each rank's
    measured time ends, as a share of its window."""

    run: GainRun | None
    scenarios: dict[BoundKind, Scenario]
    #: rank, window_ns: the pace ranks' measured windows
    windows: pl.DataFrame
    #: the mean measured step of the pace ranks
    step_ns: float
    jobs: int = 1
    spread: Spread | None = None
    #: where gains re-timed before are kept (:mod:`tracekit.analyzers.gains_memo`)
    memo: Memo | None = None
    #: the what-ifs held on the spread's workers, each group of ranks' plans and scenarios
    #: built there (:mod:`tracekit.analyzers.gains_held`): then ``run`` is None and
    #: ``scenarios`` empty here
    held: Held | None = None
    #: the compute wastes modelled whose scenario (every other waste's at once) ``scenarios``
    #: leaves out: merged only to be re-timed (:meth:`_scenario`), keyed by the others' keys
    computed: frozenset[BoundKind] = frozenset()
    #: each waste's memo key, once (:meth:`_kind_key`)
    _kind_keys: dict[BoundKind, str] = field(default_factory=dict, init=False, repr=False)

    @property
    def kinds(self) -> frozenset[BoundKind]:
        """The wastes with a what-if."""
        return self.held.kinds if self.held is not None else frozenset(self.scenarios) | self.computed

    @property
    def facts(self) -> RunFacts | None:
        """What the gains' limits read of the run's plans (None: no rank has one)."""
        if self.held is not None:
            return self.held.facts
        return RunFacts.of(self.run) if self.run is not None else None

    @functools.cached_property
    def _plans_digest(self) -> str:
        """The digest of the run's plans, once for every :meth:`gains` (the memo's keys)."""
        return plans_digest(self.run.plans if self.run is not None else [])

    @functools.cached_property
    def _placement(self) -> Callable[[], Placed | None] | None:
        """The run's ranks held on the spread's workers, placed when first asked for and kept
        for every :meth:`gains` (the verdict's gains, then their explanation, each sent every
        rank's events to the workers again: about half of the client's share of re-timing apart)."""
        if self.spread is None or self.run is None:
            return None
        return functools.cache(functools.partial(place, self.run.plans, self.spread))

    @functools.cached_property
    def _shapes(self) -> Shapes:
        """The ranks' shapes in this process, once for every :meth:`gains`."""
        return Shapes()

    def _simulate(self, run: GainRun, scenarios: dict[K, Scenario]) -> dict[K, dict[int, float]]:
        """Each scenario's gains per rank, re-timed."""
        return simulate_each(
            run.plans, scenarios, jobs=self.jobs, spread=self.spread, placement=self._placement, shapes=self._shapes
        )

    def _simulated(self, run: GainRun, sets: dict[K, tuple[BoundKind, ...]]) -> dict[K, dict[int, float]]:
        """Each set of wastes' gains per rank: kept by the memo, else re-timed (and kept). A set
        of several is keyed by its wastes' own keys (:meth:`_key`): its scenario, their merge,
        is made only to be re-timed (a warm run at 1,024 dense ranks merged its explanations'
        pairs for their keys alone: 2.1 s)."""
        if self.memo is None:
            return self._simulate(run, {k: self._scenario(v) for k, v in sets.items()})
        keys = {k: self._key(v) for k, v in sets.items()}
        out: dict[K, dict[int, float]] = {}
        for k, key in keys.items():
            data = self.memo.get(key)
            kept = None if data is None else decode(data)
            if kept is not None:
                out[k] = kept
        todo = {k: self._scenario(v) for k, v in sets.items() if k not in out}
        if todo:
            fresh = self._simulate(run, todo)
            for k, gained in fresh.items():
                self.memo.put(keys[k], encode(gained))
            out.update(fresh)
        return {k: out[k] for k in sets}

    def _key(self, wastes: tuple[BoundKind, ...]) -> str:
        """The memo's key of ``wastes`` removed at once: a waste's, its scenario's
        (:func:`~tracekit.analyzers.gains_memo.scenario_key`); several's, their keys' digest (their
        merge is a function of their scenarios)."""
        if len(wastes) == 1:
            return self._kind_key(wastes[0])
        digest = new_digest(_SETS_KEY)
        for kind in wastes:
            digest.update(self._kind_key(kind).encode())
        return hex_of(digest)

    def _kind_key(self, kind: BoundKind) -> str:
        """:func:`~tracekit.analyzers.gains_memo.scenario_key` of ``kind``'s scenario, once; of a
        compute waste left to merge, its parts' keys' digest."""
        if kind not in self._kind_keys:
            if kind in self.computed:
                digest = new_digest(_COMPUTED_KEY)
                for part in self.scenarios:
                    if part not in COMPUTE:
                        digest.update(self._kind_key(part).encode())
                self._kind_keys[kind] = hex_of(digest)
            else:
                self._kind_keys[kind] = scenario_key(self._plans_digest, self.scenarios[kind])
        return self._kind_keys[kind]

    def _scenario(self, wastes: tuple[BoundKind, ...]) -> Scenario:
        """The scenario of ``wastes`` removed at once (compute's merged here, once)."""
        parts = [self._computed if w in self.computed else self.scenarios[w] for w in wastes]
        return parts[0] if len(parts) == 1 else everything(parts)

    @functools.cached_property
    def _computed(self) -> Scenario:
        return computed(self.scenarios)

    def gains(self, sets: dict[K, tuple[BoundKind, ...]]) -> dict[K, float]:
        """Each set of wastes removed at once, re-timed: its gain, percent of the step. A set
        with a waste that has no scenario is left out of the answer."""
        wanted = {k: v for k, v in sets.items() if v and all(b in self.kinds for b in v)}
        if not wanted:
            return {}
        if self.held is not None:
            simulated = self.held.gains(wanted, self.memo)
        elif self.run is not None:
            simulated = self._simulated(self.run, wanted)
        else:
            return {}
        out = {}
        for key, gained in simulated.items():
            shares = [
                100 * gained.get(int(rank), 0.0) / float(window)
                for rank, window in self.windows.select("rank", "window_ns").iter_rows()
                if window
            ]
            if shares:
                out[key] = round(max(0.0, float(np.mean(shares))), 4)
        return out


def what_ifs(red: Reduced) -> WhatIfs | None:
    """The run's what-ifs (None when the ledger has no measured window on a pace rank)."""
    ledger: LedgerResult = red.result(LEDGER)
    steps = ledger.per_step.group_by("rank").agg(steps=pl.col("step").n_unique())
    windows = ledger.windows.join(steps, on="rank").filter(pl.col("rank").is_in(ledger.pace_ranks))
    if windows.height == 0:
        return None
    step_ns = float((windows["window_ns"] / windows["steps"]).mean())  # type: ignore[arg-type]
    parts = red.gather(GainParts)
    kept = red.kept(GainParts)
    o = red.options
    cut = straggler_cut(red)
    partial = _partial(red)
    # where the workers kept the tables they mapped, sending them here would cost more than the
    # what-ifs' work there: the work then counts as enough
    ranks, work = _work(red, parts, cut)
    if o.spread is not None and gains_held.worth_holding(
        o.spread, o.jobs, ranks, max(work, retime_parallel.MIN_WORK if kept else 0)
    ):
        cross = crossing(red, parts.frames)
        held = None
        if cross is not None:
            here = functools.partial(_here, red, parts, cut, jobs=o.jobs)
            held = gains_held.hold(parts, kept, cross, cut, o.spread, partial=partial, here=here)
        if held is not None:
            return WhatIfs(None, {}, windows, step_ns, jobs=o.jobs, memo=o.memo, held=held)
    parts = red.completed(parts, gains_held.KEPT_TABLES)
    run = plans(red, parts)
    scenarios: dict[BoundKind, Scenario] = {}
    compute: frozenset[BoundKind] = frozenset()
    if run is not None:
        straggler = straggler_scenario(cut, run, parts)
        kinds = modeled_kinds(present(run, parts, straggler), has_gpu=run.has_gpu, partial=partial)
        scenarios = built(kinds, run, parts, straggler, merged=False)
        compute = kinds & COMPUTE
    return WhatIfs(run, scenarios, windows, step_ns, jobs=o.jobs, spread=o.spread, memo=o.memo, computed=compute)


def _work(red: Reduced, parts: GainParts, cut: StragglerCut | None) -> tuple[int, int]:
    """The ranks with a measured window, and about the work of the verdict's what-ifs: the
    tasks (device work, host collectives) times the what-ifs the tables give (without building
    a plan: a thousand ranks' plans are what holding them on the workers keeps off this process)."""
    ranks = parts.frames["rank"].n_unique() if parts.frames.height else 0
    coll = red.result(COLLECTIVES).per_rank
    host = coll.filter(pl.col("source") == "host").height if coll.height else 0
    tasks = parts.tasks.height + host
    gpu = red.has_gpu
    tables = [
        cut is not None,
        parts.fetch.height > 0,
        gpu and parts.blocks.height > 0,
        coll.height > 0,
        gpu and parts.launches.height > 0,
        gpu and parts.host_free.height > 0,
        gpu and parts.tasks.height > 0 and bool(parts.tasks["transfer"].any()),
    ]
    wastes = sum(tables)
    return ranks, tasks * (wastes + 1 if wastes else 0)


def _here(
    red: Reduced,
    gathered: GainParts,
    cut: StragglerCut | None,
    kinds: frozenset[BoundKind],
    *,
    jobs: int,
) -> Callable[[dict[K, Kinds]], dict[K, dict[int, float]]]:
    """What re-times here the sets of wastes the workers could not settle: the run's plans and
    scenarios built here (the tables the workers kept fetched), once, when first needed."""

    @functools.cache
    def whole() -> tuple[GainRun | None, dict[BoundKind, Scenario]]:
        parts = red.completed(gathered, gains_held.KEPT_TABLES)
        run = plans(red, parts)
        if run is None:
            return None, {}
        return run, built(kinds, run, parts, straggler_scenario(cut, run, parts))

    def retime(sets: dict[K, Kinds]) -> dict[K, dict[int, float]]:
        run, scenarios = whole()
        if run is None:
            return {k: {} for k in sets}
        chosen = {k: scenario_of(scenarios, v) for k, v in sets.items()}
        return simulate_each(run.plans, chosen, jobs=jobs)

    return retime


def gains(
    red: Reduced,
    costs: pl.DataFrame,
    *,
    retime_from: float = 0.0,
    also: frozenset[BoundKind] = frozenset(),
    model: WhatIfs | None = None,
) -> list[Gain]:
    """Every waste of ``costs`` (the verdict's cost table) with its share and gain; the compute
    row's gain is every waste removed at once. Largest share first, as the cost table.

    Re-timed: the wastes of at least ``retime_from`` percent (those that make findings), the
    bounds in ``also`` (those the notes name) and compute's row; a smaller waste gets its
    share only (:attr:`GainLimit.BELOW_FINDING`): a re-timing each costs the run's events
    once more, for a gain no report calls a finding. ``model``: the run's what-ifs, when
    already built (:func:`what_ifs`)."""
    model = model if model is not None else what_ifs(red)
    if model is None:
        return []
    waste_share = float(costs.filter(~pl.col("bound").is_in([b.value for b in COMPUTE]))["share_pct"].sum())
    rows = []
    for row in costs.iter_rows(named=True):
        bound = BoundKind(row["bound"])
        share = waste_share if bound in COMPUTE else float(row["share_pct"])
        if share <= 0 and bound not in COMPUTE:  # compute's row stays: nothing left to gain is an answer
            continue
        small = bound not in COMPUTE and share < retime_from and bound not in also
        rows.append((bound, share, small))
    gained = model.gains({b: (b,) for b, _, small in rows if not small})
    partial = _partial(red)
    out = []
    for bound, share, small in rows:
        is_modeled = bound in model.kinds
        if small and is_modeled:
            limits = [GainLimit.BELOW_FINDING]
        elif bound is BoundKind.COMMS and partial:
            limits = [GainLimit.PARTIAL_RANKS]
        elif (facts := model.facts) is None:
            limits = [GainLimit.NOT_MODELED]
        else:
            limits = _limits(bound, facts, is_modeled, cores_shared=red.options.cores_shared)
        out.append(
            Gain(
                bound=bound,
                step_ns=round(model.step_ns, 1),
                share_pct=round(share, 4),
                gain_pct=gained.get(bound),
                limits=limits,
            )
        )
    return out


def with_gain(finding: Finding, worth: list[Gain]) -> Finding:
    """``finding`` with the gain of its bound (a mixed finding: of its components at once is not
    modeled, so none), or of the waste its note names."""
    bound = finding.bound if finding.bound is not None else NOTE_BOUND.get(finding.note) if finding.note else None
    found = next((g for g in worth if g.bound is bound), None)
    return msgspec.structs.replace(finding, gain=found) if found is not None else finding
