"""Summary statistics shared by the analyzers (mean, median, p95 as polars expressions), and
group-bys over long frames (:func:`grouped`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

#: A group-by of at least this many rows, on at least :data:`STREAM_KEYS` keys, runs on polars'
#: streaming engine (:func:`grouped`).
STREAM_ROWS: Final = 50_000
STREAM_KEYS: Final = 3


def summary_exprs(column: str, prefix: str = "") -> list[pl.Expr]:
    """count, mean, median, p95, min and max of ``column`` (nearest-rank p95)."""
    col = pl.col(column)
    return [
        col.count().alias(f"{prefix}count"),
        col.mean().alias(f"{prefix}mean_ns"),
        col.median().alias(f"{prefix}median_ns"),
        col.quantile(0.95, interpolation="higher").alias(f"{prefix}p95_ns"),
        col.min().alias(f"{prefix}min_ns"),
        col.max().alias(f"{prefix}max_ns"),
    ]


def share(part: str, whole: str, alias: str) -> pl.Expr:
    """``part / whole`` as a percentage, null when ``whole`` is zero."""
    return pl.when(pl.col(whole) > 0).then(100.0 * pl.col(part) / pl.col(whole)).otherwise(None).alias(alias)


def num(value: object) -> float:
    """A polars scalar (``mean()``, ``sum()``, a row value) as a float; 0.0 for null."""
    return 0.0 if value is None else float(value)  # type: ignore[arg-type]


def totals(frame: pl.DataFrame, columns: Iterable[str]) -> dict[str, int]:
    """The sums of these count ``columns`` of ``frame`` (0 for a column it lacks)."""
    return {c: int(num(frame[c].sum())) if c in frame.columns else 0 for c in columns}


def grouped(df: pl.DataFrame, by: Sequence[str | pl.Expr], *aggs: pl.Expr, **named: pl.Expr) -> pl.DataFrame:
    """``df.group_by(*by).agg(*aggs, **named)``, the groups in no set order, on polars'
    streaming engine where ``df`` is long and grouped on several keys.

    The in-memory engine encodes every row's keys into one binary key before it hashes them
    once there are three keys or more: on the 1.4M GPU segments of a 2 GB rank, three keys took
    +123 MB and 0.11 s where the streaming engine took +6 MB and 0.03 s (on one or two keys
    the engines keep level). Only for aggregations that the order of the rows cannot change
    (sums of integers, counts, minima, maxima): the engines may add the rows in other orders.
    """
    query = df.lazy().group_by(*by).agg(*aggs, **named)
    streaming = df.height >= STREAM_ROWS and len(by) >= STREAM_KEYS
    return query.collect(engine="streaming" if streaming else "in-memory")
