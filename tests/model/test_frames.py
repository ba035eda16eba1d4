"""The query-free frame operations give what the polars operations they replace give."""

from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from tracekit.model.frames import columns, kept, taken

ROWS = st.integers(0, 30)


def frame(n: int, seed: int) -> pl.DataFrame:
    values = [(seed * 7 + i * 13) % 11 for i in range(n)]
    return pl.DataFrame(
        {
            "rank": pl.Series(values, dtype=pl.Int32),
            "start_ns": pl.Series([v * 10 for v in values], dtype=pl.Int64),
            "name": pl.Series([f"op{v % 3}" if v % 4 else None for v in values], dtype=pl.Categorical),
            "x": pl.Series([v / 3 if v % 5 else None for v in values], dtype=pl.Float64),
        }
    )


@given(ROWS, st.integers(0, 100))
def test_kept_is_filter(n: int, seed: int) -> None:
    df = frame(n, seed)
    for mask in (df["rank"] > 4, (df["x"] > 1.0), df["rank"] >= 0, df["rank"] < 0):
        assert_frame_equal(kept(df, mask), df.filter(mask))


@given(ROWS, st.integers(0, 100))
def test_taken_is_gather(n: int, seed: int) -> None:
    df = frame(n, seed)
    rows = pl.Series([(seed + 3 * i) % n for i in range(n // 2)] if n else [], dtype=pl.UInt32)
    assert_frame_equal(taken(df, rows), df[rows])


def test_columns_is_select() -> None:
    df = frame(12, 1)
    assert_frame_equal(columns(df, "x", "rank"), df.select("x", "rank"))
    assert_frame_equal(columns(df.head(0), "name"), df.head(0).select("name"))


def test_kept_keeps_the_frame_itself_when_every_row_is() -> None:
    df = frame(5, 2)
    assert kept(df, df["rank"] >= 0) is df
