"""Result frames -> typed rows (:mod:`tracekit.results.rows`), once, at the end of an analysis."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

import msgspec
import polars as pl

if TYPE_CHECKING:
    from collections.abc import Iterator

T = TypeVar("T")
#: Floats are kept to this many decimals (ns and percentages: far below what anyone reads).
DECIMALS = 4


def rows(df: pl.DataFrame, row_type: type[T]) -> list[T]:
    """Every row of ``df`` as a ``row_type`` Struct; columns it does not declare are dropped.

    NaN and infinities become None; categorical and enum columns become strings. The rows go
    through JSON (polars writes it, msgspec decodes the Structs): 2.5x as fast as Python dicts
    on the reduce's tables of a row per rank and step (300k rows: 0.5 -> 0.2 s); a frame with
    nested columns (whose floats are not cleaned) takes the dicts.
    """
    fields = set(getattr(row_type, "__struct_fields__", ()))
    cleaned = []
    for name, dtype in df.schema.items():
        if fields and name not in fields:
            continue
        col = pl.col(name)
        if dtype.is_float():
            col = pl.when(col.is_finite()).then(col.round(DECIMALS))
        elif isinstance(dtype, (pl.Categorical, pl.Enum)):
            col = col.cast(pl.String)
        cleaned.append(col.alias(name))
    frame = df.select(cleaned)
    with untracked():
        if any(dtype.is_nested() for dtype in frame.schema.values()):
            result: list[T] = msgspec.convert(frame.to_dicts(), list[row_type])  # type: ignore[valid-type]
        else:
            result = msgspec.json.decode(frame.write_json(), type=list[row_type])  # type: ignore[valid-type]
    return result


@contextmanager
def untracked() -> Iterator[None]:
    """The cyclic garbage collector paused while rows are made: hundreds of thousands of
    Structs and their maps, no cycle among them, each allocation counting towards a collection
    that walks every object of the process (at 1,024 ranks of 224 steps the ledger's 229k rows
    took 5.4-5.6 s of CPU with it running, 3.6-3.8 without). Running again as it was after."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
