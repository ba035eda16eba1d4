"""Summary statistics shared by the analyzers (mean, median, p95 as polars expressions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from collections.abc import Iterable


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
