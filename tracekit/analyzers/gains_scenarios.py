"""The what-ifs' scenarios (:mod:`tracekit.analyzers.gains`): what each waste's fix removes,
built from the gains' per-rank tables of every rank, or of any group of ranks, whose
scenarios are then the whole run's on those ranks (:mod:`tracekit.analyzers.gains_held` builds
them where the ranks are re-timed).

The wastes a run models are decided for the whole run (:func:`modeled_kinds` of what any rank
gives, :func:`present`); each group then builds the scenarios of those (:func:`built`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import numpy as np
import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.gains_plan import rank_frame
from tracekit.analyzers.retime_plan import Removal, Scenario, Shortened, merge_each, outside
from tracekit.analyzers.retime_shape import DEPENDENCY_NS
from tracekit.analyzers.shared import STRAGGLERS
from tracekit.results.vocab import BoundKind, StragglerCause

if TYPE_CHECKING:
    from tracekit.analyzers.gains_plan import GainRun
    from tracekit.analyzers.mapreduce import Reduced

__all__ = [
    "COMPUTE",
    "WASTES",
    "StragglerCut",
    "Tables",
    "built",
    "computed",
    "everything",
    "modeled_kinds",
    "present",
    "scenario_of",
    "straggler_cut",
    "straggler_scenario",
]

COMPUTE: Final = frozenset({BoundKind.COMPUTE, BoundKind.GPU_COMPUTE})
#: The wastes with a what-if of their own, in the order a run's scenarios are built (compute's
#: is every other at once).
WASTES: Final = (
    BoundKind.STRAGGLER,
    BoundKind.DATA,
    BoundKind.SYNC,
    BoundKind.COMMS,
    BoundKind.LAUNCH,
    BoundKind.HOST,
    BoundKind.TRANSFER,
)


def _removal(df: pl.DataFrame, origin: int, rate: float | np.ndarray = 1.0) -> Removal:
    start = df["start_ns"].cast(pl.Float64).to_numpy() - origin
    end = df["end_ns"].cast(pl.Float64).to_numpy() - origin
    return Removal(start=start, end=end, rate=np.broadcast_to(np.asarray(rate, dtype=float), start.shape).copy())


def _per_rank(df: pl.DataFrame, run: GainRun) -> dict[int, Removal]:
    """``df``'s intervals (rank, start_ns, end_ns) as a removal for each rank of ``run``: every
    rank's at once, then cut by rank (a frame and two columns a rank cost a thousand ranks
    0.8 s of a warm reduce's 3.4, profiled)."""
    if not df.height:
        return {p.rank: Removal() for p in run.plans}
    spans = iv.union(df.select("rank", "start_ns", "end_ns"), ["rank"])
    if not spans["rank"].is_sorted():
        spans = spans.sort("rank", maintain_order=True)
    of = spans["rank"].cast(pl.Int64).to_numpy()
    start = spans["start_ns"].cast(pl.Float64).to_numpy() - run.origin
    end = spans["end_ns"].cast(pl.Float64).to_numpy() - run.origin
    ranks = [p.rank for p in run.plans]
    first, last = np.searchsorted(of, ranks, side="left"), np.searchsorted(of, ranks, side="right")
    return {
        rank: Removal(start=start[a:b].copy(), end=end[a:b].copy(), rate=np.ones(b - a))
        for rank, a, b in zip(ranks, first.tolist(), last.tolist(), strict=True)
    }


@dataclass(frozen=True)
class StragglerCut:
    """What the straggler's what-if reads of the cross-rank results: the first named
    straggler, the cause of its lateness and its excess (ns per step)."""

    rank: int
    cause: StragglerCause
    phase: str | None
    excess_ns: float


def straggler_cut(red: Reduced) -> StragglerCut | None:
    """The straggler whose excess its what-if removes (None: none, or no excess)."""
    if not red.result(STRAGGLERS).stragglers:
        return None
    s = red.result(STRAGGLERS).stragglers[0]
    excess = float(s.cause_excess_ns)
    return StragglerCut(s.rank, s.cause, s.phase, excess) if excess > 0 else None


