"""Result frames typed as rows (:func:`tracekit.analyzers.convert.rows`): made from the columns'
values where the row's fields are plain, the rows the JSON decode gives, to the bit."""

from __future__ import annotations

import math

import msgspec
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyzers import convert
from tracekit.analyzers.convert import rows
from tracekit.results import rows as r


class _Plain(msgspec.Struct, frozen=True, kw_only=True):
    rank: int
    step: int | None
    name: str
    share: float
    maybe: float | None
    flag: bool
    left: int = 7


def _decoded(frame: pl.DataFrame, row_type: type) -> list[object]:
    """What :func:`rows` gives through the JSON decode (its constructor turned off)."""
    real = convert._constructed
    convert._constructed = lambda *_: None  # type: ignore[assignment]
    try:
        return rows(frame, row_type)
    finally:
        convert._constructed = real


_floats = st.floats(allow_nan=True, allow_infinity=True, width=64)


@given(
    st.lists(
        st.tuples(
            st.integers(-(2**62), 2**62),
            st.none() | st.integers(-5, 10**12),
            st.text(max_size=6),
            _floats,
            st.none() | _floats,
            st.booleans(),
        ),
        max_size=30,
    ),
    st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_rows_made_of_the_columns_are_the_rows_the_json_decode_gives(
    values: list[tuple[int, int | None, str, float, float | None, bool]], integer_share: bool
) -> None:
    frame = pl.DataFrame(
        values,
        schema={
            "rank": pl.Int64,
            "step": pl.Int64,
            "name": pl.String,
            "share": pl.Float64,
            "maybe": pl.Float64,
            "flag": pl.Boolean,
        },
        orient="row",
    )
    if integer_share:  # an integer column for a float field: the decode makes it a float
        frame = frame.with_columns(share=pl.col("rank") // 3)
    frame = frame.with_columns(share=pl.col("share").fill_nan(0.0))
    if not integer_share:
        frame = frame.with_columns(share=pl.when(pl.col("share").is_infinite()).then(0.0).otherwise("share"))
    made = rows(frame, _Plain)
    assert convert._constructed(frame.select(frame.columns), _Plain) is not None or frame.height == 0
    assert msgspec.json.encode(made) == msgspec.json.encode(_decoded(frame, _Plain))
    for row in made:
        assert isinstance(row.share, float) and row.left == 7
        assert row.maybe is None or not math.isnan(row.maybe)  # NaN and infinities: None


def test_a_column_its_field_does_not_take_is_left_to_the_decode_and_its_error() -> None:
    nulls = pl.DataFrame(
        {
            "rank": [1, None],
            "step": [1, 2],
            "name": ["a", "b"],
            "share": [1.0, 2.0],
            "maybe": [None, 1.0],
            "flag": [True, False],
        }
    )
    assert convert._constructed(nulls, _Plain) is None
    with pytest.raises(msgspec.ValidationError):
        rows(nulls, _Plain)
    text = nulls.with_columns(rank=pl.lit("1"))
    assert convert._constructed(text, _Plain) is None
    missing = nulls.drop("name").with_columns(pl.col("rank").fill_null(0))
    assert convert._constructed(missing, _Plain) is None


def test_the_report_rows_of_plain_fields_are_made_so() -> None:
    assert convert._plain(r.PhaseStepRow) is not None and convert._plain(r.StepRow) is not None
    assert convert._plain(r.LedgerRow) is None  # maps
    assert convert._plain(r.WorkRow) is None  # an enum
