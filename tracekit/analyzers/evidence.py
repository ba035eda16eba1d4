"""The figures behind each bound (the verdict's shares come from the ledger), and notes beside it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tracekit.analyzers.alignment import POINT_TO_POINT
from tracekit.analyzers.collectives import INSTANCE
from tracekit.analyzers.convert import DECIMALS
from tracekit.analyzers.stats import num
from tracekit.analyzers.verdict import COMMS_MIN_SHARE, LOW_OVERLAP_PCT
from tracekit.results.analysis import Evidence, Finding, KernelShare, OpLatency, StragglerEvidence
from tracekit.results.vocab import Confidence, NoteKind

if TYPE_CHECKING:
    from tracekit.analyzers.collectives import CollectiveResult
    from tracekit.analyzers.dataloader import DataLoaderResult
    from tracekit.analyzers.kernels import KernelResult
    from tracekit.analyzers.overlap import OverlapResult
    from tracekit.analyzers.steps import StepResult
    from tracekit.analyzers.stragglers import StragglerResult
    from tracekit.analyzers.syncs import SyncResult


def _op_time(per_rank: pl.DataFrame, instances: pl.DataFrame) -> pl.DataFrame:
    """Per operation (``op``), the time its calls of the ``instances`` kept take a rank
    (``time_ns``: their durations summed over the ranks, over how many ranks hold any): what
    each operation weighs in the ranks' communication, matched across ranks or not."""
    if not per_rank.height or INSTANCE not in per_rank.columns or INSTANCE not in instances.columns:
        return pl.DataFrame(schema={"op": per_rank.schema.get("op", pl.String), "time_ns": pl.Float64})
    # the calls of those instances (a semi join took 0.145 s of the reduce of 1,024 dense ranks'
    # 2.3M calls, polars 2.1; this filter 0.006)
    kept = per_rank.filter(pl.col(INSTANCE).is_in(instances.get_column(INSTANCE).implode()))
    ranks = max(1, kept.get_column("rank").n_unique())
    return kept.group_by("op").agg((pl.col("duration_ns").sum() / ranks).alias("time_ns"))


def evidence(
    *,
    steps: StepResult,
    dataloader: DataLoaderResult,
    collectives: CollectiveResult,
    stragglers: StragglerResult,
    overlap: OverlapResult | None,
    syncs: SyncResult,
    kernels: KernelResult,
) -> Evidence:
    """The figures behind each bound, per step where that is how a reader thinks of them."""
    n_steps = max(1, int(num(steps.steps.group_by("rank").len()["len"].max()))) if steps.has_steps else 1
    fields: dict[str, object] = {"steps_per_rank": n_steps}
    dl = dataloader.per_step
    if dl.height:
        worst = dl.sort(  # ties to the lowest rank and step, however the ranks were sharded
            ["share_pct", "rank", "step"], descending=[True, False, False], nulls_last=True
        ).row(0, named=True)
        fields.update(
            data_measure=dataloader.measure,
            fetch_per_step_ns=num(dataloader.per_rank["fetch_ns"].mean()) / n_steps,
            loader_per_step_ns=num(dataloader.per_rank["loader_ns"].mean()) / n_steps,
            worst_data_rank=worst["rank"],
            worst_data_step=worst["step"],
            worst_data_share_pct=num(worst["share_pct"]),
        )
    inst = collectives.instances
    if inst.height:
        # only instances every rank of the group present holds: a step one rank's trace does not
        # cover would count its calls (unmatched) beside the others' (matched); point-to-point
        # operations involve two ranks of their group by design
        point_to_point = pl.col("op").str.contains(POINT_TO_POINT)
        inst = inst.filter(pl.col("common") | point_to_point) if "common" in inst.columns else inst
        matched = pl.col("matched").any()  # floors and waits of unmatched instances are unknown, not 0
        by_op = inst.group_by("op").agg(
            pl.len().alias("n"),
            pl.when(matched).then(pl.col("floor_ns").sum()).alias("floor_ns"),
            pl.when(matched).then(pl.col("mean_wait_ns").sum()).alias("mean_wait_ns"),
            pl.col("matched").sum().alias("matched"),
        )
        by_op = by_op.join(_op_time(collectives.per_rank, inst), on="op", how="left")
        order = by_op.sort(["floor_ns", "time_ns", "op"], descending=[True, True, False], nulls_last=True)
        fields["ops"] = [
            OpLatency(
                op=r["op"],
                count=r["n"],
                floor_ns=None if r["floor_ns"] is None else int(r["floor_ns"]),
                mean_wait_ns=None if r["mean_wait_ns"] is None else round(num(r["mean_wait_ns"]), DECIMALS),
                matched=int(r["matched"]),
                time_ns=None if r["time_ns"] is None else int(r["time_ns"]),
            )
            for r in order.head(4).rows(named=True)
        ]
        fields["has_collectives"] = True
        if overlap is not None and overlap.per_rank.height and overlap.per_rank["overlap_pct"].mean() is not None:
            fields["mean_overlap_pct"] = num(overlap.per_rank["overlap_pct"].mean())
    fields["stragglers"] = [
        StragglerEvidence(
            rank=s.rank,
            times_last=s.times_last,
            instances=s.instances,
            caused_wait_per_step_ns=round(s.caused_wait_ns / n_steps, DECIMALS),
            score=round(s.score, DECIMALS),
            cause=s.cause,
            phase=s.phase,
            cause_excess_ns=round(s.cause_excess_ns, DECIMALS),
        )
        for s in stragglers.stragglers
    ]
    per = syncs.per_rank
    if per.height:
        fields.update(
            sync_calls_per_step=num(per["per_step_calls"].mean()),
            sync_ops_per_step=num(per["per_step_ops"].mean()),
            idle_after_sync_per_step_ns=num(per["idle_after_ns"].mean()) / n_steps,
        )
    top = kernels.top.filter(pl.col("category") == "compute").head(3)
    fields["top_kernels"] = [
        KernelShare(name=r["name"], share_pct=None if r["share_pct"] is None else round(r["share_pct"], DECIMALS))
        for r in top.iter_rows(named=True)
    ]
    rounded = {k: round(v, DECIMALS) if isinstance(v, float) else v for k, v in fields.items()}
    return Evidence(**rounded)  # type: ignore[arg-type]


def sync_finding(syncs: SyncResult, *, has_gpu: bool) -> Finding | None:
    """A note for per-step host reads (``.item()``) even where they cost nothing yet."""
    if not syncs.per_rank.height:
        return None
    ops = num(syncs.per_rank["per_step_ops"].mean())
    if ops < 1:
        return None
    return Finding(
        note=NoteKind.HOST_SYNCS, confidence=Confidence.MEDIUM if has_gpu else Confidence.LOW, value=round(ops, 4)
    )


def overlap_finding(overlap: OverlapResult, comms_share: float) -> Finding | None:
    """Low comm/compute overlap where communication matters."""
    if not overlap.per_rank.height or comms_share < 100 * COMMS_MIN_SHARE:
        return None
    if overlap.per_rank["overlap_pct"].null_count() == overlap.per_rank.height:
        return None
    mean = num(overlap.per_rank["overlap_pct"].mean())
    if mean >= LOW_OVERLAP_PCT:
        return None
    return Finding(
        note=NoteKind.LOW_OVERLAP,
        confidence=Confidence.MEDIUM,
        value=round(mean, 4),
        values=[round(float(v), 4) for v in overlap.per_rank["overlap_pct"].fill_null(0)],
    )
