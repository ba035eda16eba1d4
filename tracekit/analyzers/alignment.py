"""Aligning the ranks' collectives before matching them by order.

A collective with a sequence number is matched by it. Without one, the k-th call of an
operation in a group is matched with the k-th on the other ranks, which silently pairs the
wrong calls when one rank's trace starts (or ends) a step apart from the others' (each rank
starting its profiler on its own). So calls are first placed in a *unit*: the step (its number
from the trace's step markers, warm-up included) whose window holds the call's launch, or, on a
rank without step markers or outside every step, the rest of the trace. Within a unit, the
ranks that hold it and belong to the group must hold the same count of each operation; the
k-th call of the unit is then matched with the k-th. A unit where the counts differ does not
align: its calls are left out of every cross-rank figure and listed in the
:func:`misaligned` frame (the ranks, the step, their counts), never paired by guess.

Point-to-point operations (send, recv) are held by two ranks of their group, not all: their
counts need not agree. Units held by some ranks only (a step one rank's trace does not cover) align among the ranks
that hold them; their instances are not *common* (held by every rank of the group present),
which is what the figures count.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from tracekit.results.vocab import MatchKey

#: The unit of calls outside every step (or on a rank without step markers).
OUTSIDE: Final = -1
_KEY: Final = ("pg", "op", "matched_by")
#: Operations between two ranks of a group: the other ranks of the group do not hold them, so
#: counts do not have to agree (they are matched by order within the step).
POINT_TO_POINT: Final = r"(?i)^(?:send|recv|isend|irecv|p2p|batch_isend_irecv)$"


def _counts(ordered: pl.DataFrame) -> pl.DataFrame:
    """pg, op, matched_by, unit, rank, n: each member rank's count of calls in each unit it
    holds (0 where it holds the unit but no call of that operation)."""
    units = ordered.select("rank", "unit").unique()
    members = ordered.select("pg", "matched_by", "rank").unique()
    ops = ordered.select(*_KEY).unique()
    held = ordered.group_by("rank", *_KEY, "unit").agg(n=pl.len())
    grid = members.join(units, on="rank").join(ops, on=["pg", "matched_by"])
    return grid.join(held, on=["rank", *_KEY, "unit"], how="left").with_columns(pl.col("n").fill_null(0))


def align(found: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``found`` (calls keyed pg, op, matched_by, k, with their ``window`` step) re-keyed so that
    order-matched calls pair within aligned units, without the calls of units that do not align;
    and the :func:`misaligned` frame of those units."""
    by_seq = found.filter(pl.col("matched_by") == MatchKey.SEQUENCE.value)
    ordered = found.filter(pl.col("matched_by") != MatchKey.SEQUENCE.value).with_columns(
        unit=pl.col("window").fill_null(OUTSIDE)
    )
    if ordered.height == 0:
        return found, misaligned_frame()
    counts = _counts(ordered)
    differ = (
        counts.group_by(*_KEY, "unit")
        .agg(pl.col("rank").sort(), pl.col("n").sort_by("rank").alias("counts"), distinct=pl.col("n").n_unique())
        .filter(pl.col("distinct") > 1, ~pl.col("op").cast(pl.String).str.contains(POINT_TO_POINT))
    )
    ordered = ordered.join(differ.select(*_KEY, "unit"), on=[*_KEY, "unit"], how="anti")
    within = pl.int_range(pl.len()).over("rank", *_KEY, "unit", order_by="start_ns")
    k = pl.struct("unit", "_within").rank("dense").over(*_KEY) - 1
    ordered = ordered.with_columns(_within=within).with_columns(k=k.cast(found.schema["k"])).drop("unit", "_within")
    return pl.concat([by_seq, ordered]), _as_misaligned(differ)


def misaligned_frame() -> pl.DataFrame:
    """The units that do not align: pg, op, step (null: outside every step), ranks, counts."""
    ints = pl.List(pl.Int64)
    schema: dict[str, pl.DataType] = {"pg": pl.String(), "op": pl.String(), "step": pl.Int64(), "ranks": ints}
    schema["counts"] = ints
    return pl.DataFrame(schema=schema)


def _as_misaligned(differ: pl.DataFrame) -> pl.DataFrame:
    step = pl.when(pl.col("unit") != OUTSIDE).then(pl.col("unit"))
    out = differ.select(
        pl.col("pg").cast(pl.String),
        pl.col("op").cast(pl.String),
        step.cast(pl.Int64).alias("step"),
        pl.col("rank").cast(pl.List(pl.Int64)).alias("ranks"),
        pl.col("counts").cast(pl.List(pl.Int64)),
    )
    return pl.concat([misaligned_frame(), out]).sort("step", "pg", "op", nulls_last=True)


def with_members(found: pl.DataFrame) -> pl.DataFrame:
    """``found`` with ``members_present``: how many ranks of the run hold any call of its group."""
    return found.with_columns(members_present=pl.col("rank").n_unique().over("pg", "matched_by"))
