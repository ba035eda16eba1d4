"""The event frame's columns of no value hold no buffer."""

from __future__ import annotations

import polars as pl

from tracekit.model.schema import all_null, with_literals, without_null_columns


def test_columns_of_no_value_become_literals_and_the_frame_is_unchanged() -> None:
    n = 200_000
    df = pl.DataFrame(
        {
            "start_ns": list(range(n)),
            "bytes": pl.Series([None] * (n - 1) + [7], dtype=pl.Int64),
            "seq": pl.Series([None] * n, dtype=pl.Int32),
            "pg_name": pl.Series([None] * n, dtype=pl.String).cast(pl.Categorical),
        }
    )
    out = without_null_columns(df)
    # the two empty columns no longer hold a buffer each (4 bytes of Int32 and of codes per
    # row); measured first: reading a literal column as a series materializes it (in pages
    # never written, so not resident, but counted by ``estimated_size``)
    assert out.estimated_size() < df.estimated_size() - 6 * n
    assert out.equals(df)
    assert out.schema == df.schema
    assert [c for c in df.columns if all_null(df, c)] == ["seq", "pg_name"]
    # the operations the analyses make give what they give on the buffers
    keep = pl.col("start_ns") % 2 == 0
    assert out.filter(keep).sort("start_ns", descending=True).equals(df.filter(keep).sort("start_ns", descending=True))
    assert pl.concat([out, out]).equals(pl.concat([df, df]))


def test_a_frame_without_rows_or_without_empty_columns_is_returned_as_it_is() -> None:
    empty = pl.DataFrame(schema={"seq": pl.Int32})
    assert without_null_columns(empty) is empty
    full = pl.DataFrame({"seq": [1, None]}, schema={"seq": pl.Int32})
    assert without_null_columns(full) is full


def test_with_literals_makes_columns_of_one_value_or_none_literals_and_keeps_every_value() -> None:
    """An integer column of one value (no null) and a column of none become literals (no
    buffer: a few bytes, not one value a row); a column of two values, one with a null, and a
    string column of one value stay buffers. Filters, joins and sorts read the same values."""
    rows = 1000
    frame = pl.DataFrame(
        {
            "rank": [3] * rows,
            "device": [0, None] * (rows // 2),
            "stream": [7, 9] * (rows // 2),
            "bytes": pl.Series([None] * rows, dtype=pl.Int64),
            "name": ["k"] * rows,
            "start_ns": list(range(rows, 0, -1)),
        }
    )
    made = with_literals(frame)
    # (before anything reads the literals row by row: that makes them buffers, as the frame's own)
    held = {c: made.select(c).estimated_size() for c in made.columns}
    assert {c for c, size in held.items() if size < rows} == {"rank", "bytes"}
    assert made.equals(frame)
    assert made.schema == frame.schema
    assert made.filter(pl.col("stream") == 9).equals(frame.filter(pl.col("stream") == 9))
    assert made.sort("start_ns").equals(frame.sort("start_ns"))
    other = pl.DataFrame({"rank": [3], "stream": [9], "note": ["x"]})
    assert made.join(other, on=["rank", "stream"]).equals(frame.join(other, on=["rank", "stream"]))
    assert with_literals(frame.clear()).equals(frame.clear())
