"""Stragglers: which ranks arrive last at collectives, how much of the others' waiting their
lateness explains, and why they are late.

From the matched collectives: per rank, how often it arrived last and how much of the
others' waiting its lateness explains then (each other rank's wait up to the gap between
its arrival and the last one's; their mean at each instance); a rank x step lateness
matrix (how late a rank arrived at the step's collectives, at most, after the earliest
rank: one number per rank and step, for a heatmap); the run's stragglers with a score (the
explained wait they cause per step, as a share of the step); and for each straggler the
cause, found *before* the collective: the phase that took longer on it than on the median
of the other ranks (a data phase, a DataLoader fetch, apart from the others), or a late start
of the step.

A rank is a straggler only when the wait its lateness explains passes
:data:`STRAGGLER_MIN_SHARE` of a step, is most of the waiting that late arrivals explain in the
run, and recurs: it arrives last in most steps (without steps, at most of its collectives),
and its lateness explains more waiting than any other rank's in the steps beyond their
variation (with two ranks one is always last: last at 5 of 9 collectives, the larger wait one
rank's in some steps and the other's in others, is a coin flip, not a straggler).
Counting the collectives it is last at instead would miss a rank late at one collective of
several per step (DDP's gradient bucket), where noise decides who is last at the others; only
instances held by every rank of their group count (with ranks missing, the last rank may not
be in the traces).
Waiting that no arrival explains is the collectives' own cost, never a straggler's: per
rank, ``straggler_wait_ns`` is the wait explained by a named straggler and ``comms_wait_ns``
the rest of its wait.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

import numpy as np
import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.collectives import INSTANCE
from tracekit.analyzers.dataloader import FETCH_PATTERN
from tracekit.analyzers.t_quantiles import t_quantile
from tracekit.results.rows import Straggler
from tracekit.results.vocab import StragglerCause

if TYPE_CHECKING:
    from tracekit.analyzers.annotations import AnnotationResult
    from tracekit.analyzers.collectives import CollectiveResult
    from tracekit.analyzers.steps import StepResult

#: A rank is a straggler when the wait its lateness explains is at least this share of a step ...
STRAGGLER_MIN_SHARE: Final = 0.05
#: ... and it explains at least this share of the wait that late arrivals explain in the run
#: (noise spreads that wait over the ranks) ...
STRAGGLER_MIN_WAIT_SHARE: Final = 0.5
#: ... and it arrives last in this share of the steps at least (systematic, not a one-off
#: stall); without steps, at this share of its complete collectives.
STRAGGLER_MIN_LAST_SHARE: Final = 0.5
#: ... and its lateness explains more waiting than any other rank's in every step, or beyond the
#: steps' variation: the one-sided level of that test (:func:`_consistent`) ...
CONSISTENT_LEVEL: Final = 0.95
#: ... and what happened before the collective on it (a phase longer than on the median of
#: the other ranks, or a late start of the step) accounts for at least this share of the wait
#: it causes per step. Lateness that nothing on the rank explains is jitter (a different rank
#: each capture when ranks share cores), and its waiting is the collective's cost. Without
#: phase annotations nothing can be checked and the rank is named.
STRAGGLER_MIN_CAUSE_SHARE: Final = 0.5
#: Annotation names that are no phase of the step.
_NOT_PHASES: Final = ("(unannotated)",)


@dataclass(frozen=True)
class StragglerResult:
    """Lateness per rank and step, and the run's stragglers."""

    #: rank, instances (matched), complete, times_last (at complete instances),
    #: times_among_last, mean_lateness_ns, caused_wait_ns, score, wait_ns,
    #: explained_wait_ns, unexplained_wait_ns, straggler_wait_ns, comms_wait_ns
    per_rank: pl.DataFrame
    #: rank, step, lateness_ns (max over the step's matched collectives), times_last
    matrix: pl.DataFrame
    stragglers: tuple[Straggler, ...]


def _attributed(collectives: CollectiveResult) -> pl.DataFrame:
    """Matched calls with their instance's last rank, and at the last rank's row the others'
    mean explained wait (``others_wait``): what its lateness cost them there."""
    inst = collectives.instances.filter(pl.col("matched")).select(INSTANCE, "last_rank", "ranks", "complete")
    explained = pl.col("explained_wait_ns").fill_null(0)
    # the calls of those instances, then their columns (an inner join took 0.106 s of the reduce
    # of 1,024 dense ranks' 2.3M calls, polars 2.1; the filter and a left join 0.057)
    calls = collectives.per_rank.filter(pl.col(INSTANCE).is_in(inst.get_column(INSTANCE).implode()))
    return (
        calls.join(inst, on=INSTANCE, how="left")
        .with_columns(arrived_last=(pl.col("rank") == pl.col("last_rank")) & pl.col("complete"))
        .with_columns(
            others_wait=(explained.sum().over(INSTANCE) - explained) / (pl.col("ranks") - 1).clip(1),
        )
    )