def straggler_scenario(cut: StragglerCut | None, run: GainRun, parts: Tables) -> Scenario | None:
    """The first named straggler's excess removed: from its slow phase, its late start, or its
    step (None: none, or not one of the ranks of ``parts``)."""
    if cut is None:
        return None
    frames = rank_frame(parts.frames, cut.rank)
    if frames.height == 0:
        return None
    phases = rank_frame(parts.phases, cut.rank)
    excess = cut.excess_ns
    if cut.cause in (StragglerCause.PHASE, StragglerCause.DATA_PHASE) and cut.phase is not None:
        spans = phases.filter(pl.col("name") == cut.phase)
    elif cut.cause is StragglerCause.LATE_START:
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
    tasks = run.tasks.get(cut.rank)
    if run.has_gpu and tasks is not None and tasks.height:
        launch = tasks["launch_ns"].fill_null(tasks["start_ns"]).cast(pl.Float64).to_numpy() - run.origin
        inside = np.zeros(launch.size, dtype=bool)
        for a, b in zip(removal.start, removal.end, strict=True):
            inside |= (launch >= a) & (launch < b)
        dur = (tasks["end_ns"] - tasks["start_ns"]).cast(pl.Float64).to_numpy()
        durations[cut.rank] = Shortened.where(inside, dur[inside] * (1 - rate))
    return Scenario(removals={cut.rank: removal}, durations=durations)


#: The gap between two kernels of one CUDA graph as it replays: measured 0.29 us (median) on an
#: H200 (``samples/captures/cuda-h200-cal-launch-b``, ``make_graphed_callables``); taken as 1 us.
GRAPH_GAP_NS: Final = 1_000.0


def _graph_launched(run: GainRun, removals: dict[int, Removal]) -> dict[int, Shortened]:
    """The launch what-if's tasks, as one graph's launch runs them: each task launched inside a
    removed dispatch that started when its launch let it (after its stream's previous task had
    ended) starts :data:`GRAPH_GAP_NS` after that, not after its launch latency (the kernel's
    start beyond its launch call's, 9 us a kernel measured under the profiler on an H200). Given
    as the task ending that much sooner (its duration shortened by it: the re-timing keeps each
    task's delay beyond its launch, :mod:`tracekit.analyzers.retime`, and only the end of a task
    holds anything back). Collectives, and tasks that started more than the switch time after
    their launch (a wait on another stream), keep theirs. Calibrated on the H200
    (``docs/verdict.md``): for AdamW's for-loop step of 3,134 kernels a step, the latency kept
    was 30.8 ms of a 99 ms step."""
    out: dict[int, Shortened] = {}
    for plan in run.plans:
        removal = removals.get(plan.rank)
        if removal is None or removal.start.size == 0 or plan.start.size == 0:
            continue
        order = np.argsort(plan.stream, kind="stable")  # a plan's tasks are in order within each stream
        prev_end = np.full(plan.start.size, -np.inf)
        same = plan.stream[order[1:]] == plan.stream[order[:-1]]
        prev_end[order[1:][same]] = plan.end[order[:-1]][same]
        # as the re-timing anchors a task: its launch, or its predecessor's end (where that
        # overlaps into it, its own start)
        prev_end = np.minimum(prev_end, plan.start)
        launched = ~np.isnan(plan.launch)
        launch = np.where(launched, np.minimum(np.nan_to_num(plan.launch), plan.start), plan.start)
        i = np.maximum(np.searchsorted(removal.start, launch, side="right") - 1, 0)
        inside = launched & (launch >= removal.start[i]) & (launch < removal.end[i]) & (removal.rate[i] >= 1.0)
        latency = plan.start - np.maximum(launch, prev_end)
        gated = launch >= prev_end  # its launch, not its stream, let it start
        cut = inside & gated & (plan.instance < 0) & ~plan.arrival_is_launch.astype(bool)
        cut &= (latency > GRAPH_GAP_NS) & (latency <= DEPENDENCY_NS)
        if cut.any():
            out[plan.rank] = Shortened.where(cut, (plan.end - plan.start)[cut] - (latency[cut] - GRAPH_GAP_NS))
    return out


def _transfers(run: GainRun) -> dict[int, Shortened]:
    out = {}
    for rank, t in run.tasks.items():
        if t.height and bool(t["transfer"].any()):
            transfer = t["transfer"].to_numpy()
            out[rank] = Shortened.where(transfer, np.zeros(int(transfer.sum())))
    return out


class Tables(Protocol):
    """What the scenarios read of the gains' per-rank tables (:class:`GainParts`, of every rank
    or of a group of them)."""

    @property
    def fetch(self) -> pl.DataFrame: ...
    @property
    def launches(self) -> pl.DataFrame: ...
    @property
    def host_free(self) -> pl.DataFrame: ...
    @property
    def phases(self) -> pl.DataFrame: ...
    @property
    def frames(self) -> pl.DataFrame: ...


#: The wastes whose what-ifs remove host time (each rank's own intervals of one table).
_REMOVED: Final = {BoundKind.DATA: "fetch", BoundKind.LAUNCH: "launches", BoundKind.HOST: "host_free"}


