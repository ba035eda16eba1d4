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

import numpy as np
import polars as pl

from tracekit.results.vocab import POINT_TO_POINT_OPS, MatchKey

#: The unit of calls outside every step (or on a rank without step markers).
OUTSIDE: Final = -1
_KEY: Final = ("pg", "op", "matched_by")
#: A group's calls (its members are the ranks that hold any of them).
_GROUP: Final = ["pg", "matched_by"]
#: Operations between two ranks of a group: the other ranks of the group do not hold them, so
#: counts do not have to agree (they are matched by order within the step).
POINT_TO_POINT: Final = rf"(?i)^(?:{POINT_TO_POINT_OPS})$"


def _counts(held: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """pg, op, matched_by, unit, rank, n, _op: each member rank's count of calls in each unit
    it holds (0 where it holds the unit but no call of that operation), from ``held`` (rank,
    _op, unit, n: the units where it holds calls) and ``ops`` (each operation's keys, ``_op``,
    and its group's number, ``_group``: pg and matched_by)."""
    units = held.select("rank", "unit").unique()
    members = held.join(ops.select("_op", "_group"), on="_op").select("_group", "rank").unique()
    grid = members.join(units, on="rank").join(ops, on="_group")
    return (
        grid.join(held, on=["rank", "_op", "unit"], how="left")
        .with_columns(pl.col("n").fill_null(0))
        .select(*_KEY, "unit", "rank", "n", "_op")
    )


def _runs(ordered: pl.DataFrame) -> tuple[np.ndarray, pl.DataFrame, np.ndarray, np.ndarray]:
    """The calls of ``ordered`` (rank, _op, unit, start_ns) in runs of one rank, operation and
    unit, by start (ties in their order): the order (``ordered``'s rows), the runs (rank, _op,
    unit, n), each call's run and its place in it, in that order. One sort, where a window per
    call and groupings on those columns cost polars a pass each over every call."""
    order = ordered.select(pl.arg_sort_by("rank", "_op", "unit", "start_ns", maintain_order=True)).to_series()
    keys = ordered.select("rank", "_op", "unit")[order]
    arrays = [keys.get_column(c).to_numpy() for c in keys.columns]
    new = np.ones(len(order), dtype=bool)
    new[1:] = np.logical_or.reduce([a[1:] != a[:-1] for a in arrays])
    starts = np.flatnonzero(new)
    run = np.cumsum(new) - 1
    place = np.arange(len(order)) - starts[run]
    runs = keys[starts].with_columns(n=pl.Series(np.diff(starts, append=len(order)), dtype=pl.UInt32))
    return order.to_numpy(), runs, run, place


def key_ids(frame: pl.DataFrame, keys: list[str]) -> tuple[pl.Series, pl.DataFrame]:
    """An integer per row (``_key``) that is the same for rows of equal ``keys`` and differs
    otherwise, and the distinct keys with theirs: the hash of the keys, where every row's keys
    are those of the first row of its hash (compared), else their dense rank. A grouping,
    window or join on a few text columns encodes every row's (2.3M calls of 1,024 ranks: 0.6 s
    a grouping, 0.7 a join, where one on an integer takes a third)."""
    hashed = frame.select(keys).with_columns(_key=frame.select(keys).hash_rows())
    firsts = hashed.unique("_key", keep="first", maintain_order=True)
    if firsts.height == 0:
        return hashed.get_column("_key"), firsts
    if firsts.height == 1:
        theirs = [pl.lit(firsts.get_column(k)[0], dtype=hashed.schema[k]) for k in keys]
    else:
        theirs = [pl.col("_key").replace_strict(firsts.get_column("_key"), firsts.get_column(k)) for k in keys]
    same = pl.all_horizontal(pl.col(k).eq_missing(t) for k, t in zip(keys, theirs, strict=True))
    if hashed.select(same.all()).item():
        return hashed.get_column("_key"), firsts
    ranked = frame.select(keys).with_columns(_key=pl.struct(keys).rank("dense").cast(pl.UInt64))
    return ranked.get_column("_key"), ranked.unique("_key", keep="first", maintain_order=True)


def align(found: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``found`` (calls keyed pg, op, matched_by, k, with their ``window`` step) re-keyed so that
    order-matched calls pair within aligned units, without the calls of units that do not align;
    and the :func:`misaligned` frame of those units.

    The k-th call of a unit is the dense rank of (unit, call of the unit) over the operation's
    aligned units: the calls of the units before it (each as many as its rank holding the most)
    plus its order in the unit."""
    by_seq = found.filter(pl.col("matched_by") == MatchKey.SEQUENCE.value)
    ordered = found.filter(pl.col("matched_by") != MatchKey.SEQUENCE.value)
    if ordered.height == 0:
        return found, misaligned_frame()
    op, ops = key_ids(ordered, list(_KEY))
    # the group (pg, matched_by) of each operation, numbered on the operations
    ops = ops.select(pl.col("_key").alias("_op"), *_KEY, _group=pl.struct(_GROUP).rank("dense"))
    order, held, run, place = _runs(
        ordered.select("rank", "start_ns", _op=op, unit=pl.col("window").fill_null(OUTSIDE))
    )
    counts = _counts(held, ops)
    differ = (
        counts.group_by("_op", "unit")
        .agg(
            *(pl.col(k).first() for k in _KEY),
            pl.col("rank").sort(),
            pl.col("n").sort_by("rank").alias("counts"),
            distinct=pl.col("n").n_unique(),
        )
        .filter(pl.col("distinct") > 1, ~pl.col("op").cast(pl.String).str.contains(POINT_TO_POINT))
    )
    if differ.height:
        counts = counts.join(differ.select("_op", "unit"), on=["_op", "unit"], how="anti")
    before = (
        counts.group_by("_op", "unit")
        .agg(pl.col("n").max())
        .sort("_op", "unit")
        .select("_op", "unit", before=(pl.col("n").cum_sum() - pl.col("n")).over("_op"))
    )
    # each run's first k (null for the units that do not align), then each call's, in place
    first = held.join(before, on=["_op", "unit"], how="left", maintain_order="left").get_column("before")
    k = np.empty(len(order), dtype=np.int64)
    k[order] = first.fill_null(-1).to_numpy()[run] + place
    keep = np.empty(len(order), dtype=bool)
    keep[order] = first.is_not_null().to_numpy()[run]
    ordered = ordered.with_columns(k=pl.Series(k).cast(found.schema["k"]))
    if not keep.all():
        ordered = ordered.filter(pl.Series(keep))
    return pl.concat([by_seq, ordered]), _as_misaligned(differ.sort(*_KEY, "unit"))


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
    schema = {"rank": pl.Int32, "shift": pl.Int64, "offset_ns": pl.Int64, "ambiguous": pl.Boolean}
    if clocks.height == 0 or not clocks.get_column("corrected").any():  # only corrected clocks shift
        return pl.DataFrame(schema=schema)
    period = step_period(found)
    if period is None:
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
