"""Stragglers: which ranks arrive last at collectives, how often, by how much, and why.

From the matched collectives: per rank, how often it arrived last and how long the others
waited for it then; a rank x step lateness matrix (the longest a rank kept the earliest
rank waiting in that step: small, one number per rank and step, for a heatmap); the run's
stragglers with a score (the others' wait it causes, as a share of the step time); and for
each straggler the cause, found *before* the collective: the phase that took longer on it
than on the median rank, or a late start of the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.results.thresholds import STRAGGLER_MIN_SHARE
from tracekit.results.vocab import StragglerCause

if TYPE_CHECKING:
    from tracekit.analyzers.annotations import AnnotationResult
    from tracekit.analyzers.collectives import CollectiveResult
    from tracekit.analyzers.steps import StepResult

#: ... and it arrives last at this share of its collectives at least (systematic, not noise).
STRAGGLER_MIN_LAST_SHARE: Final = 0.5


@dataclass(frozen=True)
class Straggler:
    """One straggler rank with its evidence."""

    rank: int
    score: float
    times_last: int
    instances: int
    caused_wait_ns: float
    cause: StragglerCause
    #: the phase that takes longer on it, when ``cause`` is PHASE
    phase: str | None
    cause_excess_ns: float


@dataclass(frozen=True)
class StragglerResult:
    """Lateness per rank and step, and the run's stragglers."""

    #: rank, instances, times_last, times_among_last, mean_lateness_ns, caused_wait_ns, score
    per_rank: pl.DataFrame
    #: rank, step, lateness_ns (max over the step's collectives), times_last
    matrix: pl.DataFrame
    stragglers: tuple[Straggler, ...]
    #: the time base of ``score``: mean step duration, or the trace span without steps
    per_ns: float


def find_stragglers(
    collectives: CollectiveResult, steps: StepResult, annotations: AnnotationResult, *, span_ns: int
) -> StragglerResult:
    """Score every rank's lateness and name the stragglers with their cause."""
    per = collectives.per_rank
    instances = collectives.instances.select("pg", "op", "k", "last_rank", "mean_wait_ns", "ranks")
    joined = per.join(instances, on=["pg", "op", "k"], how="left").with_columns(
        arrived_last=pl.col("rank") == pl.col("last_rank"),
        # how long the others waited for this rank when it was the last: their mean wait
        others_wait=(pl.col("mean_wait_ns") * pl.col("ranks") - pl.col("wait_ns")) / (pl.col("ranks") - 1).clip(1),
    )
    base, n_steps = _time_base(steps, span_ns)
    per_rank = (
        joined.group_by("rank")
        .agg(
            instances=pl.len(),
            times_last=pl.col("arrived_last").sum(),
            times_among_last=pl.col("is_last").sum(),
            mean_lateness_ns=pl.col("lateness_ns").mean(),
            caused_wait_ns=pl.col("others_wait").filter(pl.col("arrived_last")).sum(),
        )
        .with_columns(score=pl.col("caused_wait_ns") / n_steps / base if base > 0 else pl.lit(0.0))
        .sort("rank")
    )
    matrix = (
        joined.filter(pl.col("step").is_not_null())
        .group_by("rank", "step")
        .agg(lateness_ns=pl.col("lateness_ns").max(), times_last=pl.col("arrived_last").sum())
        .sort("rank", "step")
    )
    stragglers = tuple(
        _explain(row, steps, annotations)
        for row in per_rank.filter(
            pl.col("score") >= STRAGGLER_MIN_SHARE,
            pl.col("times_last") >= STRAGGLER_MIN_LAST_SHARE * pl.col("instances"),
            pl.col("times_last") > 0,
        )
        .sort(["score", "rank"], descending=[True, False])
        .iter_rows(named=True)
    )
    return StragglerResult(per_rank=per_rank, matrix=matrix, stragglers=stragglers, per_ns=base)


def _time_base(steps: StepResult, span_ns: int) -> tuple[float, int]:
    if not steps.has_steps:
        return float(span_ns), 1
    per_rank_steps = steps.steps.group_by("rank").len()["len"]
    return float(steps.steps["duration_ns"].mean() or 0.0), int(per_rank_steps.max() or 1)  # type: ignore[arg-type]


#: The key of a late step start among the phase candidates (no phase has this name).
_LATE: Final = "\x00late start"


def _explain(row: dict[str, object], steps: StepResult, annotations: AnnotationResult) -> Straggler:
    rank = int(row["rank"])  # type: ignore[call-overload]
    candidates = phase_excess(annotations, rank)
    if steps.has_steps:
        start = steps.steps.with_columns(rel=pl.col("start_ns") - pl.col("start_ns").median().over("step"))
        late = start.filter(pl.col("rank") == rank)["rel"].mean()
        if late is not None:
            candidates[_LATE] = float(late)  # type: ignore[arg-type]
    name, excess = max(candidates.items(), key=lambda kv: kv[1], default=(None, 0.0))
    if name is None:
        cause, phase = StragglerCause.NO_PHASES, None
    elif excess <= 0:
        cause, phase, excess = StragglerCause.NOT_IN_PHASES, None, 0.0
    elif name == _LATE:
        cause, phase = StragglerCause.LATE_START, None
    else:
        cause, phase = StragglerCause.PHASE, name
    return Straggler(
        rank=rank,
        score=float(row["score"]),  # type: ignore[arg-type]
        times_last=int(row["times_last"]),  # type: ignore[call-overload]
        instances=int(row["instances"]),  # type: ignore[call-overload]
        caused_wait_ns=float(row["caused_wait_ns"]),  # type: ignore[arg-type]
        cause=cause,
        phase=phase,
        cause_excess_ns=excess,
    )


def phase_excess(annotations: AnnotationResult, rank: int) -> dict[str, float]:
    """Per phase: the rank's mean time per step minus the median rank's."""
    means = annotations.per_step.group_by("rank", "name").agg(pl.col("cpu_ns").mean().alias("mean_ns"))
    median = means.group_by("name").agg(pl.col("mean_ns").median().alias("median_ns"))
    mine = means.filter(pl.col("rank") == rank).join(median, on="name")
    return {
        str(r["name"]): float(r["mean_ns"] - r["median_ns"])
        for r in mine.iter_rows(named=True)
        if r["name"] != "(unannotated)"
    }