def _caused_wait(joined: pl.DataFrame) -> pl.DataFrame:
    """rank, caused_wait_ns: the wall time the others spent waiting for the rank, at the
    complete instances it arrived last at, their mean over the others.

    Each other rank waited from its arrival for as long as the last rank's lateness explains;
    those stretches are merged per waiting rank before they are added up, because collectives
    in flight together (DDP's gradient buckets, launched one after another while the late rank
    is still in its forward) wait for the same late arrival at the same time: summing their
    waits would count that time once per bucket.
    """
    at_last = joined.filter(pl.col("complete") & (pl.col("rank") != pl.col("last_rank")))
    waits = at_last.filter(pl.col("explained_wait_ns").fill_null(0) > 0).select(
        pl.col("last_rank").alias("straggler"),
        "rank",
        pl.col("arrival_ns").alias("start_ns"),
        (pl.col("arrival_ns") + pl.col("explained_wait_ns")).alias("end_ns"),
    )
    merged = iv.total(waits, ["straggler", "rank"])
    assert isinstance(merged, pl.DataFrame)
    others = at_last.group_by(pl.col("last_rank").alias("straggler")).agg(others=pl.col("rank").n_unique())
    return (
        merged.group_by("straggler")
        .agg(pl.col("total_ns").sum())
        .join(others, on="straggler")
        .select(pl.col("straggler").alias("rank"), caused_wait_ns=pl.col("total_ns") / pl.col("others"))
    )


def _per_rank(joined: pl.DataFrame, *, base: float, n_steps: int, in_steps: bool) -> pl.DataFrame:
    """Per rank: its arrivals at every matched collective, and the waiting it caused, counted in
    the steps measured when there are steps (the wait is divided by their number: a warm-up
    stall counted in it but not in the steps read as more waiting a step than any phase explains,
    and more than the step itself), else in the whole trace."""
    caused = _caused_wait(joined.filter(pl.col("step").is_not_null()) if in_steps else joined)
    return (
        joined.group_by("rank")
        .agg(
            instances=pl.len(),
            complete=pl.col("complete").sum(),
            times_last=pl.col("arrived_last").sum(),
            times_among_last=pl.col("is_last").sum(),
            mean_lateness_ns=pl.col("lateness_ns").mean(),
            wait_ns=pl.col("wait_ns").sum(),
            explained_wait_ns=pl.col("explained_wait_ns").sum(),
            unexplained_wait_ns=pl.col("unexplained_wait_ns").sum(),
        )
        .join(caused.with_columns(pl.col("rank").cast(joined.schema["rank"])), on="rank", how="left")
        .with_columns(pl.col("caused_wait_ns").fill_null(0.0))
        .with_columns(score=pl.col("caused_wait_ns") / n_steps / base if base > 0 else pl.lit(0.0))
        .select(
            "rank",
            "instances",
            "complete",
            "times_last",
            "times_among_last",
            "mean_lateness_ns",
            "caused_wait_ns",
            "wait_ns",
            "explained_wait_ns",
            "unexplained_wait_ns",
            "score",
        )
        .sort("rank")
    )


def _straggler_waits(joined: pl.DataFrame, per_rank: pl.DataFrame, named: list[int]) -> pl.DataFrame:
    """``per_rank`` with the wait each rank spent on named stragglers, and the rest."""
    by_straggler = pl.col("complete") & pl.col("last_rank").is_in(named)
    waits = joined.group_by("rank").agg(
        straggler_wait_ns=pl.col("explained_wait_ns").filter(by_straggler).sum(),
    )
    return per_rank.join(waits, on="rank", how="left").with_columns(
        comms_wait_ns=pl.col("wait_ns") - pl.col("straggler_wait_ns")
    )


