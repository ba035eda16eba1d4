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

Step numbers that are shifted on one rank (it called ``prof.step()`` once more: its #6 is the
others' #5) keep the counts per step equal, and pair each call with the call one step away: the
ends of every pair are then a whole step apart, which the clock estimate reads as an offset of
about a step (:func:`step_shifts`). Such a rank is renumbered by the shift where the estimate is a
whole number of steps within a quarter of a step (:func:`renumber`), and the calls are paired
again; where it is not (an offset of 60 ms in steps of 100 ms: a shift by one and 40 ms of clock,
or 60 ms of clock), its steps are listed as not aligning, with how far its windows are off
(``offset_ns``), and left out. Only an estimate beyond what one clock allows is looked at (the
ends of one collective differ by less than its floor on one clock), and ranks known to share the
reference rank's host are never left out for it (their clocks agree: what is not a whole number
of steps there is the order in which ranks leave).

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
    schema["offset_ns"] = pl.Int64()
    return pl.DataFrame(schema=schema)


def _as_misaligned(differ: pl.DataFrame) -> pl.DataFrame:
    step = pl.when(pl.col("unit") != OUTSIDE).then(pl.col("unit"))
    out = differ.select(
        pl.col("pg").cast(pl.String),
        pl.col("op").cast(pl.String),
        step.cast(pl.Int64).alias("step"),
        pl.col("rank").cast(pl.List(pl.Int64)).alias("ranks"),
        pl.col("counts").cast(pl.List(pl.Int64)),
        pl.lit(None, dtype=pl.Int64).alias("offset_ns"),
    )
    return pl.concat([misaligned_frame(), out]).sort("step", "pg", "op", nulls_last=True)


_ORDERED_IN_STEP: Final = pl.col("window").is_not_null() & (pl.col("matched_by") != MatchKey.SEQUENCE.value)


def step_period(found: pl.DataFrame) -> float | None:
    """The median time from a marked step's first order-matched call to the next step's, per step
    number, over every rank (None with fewer than two such steps on every rank)."""
    first = found.filter(_ORDERED_IN_STEP).group_by("rank", "window").agg(t=pl.col("launch_ns").min())
    per = first.sort("rank", "window").with_columns(p=(pl.col("t").diff() / pl.col("window").diff()).over("rank"))
    period = per.filter(pl.col("p") > 0)["p"].median()
    return float(period) if isinstance(period, (int, float)) else None


def step_shifts(found: pl.DataFrame, clocks: pl.DataFrame, hosts: pl.DataFrame) -> pl.DataFrame:
    """rank, shift (whole steps to add to its step numbers), offset_ns (its clock estimate),
    ambiguous: of each rank whose clock estimate (``clocks`` fitted per rank, hosts aside) is
    beyond one clock's and a whole number of steps or close to none (see the module docstring)."""
    period = step_period(found)
    schema = {"rank": pl.Int32, "shift": pl.Int64, "offset_ns": pl.Int64, "ambiguous": pl.Boolean}
    if period is None or clocks.height == 0:
        return pl.DataFrame(schema=schema)
    marked = found.filter(_ORDERED_IN_STEP).select(pl.col("rank").cast(pl.Int32)).unique()
    est = pl.col("estimate_ns").cast(pl.Float64)
    steps = est.sign() * (est.abs() / period - 0.5).ceil()
    host = hosts.select(pl.col("rank").cast(pl.Int32), "host")
    same_host = (pl.col("host") == pl.col("ref_host")).fill_null(False)
    return (
        clocks.filter("corrected")
        .select(pl.col("rank").cast(pl.Int32), "estimate_ns", pl.col("ref").cast(pl.Int32))
        .join(marked, on="rank")
        .join(host, on="rank", how="left")
        .join(host.rename({"rank": "ref", "host": "ref_host"}), on="ref", how="left")
        .with_columns(shift=steps.cast(pl.Int64))
        .with_columns(ambiguous=(est - pl.col("shift") * period).abs() > period / 4)
        .filter(pl.col("shift") != 0, ~(pl.col("ambiguous") & same_host))
        .select("rank", "shift", pl.col("estimate_ns").alias("offset_ns"), "ambiguous")
    )


def renumber(found: pl.DataFrame, shifts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``found`` with the step numbers of the shifted ranks' order-matched calls moved by their
    shift, without those of the ranks whose shift is ambiguous; and those as :func:`misaligned_frame` rows."""
    shifts = shifts.with_columns(pl.col("rank").cast(found.schema["rank"]))
    found = found.join(shifts, on="rank", how="left", maintain_order="left")
    out = _ORDERED_IN_STEP & pl.col("ambiguous").fill_null(False)
    moved = pl.when(_ORDERED_IN_STEP & ~out).then(pl.col("shift").fill_null(0)).otherwise(0)
    found = found.with_columns(pl.col("window") + moved, pl.col("step") + moved)
    dropped = (
        found.filter(out)
        .group_by("pg", "op", "window", "rank")
        .agg(n=pl.len(), offset_ns=pl.col("offset_ns").first())
        .select(
            pl.col("pg").cast(pl.String),
            pl.col("op").cast(pl.String),
            pl.col("window").cast(pl.Int64).alias("step"),
            pl.concat_list(pl.col("rank").cast(pl.Int64)).alias("ranks"),
            pl.concat_list(pl.col("n").cast(pl.Int64)).alias("counts"),
            "offset_ns",
        )
    )
    return found.filter(~out).drop("shift", "offset_ns", "ambiguous"), dropped


def with_members(found: pl.DataFrame) -> pl.DataFrame:
    """``found`` with ``members_present``: how many ranks of the run hold any call of its group."""
    return found.with_columns(members_present=pl.col("rank").n_unique().over("pg", "matched_by"))
