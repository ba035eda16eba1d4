"""A file's events sorted by start keep their columns of no value as literals (no buffer)."""

from __future__ import annotations

import polars as pl
import pytest

from tracekit.readers.kineto_normalize import by_start

_N = 1000


@pytest.mark.parametrize("shuffled", [True, False])
def test_a_literal_column_is_left_as_it_is_whether_or_not_the_events_are_in_order(shuffled: bool) -> None:
    starts = [(i * 7919) % _N if shuffled else i for i in range(2 * _N)]
    # as a file's events come to it: columns in chunks (one per piece of the file read), and a
    # column no event fills made a literal in the query that makes the rest
    chunks = [
        pl.DataFrame({"start_ns": starts[:_N], "x": range(_N)}),
        pl.DataFrame({"start_ns": starts[_N:], "x": range(_N, 2 * _N)}),
    ]
    frame = pl.concat(chunks, rechunk=False).lazy().with_columns(none=pl.lit(None, dtype=pl.Int64)).collect()
    expected = frame.sort("start_ns", maintain_order=True)
    out = by_start([frame], unordered=frozenset({"none"}))
    # gathered or rechunked, the literal would be a buffer of 2,000 values and their validity
    # (as it would once read as a series: first the sizes, then the values)
    assert out.select("none").estimated_size() < 100
    assert out.select("start_ns").estimated_size() == 8 * 2 * _N
    assert out.equals(expected)
