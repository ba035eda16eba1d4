"""Interval algebra on polars frames: union, intersection, difference, gaps, sweeps.

Intervals are rows with ``start_ns`` and ``end_ns`` (half-open ``[start, end)``), grouped
by the ``by`` columns (usually ``rank``). Every measure of time in tracekit goes through
here, so time is always measured on wall-clock unions, never on per-stream sums.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from collections.abc import Sequence

START, END = "start_ns", "end_ns"
_KEY = "__group"


def _grouped(df: pl.DataFrame, by: Sequence[str]) -> tuple[pl.DataFrame, list[str]]:
    """``df`` with at least one grouping column (a constant one when ``by`` is empty)."""
    if by:
        return df, list(by)
    return df.with_columns(pl.lit(0, dtype=pl.Int8).alias(_KEY)), [_KEY]


def _ungrouped(df: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    return df if by else df.drop(_KEY)


def union(df: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """Merge overlapping or touching intervals within each group.

    Returns ``by + [start_ns, end_ns]``, disjoint and sorted. Empty intervals are dropped.
    """
    df, keys = _grouped(df.filter(pl.col(END) > pl.col(START)), by)
    reach = pl.col(END).cum_max().shift(1).over(keys)
    return _ungrouped(
        df.select(*keys, START, END)
        .sort(*keys, START)
        .with_columns(island=(pl.col(START) > reach).fill_null(True).cum_sum().over(keys))
        .group_by(*keys, "island", maintain_order=True)
        .agg(pl.col(START).min(), pl.col(END).max())
        .drop("island"),
        by,
    )


def total(df: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame | int:
    """Length of the union: an int without ``by``, else a frame ``by + [total_ns]``."""
    merged = union(df, by).with_columns((pl.col(END) - pl.col(START)).alias("total_ns"))
    if not by:
        return int(merged["total_ns"].sum())
    return merged.group_by(*by).agg(pl.col("total_ns").sum())


def sweep(df: pl.DataFrame, label: str, labels: Sequence[str], by: Sequence[str] = ()) -> pl.DataFrame:
    """Cut the timeline of each group into elementary segments.

    ``df`` holds intervals with a ``label`` column. The result has ``by + [start_ns,
    end_ns]`` and one boolean column per name in ``labels``, true where at least one
    interval of that label covers the segment. Segments cover ``[first start, last end]``
    of each group without gaps (uncovered stretches have every flag false) and never cross
    an interval boundary, so any measure is a filter and a sum of lengths.
    """
    df, keys = _grouped(df.filter(pl.col(END) >= pl.col(START)), by)
    points = pl.concat(
        [
            df.select(*keys, pl.col(START).alias("t"), pl.col(label).cast(pl.String), pl.lit(1).alias("d")),
            df.select(*keys, pl.col(END).alias("t"), pl.col(label).cast(pl.String), pl.lit(-1).alias("d")),
        ]
    ).sort(*keys, "t")
    flags = [
        ((pl.col(label) == name).cast(pl.Int32) * pl.col("d")).cum_sum().over(keys).gt(0).alias(name) for name in labels
    ]
    segments = (
        points.with_columns(*flags, pl.col("t").shift(-1).over(keys).alias(END))
        .filter(pl.col(END) > pl.col("t"))
        .rename({"t": START})
        .select(*keys, START, END, *labels)
    )
    return _ungrouped(segments, by)


def intersect(a: pl.DataFrame, b: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """The parts of time covered by both ``a`` and ``b``, per group, as disjoint intervals."""
    return _combine(a, b, by, pl.col("a") & pl.col("b"))


def subtract(a: pl.DataFrame, b: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """The parts of ``a`` not covered by ``b``, per group, as disjoint intervals."""
    return _combine(a, b, by, pl.col("a") & ~pl.col("b"))


def _combine(a: pl.DataFrame, b: pl.DataFrame, by: Sequence[str], keep: pl.Expr) -> pl.DataFrame:
    both = pl.concat(
        [
            a.select(*by, START, END).with_columns(pl.lit("a").alias("which")),
            b.select(*by, START, END).with_columns(pl.lit("b").alias("which")),
        ]
    )
    cut = sweep(both, "which", ["a", "b"], by).filter(keep)
    return union(cut.select(*by, START, END), by)


def gaps(df: pl.DataFrame, by: Sequence[str] = (), window: pl.DataFrame | None = None) -> pl.DataFrame:
    """The uncovered stretches between intervals of each group.

    Without ``window``, between the first start and the last end of each group; with a
    ``window`` frame (``by + [start_ns, end_ns]``), within those windows.
    """
    if window is None:
        window = (
            df.group_by(*by).agg(pl.col(START).min(), pl.col(END).max())
            if by
            else df.select(pl.col(START).min(), pl.col(END).max()).drop_nulls()
        )
    return subtract(window, df, by)


def locate(
    df: pl.DataFrame, time: str, frames: pl.DataFrame, *, by: Sequence[str], keep: Sequence[str]
) -> pl.DataFrame:
    """Attach to each row of ``df`` the frame that contains its ``time`` column.

    ``frames`` holds non-overlapping intervals per group (``by + [start_ns, end_ns] +
    keep``); the ``keep`` columns of the containing frame are added, with ``frame_end_ns``.
    Rows whose time falls in no frame are dropped.
    """
    right = frames.select(*by, *keep, pl.col(START).alias("frame_start_ns"), pl.col(END).alias("frame_end_ns"))
    return (
        df.sort(*by, time)
        .join_asof(
            right.sort(*by, "frame_start_ns"),
            left_on=time,
            right_on="frame_start_ns",
            by=list(by),
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col(time) < pl.col("frame_end_ns"))
        .drop("frame_start_ns")
    )