def present(run: GainRun, parts: Tables, straggler: Scenario | None) -> set[BoundKind]:
    """The wastes the ranks of ``run`` and ``parts`` (every rank, or a group of them) give a
    what-if: a waste has one when any rank gives it one. ``straggler``: :func:`_straggler`'s."""
    out = set()
    if straggler is not None:
        out.add(BoundKind.STRAGGLER)
    if parts.fetch.height:
        out.add(BoundKind.DATA)
    if any(p.block_start.size for p in run.plans) and run.has_gpu:
        out.add(BoundKind.SYNC)
    if any((p.instance >= 0).any() for p in run.plans):
        out.add(BoundKind.COMMS)
    if run.has_gpu and parts.launches.height:
        out.add(BoundKind.LAUNCH)
    if run.has_gpu and parts.host_free.height:
        out.add(BoundKind.HOST)
    if run.has_gpu and any(t.height and bool(t["transfer"].any()) for t in run.tasks.values()):
        out.add(BoundKind.TRANSFER)
    return out


def modeled_kinds(found: set[BoundKind], *, has_gpu: bool, partial: bool) -> frozenset[BoundKind]:
    """The wastes a run's what-ifs model, from those its ranks give one (:func:`present`):
    with compute's (every other at once), and without comms' where ranks of the world are
    absent (their arrivals are unknown)."""
    kinds = set(found)
    if kinds:
        kinds.add(BoundKind.GPU_COMPUTE if has_gpu else BoundKind.COMPUTE)
    if partial:
        kinds.discard(BoundKind.COMMS)
    return frozenset(kinds)


def built(
    kinds: frozenset[BoundKind], run: GainRun, parts: Tables, straggler: Scenario | None, *, merged: bool = True
) -> dict[BoundKind, Scenario]:
    """The scenario of each waste of ``kinds`` (decided for the whole run: :func:`modeled`) on
    the ranks of ``run`` and ``parts``: every rank's, or a group's, whose scenarios are then
    the whole run's on those ranks. Without ``merged``, compute's (every other at once,
    :func:`computed`) is left out, for the caller to merge when it needs it."""
    out: dict[BoundKind, Scenario] = {}
    if BoundKind.STRAGGLER in kinds:
        out[BoundKind.STRAGGLER] = straggler if straggler is not None else Scenario()

    def per_rank(df: pl.DataFrame) -> dict[int, Removal]:
        # the straggler's excess is the straggler's (as the ledger carves it): not removed twice
        removals = _per_rank(df, run)
        if straggler is not None:
            removals = {r: outside(v, straggler.removals.get(r, Removal())) for r, v in removals.items()}
        return removals

    for kind in WASTES[1:]:
        if kind not in kinds:
            continue
        if kind in _REMOVED:
            removals = per_rank(getattr(parts, _REMOVED[kind]))
            latency = _graph_launched(run, removals) if kind is BoundKind.LAUNCH else {}
            out[kind] = Scenario(removals=removals, durations=latency)
        elif kind is BoundKind.SYNC:
            out[kind] = Scenario(no_wait_blocks=True)
        elif kind is BoundKind.COMMS:
            out[kind] = Scenario(hide_collectives=True)
        else:
            out[kind] = Scenario(durations=_transfers(run))
    if merged:
        for kind in kinds & COMPUTE:
            out[kind] = computed(out)
    return out


def computed(scenarios: dict[BoundKind, Scenario]) -> Scenario:
    """Compute's scenario: every other waste of ``scenarios`` removed at once."""
    return everything([v for k, v in scenarios.items() if k not in COMPUTE])


def everything(scenarios: list[Scenario]) -> Scenario:
    """Several scenarios at once: each instant removed at the largest rate, each task at the
    shortest duration, the blocks and collectives of any."""
    ranks = {r for s in scenarios for r in (*s.removals, *s.durations)}
    removals = merge_each({r: [s.removals[r] for s in scenarios if r in s.removals] for r in ranks})
    durations = {
        r: Shortened.shortest(each) for r in ranks if (each := [s.durations[r] for s in scenarios if r in s.durations])
    }
    return Scenario(
        removals=removals,
        durations=durations,
        no_wait_blocks=any(s.no_wait_blocks for s in scenarios),
        hide_collectives=any(s.hide_collectives for s in scenarios),
    )


def scenario_of(scenarios: dict[BoundKind, Scenario], wastes: tuple[BoundKind, ...]) -> Scenario:
    """The scenario of ``wastes`` removed at once, from each waste's own in ``scenarios``."""
    return scenarios[wastes[0]] if len(wastes) == 1 else everything([scenarios[b] for b in wastes])
