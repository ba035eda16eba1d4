"""Decoded JSON values -> typed polars columns, tolerating values of other JSON types."""

from __future__ import annotations

import math
import re
from typing import Any, Final

import polars as pl

#: What building a column of one dtype from values of other JSON types raises.
_MIXED: Final = (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError)
#: Integer columns that Kineto writes as text in some rows (``"pid": "Spans"``).
_OFTEN_TEXT: Final = ("pid", "tid")
#: The integer in a text id such as "stream 7".
_INT_IN_TEXT: Final = r"(-?\d+)\s*$"


def rows_frame(rows: list[tuple[Any, ...]], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Query rows (in ``schema`` order) as a frame of ``schema``; values of other types are null.

    SQLite keeps any type in any column: the fast row-wise build fails on such a value, and
    the columns are then built one by one through :func:`column`.
    """
    try:
        return pl.DataFrame(rows, schema=schema, orient="row")
    except (pl.exceptions.PolarsError, TypeError, ValueError, OverflowError):
        values = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
        return pl.DataFrame([column(c, list(v), t) for (c, t), v in zip(schema.items(), values, strict=True)])


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
    return pl.Series(name, [_tolerant(v, dtype) for v in values], dtype=dtype)


#: The range of an Int64 column.
_INT64: Final = (-(2**63), 2**63 - 1)


def _tolerant(value: Any, dtype: pl.DataType) -> Any:
    """One value as ``dtype`` wants it, or None: the slow path, for files with values of any type.

    Booleans are not numbers here (``"ts": true`` is no time), integers beyond int64 and
    non-finite floats are no value, text becomes a number only where an id is written as
    text (its last run of digits), and containers are never a value.
    """
    if value is None or isinstance(value, bool | dict | list | tuple):
        return None
    if isinstance(value, bytes):  # a SQLite BLOB
        value = value.decode("utf-8", errors="replace")
    if dtype == pl.String:
        return value if isinstance(value, str) else str(value)
    if dtype.is_integer():
        return _tolerant_int(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _tolerant_int(value: Any) -> int | None:
    if isinstance(value, str):
        digits = re.search(_INT_IN_TEXT, value)
        value = int(digits.group(1)) if digits else None
    elif isinstance(value, float):
        value = int(value) if math.isfinite(value) and value.is_integer() else None
    return value if isinstance(value, int) and _INT64[0] <= value <= _INT64[1] else None


def _ints_and_text(name: str, values: list[Any]) -> pl.Series:
    """Integers that some rows write as text (``"pid": "Spans"``, ``"tid": "stream 7"``).

    The text values (found by C-level passes over the values' types: text is rare, and a
    column without any is one count) are taken out of ``values`` and parsed on their own
    (their last run of digits, else null), so that the rest still builds on the fast path.
    """
    types = list(map(type, values))
    at: list[int] = []
    for _ in range(types.count(str)):
        at.append(types.index(str, at[-1] + 1 if at else 0))
    if not at:
        return pl.Series(name, values, dtype=pl.Int64, strict=True)
    text = pl.Series([values[i] for i in at], dtype=pl.String)
    values = list(values)  # the caller's list stays as it was, for its fallback
    for i in at:
        values[i] = None
    ints = pl.Series(name, values, dtype=pl.Int64, strict=True)
    return ints.scatter(at, text.str.extract(_INT_IN_TEXT).cast(pl.Int64, strict=False))