def find_stragglers(
    collectives: CollectiveResult, steps: StepResult, annotations: AnnotationResult, *, span_ns: int
) -> StragglerResult:
    """Score every rank's lateness and name the stragglers with their cause."""
    joined = _attributed(collectives)
    steps = on_corrected_clocks(steps, collectives.clocks)
    base, n_steps = _time_base(steps, span_ns)
    per_rank = _per_rank(joined, base=base, n_steps=n_steps, in_steps=steps.has_steps)
    matrix = (
        joined.filter(pl.col("step").is_not_null())
        .group_by("rank", "step")
        .agg(lateness_ns=pl.col("lateness_ns").max(), times_last=pl.col("arrived_last").sum())
        .sort("rank", "step")
    )
    recurring = matrix.group_by("rank").agg(steps=pl.len(), steps_last=(pl.col("times_last") > 0).sum())
    named = (
        per_rank.join(recurring, on="rank", how="left")
        .filter(
            pl.col("score") >= STRAGGLER_MIN_SHARE,
            pl.col("times_last") > 0,
            pl.col("caused_wait_ns") >= STRAGGLER_MIN_WAIT_SHARE * pl.col("caused_wait_ns").sum(),
            pl.when(pl.col("steps").fill_null(0) > 0)
            .then(pl.col("steps_last") >= STRAGGLER_MIN_LAST_SHARE * pl.col("steps"))
            .otherwise(pl.col("times_last") >= STRAGGLER_MIN_LAST_SHARE * pl.col("complete")),
        )
        .sort(["score", "rank"], descending=[True, False])
    )
    consistent = _consistent(joined)
    named = named.filter(pl.col("rank").is_in(consistent))
    explained = [_explain(row, steps, annotations, matrix) for row in named.iter_rows(named=True)]
    stragglers = tuple(s for s in explained if _caused(s, n_steps=n_steps))
    per_rank = _straggler_waits(joined, per_rank, [s.rank for s in stragglers])
    return StragglerResult(per_rank=per_rank, matrix=matrix, stragglers=stragglers)


def _consistent(joined: pl.DataFrame) -> list[int]:
    """The ranks whose lateness explains more waiting than any other rank's in the steps: per
    step, the waiting a rank's late arrivals explain (the mean over the others of their
    explained waits, summed over its instances) less the most any other rank's explain is above
    zero in every step, or its one-sided :data:`CONSISTENT_LEVEL` lower bound over the steps
    (Student's t) is. With fewer than two steps nothing measures that: every rank passes (the
    other rules decide). Two ranks are one and the other in turn by chance:
    last at 5 of 9 collectives, each explaining the larger wait in some steps, is a coin flip."""
    rows = joined.filter(pl.col("complete"), pl.col("rank") != pl.col("last_rank"), pl.col("step").is_not_null())
    ranks = sorted(int(r) for r in joined["rank"].unique())
    steps = sorted(int(x) for x in joined.filter(pl.col("step").is_not_null())["step"].unique())
    if len(steps) < 2:
        return ranks
    by_instance = rows.group_by(INSTANCE, "step", "last_rank").agg(w=pl.col("explained_wait_ns").fill_null(0).mean())
    caused = by_instance.group_by("step", "last_rank").agg(pl.col("w").sum())
    table = {(int(s), int(r)): float(w) for s, r, w in caused.select("step", "last_rank", "w").iter_rows()}
    # per step, the most any other rank's explain: the largest of all, or for the rank that
    # holds it the second largest (ranks x steps, where comparing every pair was ranks^2 x steps)
    column = {r: j for j, r in enumerate(ranks)}
    waits = np.zeros((len(steps), len(ranks)))
    row = {x: i for i, x in enumerate(steps)}
    for (x, r), w in table.items():
        if x in row and r in column:
            waits[row[x], column[r]] = w
    first = waits.argmax(axis=1)
    top = waits.max(axis=1)
    if len(ranks) > 1:
        second = np.where(np.arange(len(ranks)) == first[:, None], -np.inf, waits).max(axis=1)
    else:  # no other rank: none explains anything
        second = np.zeros(len(steps))
    # every rank at once (steps x ranks): each column summed over the steps in order, as a loop
    # over the steps would (a reduction along the first axis adds row after row)
    others = np.where(first[:, None] == np.arange(len(ranks)), second[:, None], top[:, None])
    diffs = waits - others
    n = len(steps)
    mean = diffs.sum(axis=0) / n
    sd = (((diffs - mean) ** 2).sum(axis=0) / (n - 1)) ** 0.5
    passed = (diffs > 0).all(axis=0) | (mean - t_quantile(n - 1, CONSISTENT_LEVEL) * sd / n**0.5 > 0)
    return [rank for rank, ok in zip(ranks, passed.tolist(), strict=True) if ok]


def on_corrected_clocks(steps: StepResult, clocks: pl.DataFrame) -> StepResult:
    """``steps`` with each rank's step starts on the corrected clocks (a rank whose clock reads
    ahead would seem to start its steps late), for comparing starts across ranks."""
    if not steps.has_steps or clocks.height == 0 or not clocks["corrected"].any():
        return steps
    offsets = clocks.select(pl.col("rank").cast(steps.steps.schema["rank"]), "offset_ns")
    shifted = (
        steps.steps.join(offsets, on="rank", how="left", maintain_order="left")
        .with_columns(pl.col("start_ns") - pl.col("offset_ns").fill_null(0))
        .drop("offset_ns")
    )
    return replace(steps, steps=shifted)


