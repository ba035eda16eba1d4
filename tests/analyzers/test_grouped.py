"""``stats.grouped``: a group-by of several keys on a long frame runs on polars' streaming
engine, and gives what the in-memory group-by gives (groups in no set order)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyzers import stats
from tracekit.analyzers.stats import grouped

_KEYS = ["rank", "step", "entry"]


def _frame(rows: list[tuple[int, int | None, str, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={"rank": pl.Int32, "step": pl.Int64, "entry": pl.Enum(["a", "b", "c"]), "ns": pl.Int64},
        orient="row",
    )


def _same(got: pl.DataFrame, expected: pl.DataFrame) -> None:
    assert got.schema == expected.schema
    assert got.sort(_KEYS, nulls_last=True).equals(expected.sort(_KEYS, nulls_last=True))


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3),
            st.one_of(st.none(), st.integers(-2, 5)),
            st.sampled_from(["a", "b", "c"]),
            st.integers(-(2**40), 2**40),
        ),
        max_size=40,
    )
)
def test_the_streaming_engine_groups_as_the_in_memory_one(rows: list) -> None:
    """Null keys, empty frames, negative sums: every frame on the streaming engine (its row
    threshold set to 0) gives the sums, counts, minima and maxima of ``group_by``."""
    df = _frame(rows)
    aggs = {"ns": pl.col("ns").sum(), "n": pl.len(), "low": pl.col("ns").min(), "high": pl.col("ns").max()}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stats, "STREAM_ROWS", 0)
        _same(grouped(df, _KEYS, **aggs), df.group_by(_KEYS).agg(**aggs))


def test_a_long_frame_on_several_keys_goes_to_the_streaming_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine is chosen by the frame's length and the keys' count, and both give the same."""
    rng = np.random.default_rng(7)
    n = stats.STREAM_ROWS
    df = pl.DataFrame(
        {
            "rank": rng.integers(0, 4, n).astype(np.int32),
            "step": rng.integers(0, 50, n),
            "entry": pl.Series(rng.choice(["a", "b", "c"], n)).cast(pl.Enum(["a", "b", "c"])),
            "ns": rng.integers(0, 10**9, n),
        }
    )
    engines: list[str] = []
    collect = pl.LazyFrame.collect

    def spy(self: pl.LazyFrame, *args: object, engine: str = "auto", **kwargs: object) -> pl.DataFrame:
        engines.append(engine)
        return collect(self, *args, engine=engine, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pl.LazyFrame, "collect", spy)
    _same(grouped(df, _KEYS, ns=pl.col("ns").sum()), df.group_by(_KEYS).agg(ns=pl.col("ns").sum()))
    grouped(df.head(n - 1), _KEYS, ns=pl.col("ns").sum())
    grouped(df, ["rank", "step"], ns=pl.col("ns").sum())
    assert engines[0] == "streaming"
    assert engines[-2:] == ["in-memory", "in-memory"]
