"""The verdict: what bounds the run, read off the ledger and the re-timing (the reports write
the sentences).

Every share here is a ledger number (:mod:`tracekit.analyzers.ledger`): a bound's share is the
sum of the run's ledger entries that are evidence for it, the mean over the ranks that set the
pace. Every gain is a re-timing (:mod:`tracekit.analyzers.gains`): the step with that waste
removed. Compute is where a run should be; every other bound is waste. One rule weighs them:

* **A waste bounds the run when removing it would make the step materially faster**: at least
  ``1 / (1 - MATERIAL_SHARE)`` = 1.18x as fast, that is when its re-timed gain is
  :data:`MATERIAL_SHARE` (15%) of the step or more. Of the wastes that are worth fixing so, the
  one with the largest share of the ledger is the primary verdict: the ledger says what the
  time is, the gain whether fixing it pays. (On the TensorBoard tutorial's pair of runs: GPU
  idle waiting for the DataLoader 20% beside compute 69%, worth 1.25x, is data-bound; launch
  gaps worth 1.34x there take 7% of the time and their gain is mostly the same data wait
  hidden behind queued work.) Where no what-if models a waste (or none this trace can build:
  ranks of the world absent), its share stands for its gain and the confidence is one level
  lower. So does a re-timed gain that is a floor under the material share (CPU-only, the ranks
  outnumbering their machine's cores: :attr:`~tracekit.results.worth.GainLimit.CORES_SHARED`,
  ``verdict_section._decisive``): a floor cannot reject a bound.
* **A waste whose removal gains less than that is not the bound**, however large its share: it
  is a symptom of another cause (a collective whose time waits for a late rank, a host that
  idles for input). Such a waste with a material share is listed as passed over
  (``Finding.passed_over``), and its finding says what its freed time waits for
  (:mod:`tracekit.analyzers.gain_why`).
* **Otherwise the run is compute-bound**, when compute is the largest share: the GPU is busy
  nearly all the time and only cheaper kernels help. Where some waste is larger than compute
  but none is worth fixing, nothing dominates: ``mixed``.
* **Mixed**: when the two largest wastes worth fixing are within the measured step-to-step
  variation of their difference in share (the one-sided :data:`LEVEL` lower bound of the mean
  difference over the steps, Student's t, is not above zero: the data do not show the larger
  one larger), neither is named alone. The mean weighs each step by its time, as the run's
  shares do (an unweighted mean of the steps' shares tests another quantity: three steps of 7.7,
  59.6 and 6.6 ms, data 13, 89 and 0% of them and host work 63, 8 and 61%, are data 72.8% and
  host 18.2% of the run, yet host is the larger in the unweighted mean). With fewer than two steps nothing measures that
  variation: the margin decides (the larger at least :data:`ONE_STEP_RATIO` times the other)
  and the confidence is low.
* **Confidence**: high for a waste clearly separated from the next whose share and gain are
  both at least twice the material share, or for compute at least :data:`BUSY_SHARE` of the
  window; medium otherwise; low on one step or for mixed; one level lower where the primary's
  gain could not be re-timed.
* **Secondary findings** are the other wastes of at least :data:`SECONDARY_SHARE` of the time
  (removing one would give 1.05x or more if it gave all of it back), and those worth fixing
  whatever their share, largest share first.

Without gains (``worth`` not given) every share stands for its gain: the rule of the ledger alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import polars as pl

from tracekit.analyzers.caveats import lower
from tracekit.analyzers.ledger import ENTRY_BOUND
from tracekit.analyzers.stats import num
from tracekit.analyzers.t_quantiles import t_quantile
from tracekit.results.analysis import Finding
from tracekit.results.vocab import BoundKind, Confidence, LedgerEntry, MeasuredOn

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tracekit.analyzers.ledger import LedgerResult
    from tracekit.analyzers.stragglers import StragglerResult

#: A waste of at least this share of the step is material: removing it gives 1.18x or more.
MATERIAL_SHARE: Final = 0.15
#: Other wastes of at least this share are secondary findings (1.05x or more each).
SECONDARY_SHARE: Final = 0.05
#: Compute of at least this share of the window is the GPU busy nearly all the time.
BUSY_SHARE: Final = 0.85
#: The level of the one-sided bound over steps that separates the two largest wastes.
LEVEL: Final = 0.95
#: With fewer than two steps, the larger waste must be this many times the other.
ONE_STEP_RATIO: Final = 1.25
#: Exposed communication at least this share, with overlap below LOW_OVERLAP_PCT, is a finding.
COMMS_MIN_SHARE: Final = 0.10
#: Comm/compute overlap below this (with communication above COMMS_MIN_SHARE) is a finding.
LOW_OVERLAP_PCT: Final = 50.0


@dataclass(frozen=True)
class Decision:
    """The primary finding, the secondary ones and the cost table (bound, shares, worst rank)."""

    primary: Finding
    secondary: tuple[Finding, ...]
    costs: pl.DataFrame


def bound_of(entry: str, measured_on: MeasuredOn) -> BoundKind | None:
    """The bound a ledger entry is evidence for, on this timeline (compute is the host's on a CPU-only run)."""
    bound = ENTRY_BOUND[LedgerEntry(entry)]
    if bound is BoundKind.GPU_COMPUTE and measured_on is MeasuredOn.HOST:
        return BoundKind.COMPUTE
    return bound


def bound_names(measured_on: MeasuredOn) -> dict[str, str | None]:
    """Each ledger entry's name -> the name of the bound it is evidence for (None: no bound)."""
    return {e.value: (b.value if (b := bound_of(e.value, measured_on)) else None) for e in LedgerEntry}


def _bounds(frame: pl.DataFrame, measured_on: MeasuredOn) -> pl.DataFrame:
    """``frame`` (with ``entry``) with ``bound``; rows of entries that bound nothing dropped."""
    mapping = bound_names(measured_on)
    return frame.with_columns(bound=pl.col("entry").replace_strict(mapping, return_dtype=pl.String)).filter(
        pl.col("bound").is_not_null()
    )


def cost_table(ledger: LedgerResult, measured_on: MeasuredOn) -> pl.DataFrame:
    """bound, share_pct (the run's: the sum of its entries, mean over the pace ranks),
    max_rank_share_pct, worst_rank; every candidate bound, largest first."""
    per_rank = (
        _bounds(ledger.per_rank, measured_on)
        .group_by("rank", "bound")
        .agg(pl.col("ns").sum())
        .join(ledger.windows, on="rank")
        .with_columns(share=100 * pl.col("ns") / pl.col("window_ns"))
    )
    n = max(1, len(ledger.pace_ranks))
    in_pace = per_rank.filter(pl.col("rank").is_in(ledger.pace_ranks))
    run = in_pace.group_by("bound").agg(share_pct=pl.col("share").sum() / n)
    worst = (
        per_rank.sort(["share", "rank"], descending=[True, False])
        .group_by("bound", maintain_order=True)
        .agg(max_rank_share_pct=pl.col("share").first(), worst_rank=pl.col("rank").first())
    )
    compute = BoundKind.COMPUTE if measured_on is MeasuredOn.HOST else BoundKind.GPU_COMPUTE
    candidates = [compute, *(b for b in dict.fromkeys(ENTRY_BOUND.values()) if b not in (None, BoundKind.GPU_COMPUTE))]
    every = pl.DataFrame({"bound": [b.value for b in candidates]})
    return (
        every.join(run, on="bound", how="left")
        .join(worst, on="bound", how="left")
        .with_columns(pl.col("share_pct", "max_rank_share_pct").fill_null(0.0))
        .sort(["share_pct", "bound"], descending=[True, False])
    )


def step_shares(ledger: LedgerResult, measured_on: MeasuredOn) -> pl.DataFrame:
    """step, bound, share_pct: each bound's share in each step (mean over the pace ranks)."""
    return _bounds(ledger.run_steps, measured_on).group_by("step", "bound").agg(pl.col("share_pct").sum())


def decide(
    ledger: LedgerResult,
    *,
    measured_on: MeasuredOn,
    stragglers: StragglerResult,
    undetermined: tuple[Finding, ...] = (),
    worth: Mapping[str, float | None] | None = None,
) -> Decision:
    """The primary bound and the secondary findings, by the rule of this module's docstring.

    ``undetermined``: notes saying why the trace cannot support a verdict (GPU events
    missing, a handful of operations); with any, the primary is undetermined. ``worth``: each
    re-timed waste's gain (percent of the step), by bound name; None for a waste no what-if
    models (its share decides, the confidence one level lower); a waste not in it was not
    re-timed (its share decides).
    """
    table = cost_table(ledger, measured_on)
    ranked = list(table.iter_rows(named=True))
    if undetermined or not ranked or ranked[0]["share_pct"] <= 0:
        return Decision(Finding(bound=BoundKind.UNDETERMINED, confidence=Confidence.LOW), undetermined, table)
    compute_kind = BoundKind.COMPUTE if measured_on is MeasuredOn.HOST else BoundKind.GPU_COMPUTE
    compute = next(r for r in ranked if r["bound"] == compute_kind.value)
    wastes = [r for r in ranked if r is not compute and r["share_pct"] > 0]
    given = dict(worth or {})

    def gain(r: dict[str, object]) -> float:
        found = given.get(str(r["bound"]))
        return num(r["share_pct"]) if found is None else found

    def modeled(r: dict[str, object]) -> bool:
        return worth is None or str(r["bound"]) not in given or given[str(r["bound"])] is not None

    per_step = step_shares(ledger, measured_on)
    steps = per_step["step"].n_unique() if per_step.height else 0
    worth_fixing = [r for r in wastes if gain(r) >= 100 * MATERIAL_SHARE]
    symptoms = [r for r in wastes if num(r["share_pct"]) >= 100 * MATERIAL_SHARE and r not in worth_fixing]
    few_steps = steps < 2
    listed = [r for r in wastes if num(r["share_pct"]) >= 100 * SECONDARY_SHARE or r in worth_fixing]
    if worth_fixing:
        top = worth_fixing[0]
        runner = worth_fixing[1] if len(worth_fixing) > 1 else None
        over = [BoundKind(str(r["bound"])) for r in symptoms if num(r["share_pct"]) > num(top["share_pct"])]
        if runner is not None and not _separated(per_step, step_weights(ledger), top["bound"], runner["bound"]):
            return _mixed(top, runner, wastes=listed, stragglers=stragglers, table=table, over=over)
        clear = min(num(top["share_pct"]), gain(top)) >= 2 * 100 * MATERIAL_SHARE
        confidence = Confidence.LOW if few_steps else (Confidence.HIGH if clear else Confidence.MEDIUM)
        if not modeled(top):
            confidence = lower(confidence)
        margin = num(top["share_pct"]) / (num(runner["share_pct"]) if runner else 100 * MATERIAL_SHARE)
        primary = _finding(top, confidence, stragglers, margin=margin, threshold=MATERIAL_SHARE, over=over)
        return Decision(primary, _secondary(listed, [top["bound"]], stragglers), table)
    if wastes and wastes[0]["share_pct"] > compute["share_pct"]:
        return _mixed(wastes[0], compute, wastes=listed, stragglers=stragglers, table=table, over=[])
    busy = compute["share_pct"] >= 100 * BUSY_SHARE
    confidence = Confidence.LOW if few_steps else (Confidence.HIGH if busy else Confidence.MEDIUM)
    over = [BoundKind(str(r["bound"])) for r in symptoms]
    primary = _finding(compute, confidence, stragglers, over=over)
    return Decision(primary, _secondary(listed, [], stragglers), table)


def step_noise(ledger: LedgerResult) -> float | None:
    """The step's noise, percent: the standard deviation of the measured step over the steps
    (the mean over the pace ranks of each step) over its mean, how much one step differs from
    the next; None with fewer than two steps."""
    steps = step_weights(ledger)
    if steps.height < 2:
        return None
    mean, sd = num(steps["window_ns"].mean()), num(steps["window_ns"].std())
    return round(100 * sd / mean, 4) if mean > 0 else None


def step_weights(ledger: LedgerResult) -> pl.DataFrame:
    """step, window_ns: each step's measured time, the mean over the pace ranks that hold it
    (what a step weighs in the run's shares)."""
    pace = ledger.per_step.filter(pl.col("rank").is_in(ledger.pace_ranks))
    return (
        pace.group_by("rank", "step").agg(window_ns=pl.col("ns").sum()).group_by("step").agg(pl.col("window_ns").mean())
    )


def _separated(per_step: pl.DataFrame, weights: pl.DataFrame, a: str, b: str) -> bool:
    """Whether bound ``a`` is larger than ``b`` beyond the step-to-step variation of their
    difference: the difference of their shares of the run (the steps' differences weighted by
    the steps' time, as the run's shares are) has a one-sided LEVEL lower bound above zero,
    its standard error that of a weighted mean (a ratio of sums: the linearized variance of
    ``sum(w d) / sum(w)`` over the steps); a step holding neither differs by zero. With fewer
    than two steps, by the ratio."""
    steps = per_step.select("step").unique().join(weights, on="step", how="left", nulls_equal=True)
    shares = per_step.filter(pl.col("bound").is_in([a, b])).pivot(on="bound", index="step", values="share_pct")
    wide = steps.join(shares, on="step", how="left", nulls_equal=True)
    share_a, share_b = (
        wide[c].fill_null(0.0) if c in wide.columns else pl.repeat(0.0, wide.height, eager=True) for c in (a, b)
    )
    diff = (share_a - share_b).to_numpy()
    if len(diff) < 2:
        return num(share_a.sum()) >= ONE_STEP_RATIO * num(share_b.sum())
    n = len(diff)
    w = wide["window_ns"].fill_null(0.0).cast(pl.Float64).to_numpy()
    total = float(w.sum())
    if total <= 0:
        w, total = np.ones(n), float(n)
    mean = float((w * diff).sum()) / total
    se = float(np.sqrt(n / (n - 1) * float(((w * (diff - mean)) ** 2).sum()))) / total
    half = t_quantile(n - 1, LEVEL) * se
    return bool(mean - half > 0)


def _mixed(
    top: dict[str, object],
    other: dict[str, object],
    *,
    wastes: list[dict[str, object]],
    stragglers: StragglerResult,
    table: pl.DataFrame,
    over: list[BoundKind],
) -> Decision:
    parts = [BoundKind(str(top["bound"])), BoundKind(str(other["bound"]))]
    share, other_share = num(top["share_pct"]), num(other["share_pct"])
    mixed = Finding(
        bound=BoundKind.MIXED,
        share_pct=round(share, 4),
        confidence=Confidence.LOW,
        margin=round(share / other_share, 4) if other_share > 0 else None,
        components=parts,
        passed_over=over,
    )
    named = [p.value for p in parts]
    listed = [_finding(r, Confidence.LOW, stragglers) for r in wastes if r["bound"] in named]
    return Decision(mixed, (*listed, *_secondary(wastes, named, stragglers)), table)


def _secondary(listed: list[dict[str, object]], taken: list[str], stragglers: StragglerResult) -> tuple[Finding, ...]:
    return tuple(
        _finding(r, Confidence.MEDIUM, stragglers, threshold=SECONDARY_SHARE) for r in listed if r["bound"] not in taken
    )


def _finding(
    row: dict[str, object],
    confidence: Confidence,
    stragglers: StragglerResult,
    *,
    margin: float | None = None,
    threshold: float | None = None,
    over: list[BoundKind] | None = None,
) -> Finding:
    bound = BoundKind(str(row["bound"]))
    named = stragglers.stragglers[0].rank if bound is BoundKind.STRAGGLER and stragglers.stragglers else None
    return Finding(
        bound=bound,
        share_pct=round(num(row["share_pct"]), 4),
        confidence=confidence,
        worst_rank=row["worst_rank"],  # type: ignore[arg-type]
        max_rank_share_pct=round(num(row["max_rank_share_pct"]), 4),
        threshold_pct=None if threshold is None else 100 * threshold,
        margin=None if margin is None or margin == float("inf") else round(margin, 4),
        straggler_rank=named,
        passed_over=over or [],
    )
