"""Frame operations without a query: column by column, for the many small frames of an analysis.

An eager polars operation (``df.select``, ``df.filter``, ``df[rows]``) builds a lazy query, plans
it and runs it: about 50 to 200 us before any work, whatever the frame's size. An analysis of a
125 MB rank makes some 1,700 of them, most on frames of a few hundred rows, where that fixed
cost is the whole cost. Picking columns by name and filtering or gathering each column of a
frame run no query (a few us): what these do, with the results of the operations they replace.
Some methods of a series run a query as well (polars implements them as expressions on a frame
of one column: ``gather``, ``clip``, ``shift``, ``is_null``...): indexing a series with
integers (``s[rows]``) gathers without one.
"""

from __future__ import annotations

import polars as pl

__all__ = ["columns", "kept", "taken"]


def columns(df: pl.DataFrame, *names: str) -> pl.DataFrame:
    """The columns ``names`` of ``df``, in that order: ``df.select(*names)`` without a query."""
    picked: pl.DataFrame = df[list(names)]
    return picked


def kept(df: pl.DataFrame, mask: pl.Series) -> pl.DataFrame:
    """The rows of ``df`` where ``mask`` is true (null: not kept), in order: ``df.filter(mask)``
    without a query; ``df`` itself where every row is kept."""
    if mask.null_count():
        mask = mask.fill_null(False)
    if df.width == 0 or mask.all():
        return df
    return pl.DataFrame([column.filter(mask) for column in df.get_columns()])


def taken(df: pl.DataFrame, rows: pl.Series) -> pl.DataFrame:
    """The rows of ``df`` at the indices ``rows``, in their order: ``df[rows]`` without a query."""
    if df.width == 0:
        return df
    return pl.DataFrame([column[rows] for column in df.get_columns()])  # Series.gather runs a query
