"""Decoded JSON values -> typed polars columns, tolerating values of other JSON types."""

from __future__ import annotations

from itertools import repeat
from typing import Any, Final

import polars as pl

#: What building a column of one dtype from values of other JSON types raises.
_MIXED: Final = (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError)
#: Integer columns that Kineto writes as text in some rows (``"pid": "Spans"``).
_OFTEN_TEXT: Final = ("pid", "tid")
#: The integer in a text id such as "stream 7".
_INT_IN_TEXT: Final = r"(-?\d+)\s*$"


def column(name: str, values: list[Any], dtype: pl.DataType) -> pl.Series:
    """A column of ``dtype`` from decoded values; mixed JSON types take a tolerant path.

    Integers written as text in some rows (``"pid": "Spans"``, ``"tid": "stream 7"``) become
    the last run of digits in the text, else null; any other value of the wrong type is null.
    """
    if name not in _OFTEN_TEXT:
        try:
            return pl.Series(name, values, dtype=dtype, strict=True)
        except _MIXED:
            pass
    if dtype.is_integer():
        try:
            ints: pl.Series = _ints_and_text(name, values).cast(dtype, strict=False)
            return ints
        except _MIXED:
            pass
    series = pl.Series(name, values, strict=False)
    if dtype.is_integer() and series.dtype == pl.String:
        series = series.str.extract(_INT_IN_TEXT)
    out: pl.Series = series.cast(dtype, strict=False)
    return out


def _ints_and_text(name: str, values: list[Any]) -> pl.Series:
    """Integers that some rows write as text (``"pid": "Spans"``, ``"tid": "stream 7"``).

    The text values (found by one C-level ``map(isinstance, ...)`` pass) are taken out of
    ``values`` and parsed on their own (their last run of digits, else null), so that the
    rest still builds on the fast path.
    """
    at = pl.Series(list(map(isinstance, values, repeat(str))), dtype=pl.Boolean).arg_true().to_list()
    text = pl.Series([values[i] for i in at], dtype=pl.String)
    for i in at:
        values[i] = None
    ints = pl.Series(name, values, dtype=pl.Int64, strict=True)
    return ints.scatter(at, text.str.extract(_INT_IN_TEXT).cast(pl.Int64, strict=False)) if at else ints
