"""Collectives matched across ranks: the k-th instance of each collective, on every rank.

An instance is keyed by (process group, operation, k): the k-th ``AllReduce`` kernel of a
rank is matched with the k-th ``AllReduce`` of every other rank. Ranks leave a collective
together, so the shortest duration of an instance over ranks is its *latency floor* (the
cost of the communication itself) and the rest of each rank's duration is *waiting* for
the others: the rank that waits least arrived last.

GPU runs use communication kernels (every family of :mod:`tracekit.model.taxonomy`, each named
by its operation: ``AllReduce``, ``deepep_dispatch``, ``symm_mem_one_shot_all_reduce``); a rank
without any uses its host-side collectives: ``gloo:``/``mpi:``/``ucc:`` operations (whose spans
include the wait), else ``c10d::`` calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.model.taxonomy import kernel_op_expr

if TYPE_CHECKING:
    from tracekit.analyzers.steps import StepResult
    from tracekit.model.run import Run

HOST_OP: Final = r"^(?:gloo|nccl|mpi|ucc):([A-Za-z0-9_]+)"
C10D_OP: Final = r"^c10d(?:_functional)?::([A-Za-z0-9_]+?)_?$"
#: A rank "arrived last" when its wait is within this share of the instance's spread ...
LAST_TOLERANCE_SHARE: Final = 0.05
#: ... or within this many ns of the shortest wait.
LAST_TOLERANCE_NS: Final = 20_000


@dataclass(frozen=True)
class CollectiveResult:
    """Matched collective instances."""

    #: rank, pg, op, k, source ("kernel"/"host"), step, arrival_ns (launch or start), start_ns,
    #: end_ns, duration_ns, floor_ns, wait_ns, lateness_ns, is_last
    per_rank: pl.DataFrame
    #: pg, op, k, ranks, first_start_ns, floor_ns, spread_ns, mean_wait_ns, last_rank (shortest
    #: wait), last_ranks (within tolerance of it)
    instances: pl.DataFrame

    @property
    def has_collectives(self) -> bool:
        """Whether any collective was found."""
        return self.per_rank.height > 0


def _kernel_collectives(activity: pl.DataFrame) -> pl.DataFrame:
    return activity.filter(pl.col("category") == "collective", pl.col("kind") == "kernel").select(
        "rank",
        kernel_op_expr(pl.col("name").cast(pl.String)).alias("op"),
        pl.col("launch_ns").alias("arrival_ns"),
        "start_ns",
        "end_ns",
        pl.lit("kernel").alias("source"),
    )


def _host_collectives(run: Run, ranks_with_kernels: pl.Series) -> pl.DataFrame:
    host = run.select(
        ["cpu_op", "annotation"],
        "rank",
        pl.col("name").cast(pl.String).alias("n"),
        "start_ns",
        "end_ns",
        where=(pl.col("category") == "collective") & ~pl.col("rank").is_in(ranks_with_kernels.implode()),
    )
    backend = host.filter(pl.col("n").str.contains(HOST_OP)).with_columns(op=pl.col("n").str.extract(HOST_OP))
    c10d = host.filter(
        pl.col("n").str.contains(C10D_OP), ~pl.col("rank").is_in(backend["rank"].unique().implode())
    ).with_columns(op=pl.col("n").str.extract(C10D_OP))
    return pl.concat([backend, c10d]).select(
        "rank", "op", pl.col("start_ns").alias("arrival_ns"), "start_ns", "end_ns", pl.lit("host").alias("source")
    )


def match_collectives(run: Run, activity: pl.DataFrame, steps: StepResult) -> CollectiveResult:
    """Match every rank's collectives and measure floors, waits and who arrived last."""
    return match_found(find_collectives(run, activity, steps))


def find_collectives(run: Run, activity: pl.DataFrame, steps: StepResult) -> pl.DataFrame:
    """The per-rank part: every collective of each rank, numbered (k) per group and op, with its step.

    Columns: rank, pg, op, k, source, step, arrival_ns, start_ns, end_ns, duration_ns.
    """
    kernels = _kernel_collectives(activity)
    found = pl.concat([kernels, _host_collectives(run, kernels["rank"].unique())]).with_columns(
        pg=pl.lit(""), duration_ns=pl.col("end_ns") - pl.col("start_ns")
    )
    found = found.sort("rank", "start_ns").with_columns(k=pl.int_range(pl.len()).over("rank", "pg", "op"))
    keys = ["pg", "op", "k"]
    if steps.has_steps:
        frames = steps.steps.select(
            "rank", "step", pl.col("win_start_ns").alias("start_ns"), pl.col("win_end_ns").alias("end_ns")
        )
        located = iv.locate(found, "arrival_ns", frames, by=["rank"], keep=["step"]).drop("frame_end_ns")
        found = found.join(located.select("rank", *keys, "step"), on=["rank", *keys], how="left")
    else:
        found = found.with_columns(step=pl.lit(None, dtype=pl.Int64))
    return found.select("rank", *keys, "source", "step", "arrival_ns", "start_ns", "end_ns", "duration_ns")


def match_found(found: pl.DataFrame) -> CollectiveResult:
    """The cross-rank part: match the k-th instances, floors, waits, who arrived last."""
    keys = ["pg", "op", "k"]
    found = found.with_columns(floor_ns=pl.col("duration_ns").min().over(keys)).with_columns(
        wait_ns=pl.col("duration_ns") - pl.col("floor_ns")
    )
    spread = pl.col("wait_ns").max().over(keys) - pl.col("wait_ns").min().over(keys)
    tolerance = pl.max_horizontal(spread * LAST_TOLERANCE_SHARE, pl.lit(LAST_TOLERANCE_NS))
    found = found.with_columns(
        lateness_ns=pl.col("wait_ns").max().over(keys) - pl.col("wait_ns"),
        is_last=(pl.col("wait_ns") - pl.col("wait_ns").min().over(keys) <= tolerance)
        & (pl.len().over(keys) > 1)
        & (spread > LAST_TOLERANCE_NS),
    )
    per_rank = found.select(
        "rank",
        *keys,
        "source",
        "step",
        "arrival_ns",
        "start_ns",
        "end_ns",
        "duration_ns",
        "floor_ns",
        "wait_ns",
        "lateness_ns",
        "is_last",
    ).sort("rank", "start_ns")
    instances = (
        found.group_by(keys)
        .agg(
            ranks=pl.len(),
            first_start_ns=pl.col("start_ns").min(),
            floor_ns=pl.col("floor_ns").first(),
            spread_ns=pl.col("wait_ns").max() - pl.col("wait_ns").min(),
            mean_wait_ns=pl.col("wait_ns").mean(),
            last_rank=pl.col("rank").sort_by("wait_ns", "start_ns", descending=[False, True]).first(),
            last_ranks=pl.col("rank").filter(pl.col("is_last")).sort(),
        )
        .sort("op", "k")
    )
    return CollectiveResult(per_rank=per_rank, instances=instances)
