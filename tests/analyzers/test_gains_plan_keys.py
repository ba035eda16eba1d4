"""The gains' plans match tasks to collective kernels on hashed keys: the same rows as a
unique and a join on the keys themselves (duplicates, nulls, tasks of no kernel)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyzers.gains_plan import TASK_KEYS, _first_of_keys, _matched

KEYS = list(TASK_KEYS)
_ROW = st.tuples(st.integers(0, 2), st.sampled_from([None, -1, 7]), st.integers(0, 6), st.integers(0, 3))


@contextmanager
def _colliding(collide: bool) -> Iterator[None]:
    """Every row's hash the same (each pair of rows a collision), when ``collide``."""
    if not collide:
        yield
        return
    real = pl.DataFrame.hash_rows
    pl.DataFrame.hash_rows = lambda self, *a, **k: pl.Series([0] * self.height, dtype=pl.UInt64)  # type: ignore[method-assign]
    try:
        yield
    finally:
        pl.DataFrame.hash_rows = real  # type: ignore[method-assign]


def _frame(rows: list[tuple[int, int | None, int, int]]) -> pl.DataFrame:
    data = [(r, s, t, t + d) for r, s, t, d in rows]
    schema = {"rank": pl.Int64, "stream": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64}
    return pl.DataFrame(data, schema=schema, orient="row")


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(_ROW, max_size=40), collide=st.booleans())
def test_first_of_keys_is_unique_keep_first(rows: list[tuple[int, int | None, int, int]], collide: bool) -> None:
    df = _frame(rows).with_row_index("i")
    with _colliding(collide):
        found = _first_of_keys(df, KEYS)
    assert found.drop("_hash").equals(df.unique(KEYS, keep="first", maintain_order=True))


@settings(max_examples=300, deadline=None)
@given(tasks=st.lists(_ROW, max_size=40), kernels=st.lists(_ROW, max_size=20), collide=st.booleans())
def test_matched_on_hashes_is_the_join_on_keys(
    tasks: list[tuple[int, int | None, int, int]], kernels: list[tuple[int, int | None, int, int]], collide: bool
) -> None:
    made = _frame(kernels).with_columns(pl.col("stream").fill_null(-1)).with_row_index("instance")
    made = made.with_columns(arrival_ns=pl.col("start_ns") - 1, instance=pl.col("instance").cast(pl.Int64))
    mine = _frame(tasks).unique(KEYS, keep="first", maintain_order=True)  # the map keeps one of each
    with _colliding(collide):
        unique = _first_of_keys(made, KEYS)
        found = _matched(mine, unique, KEYS)
    joined = mine.join(unique.drop("_hash"), on=KEYS, how="left", maintain_order="left")
    expected = joined.select(*mine.columns, pl.col("instance").fill_null(-1), "arrival_ns")
    assert found.equals(expected)
