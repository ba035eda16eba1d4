"""Interval algebra on hand-checked cases."""

from __future__ import annotations

import polars as pl

from tracekit.analyzers import intervals as iv


def frame(rows: list[tuple[int, int]], rank: int | None = None) -> pl.DataFrame:
    df = pl.DataFrame(
        {"start_ns": [r[0] for r in rows], "end_ns": [r[1] for r in rows]},
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    return df if rank is None else df.with_columns(rank=pl.lit(rank))


def pairs(df: pl.DataFrame) -> list[tuple[int, int]]:
    return list(zip(df["start_ns"].to_list(), df["end_ns"].to_list(), strict=True))


def test_union_merges_overlapping_and_touching_and_drops_empty() -> None:
    df = frame([(10, 20), (0, 5), (15, 30), (30, 35), (40, 40), (50, 60), (52, 55)])
    assert pairs(iv.union(df)) == [(0, 5), (10, 35), (50, 60)]
    assert iv.total(df) == 5 + 25 + 10


def test_union_by_group_keeps_groups_apart() -> None:
    df = pl.concat([frame([(0, 10), (5, 20)], rank=0), frame([(8, 12)], rank=1)])
    out = iv.union(df, ["rank"]).sort("rank")
    assert out.to_dicts() == [
        {"rank": 0, "start_ns": 0, "end_ns": 20},
        {"rank": 1, "start_ns": 8, "end_ns": 12},
    ]
    totals = iv.total(df, ["rank"])
    assert isinstance(totals, pl.DataFrame)
    assert dict(totals.sort("rank").iter_rows()) == {0: 20, 1: 4}


def test_two_streams_overlapping_count_once() -> None:
    # stream A: [0,100); stream B: [50,150) -> wall-clock busy 150, not 200
    assert iv.total(frame([(0, 100), (50, 150)])) == 150


def test_intersect_and_subtract() -> None:
    a = frame([(0, 10), (20, 30)])
    b = frame([(5, 25)])
    assert pairs(iv.intersect(a, b)) == [(5, 10), (20, 25)]
    assert pairs(iv.subtract(a, b)) == [(0, 5), (25, 30)]
    assert pairs(iv.subtract(b, a)) == [(10, 20)]


def test_gaps_between_and_within_window() -> None:
    df = frame([(0, 10), (15, 20), (18, 30), (40, 50)])
    assert pairs(iv.gaps(df)) == [(10, 15), (30, 40)]
    window = frame([(-5, 60)])
    assert pairs(iv.gaps(df, window=window)) == [(-5, 0), (10, 15), (30, 40), (50, 60)]


def test_sweep_flags_every_segment() -> None:
    df = pl.DataFrame(
        {
            "start_ns": [0, 5, 20],
            "end_ns": [10, 15, 25],
            "what": ["x", "y", "x"],
        }
    )
    seg = iv.sweep(df, "what", ["x", "y"])
    assert seg.rows() == [
        (0, 5, True, False),
        (5, 10, True, True),
        (10, 15, False, True),
        (15, 20, False, False),
        (20, 25, True, False),
    ]


def test_empty_inputs() -> None:
    empty = frame([])
    assert iv.union(empty).height == 0
    assert iv.total(empty) == 0
    assert iv.gaps(empty).height == 0
    assert iv.sweep(empty.with_columns(what=pl.lit("x")), "what", ["x"]).height == 0
