"""Interval algebra on hand-checked cases."""

from __future__ import annotations

import itertools
import random

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    x = frame([(0, 10), (20, 25), (2, 4)])  # (2, 4) nests in (0, 10): cut at its ends, still x
    y = frame([(5, 15)])
    seg = iv.sweep({"x": x, "y": y})
    assert seg.rows() == [
        (0, 2, True, False),
        (2, 4, True, False),
        (4, 5, True, False),
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
    assert iv.sweep({"x": empty}).height == 0


def test_sweep_keeps_interleaved_groups_apart() -> None:
    # rank 1 starts before rank 0 ends and rank 0's last end is past rank 1's start:
    # no segment may span from one rank's timeline into the other's
    x = pl.concat([frame([(0, 100)], rank=0), frame([(50, 60)], rank=1)])
    y = pl.concat([frame([(90, 120)], rank=0), frame([(40, 55), (58, 70)], rank=1)])
    seg = iv.sweep({"x": x, "y": y}, ["rank"]).sort("rank", "start_ns")
    assert seg.select("rank", "start_ns", "end_ns", "x", "y").rows() == [
        (0, 0, 90, True, False),
        (0, 90, 100, True, True),
        (0, 100, 120, False, True),
        (1, 40, 50, False, True),
        (1, 50, 55, True, True),
        (1, 55, 58, True, False),
        (1, 58, 60, True, True),
        (1, 60, 70, False, True),
    ]


def test_union_of_interleaved_groups_and_unsorted_rows() -> None:
    df = pl.concat([frame([(30, 40), (0, 50)], rank=1), frame([(45, 47), (0, 10), (5, 46)], rank=0)])
    out = iv.union(df, ["rank"]).sort("rank", "start_ns")
    assert out.rows() == [(0, 0, 47), (1, 0, 50)]
    assert iv.intersect(frame([(0, 100)], rank=0), df, ["rank"]).rows() == [(0, 0, 47)]


@given(
    gaps=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 5), st.integers(1, 9)), min_size=1, max_size=30),
    touch=st.none() | st.integers(0, 29),
    end_type=st.sampled_from([pl.Int64, pl.Int32]),
)
def test_union_of_rows_already_apart_is_the_rows_as_the_general_path_gives_them(
    gaps: list[tuple[int, int, int]], touch: int | None, end_type: pl.DataType
) -> None:
    # rows in order, each group's intervals apart (the fast path returns them as they are), each
    # group's times from 0 again (apart only once the groups are laid end to end); one pair made
    # to touch where ``touch`` says (then they merge, as in the general path)
    rows, rank, t = [], 0, 0
    for i, (step, gap, length) in enumerate(gaps):
        rank += step
        t = 0 if step else t
        t += 0 if (touch == i and rows and step == 0) else gap
        rows.append((rank, t, t + length))
        t += length
    schema = {"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": end_type}
    df = pl.DataFrame(rows, schema=schema, orient="row")
    fast = iv.union(df, ["rank"])
    general = iv.union(df.with_columns(host=pl.lit("a")), ["rank", "host"]).drop("host")
    assert fast.schema == {"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}
    assert fast.rows() == general.sort("rank", "start_ns").rows()
    assert _covered(fast.rows()) == _covered(rows)


def _covered(rows: list[tuple[int, int, int]]) -> set[tuple[int, int]]:
    """Brute force: every (rank, unit of time) some interval covers."""
    return {(r, t) for r, s, e in rows for t in range(s, e)}


@pytest.mark.parametrize("seed", range(5))
def test_union_and_sweep_agree_with_brute_force_on_both_paths(seed: int) -> None:
    # one integer key takes the fast path (groups laid end to end); two keys the general one
    rng = random.Random(seed)
    rows = []
    for _ in range(200):
        r, s = rng.randrange(4), rng.randrange(-50, 500)
        rows.append((r, s, s + rng.choice([0, 1, 3, 20, 80])))
    df = pl.DataFrame(rows, schema={"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}, orient="row")
    fast = iv.union(df, ["rank"])
    general = iv.union(df.with_columns(host=pl.lit("a")), ["rank", "host"]).drop("host")
    assert fast.sort("rank", "start_ns").rows() == general.sort("rank", "start_ns").rows()
    merged = fast.rows()
    assert _covered(merged) == _covered(rows)
    assert all(a[0] != b[0] or a[2] < b[1] for a, b in itertools.pairwise(merged))  # disjoint, not touching
    other = df.sample(fraction=0.5, seed=seed).with_columns(pl.col("start_ns") + 7, pl.col("end_ns") + 7)
    for key in (["rank"], ["rank", "host"]):
        cut = iv.sweep({"x": df.with_columns(host=pl.lit("a")), "y": other.with_columns(host=pl.lit("a"))}, key)
        both = {
            (r, t) for r, s, e in cut.filter("x", "y").select("rank", "start_ns", "end_ns").rows() for t in range(s, e)
        }
        assert both == _covered(rows) & _covered(other.rows())
        inter = iv.intersect(df.with_columns(host=pl.lit("a")), other.with_columns(host=pl.lit("a")), key)
        assert _covered(inter.select("rank", "start_ns", "end_ns").rows()) == both


def test_covered_measures_each_row_by_hand() -> None:
    rows = pl.concat([frame([(0, 10), (20, 40), (50, 55)], rank=0), frame([(0, 10)], rank=1)])
    cover = pl.concat([frame([(5, 25), (8, 12), (30, 31)], rank=0), frame([(-5, 2), (9, 30)], rank=1)])
    assert iv.covered(rows, cover, ["rank"]).to_list() == [5, 6, 0, 3]
    assert iv.covered(rows, cover.head(0), ["rank"]).to_list() == [0, 0, 0, 0]
    assert iv.covered(frame([(0, 10)]), frame([(3, 4), (9, 20)])).to_list() == [2]


@pytest.mark.parametrize("seed", range(5))
def test_covered_agrees_with_brute_force_on_both_paths(seed: int) -> None:
    rng = random.Random(seed)

    def random_rows(n: int) -> list[tuple[int, int, int]]:
        out = []
        for _ in range(n):
            s = rng.randrange(-50, 500)
            out.append((rng.randrange(4), s, s + rng.choice([0, 1, 5, 30, 90])))
        return out

    schema = {"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}
    rows, cover = random_rows(60), random_rows(150)
    expected = [len(_covered([(r, s, e)]) & _covered(cover)) for r, s, e in rows]
    df, cv = pl.DataFrame(rows, schema=schema, orient="row"), pl.DataFrame(cover, schema=schema, orient="row")
    assert iv.covered(df, cv, ["rank"]).to_list() == expected
    general = iv.covered(df.with_columns(host=pl.lit("a")), cv.with_columns(host=pl.lit("a")), ["rank", "host"])
    assert general.to_list() == expected


@pytest.mark.parametrize("seed", range(40))
def test_covered_first_agrees_with_covered_unions_on_both_paths(seed: int) -> None:
    # each cover takes what the earlier ones left: measured against growing unions, one at a time
    rng = random.Random(seed)
    schema = {"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}

    def random_rows(n: int) -> pl.DataFrame:
        out = []
        for _ in range(n):
            s = rng.randrange(-50, 500)
            out.append((rng.randrange(4), s, s + rng.choice([0, 1, 5, 30, 90])))
        return pl.DataFrame(out, schema=schema, orient="row")

    rows = random_rows(60)
    covers = [random_rows(n) for n in (40, 0, 80, 150)]
    expected, taken = [], pl.Series([0] * rows.height, dtype=pl.Int64)
    for k in range(len(covers)):
        now = iv.covered(rows, pl.concat(covers[: k + 1]), ["rank"])
        expected.append((now - taken).to_list())
        taken = now
    assert [s.to_list() for s in iv.covered_first(rows, covers, ["rank"])] == expected
    host = [c.with_columns(host=pl.lit("a")) for c in covers]
    general = iv.covered_first(rows.with_columns(host=pl.lit("a")), host, ["rank", "host"])
    assert [s.to_list() for s in general] == expected
    assert [s.to_list() for s in iv.covered_first(rows, [c.head(0) for c in covers], ["rank"])] == [
        [0] * rows.height
    ] * len(covers)


@pytest.mark.parametrize("seed", range(5))
def test_outermost_first_of_equal_is_unique_then_outermost(seed: int) -> None:
    rng = random.Random(seed)
    rows = []
    for i in range(300):
        s = rng.randrange(50)
        rows.append((rng.randrange(2), rng.randrange(2), s, s + rng.choice([0, 0, 1, 3, 10]), f"op{i}"))
    df = pl.DataFrame(rows, schema=["rank", "tid", "start_ns", "end_ns", "name"], orient="row")
    once = df.unique(["rank", "tid", "start_ns", "end_ns"], keep="first", maintain_order=True)
    expected = iv.outermost(once, ["rank", "tid"])
    assert iv.outermost(df, ["rank", "tid"], first_of_equal=True).equals(expected)


def test_covered_one_group_at_a_time_when_groups_do_not_pack() -> None:
    # group ids 2**30 apart and times 2**33 ns apart: (ids x span) does not fit in 62 bits
    far = 1 << 33
    rows = pl.DataFrame({"g": [0, 1 << 30], "start_ns": [0, far], "end_ns": [10, far + 10]})
    cover = pl.DataFrame({"g": [0, 1 << 30], "start_ns": [5, far - 5], "end_ns": [6, far + 2]})
    assert iv.covered(rows, cover, ["g"]).to_list() == [1, 2]


_OPS = st.lists(
    st.tuples(
        st.integers(0, 2), st.sampled_from([7, 3, 12345678]), st.integers(0, 40), st.sampled_from([0, 0, 1, 3, 9])
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(rows=_OPS, first_of_equal=st.booleans(), null_at=st.none() | st.integers(0, 59))
def test_outermost_equals_its_window_form(
    rows: list[tuple[int, int, int, int]], first_of_equal: bool, null_at: int | None
) -> None:
    """The shifted running maximum keeps exactly the rows a per-group window keeps (a null
    time or key takes the window itself)."""
    data = [(r, t, s, s + d, f"op{i}") for i, (r, t, s, d) in enumerate(rows)]
    df = pl.DataFrame(
        data,
        schema={"rank": pl.Int32, "tid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "name": pl.String},
        orient="row",
    )
    if null_at is not None and null_at < df.height:
        df = df.with_columns(
            pl.when(pl.int_range(pl.len()) == null_at).then(None).otherwise(pl.col("tid")).alias("tid")
        )
    keys = ["rank", "tid"]
    order = [*keys, "start_ns", "end_ns"]
    expected = iv._outermost_by_window(df, keys, order, [False, False, False, True], first_of_equal=first_of_equal)
    assert iv.outermost(df, keys, first_of_equal=first_of_equal).equals(expected)


_PART = st.lists(st.tuples(st.integers(0, 3), st.integers(-20, 60), st.integers(-2, 15)), max_size=25)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PART, min_size=1, max_size=3))
def test_sweep_on_one_key_cuts_as_the_general_path(parts: list[list[tuple[int, int, int]]]) -> None:
    """The same segments and flags, in the same types, on one integer key (groups laid end to
    end, in NumPy) as on two keys (polars): empty, zero-length and backward intervals, ties."""
    schema = {"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}
    frames = {
        f"p{i}": pl.DataFrame([(r, s, s + d) for r, s, d in rows], schema=schema, orient="row")
        for i, rows in enumerate(parts)
    }
    fast = iv.sweep(frames, ["rank"])
    general = iv.sweep({k: f.with_columns(host=pl.lit("a")) for k, f in frames.items()}, ["rank", "host"])
    assert fast.schema == general.drop("host").schema
    assert fast.sort("rank", "start_ns").rows() == general.drop("host").sort("rank", "start_ns").rows()
    alone = iv.sweep({k: f.drop("rank") for k, f in frames.items()})
    merged = iv.sweep({k: f.with_columns(rank=pl.lit(0, pl.Int32)) for k, f in frames.items()}, ["rank"])
    assert alone.rows() == merged.drop("rank").rows()


_POINT = st.tuples(st.integers(0, 2), st.integers(-5, 30))


@settings(max_examples=300, deadline=None)
@given(points=st.lists(_POINT, min_size=1, max_size=15), marks=st.lists(_POINT, min_size=1, max_size=15))
def test_first_mark_and_marks_before_by_binary_search_as_by_hand(points: list, marks: list) -> None:
    """Each point's first mark of its group at or after it (null where none) and how many of its
    group's marks lie before it, in the points' own order, the marks given in any order."""
    frame = pl.DataFrame(points, schema={"g": pl.Int64, "t": pl.Int64}, orient="row")
    given_marks = pl.DataFrame(marks, schema={"g": pl.Int64, "m": pl.Int64}, orient="row")
    first = iv.first_at_or_after(frame, "t", given_marks, "m", by=["g"])
    before = iv.count_before(frame, "t", given_marks, "m", by=["g"])
    assert first is not None and before is not None
    mine = [([m for g2, m in marks if g2 == g], t) for g, t in points]
    assert first.to_list() == [min((m for m in ms if m >= t), default=None) for ms, t in mine]
    assert before.to_list() == [sum(m < t for m in ms) for ms, t in mine]


def test_first_mark_and_marks_before_leave_what_does_not_pack_to_the_caller() -> None:
    """No answer (None) where the groups cannot be laid end to end: no marks, a null, two keys."""
    points = pl.DataFrame({"g": [0], "t": [1]})
    none = pl.DataFrame(schema={"g": pl.Int64, "m": pl.Int64})
    null = pl.DataFrame({"g": [0], "m": [None]}, schema={"g": pl.Int64, "m": pl.Int64})
    assert iv.first_at_or_after(points, "t", none, "m", by=["g"]) is None
    assert iv.count_before(points, "t", null, "m", by=["g"]) is None
    assert iv.count_before(points, "t", pl.DataFrame({"g": [0], "m": [2]}), "m", by=["g", "t"]) is None


_POINTS = st.lists(st.tuples(st.integers(0, 2), st.integers(-2, 52)), min_size=1, max_size=20)


@settings(max_examples=300, deadline=None)
@given(rows=_OPS, points=_POINTS, shuffled=st.booleans())
def test_outermost_at_is_locate_in_the_outermost(
    rows: list[tuple[int, int, int, int]], points: list[tuple[int, int]], shuffled: bool
) -> None:
    """Each point's outermost range found from the running maximum of the ends is the one
    :func:`locate` finds among :func:`outermost`'s (ties of start, twins, zero lengths, ranges
    that overlap without nesting, points before, between and after them), on one key (the
    binary search) and on two (the fallback)."""
    data = [(r, s, s + d, f"op{i}") for i, (r, _, s, d) in enumerate(rows)]
    # in start order, as a trace's events are; or in any other: it is sorted within
    by_start, shuffle = (lambda row: row[1]), (lambda row: (-row[0], row[3]))
    data = sorted(data, key=shuffle if shuffled else by_start)
    schema = {"g": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "name": pl.String}
    ranges = pl.DataFrame(data, schema=schema, orient="row")
    at = pl.DataFrame(points, schema={"g": pl.Int64, "t": pl.Int64}, orient="row").with_row_index("i")
    for keys, df, spans in (
        (["g"], at, ranges),
        (["g", "h"], at.with_columns(h=pl.lit(1)), ranges.with_columns(h=pl.lit(1))),
    ):
        tops = iv.outermost(spans, keys, first_of_equal=True)
        expected = iv.locate(df, "t", tops, by=keys, keep=["name"]).sort("i").select("i", "name")
        found = iv.outermost_at(df, "t", spans, by=keys, keep=["name"])
        assert found.select("i", "name").equals(expected), (keys, found, expected)
        assert found.get_column("i").is_sorted()


@settings(max_examples=1000, deadline=None)
@given(rows=_OPS, points=_POINTS, cuts=st.lists(st.integers(0, 60), max_size=4), shuffled=st.booleans())
def test_the_holders_give_outermost_at_every_range_s_answers(
    rows: list[tuple[int, int, int, int]], points: list[tuple[int, int]], cuts: list[int], shuffled: bool
) -> None:
    """outermost_at over the ranges :func:`holders` keeps (read from the ranges cut into
    slices) answers as over every range: partial overlaps (a range that starts inside another
    holding no point is not outermost), twins, ties of start, zero lengths, points outside."""
    data = [(r, s, s + d, f"op{i}") for i, (r, _, s, d) in enumerate(rows)]
    data = sorted(data, key=(lambda row: (-row[0], row[3])) if shuffled else (lambda row: row[1]))
    schema = {"g": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "name": pl.String}
    ranges = pl.DataFrame(data, schema=schema, orient="row")
    at = pl.DataFrame(points, schema={"g": pl.Int64, "t": pl.Int64}, orient="row").with_row_index("i")
    bounds = sorted({0, ranges.height, *(min(c, ranges.height) for c in cuts)})

    def slices() -> list[pl.DataFrame]:
        return [ranges.slice(lo, hi - lo) for lo, hi in itertools.pairwise(bounds)] or [ranges.clear()]

    kept = iv.holders(slices, at, "t", by=["g"])
    assert kept.height <= ranges.height
    assert kept.get_column("name").is_in(ranges.get_column("name").implode()).all()
    expected = iv.outermost_at(at, "t", ranges, by=["g"], keep=["name"])
    found = iv.outermost_at(at, "t", kept, by=["g"], keep=["name"])
    assert found.select("i", "name").equals(expected.select("i", "name")), (kept, found, expected)


def test_a_range_holding_no_point_still_decides_the_outermost() -> None:
    # a: 0-10 holds no point, c: 8-15 holds 12 but starts inside a: not outermost, no answer;
    # b: 20-30 holds 25 and is outermost; d: 40-41 holds nothing and decides nothing
    ranges = pl.DataFrame({"g": [1] * 4, "start_ns": [0, 8, 20, 40], "end_ns": [10, 15, 30, 41], "name": list("acbd")})
    points = pl.DataFrame({"g": [1, 1], "t": [12, 25]})
    kept = iv.holders(lambda: [ranges.head(2), ranges.tail(2)], points, "t", by=["g"])
    assert kept.get_column("name").to_list() == ["a", "c", "b"]
    assert iv.outermost_at(points, "t", kept, by=["g"], keep=["name"]).rows() == [(1, 25, "b")]


def test_outermost_at_by_hand() -> None:
    # a: 0-10 holds b: 2-4 (nested); c: 8-15 overlaps a without nesting (not outermost);
    # d and e start together at 20, e the longer (outermost), f: 30-30 (zero length)
    ranges = pl.DataFrame(
        {
            "g": [1] * 6,
            "start_ns": [0, 2, 8, 20, 20, 30],
            "end_ns": [10, 4, 15, 22, 25, 30],
            "name": ["a", "b", "c", "d", "e", "f"],
        }
    )
    points = pl.DataFrame({"g": [1] * 7, "t": [3, 9, 12, 21, 24, 30, -1]})
    found = iv.outermost_at(points, "t", ranges, by=["g"], keep=["name"])
    assert found.rows() == [(1, 3, "a"), (1, 9, "a"), (1, 21, "e"), (1, 24, "e")]