def _caused(straggler: Straggler, *, n_steps: int) -> bool:
    """Whether the straggler's cause accounts for the waiting it is named for (see
    :data:`STRAGGLER_MIN_CAUSE_SHARE`)."""
    if straggler.cause is StragglerCause.NO_PHASES:
        return True
    per_step = straggler.caused_wait_ns / max(n_steps, 1)
    return straggler.cause_excess_ns >= STRAGGLER_MIN_CAUSE_SHARE * per_step


def _time_base(steps: StepResult, span_ns: int) -> tuple[float, int]:
    if not steps.has_steps:
        return float(span_ns), 1
    per_rank_steps = steps.steps.group_by("rank").len()["len"]
    return float(steps.steps["duration_ns"].mean() or 0.0), int(per_rank_steps.max() or 1)  # type: ignore[arg-type]


def late_start(steps: StepResult, rank: int) -> float | None:
    """How much later than the median of the other ranks ``rank`` starts its steps, on
    average (ns). The others, not all ranks: of two ranks, the median of both is their mean,
    which halves the difference."""
    if not steps.has_steps:
        return None
    table = steps.steps
    others = table.filter(pl.col("rank") != rank).group_by("step").agg(pl.col("start_ns").median().alias("median_ns"))
    mine = table.filter(pl.col("rank") == rank).join(others, on="step")
    late = (mine["start_ns"] - mine["median_ns"]).mean()
    return None if late is None else float(late)


def straggler_cause(
    annotations: AnnotationResult, steps: StepResult, rank: int
) -> tuple[StragglerCause, str | None, float]:
    """Why ``rank`` arrives late, from what happened before the collectives: the phase that
    takes longest beyond the other ranks' median, or a late start of its steps, whichever is larger.

    Returns (cause, phase name or None, excess ns per step).
    """
    phases = phase_excess(annotations, rank)
    candidates: dict[str | None, float] = dict(phases.items())
    late = late_start(steps, rank)
    if late is not None:
        candidates[None] = late
    if candidates:
        phase, excess = max(candidates.items(), key=lambda kv: (kv[1], kv[0] or ""))
        if excess > 0:
            return _phase_cause(phase), phase, excess
    return (StragglerCause.NOT_IN_PHASES if phases else StragglerCause.NO_PHASES), None, 0.0


def _phase_cause(phase: str | None) -> StragglerCause:
    """A late start (no phase), a data phase (a DataLoader fetch: :data:`FETCH_PATTERN`), or any
    other phase: its advice differs (what runs before the step, the input pipeline, compute)."""
    if phase is None:
        return StragglerCause.LATE_START
    return StragglerCause.DATA_PHASE if re.search(FETCH_PATTERN, phase) else StragglerCause.PHASE


def _explain(
    row: dict[str, object], steps: StepResult, annotations: AnnotationResult, matrix: pl.DataFrame
) -> Straggler:
    rank = int(row["rank"])  # type: ignore[call-overload]
    cause, phase, excess = straggler_cause(annotations, steps, rank)
    mine = matrix.filter(pl.col("rank") == rank)
    return Straggler(
        rank=rank,
        score=float(row["score"]),  # type: ignore[arg-type]
        times_last=int(row["times_last"]),  # type: ignore[call-overload]
        instances=int(row["complete"]),  # type: ignore[call-overload]
        caused_wait_ns=float(row["caused_wait_ns"]),  # type: ignore[arg-type]
        cause=cause,
        phase=phase,
        cause_excess_ns=excess,
        steps_last=mine.filter(pl.col("times_last") > 0).height,
        steps=mine.height,
    )


def phase_excess(annotations: AnnotationResult, rank: int) -> dict[str, float]:
    """Per phase: the rank's mean time per step minus the median of the other ranks' means
    (of two ranks, the other one's)."""
    means = annotations.per_step.group_by("rank", "name").agg(pl.col("cpu_ns").mean().alias("mean_ns"))
    others = means.filter(pl.col("rank") != rank).group_by("name").agg(pl.col("mean_ns").median().alias("median_ns"))
    mine = means.filter(pl.col("rank") == rank, ~pl.col("name").is_in(_NOT_PHASES)).join(others, on="name")
    return dict(zip(mine["name"].cast(pl.String), (mine["mean_ns"] - mine["median_ns"]).cast(pl.Float64), strict=True))
