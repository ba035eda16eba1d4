"""Points located in frames, and events overlapping gaps: against a brute force on random data."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyzers import intervals as iv

TIMES = st.integers(min_value=0, max_value=60)


@st.composite
def disjoint(draw: st.DrawFn, ranks: int) -> list[tuple[int, int, int]]:
    """(rank, start, end) intervals, disjoint within each rank, in rank then start order."""
    out = []
    for rank in range(ranks):
        cuts = sorted(set(draw(st.lists(TIMES, max_size=8))))
        out += [(rank, a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=False) if b > a]
    return out


def _frame(rows: Sequence[tuple[int | None, ...]], names: list[str]) -> pl.DataFrame:
    schema = {n: pl.Int32 if n == "rank" else pl.Int64 for n in names}
    return pl.DataFrame(rows, schema=schema, orient="row")


@settings(max_examples=200, deadline=None)
@given(
    frames=disjoint(3),
    points=st.lists(st.tuples(st.integers(0, 2), TIMES, st.integers(0, 99)), max_size=30),
)
def test_locate_finds_the_frame_of_each_point(
    frames: list[tuple[int, int, int]], points: list[tuple[int, ...]]
) -> None:
    windows = _frame([(r, a, b, i) for i, (r, a, b) in enumerate(frames)], ["rank", "start_ns", "end_ns", "step"])
    df = _frame(points, ["rank", "start_ns", "tag"])
    found = iv.locate(df, "start_ns", windows, by=["rank"], keep=["step"])
    expected = sorted(
        (r, t, tag, i, b) for r, t, tag in points for i, (fr, a, b) in enumerate(frames) if fr == r and a <= t < b
    )
    assert found.columns == ["rank", "start_ns", "tag", "step", "frame_end_ns"]
    assert sorted(found.rows()) == expected
    keys = found.select("rank", "start_ns").rows()
    assert keys == sorted(keys)  # in group, then time order


@settings(max_examples=300, deadline=None)
@given(
    gaps=disjoint(3),
    events=st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 2)), TIMES, TIMES), max_size=30),
    far=st.booleans(),
    in_order=st.booleans(),
)
def test_overlapping_keeps_the_events_that_overlap_a_gap_of_their_rank(
    gaps: list[tuple[int, int, int]], events: list[tuple[int | None, int, int]], far: bool, in_order: bool
) -> None:
    """``overlapping`` keeps, in the events' own order, those overlapping a gap of their rank (a
    null rank overlaps nothing; ``far``: ranks 2**60 apart, whose times cannot be laid end to end
    in one integer: the as-of join; ``in_order``: the events in rank and start order, as a
    rank's are, which places the gaps among the events rather than each event among the gaps)."""
    scale = 1 << 60 if far else 1
    if in_order:
        events = sorted(events, key=lambda e: (e[0] is None, e[0] or 0, e[1]))
    rows = [(r, a, a + d) for r, a, d in events]
    df = _frame(rows, ["rank", "start_ns", "end_ns"]).with_columns(pl.col("rank").cast(pl.Int64) * scale)
    gap_frame = _frame(gaps, ["rank", "start_ns", "end_ns"]).with_columns(pl.col("rank").cast(pl.Int64) * scale)
    found = iv.overlapping(df.with_row_index("row"), gap_frame, by=["rank"])
    expected = [i for i, (r, a, b) in enumerate(rows) if any(g == r and s < b and a < e for g, s, e in gaps)]
    assert found.get_column("row").to_list() == expected
    assert found.columns == ["row", "rank", "start_ns", "end_ns"]


@settings(max_examples=200, deadline=None)
@given(
    frames=disjoint(3),
    points=st.lists(st.tuples(st.integers(0, 2), TIMES, st.integers(0, 99)), max_size=30),
    far=st.booleans(),
)
def test_within_is_the_mask_of_the_points_locate_keeps(
    frames: list[tuple[int, int, int]], points: list[tuple[int, ...]], far: bool
) -> None:
    """``within`` marks, in the points' own order, exactly the points in a frame of their rank
    (``far``: ranks 2**60 apart, whose times cannot be packed into one integer)."""
    scale = 1 << 60 if far else 1
    windows = _frame(frames, ["rank", "start_ns", "end_ns"]).with_columns(pl.col("rank").cast(pl.Int64) * scale)
    df = _frame(points, ["rank", "start_ns", "tag"]).with_columns(pl.col("rank").cast(pl.Int64) * scale)
    mask = iv.within(df, "start_ns", windows, by=["rank"])
    expected = [any(fr == r and a <= t < b for fr, a, b in frames) for r, t, _ in points]
    assert mask.to_list() == expected


@settings(max_examples=100, deadline=None)
@given(
    gaps=disjoint(3),
    events=st.lists(st.tuples(st.integers(0, 2), TIMES, TIMES), max_size=30),
    rows=st.integers(1, 8),
)
def test_overlapping_slice_by_slice_is_overlapping_at_once(
    gaps: list[tuple[int, int, int]], events: list[tuple[int, int, int]], rows: int
) -> None:
    """What ``late_causes`` keeps of events read a slice at a time is what it keeps of them at once."""
    df = _frame(sorted((r, a, a + d) for r, a, d in events), ["rank", "start_ns", "end_ns"])
    gap_frame = _frame(gaps, ["rank", "start_ns", "end_ns"])
    parts = [iv.overlapping(df.slice(o, rows), gap_frame, by=["rank"]) for o in range(0, max(df.height, 1), rows)]
    assert pl.concat(parts).equals(iv.overlapping(df, gap_frame, by=["rank"]))


@settings(max_examples=200, deadline=None)
@given(
    frames=disjoint(3),
    points=st.lists(st.tuples(st.integers(0, 2), TIMES, st.integers(0, 99)), max_size=30),
    order=st.randoms(use_true_random=False),
    far=st.booleans(),
)
def test_containing_is_the_row_of_the_frame_of_each_point(
    frames: list[tuple[int, int, int]], points: list[tuple[int, ...]], order: object, far: bool
) -> None:
    """``containing`` gives, in the points' own order, the row number of the frame of its rank
    that holds each point (null where none), whatever the frames' order; by a binary search, or by
    an as-of join where the ranks (``far``: 2**60 apart) cannot be laid end to end."""
    import random

    assert isinstance(order, random.Random)
    shuffled = list(frames)
    order.shuffle(shuffled)
    scale = 1 << 60 if far else 1
    windows = _frame(shuffled, ["rank", "start_ns", "end_ns"]).with_columns(pl.col("rank").cast(pl.Int64) * scale)
    df = _frame(points, ["rank", "start_ns", "tag"]).with_columns(pl.col("rank").cast(pl.Int64) * scale)
    found = iv.containing(df, "start_ns", windows, by=["rank"])
    expected = [
        next((i for i, (fr, a, b) in enumerate(shuffled) if fr == r and a <= t < b), None) for r, t, _ in points
    ]
    assert found.to_list() == expected
    assert found.dtype == pl.UInt32
