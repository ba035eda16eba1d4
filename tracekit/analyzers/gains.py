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
                    between them (what CUDA graphs' one launch for many saves)
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

import msgspec
import numpy as np
import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.gains_memo import decode, encode, plans_digest, scenario_key
from tracekit.analyzers.gains_plan import TASK_KEYS, ByRank, GainRun, plans, rank_frame
from tracekit.analyzers.host_time import host_time
from tracekit.analyzers.parts import Parts, table
from tracekit.analyzers.retime import Removal, Scenario, Shapes
from tracekit.analyzers.retime_parallel import place, simulate_each
from tracekit.analyzers.retime_plan import merge, outside
from tracekit.analyzers.shared import COLLECTIVES, LEDGER, STRAGGLERS
from tracekit.analyzers.timeline import COLLECTIVE_WAIT, TRANSFER_COPY, host_collective_waits
from tracekit.results.vocab import BoundKind, IdleCause, StragglerCause
from tracekit.results.worth import NOTE_BOUND, Gain, GainLimit

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.gains_memo import Memo
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
    """Rows of ``df`` that start inside their rank's measured span."""
    return (
        df.with_columns(pl.col("rank").cast(pl.Int32))
        .join(spans, on="rank", how="inner")
        .filter(pl.col("start_ns") >= pl.col("_lo"), pl.col("start_ns") <= pl.col("_hi"))
        .drop("_lo", "_hi")
    )


def gains_map(ctx: RankContext) -> GainParts:
    """The per-rank part: the device tasks, host blocks and removable host time in the window."""
    frames = ctx.frames.select(pl.col("rank").cast(pl.Int32), "step", "start_ns", "end_ns")
    if frames.height == 0:
        return GainParts()
    spans = frames.group_by("rank").agg(_lo=pl.col("start_ns").min(), _hi=pl.col("end_ns").max())
    window = spans.select("rank", start_ns="_lo", end_ns="_hi")
    fetch = _inside(iv.union(ctx.fetch.select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns"), ["rank"]), spans)
    phases = _inside(ctx.top_level.select("rank", pl.col("name").cast(pl.String), "start_ns", "end_ns"), spans)
    if not ctx.has_gpu:
        waits = ctx.device.filter(pl.col("name").cast(pl.String) == COLLECTIVE_WAIT).select(
            "rank", "start_ns", "end_ns", until="end_ns", on_collectives=pl.lit(True), kept=pl.lit(False)
        )
        return GainParts(blocks=_inside(waits, spans), fetch=fetch, phases=phases, frames=frames)
    act = ctx.activity
    # each distinct name tested once (every activity's name as text: 20 MB on a 125 MB rank)
    copies = (pl.col("kind") == "memcpy") & pl.col("name").is_in(ctx.run.names_matching(TRANSFER_COPY).implode())
    tasks = _inside(
        act.select(
            "rank",
            pl.col("stream").fill_null(-1),
            launch_ns=pl.when(pl.col("launch_pid").is_not_null()).then(pl.col("launch_ns")),
            start_ns="start_ns",
            end_ns="end_ns",
            transfer=copies,
        ),
        spans,
    ).unique(TASK_KEYS, keep="first", maintain_order=True)  # one task a stream and span (the re-timing's identity)
    # tracekit capture's own step-end sync is kept in every what-if: the fix is the training's
    syncs = ctx.syncs.calls.select(
        pl.col("rank").cast(pl.Int32),
        "start_ns",
        "end_ns",
        until="start_ns",
        on_collectives=pl.lit(False),
        kept="capture",
    )
    parts = [syncs]
    if ctx.run.select(["cpu_op", "annotation"], "rank", name=HOST_BACKEND).height:  # a GPU run on gloo/MPI
        waits = host_collective_waits(ctx.run).select(
            pl.col("rank").cast(pl.Int32),
            "start_ns",
            "end_ns",
            until="end_ns",
            on_collectives=pl.lit(True),
            kept=pl.lit(False),
        )
        parts.append(waits)
    blocks = _inside(pl.concat(parts).sort("rank", "start_ns"), spans)
    host = _host_time(ctx, window)

    def cause(c: IdleCause) -> pl.DataFrame:
        return host.filter(pl.col("cause") == c.value).select("rank", "start_ns", "end_ns")

    inputs = ctx.host_ranges[IdleCause.DATA].select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns")
    data = iv.union(pl.concat([fetch, _inside(inputs, spans)], how="vertical_relaxed"), ["rank"])
    launches, host_free = cause(IdleCause.LAUNCH), cause(IdleCause.HOST_WORK)
    return GainParts(
        tasks=tasks, blocks=blocks, fetch=data, launches=launches, host_free=host_free, phases=phases, frames=frames
    )


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
    lengths = window.select("rank", length=pl.col("end_ns") - pl.col("start_ns"))
    ranks = held.join(lengths, on="rank").filter(pl.col("idle_ns") >= HOST_IDLE_SHARE * pl.col("length"))["rank"]
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
    )


# -- the reduce --------------------------------------------------------------------------------


def _removal(df: pl.DataFrame, origin: int, rate: float | np.ndarray = 1.0) -> Removal:
    start = df["start_ns"].cast(pl.Float64).to_numpy() - origin
    end = df["end_ns"].cast(pl.Float64).to_numpy() - origin
    return Removal(start=start, end=end, rate=np.broadcast_to(np.asarray(rate, dtype=float), start.shape).copy())


def _per_rank(df: pl.DataFrame, run: GainRun) -> dict[int, Removal]:
    if not df.height:
        return {}
    spans = ByRank(iv.union(df.select("rank", "start_ns", "end_ns"), ["rank"]))
    return {p.rank: _removal(spans[p.rank], run.origin) for p in run.plans}


def _straggler(red: Reduced, run: GainRun, parts: GainParts) -> Scenario | None:
    """The first named straggler's excess removed: from its slow phase, its late start, or its step."""
    if not red.result(STRAGGLERS).stragglers:
        return None
    s = red.result(STRAGGLERS).stragglers[0]
    excess = float(s.cause_excess_ns)
    if excess <= 0:
        return None
    frames = rank_frame(parts.frames, s.rank)
    if frames.height == 0:
        return None
    phases = rank_frame(parts.phases, s.rank)
    if s.cause in (StragglerCause.PHASE, StragglerCause.DATA_PHASE) and s.phase is not None:
        spans = phases.filter(pl.col("name") == s.phase)
    elif s.cause is StragglerCause.LATE_START:
        # it reaches each step late: whatever held it before the step, gone
        spans = frames.select("rank", start_ns=pl.col("start_ns") - int(excess), end_ns="start_ns")
    else:
        spans = frames.select("rank", "start_ns", "end_ns")
    if spans.height == 0:
        return None
    steps = max(1, frames.height)
    held = float((spans["end_ns"] - spans["start_ns"]).sum())
    rate = min(1.0, excess * steps / held) if held > 0 else 0.0
    if rate <= 0:
        return None
    removal = _removal(spans, run.origin, rate)
    durations = {}
    tasks = run.tasks.get(s.rank)
    if run.has_gpu and tasks is not None and tasks.height:
        launch = tasks["launch_ns"].fill_null(tasks["start_ns"]).cast(pl.Float64).to_numpy() - run.origin
        inside = np.zeros(launch.size, dtype=bool)
        for a, b in zip(removal.start, removal.end, strict=True):
            inside |= (launch >= a) & (launch < b)
        dur = (tasks["end_ns"] - tasks["start_ns"]).cast(pl.Float64).to_numpy()
        durations[s.rank] = np.where(inside, dur * (1 - rate), np.nan)
    return Scenario(removals={s.rank: removal}, durations=durations)


def _transfers(run: GainRun) -> dict[int, np.ndarray]:
    return {
        rank: np.where(t["transfer"].to_numpy(), 0.0, np.nan)
        for rank, t in run.tasks.items()
        if t.height and bool(t["transfer"].any())
    }


def _scenarios(red: Reduced, run: GainRun, parts: GainParts) -> dict[BoundKind, Scenario]:
    """One scenario per waste it can model."""
    out: dict[BoundKind, Scenario] = {}
    straggler = _straggler(red, run, parts)
    if straggler is not None:
        out[BoundKind.STRAGGLER] = straggler

    def per_rank(df: pl.DataFrame) -> dict[int, Removal]:
        # the straggler's excess is the straggler's (as the ledger carves it): not removed twice
        removals = _per_rank(df, run)
        if straggler is not None:
            removals = {r: outside(v, straggler.removals.get(r, Removal())) for r, v in removals.items()}
        return removals

    if parts.fetch.height:
        out[BoundKind.DATA] = Scenario(removals=per_rank(parts.fetch))
    if any(p.block_start.size for p in run.plans) and run.has_gpu:
        out[BoundKind.SYNC] = Scenario(no_wait_blocks=True)
    if any((p.instance >= 0).any() for p in run.plans):
        out[BoundKind.COMMS] = Scenario(hide_collectives=True)
    if run.has_gpu and parts.launches.height:
        out[BoundKind.LAUNCH] = Scenario(removals=per_rank(parts.launches))
    if run.has_gpu and parts.host_free.height:
        out[BoundKind.HOST] = Scenario(removals=per_rank(parts.host_free))
    if run.has_gpu and (transfers := _transfers(run)):
        out[BoundKind.TRANSFER] = Scenario(durations=transfers)
    if out:
        out[BoundKind.GPU_COMPUTE if run.has_gpu else BoundKind.COMPUTE] = _everything(list(out.values()))
    return out


def _everything(scenarios: list[Scenario]) -> Scenario:
    ranks = {r for s in scenarios for r in (*s.removals, *s.durations)}
    removals = {r: merge([s.removals[r] for s in scenarios if r in s.removals]) for r in ranks}
    durations: dict[int, np.ndarray] = {}
    for s in scenarios:
        for r, d in s.durations.items():
            durations[r] = d if r not in durations else np.fmin(durations[r], d)
    return Scenario(
        removals=removals,
        durations=durations,
        no_wait_blocks=any(s.no_wait_blocks for s in scenarios),
        hide_collectives=any(s.hide_collectives for s in scenarios),
    )


def _limits(bound: BoundKind, run: GainRun, modeled: bool, *, cores_shared: bool = False) -> list[GainLimit]:
    if not modeled:
        return [GainLimit.NOT_MODELED]
    out = []
    if run.has_gpu:
        out.append(GainLimit.EVENT_WAITS_KEPT)
    if run.matched:
        out.append(GainLimit.ONE_CLOCK)
    if len(run.plans) > 1 and not run.matched:
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


COMPUTE: Final = frozenset({BoundKind.COMPUTE, BoundKind.GPU_COMPUTE})


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

    def _simulated(self, run: GainRun, scenarios: dict[K, Scenario]) -> dict[K, dict[int, float]]:
        """Each scenario's gains per rank: kept by the memo, else re-timed (and kept)."""
        if self.memo is None:
            return self._simulate(run, scenarios)
        keys = {k: scenario_key(self._plans_digest, s) for k, s in scenarios.items()}
        out: dict[K, dict[int, float]] = {}
        for k, key in keys.items():
            data = self.memo.get(key)
            kept = None if data is None else decode(data)
            if kept is not None:
                out[k] = kept
        todo = {k: s for k, s in scenarios.items() if k not in out}
        if todo:
            fresh = self._simulate(run, todo)
            for k, gained in fresh.items():
                self.memo.put(keys[k], encode(gained))
            out.update(fresh)
        return {k: out[k] for k in scenarios}

    def gains(self, sets: dict[K, tuple[BoundKind, ...]]) -> dict[K, float]:
        """Each set of wastes removed at once, re-timed: its gain, percent of the step. A set
        with a waste that has no scenario is left out of the answer."""
        wanted = {k: v for k, v in sets.items() if v and all(b in self.scenarios for b in v)}
        if self.run is None or not wanted:
            return {}
        scenarios = {
            k: self.scenarios[v[0]] if len(v) == 1 else _everything([self.scenarios[b] for b in v])
            for k, v in wanted.items()
        }
        simulated = self._simulated(self.run, scenarios)
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
    run = plans(red, parts)
    scenarios = _scenarios(red, run, parts) if run is not None else {}
    if _partial(red):
        scenarios.pop(BoundKind.COMMS, None)
        if scenarios:
            compute = BoundKind.GPU_COMPUTE if red.has_gpu else BoundKind.COMPUTE
            scenarios[compute] = _everything([v for k, v in scenarios.items() if k not in COMPUTE])
    o = red.options
    return WhatIfs(run, scenarios, windows, step_ns, jobs=o.jobs, spread=o.spread, memo=o.memo)


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
        scenario = model.scenarios.get(bound)
        if small and scenario is not None:
            limits = [GainLimit.BELOW_FINDING]
        elif bound is BoundKind.COMMS and partial:
            limits = [GainLimit.PARTIAL_RANKS]
        elif model.run is None:
            limits = [GainLimit.NOT_MODELED]
        else:
            limits = _limits(bound, model.run, scenario is not None, cores_shared=red.options.cores_shared)
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
