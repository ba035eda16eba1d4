"""The verdict: what bounds the run, as structured findings (the reports write the sentences).

Every candidate bound gets a *cost*: the share of the measured time it accounts for, as
the mean over ranks (GPU time on GPU runs; host time on CPU-only runs, where the host is
the device). Compute-bound is where a run should be; every other bound is avoidable waste.
So the primary verdict is the largest waste above its threshold, and compute-bound only when
no waste passes its threshold. Every other waste above its threshold is a secondary finding.
All thresholds are the constants below, in this one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers.stats import num
from tracekit.results.analysis import Finding
from tracekit.results.thresholds import STRAGGLER_MIN_SHARE
from tracekit.results.vocab import BoundKind, Confidence, MeasuredOn

if TYPE_CHECKING:
    from tracekit.analyzers.stragglers import StragglerResult

#: Data wait above this share of step time makes a run data-bound (common practice: ~5%).
DATA_MIN_SHARE: Final = 0.05
#: Exposed communication above this share is a finding.
COMMS_MIN_SHARE: Final = 0.10
#: GPU idle after host syncs above this share is a finding.
SYNC_MIN_SHARE: Final = 0.05
#: Launch-bound idle above this share is a finding.
LAUNCH_MIN_SHARE: Final = 0.10
#: GPU idle while the host does CPU work that launches nothing, above this share, is a finding.
HOST_MIN_SHARE: Final = 0.10
#: Copies and sets (not hidden by compute or communication) above this share are a finding.
TRANSFER_MIN_SHARE: Final = 0.10
#: GPU idle waiting on events / other streams above this share is a finding.
DEPENDENCY_MIN_SHARE: Final = 0.10
#: GPU idle that no host activity in the trace explains, above this share, is a finding.
IDLE_MIN_SHARE: Final = 0.20
#: Comm/compute overlap below this (with comms above COMMS_MIN_SHARE) is a finding.
LOW_OVERLAP_PCT: Final = 50.0
#: Confidence is high when the primary waste is at least this multiple of its threshold and
#: of the next waste, medium at MEDIUM_CONFIDENCE_RATIO, low below.
HIGH_CONFIDENCE_RATIO: Final = 2.0
MEDIUM_CONFIDENCE_RATIO: Final = 1.25

THRESHOLDS: Final = {
    BoundKind.DATA: DATA_MIN_SHARE,
    BoundKind.COMMS: COMMS_MIN_SHARE,
    BoundKind.STRAGGLER: STRAGGLER_MIN_SHARE,
    BoundKind.SYNC: SYNC_MIN_SHARE,
    BoundKind.LAUNCH: LAUNCH_MIN_SHARE,
    BoundKind.HOST: HOST_MIN_SHARE,
    BoundKind.TRANSFER: TRANSFER_MIN_SHARE,
    BoundKind.DEPENDENCY: DEPENDENCY_MIN_SHARE,
    BoundKind.IDLE: IDLE_MIN_SHARE,
}

#: The per-rank cost columns and the bound each one measures.
COST_COLUMNS: Final = {
    "data_ns": BoundKind.DATA,
    "comms_ns": BoundKind.COMMS,
    "straggler_ns": BoundKind.STRAGGLER,
    "sync_ns": BoundKind.SYNC,
    "launch_ns": BoundKind.LAUNCH,
    "host_ns": BoundKind.HOST,
    "transfer_ns": BoundKind.TRANSFER,
    "dependency_ns": BoundKind.DEPENDENCY,
    "idle_ns": BoundKind.IDLE,
    "compute_ns": BoundKind.GPU_COMPUTE,
}


@dataclass(frozen=True)
class Costs:
    """Per-rank time of each candidate bound, in ns, with the window it is a share of."""

    #: rank, window_ns, and one column per key of COST_COLUMNS
    per_rank: pl.DataFrame
    measured_on: MeasuredOn


@dataclass(frozen=True)
class Decision:
    """The primary finding, the secondary ones and the cost table (bound, shares, worst rank)."""

    primary: Finding
    secondary: tuple[Finding, ...]
    costs: pl.DataFrame


def cost_table(costs: Costs) -> pl.DataFrame:
    """bound, share_pct (mean over ranks), max_rank_share_pct, worst_rank; largest first."""
    df = costs.per_rank
    rows = []
    host = costs.measured_on is MeasuredOn.HOST
    for col, kind in COST_COLUMNS.items():
        bound = BoundKind.COMPUTE if host and kind is BoundKind.GPU_COMPUTE else kind
        share = (df[col] / df["window_ns"]).fill_nan(0.0).fill_null(0.0)
        worst = int(df["rank"][int(share.arg_max() or 0)]) if df.height else None
        rows.append(
            {
                "bound": bound.value,
                "share_pct": 100 * num(share.mean()),
                "max_rank_share_pct": 100 * num(share.max()),
                "worst_rank": worst,
            }
        )
    return pl.DataFrame(rows).sort("share_pct", descending=True, maintain_order=True)


def costs_of(per_rank: pl.DataFrame, measured_on: MeasuredOn) -> Costs:
    """Costs from per-rank columns, with every column of :data:`COST_COLUMNS` (0 where absent)."""
    missing = [pl.lit(0, dtype=pl.Int64).alias(c) for c in COST_COLUMNS if c not in per_rank.columns]
    return Costs(per_rank=per_rank.with_columns(missing), measured_on=measured_on)


def decide(costs: Costs, *, stragglers: StragglerResult, undetermined: tuple[Finding, ...] = ()) -> Decision:
    """Pick the primary bound and the secondary findings from the costs.

    ``undetermined``: notes saying why the trace cannot support a verdict (GPU events
    missing, too little work); with any, the primary is undetermined and the notes explain it.
    When the two largest wastes are within :data:`MEDIUM_CONFIDENCE_RATIO` of each other (the
    margin that run-to-run variation moves them by), the primary is ``mixed``, naming both.
    """
    table = cost_table(costs)
    ranked = list(table.iter_rows(named=True))
    if undetermined or not ranked or ranked[0]["share_pct"] <= 0:
        return Decision(Finding(bound=BoundKind.UNDETERMINED, confidence=Confidence.LOW), undetermined, table)
    waste = [r for r in ranked if _threshold(r) is not None and r["share_pct"] >= 100 * (_threshold(r) or 0)]
    if not waste:
        return _busy(ranked, stragglers, table)
    top = waste[0]
    over_threshold = top["share_pct"] / (100 * (_threshold(top) or 1))
    over_next = top["share_pct"] / waste[1]["share_pct"] if len(waste) > 1 else float("inf")
    margin = min(over_threshold, over_next)
    if over_next < MEDIUM_CONFIDENCE_RATIO:
        mixed = Finding(
            bound=BoundKind.MIXED,
            share_pct=round(num(top["share_pct"]), 4),
            confidence=Confidence.LOW,
            margin=round(over_next, 4),
            components=[BoundKind(top["bound"]), BoundKind(waste[1]["bound"])],
        )
        return Decision(mixed, tuple(_finding(r, Confidence.LOW, stragglers) for r in waste), table)
    primary = _finding(top, _confidence(margin), stragglers, margin=margin)
    secondary = tuple(_finding(r, Confidence.MEDIUM, stragglers) for r in waste if r is not top)
    return Decision(primary, secondary, table)


def _confidence(margin: float) -> Confidence:
    if margin >= HIGH_CONFIDENCE_RATIO:
        return Confidence.HIGH
    return Confidence.MEDIUM if margin >= MEDIUM_CONFIDENCE_RATIO else Confidence.LOW


def _busy(ranked: list[dict[str, object]], stragglers: StragglerResult, table: pl.DataFrame) -> Decision:
    """No waste passes its threshold: compute-bound when compute is the largest share, else mixed."""
    compute = next(r for r in ranked if _threshold(r) is None)
    share = num(compute["share_pct"])
    larger = [r for r in ranked if r is not compute and num(r["share_pct"]) > share]
    if larger:  # a waste below its threshold is still larger than compute: nothing dominates
        parts = [BoundKind(r["bound"]) for r in (larger[0], compute)]
        mixed = Finding(bound=BoundKind.MIXED, share_pct=round(share, 4), confidence=Confidence.LOW, components=parts)
        return Decision(mixed, (), table)
    margin = HIGH_CONFIDENCE_RATIO if share >= 50 else MEDIUM_CONFIDENCE_RATIO
    return Decision(_finding(compute, _confidence(margin), stragglers, margin=margin), (), table)


def _threshold(row: dict[str, object]) -> float | None:
    return THRESHOLDS.get(BoundKind(row["bound"]))


def _finding(
    row: dict[str, object], confidence: Confidence, stragglers: StragglerResult, *, margin: float | None = None
) -> Finding:
    bound = BoundKind(row["bound"])
    threshold = THRESHOLDS.get(bound)
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
    )
