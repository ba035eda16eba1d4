"""Events held a kind at a time read as one frame of them does: every selection, slice, whole
frame and restriction equals the one frame's, row for row and in order (a property test on
random frames: kinds interleaved, equal starts, columns null or one value within a kind)."""

from __future__ import annotations

import dataclasses
from unittest import mock

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import ev, make_run
from tracekit.model import by_kind
from tracekit.model.by_kind import NARROW_TYPE, ROW, SPAN, ByKind, Reach, reaching, with_literals
from tracekit.model.schema import SCHEMA, empty_events

_KINDS = ("cpu_op", "runtime", "kernel", "memcpy", "annotation", "step")


@st.composite
def frames(draw: st.DrawFn) -> pl.DataFrame:
    n = draw(st.integers(0, 40))
    kinds = draw(st.lists(st.sampled_from(_KINDS), min_size=n, max_size=n))
    starts = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))  # ties are common
    lengths = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    ranks = sorted(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    names = draw(st.lists(st.sampled_from(["a", "b", "nccl:x", "cudaLaunchKernel"]), min_size=n, max_size=n))
    # a column of one value within a kind, one null within some kinds, one of any values
    pid = [7 if k in ("cpu_op", "runtime") else draw(st.integers(0, 3)) for k in kinds]
    device = [draw(st.one_of(st.none(), st.integers(0, 1))) if k in ("kernel", "memcpy") else None for k in kinds]
    # (now and then one past what a narrower column holds: that kind's column stays wide)
    correlation = [draw(st.one_of(st.none(), st.integers(0, 5), st.just(2**40))) for _ in kinds]
    rows = {
        "rank": ranks,
        "kind": kinds,
        "category": ["compute"] * n,
        "name": names,
        "start_ns": starts,
        "end_ns": [s + d for s, d in zip(starts, lengths, strict=True)],
        "pid": pid,
        "tid": [draw(st.integers(1, 2)) for _ in kinds],
        "device": device,
        "stream": [None if d is None else 7 for d in device],
        "correlation": correlation,
    }
    frame = pl.DataFrame(rows, schema={c: SCHEMA[c] for c in rows})
    # the run's order: by rank and start, ties as given
    frame = frame.sort("rank", "start_ns", maintain_order=True)
    return pl.concat([empty_events(), frame], how="diagonal_relaxed").select(list(SCHEMA))


_COLUMNS = ("rank", "kind", "tid", "start_ns", "end_ns", pl.col("name").cast(pl.String), "device", "correlation")


def _reference(frame: pl.DataFrame, kinds: list[str], conditions: list[pl.Expr]) -> pl.DataFrame:
    return frame.lazy().filter(pl.col("kind").is_in(kinds), *conditions).select(*_COLUMNS).collect()


@settings(max_examples=300, deadline=None)
@given(
    frames(),
    st.lists(st.sampled_from([*_KINDS, "sync"]), max_size=4),
    st.sampled_from(["none", "where", "null", "wide"]),
    st.sampled_from([0, 1 << 16]),
    st.sampled_from([1, 3, 1 << 19]),
)
def test_a_selection_is_the_one_frame_s(
    frame: pl.DataFrame, kinds: list[str], condition: str, literal: int, filter_rows: int
) -> None:
    conditions = {
        "none": [],
        "where": [pl.col("start_ns") >= 10],
        "null": [pl.col("correlation").is_not_null()],
        # a column held narrower (NARROW) is read in the schema's type: no overflow
        "wide": [pl.col("tid") * 2**32 > 2**32, pl.col("correlation").is_in([1, 2**40])],
    }[condition]
    held = ByKind.of(frame, literal_rows=literal)
    with mock.patch.object(by_kind, "FILTER_ROWS", filter_rows):  # a kind filtered a few rows at a time
        assert held.select(kinds, _COLUMNS, conditions).equals(_reference(frame, kinds, conditions))
    assert held.frame().equals(frame)
    assert held.height == frame.height
    assert sorted(held.names().to_list()) == sorted(frame["name"].unique().cast(pl.String).drop_nulls().to_list())


@settings(max_examples=300, deadline=None)
@given(
    frames(),
    st.lists(st.sampled_from(_KINDS), min_size=1, max_size=3),
    st.integers(1, 8),
    st.integers(0, 40),
    st.sampled_from([0, 1 << 16]),
)
def test_slices_are_the_one_frame_s_slices(
    frame: pl.DataFrame, kinds: list[str], rows: int, lo: int, literal: int
) -> None:
    held = ByKind.of(frame, literal_rows=literal)
    for within in (None, (lo, lo + 5)):
        expected = []
        read = 0
        for offset in range(0, max(frame.height, 1), rows):
            part = frame.slice(offset, rows)
            if within is not None and part.height:
                first, last = part.select(pl.col("start_ns").min(), pl.col("end_ns").max()).row(0)
                if first >= within[1] or last <= within[0]:
                    continue
            read += 1
            expected.append(_reference(part, kinds, []))
        if not read:
            expected.append(_reference(frame.clear(), kinds, []))
        got = list(held.slices(kinds, _COLUMNS, rows, within))
        assert len(got) == len(expected)
        for mine, theirs in zip(got, expected, strict=True):
            assert mine.equals(theirs)
        # a filter of rows applied to each kind's events before they are merged: the slices filtered
        kept = list(held.slices(kinds, _COLUMNS, rows, within, kept=_kept))
        assert len(kept) == len(expected)
        for mine, theirs in zip(kept, expected, strict=True):
            assert mine.equals(_kept(theirs))


def _kept(frame: pl.DataFrame) -> pl.DataFrame:
    """A filter that keeps a row or not whatever the others (as an overlap with gaps does)."""
    return frame.filter((pl.col("end_ns") - pl.col("start_ns") >= 3) | (pl.col("tid") == 2))


@settings(max_examples=200, deadline=None)
@given(frames(), st.integers(0, 2), st.sampled_from([0, 1 << 16]))
def test_a_restriction_and_order_free_sums_are_the_one_frame_s(frame: pl.DataFrame, rank: int, literal: int) -> None:
    held = ByKind.of(frame, literal_rows=literal)
    assert held.only(pl.col("rank") == rank).frame().equals(frame.filter(pl.col("rank") == rank))
    sums = held.unordered(["rank", "start_ns"]).group_by("rank").agg(pl.len(), pl.col("start_ns").sum())
    assert (
        sums.collect().sort("rank").equals(frame.group_by("rank").agg(pl.len(), pl.col("start_ns").sum()).sort("rank"))
    )


def test_a_column_of_one_value_or_none_within_a_kind_holds_no_buffer() -> None:
    run = make_run(
        [ev("cpu_op", "a", 0, 5, tid=1), ev("kernel", "k", 1, 4, device=0, stream=7), ev("cpu_op", "b", 2, 3, tid=2)]
    )
    run = dataclasses.replace(run, by_kind=ByKind.of(run.events, literal_rows=0))
    ops = run.by_kind.parts["cpu_op"]
    # the ends held as lengths, in their place
    assert ops.columns == [*(SPAN if c == "end_ns" else c for c in SCHEMA), ROW]
    assert ops[SPAN].to_list() == [5, 1] and ops.schema[SPAN] == NARROW_TYPE
    assert ops[ROW].to_list() == [0, 2]
    # device and stream are null on every operator, kind and process one value: literals
    assert ops.select("device", "stream", "kind", "pid").estimated_size() < 100
    # two values: a buffer, of the narrower type (they fit it)
    assert ops.schema["tid"] == NARROW_TYPE and ops.select("tid").estimated_size() >= 8
    # the same values and types as one frame's, read back through the run
    back = run.select(["cpu_op"], "device", "stream", "kind", "tid")
    assert back["device"].to_list() == [None, None] and back["tid"].to_list() == [1, 2]
    assert back.schema["tid"] == SCHEMA["tid"]
    ends = run.select(["cpu_op"], "end_ns")
    assert ends["end_ns"].to_list() == [5, 3] and ends.schema["end_ns"] == SCHEMA["end_ns"]
    assert run.select(["cpu_op", "kernel"], "name")["name"].cast(pl.String).to_list() == ["a", "k", "b"]


def test_taken_empties_the_list_and_holds_the_same_events() -> None:
    run = make_run([ev("cpu_op", "a", 0, 5), ev("kernel", "k", 1, 4, device=0, stream=7), ev("runtime", "r", 2, 3)])
    frame = run.events
    owned = [frame.clone()]
    held = ByKind.taken(owned, literal_rows=0)
    assert owned == []
    assert held.frame().equals(frame)


@st.composite
def ordered_frames(draw: st.DrawFn) -> pl.DataFrame:
    """One rank's events in order of their starts (what :class:`Reach` reads by position): long
    events whose ends pass those of events after them, instants, and nulls in the times where a
    draw asks for them (read by the filter)."""
    n = draw(st.integers(0, 40))
    kinds = draw(st.lists(st.sampled_from(_KINDS[:3]), min_size=n, max_size=n))
    starts = sorted(draw(st.lists(st.integers(0, 60), min_size=n, max_size=n)))
    # mostly short, some instants, a few that last past many later starts
    lengths = draw(st.lists(st.one_of(st.integers(0, 3), st.just(0), st.integers(0, 80)), min_size=n, max_size=n))
    ends: list[int | None] = [s + d for s, d in zip(starts, lengths, strict=True)]
    nulls = draw(st.sampled_from(["none", "start", "end"]))
    begun: list[int | None] = list(starts)
    if n and nulls != "none":
        at = draw(st.integers(0, n - 1))
        (begun if nulls == "start" else ends)[at] = None
    rows = {"rank": [0] * n, "kind": kinds, "name": ["a"] * n, "start_ns": begun, "end_ns": ends}
    frame = pl.DataFrame(rows, schema={c: SCHEMA[c] for c in rows})
    return pl.concat([empty_events(), frame], how="diagonal_relaxed").select(list(SCHEMA))


def _within_reference(frame: pl.DataFrame, lo: int, hi: int) -> pl.DataFrame:
    start, end = pl.col("start_ns"), pl.col("end_ns")
    return frame.filter((start < hi) & ((end > lo) | (start >= lo)))


def _check_within(frame: pl.DataFrame, lo: int, hi: int, literal: int) -> None:
    held = ByKind.of(frame, literal_rows=literal)
    for _ in range(2):  # read once, then again with what the first read found of each kind
        kept = held.within(lo, hi)
        expected = _within_reference(frame, lo, hi)
        assert kept.frame().equals(expected)
        assert kept.height == expected.height
        for part in kept.parts.values():  # the places renumbered among the kept, ascending
            rows = part[ROW].to_list()
            assert rows == sorted(rows)
            assert all(0 <= r < kept.height for r in rows)


@settings(max_examples=400, deadline=None)
@given(ordered_frames(), st.integers(-5, 70), st.integers(-5, 70), st.sampled_from([0, 1 << 16]))
def test_within_by_position_is_the_filter_s(frame: pl.DataFrame, lo: int, hi: int, literal: int) -> None:
    _check_within(frame, lo, hi, literal)
    for block in (1, 3, 8):  # the greatest ends kept a few rows at a time: the blocks' edges read
        reach = Reach.of(frame, block=block)
        assert reach.within(frame, lo, hi).equals(_within_reference(frame, lo, hi))
        # its ends included: the rows the window's idle model reads
        start, end = pl.col("start_ns"), pl.col("end_ns")
        closed = frame.filter((start <= hi) & ((end >= lo) | (start >= lo)))
        assert reach.within(frame, lo, hi, closed=True).equals(closed)
        assert frame.filter(reaching(lo, hi, closed=True)).equals(closed)


@settings(max_examples=200, deadline=None)
@given(frames(), st.integers(-2, 40), st.integers(0, 12), st.sampled_from([0, 1 << 16]))
def test_within_of_several_ranks_is_the_filter_s(frame: pl.DataFrame, lo: int, width: int, literal: int) -> None:
    # several ranks' events are in order of rank, then start: a kind's starts may fall back
    _check_within(frame, lo, lo + width, literal)


def test_within_reads_a_kind_in_order_of_starts_by_position() -> None:
    run = make_run([ev("cpu_op", "long", 0, 100), *(ev("cpu_op", f"op{i}", 10 * i, 10 * i + 2) for i in range(1, 9))])
    held = ByKind.of(run.events, literal_rows=0)
    names = held.within(45, 62).select(["cpu_op"], [pl.col("name").cast(pl.String)])["name"].to_list()
    assert names == ["long", "op5", "op6"]  # the long one, whose end passes the others', kept
    assert held._reach("cpu_op").starts is not None  # read by position
    unordered = ByKind.of(run.events.reverse(), literal_rows=0)
    assert unordered._reach("cpu_op").starts is None  # by the filter
    assert unordered.within(45, 62).height == 3


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
    made = with_literals(frame, literal_rows=0)
    # (before anything reads the literals row by row: that makes them buffers, as the frame's own)
    held = {c: made.select(c).estimated_size() for c in made.columns}
    assert {c for c, size in held.items() if size < rows} == {"rank", "bytes"}
    assert made.equals(frame)
    assert made.schema == frame.schema
    assert made.filter(pl.col("stream") == 9).equals(frame.filter(pl.col("stream") == 9))
    assert made.sort("start_ns").equals(frame.sort("start_ns"))
    other = pl.DataFrame({"rank": [3], "stream": [9], "note": ["x"]})
    assert made.join(other, on=["rank", "stream"]).equals(frame.join(other, on=["rank", "stream"]))
    assert with_literals(frame.clear(), literal_rows=0).equals(frame.clear())
    assert with_literals(frame, literal_rows=rows + 1) is frame  # a short table as it is


def test_ends_are_held_as_lengths_where_each_fits_and_ranks_of_both_make_one_run() -> None:
    short = make_run([ev("cpu_op", "a", 0, 5), ev("cpu_op", "b", 2, 3)]).events
    long = make_run([ev("cpu_op", "c", 1, 2**32), ev("cpu_op", "d", 4, 6)]).events
    spanned, wide = ByKind.of(short, literal_rows=0), ByKind.of(long, literal_rows=0)
    assert SPAN in spanned.parts["cpu_op"].columns  # lengths of 5 and 1
    assert "end_ns" in wide.parts["cpu_op"].columns  # a length past 32 bits: ends as they are
    # one rank's ends held as lengths, another's as ends: one run, every end as given
    run = ByKind.ranked([(0, spanned), (1, wide)])
    assert run.select(["cpu_op"], ["end_ns"])["end_ns"].to_list() == [5, 3, 2**32, 6]
    assert run.frame().equals(pl.concat([short.with_columns(rank=0), long.with_columns(rank=1)]))
