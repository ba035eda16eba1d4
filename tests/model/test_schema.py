"""The event frame's columns of no value hold no buffer."""

from __future__ import annotations

import polars as pl

from tracekit.model.schema import all_null, without_null_columns


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
