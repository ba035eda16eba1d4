"""``alignment.align`` numbers the order-matched calls from one sort (runs of a rank, operation
and unit) and the operations by the hash of their keys: held, on random calls, to the windows
and groupings on the text keys it replaced (``_reference``), with every hash made to collide
once (the keys' dense rank then numbers them)."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from tracekit.analyzers.alignment import _KEY, OUTSIDE, POINT_TO_POINT, _as_misaligned, align, key_ids, misaligned_frame
from tracekit.analyzers.collectives import INSTANCE, KEYS, _numbered
from tracekit.results.vocab import MatchKey

_SCHEMA = {
    "rank": pl.Int32,
    "pg": pl.String,
    "op": pl.String,
    "matched_by": pl.String,
    "k": pl.Int64,
    "window": pl.Int64,
    "start_ns": pl.Int64,
    "tag": pl.Int64,
}


def _reference(found: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``align`` as it was: every grouping, window and join on the three text keys."""
    by_seq = found.filter(pl.col("matched_by") == MatchKey.SEQUENCE.value)
    ordered = found.filter(pl.col("matched_by") != MatchKey.SEQUENCE.value).with_columns(
        unit=pl.col("window").fill_null(OUTSIDE)
    )
    if ordered.height == 0:
        return found, misaligned_frame()
    units = ordered.select("rank", "unit").unique()
    members = ordered.select("pg", "matched_by", "rank").unique()
    ops = ordered.select(*_KEY).unique()
    held = ordered.group_by("rank", *_KEY, "unit").agg(n=pl.len())
    grid = members.join(units, on="rank").join(ops, on=["pg", "matched_by"])
    counts = grid.join(held, on=["rank", *_KEY, "unit"], how="left").with_columns(pl.col("n").fill_null(0))
    differ = (
        counts.group_by(*_KEY, "unit")
        .agg(pl.col("rank").sort(), pl.col("n").sort_by("rank").alias("counts"), distinct=pl.col("n").n_unique())
        .filter(pl.col("distinct") > 1, ~pl.col("op").cast(pl.String).str.contains(POINT_TO_POINT))
    )
    ordered = ordered.join(differ.select(*_KEY, "unit"), on=[*_KEY, "unit"], how="anti")
    within = pl.int_range(pl.len()).over("rank", *_KEY, "unit", order_by="start_ns")
    k = pl.struct("unit", "_within").rank("dense").over(*_KEY) - 1
    ordered = ordered.with_columns(_within=within).with_columns(k=k.cast(found.schema["k"])).drop("unit", "_within")
    return pl.concat([by_seq, ordered]), _as_misaligned(differ)


_CALL = st.fixed_dictionaries(
    {
        "rank": st.integers(0, 3),
        # never null: a call without a group is keyed by its stream or "" (collectives._keys)
        "pg": st.sampled_from(["0", "1", ""]),
        "op": st.sampled_from(["allreduce", "broadcast", "send"]),
        "matched_by": st.sampled_from([m.value for m in MatchKey]),
        "k": st.integers(0, 5),
        "window": st.none() | st.integers(0, 3),
        # few distinct starts: calls of a run that start together keep their order
        "start_ns": st.integers(0, 6),
    }
)


def _frame(calls: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame([{**c, "tag": i} for i, c in enumerate(calls)], schema=_SCHEMA)


def _same(found: pl.DataFrame) -> None:
    got, got_misaligned = align(found)
    want, want_misaligned = _reference(found)
    assert_frame_equal(got.sort("tag"), want.sort("tag"))
    # units that do not align, in any order (two operations' of one step and name, told apart
    # by what matched them, are in no order the frame fixes)
    assert got_misaligned.schema == want_misaligned.schema
    assert sorted(map(repr, got_misaligned.rows())) == sorted(map(repr, want_misaligned.rows()))


@settings(max_examples=150, deadline=None)
@given(st.lists(_CALL, max_size=40))
def test_align_numbers_the_calls_as_the_text_keys_did(calls: list[dict[str, Any]]) -> None:
    _same(_frame(calls))


@settings(max_examples=50, deadline=None)
@given(st.lists(_CALL, min_size=1, max_size=40))
def test_colliding_hashes_fall_back_to_the_keys_rank(calls: list[dict[str, Any]]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pl.DataFrame, "hash_rows", lambda self, *a, **k: pl.repeat(7, self.height, dtype=pl.UInt64))
        _same(_frame(calls))


def test_the_keys_ids_tell_every_distinct_key_apart() -> None:
    frame = pl.DataFrame({"pg": ["0", "0", None, "1", None], "op": ["a", "b", "a", "a", "a"]})
    ids, distinct = key_ids(frame, ["pg", "op"])
    assert ids.n_unique() == 4 and distinct.height == 4
    assert ids[2] == ids[4] and ids[0] != ids[3]


_KEYED = st.fixed_dictionaries(
    {
        "pg": st.sampled_from(["0", "1", None]),
        "op": st.sampled_from(["allreduce", "broadcast"]),
        "matched_by": st.sampled_from([m.value for m in MatchKey]),
        # negative, null and past 2**40: the keys' own join numbers them
        "k": st.integers(0, 4) | st.sampled_from([-1, None, 1 << 41]),
    }
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_KEYED, max_size=30))
def test_an_instance_s_number_is_its_keys(rows: list[dict[str, Any]]) -> None:
    schema = {"pg": pl.String, "op": pl.String, "matched_by": pl.String, "k": pl.Int64}
    found = _numbered(pl.DataFrame(rows, schema=schema))
    assert found.schema[INSTANCE] == pl.Int64
    pairs = set(zip(found.select(KEYS).rows(), found[INSTANCE].to_list(), strict=True))
    # one number per keys, one keys per number
    assert len({keys for keys, _ in pairs}) == len(pairs) == len({n for _, n in pairs})
