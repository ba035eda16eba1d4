"""Interval algebra on polars frames: union, intersection, difference, gaps, sweeps.

Intervals are rows with ``start_ns`` and ``end_ns`` (half-open ``[start, end)``), grouped
by the ``by`` columns (usually ``rank``). Every measure of time in tracekit goes through
here, so time is always measured on wall-clock unions, never on per-stream sums.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import polars as pl

from tracekit.model.frames import columns, kept, taken

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

START, END = "start_ns", "end_ns"
_KEY = "__group"


def _grouped(df: pl.DataFrame, by: Sequence[str]) -> tuple[pl.DataFrame, list[str]]:
    """``df`` with at least one grouping column (a constant one when ``by`` is empty)."""
    if by:
        return df, list(by)
    return df.hstack([pl.zeros(df.height, pl.Int8, eager=True).alias(_KEY)]), [_KEY]


def _ungrouped(df: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    return df if by else columns(df, *(c for c in df.columns if c != _KEY))


def _spans(df: pl.DataFrame, by: Sequence[str], *, empty: bool) -> pl.DataFrame:
    """``by + [start_ns, end_ns]`` of the rows of ``df`` whose end is after their start (at or
    after it with ``empty``); a row with a null time is left out. Column by column where the
    times are numbers (:mod:`tracekit.model.frames`: no query)."""
    spans = columns(df, *by, START, END)
    start, end = spans.get_column(START), spans.get_column(END)
    if not (start.dtype.is_numeric() and end.dtype.is_numeric()):
        return spans.filter(pl.col(END) >= pl.col(START) if empty else pl.col(END) > pl.col(START))
    return kept(spans, end >= start if empty else end > start)


class _Shift(NamedTuple):
    """The shift that lays groups end to end (see :func:`_offset`): ``(key - kmin) * width - tmin``.

    ``single``: every row has the one key ``kmin`` (a shard of one rank), so the shift is
    ``-tmin`` for all: the same values without the key's column read, cast and multiplied (a
    2 GB rank's idle model spent a tenth of its time there)."""

    key: str
    kmin: int
    width: int
    tmin: int
    single: bool = False

    def expr(self) -> pl.Expr:
        """The shift of each row, as an expression."""
        if self.single:
            return pl.lit(-self.tmin, dtype=pl.Int64)
        return (pl.col(self.key).cast(pl.Int64) - self.kmin) * self.width - self.tmin

    def offsets(self, df: pl.DataFrame) -> pl.Series:
        """The shift of each row of ``df``, computed on the series (no query)."""
        if self.single:
            return pl.Series(self.key, np.full(df.height, -self.tmin, dtype=np.int64))
        offsets: pl.Series = (df.get_column(self.key).cast(pl.Int64) - self.kmin) * self.width - self.tmin
        return offsets

    def shifted(self, df: pl.DataFrame, column: str) -> pl.Series:
        """``column + shift`` of each row of ``df``."""
        if self.single:
            moved: pl.Series = df.get_column(column).cast(pl.Int64) - self.tmin
            return moved
        shifted: pl.Series = df.get_column(column) + self.offsets(df)
        return shifted


def _offset(df: pl.DataFrame, keys: Sequence[str], columns: Sequence[str]) -> pl.Expr | None:
    """A per-row shift that lays the groups' times end to end, or None where it cannot.

    With one integer key (a rank, an id) and no nulls, ``time + offset`` equals ``(key - min
    key) * width + (time - first time)``, ``width`` beyond the span of every ``columns``:
    increasing from group to group, and in time order within a group. Sorting that one
    integer is several times faster in polars than sorting several columns (whose rows it
    encodes first), and a running maximum over it never leaks from one group into the next,
    so no per-group window is needed. None when it would not fit in 62 bits.
    """
    shift = _shift(keys, [(df, columns)])
    return None if shift is None else shift.expr()


def _shift(keys: Sequence[str], frames: Sequence[tuple[pl.DataFrame, Sequence[str]]]) -> _Shift | None:
    """The shift of :func:`_offset` shared by several frames (each with its time ``columns``),
    so that their shifted times compare; None where any frame is empty or has a null or
    non-integer key or time, or where the times would not fit. Read from the series' own
    minima and maxima: small frames pay no query for it."""
    if len(keys) != 1:
        return None
    key, groups, times = keys[0], [], []
    for df, timed in frames:
        schema = df.schema
        if df.height == 0 or any(not schema[c].is_integer() for c in (key, *timed)):
            return None
        series = [df.get_column(c) for c in (key, *timed)]
        if any(s.null_count() for s in series):
            return None
        groups.append(_extent(series[0]))
        times += [_extent(t) for t in series[1:]]
    kmin, kmax = min(low for low, _ in groups), max(high for _, high in groups)
    tmin, tmax = min(low for low, _ in times), max(high for _, high in times)
    width = tmax - tmin + 1
    if (kmax - kmin + 1) * width >= 1 << 62:
        return None
    return _Shift(key, kmin, width, tmin, single=kmin == kmax)


def _ascending(values: np.ndarray) -> bool:
    """Whether ``values`` never decrease."""
    return bool(values.size < 2 or (values[1:] >= values[:-1]).all())


def _extent(series: pl.Series) -> tuple[int, int]:
    """The least and the greatest value of an integer series with values and no nulls."""
    low, high = series.min(), series.max()
    assert isinstance(low, int)
    assert isinstance(high, int)
    return low, high


def sort_within(df: pl.DataFrame, keys: Sequence[str], column: str) -> pl.DataFrame:
    """``df`` sorted by ``keys``, then by ``column`` within each group (fast: see ``_offset``)."""
    if not keys:
        return df.sort(column)
    shift = _shift(keys, [(df, [column])])
    if shift is None:
        return df.sort(*keys, column)
    return _sort_on(df, shift.shifted(df, column))


def _sort_on(df: pl.DataFrame, values: pl.Series) -> pl.DataFrame:
    """``df`` sorted on one integer per row; as it is when already in order (events are)."""
    return df if values.is_sorted() else df.sort(values)


def _same_group_as_next(keys: Sequence[str]) -> pl.Expr:
    same = [pl.col(k).shift(-1) == pl.col(k) for k in keys]
    return pl.all_horizontal(same).fill_null(False)


def union(df: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """Merge overlapping or touching intervals within each group.

    Returns ``by + [start_ns, end_ns]``, disjoint and sorted. Empty intervals are dropped.
    """
    df, keys = _grouped(_spans(df, by, empty=False), by)
    # an island (a merged interval) starts where a start lies beyond every earlier end of
    # its group and ends at the running maximum of ends on its last row; rows are sorted
    # by group, so filters keep islands in order and starts line up with ends
    shift = _shift(keys, [(df, [START, END])])
    if shift is not None:  # groups laid end to end: one running maximum over all of them at once
        return _ungrouped(_union_flat(df, shift), by)
    marked = df.sort(*keys, START).with_columns(
        new=(pl.col(START) > pl.col(END).cum_max().shift(1).over(keys)).fill_null(True),
        reach=pl.col(END).cum_max().over(keys),
    )
    last = (~_same_group_as_next(keys)) | pl.col("new").shift(-1).fill_null(True)
    starts = marked.filter(pl.col("new")).select(*keys, START)
    ends = marked.filter(last).select(pl.col("reach").alias(END))
    return _ungrouped(starts.hstack(ends), by)


def _union_flat(df: pl.DataFrame, shift: _Shift) -> pl.DataFrame:
    """:func:`union` of ``df`` (key, start_ns, end_ns; no empty interval) with its groups laid
    end to end by ``shift``: a running maximum over all of them, in NumPy, where the polars
    queries it replaces took a third more time (a 125 MB rank's 33 unions: 0.10 -> 0.07 s)."""
    off = shift.offsets(df).to_numpy()
    starts = df.get_column(START).to_numpy() + off
    ends = df.get_column(END).to_numpy() + off
    if bool((starts[1:] > ends[:-1]).all()):
        # in order, apart and not touching already (as unions and the classified host time are
        # when merged again): every row is an island of its own, so the rows are the union (the
        # gains' removals of 1,024 ranks, 2.7M rows: no running maximum, no gather, no new columns)
        return pl.DataFrame([df.get_column(shift.key), df.get_column(START), df.get_column(END).cast(pl.Int64)])
    order = None
    if starts.size > 1 and (starts[1:] < starts[:-1]).any():
        order = np.argsort(starts, kind="stable")
        starts, ends, off = starts[order], ends[order], off[order]
    reach = np.maximum.accumulate(ends)
    new = np.empty(starts.size, dtype=np.bool_)
    new[0] = True
    np.greater(starts[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, starts.size - 1)
    rows = first if order is None else order[first]
    return pl.DataFrame(
        [
            df.get_column(shift.key)[rows],
            pl.Series(START, starts[first] - off[first]).cast(df.schema[START]),
            pl.Series(END, reach[last] - off[last]),
        ]
    )


def total(df: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame | int:
    """Length of the union: an int without ``by``, else a frame ``by + [total_ns]``."""
    merged = union(df, by).with_columns((pl.col(END) - pl.col(START)).alias("total_ns"))
    if not by:
        return int(merged["total_ns"].sum())
    return merged.group_by(*by).agg(pl.col("total_ns").sum())


def sweep(parts: Mapping[str, pl.DataFrame], by: Sequence[str] = ()) -> pl.DataFrame:
    """Cut the timeline of each group into elementary segments.

    ``parts`` maps a label to its intervals (``by + [start_ns, end_ns]``). The result has
    ``by + [start_ns, end_ns]`` and one boolean column per label, true where at least one
    interval of that label covers the segment. Segments cover ``[first start, last end]``
    of each group without gaps (uncovered stretches have every flag false) and never cross
    an interval boundary, so any measure is a filter and a sum of lengths. Sweeping costs a
    sort of every start and end: a caller that needs coverage only, not the boundaries of
    each interval, passes unions (:func:`union`), which are often much smaller.
    """
    labels = list(parts)
    framed = [_grouped(_spans(f, by, empty=True), by) for f in parts.values()]
    held = [(f, keys) for f, keys in framed if f.height]
    typed = all(all(f.schema[c].is_integer() for c in (*keys, START, END)) for f, keys in framed)
    shift = _shift(held[0][1], [(f, [START, END]) for f, _ in held]) if held and typed else None
    if shift is not None:
        return _ungrouped(_sweep_flat([f for f, _ in framed], labels, shift), by)
    points = []
    for code, (merged, keys) in enumerate(framed):
        code_col = pl.lit(code, dtype=pl.Int16).alias("code")
        points.append(merged.select(*keys, pl.col(START).alias("t"), code_col, pl.lit(1, dtype=pl.Int8).alias("d")))
        points.append(merged.select(*keys, pl.col(END).alias("t"), code_col, pl.lit(-1, dtype=pl.Int8).alias("d")))
    if not points:
        return pl.DataFrame(schema={**dict.fromkeys(by, pl.Int64), START: pl.Int64, END: pl.Int64})
    keys = list(by) or [_KEY]
    # every interval ends in its own group, so each label's depth is 0 again at the end of
    # every group: a running sum over all groups at once is each group's own
    flags = [
        pl.when(pl.col("code") == code).then(pl.col("d")).otherwise(0).cum_sum().gt(0).alias(name)
        for code, name in enumerate(labels)
    ]
    segments = (
        sort_within(pl.concat(points, how="vertical_relaxed"), keys, "t")
        .with_columns(*flags, pl.when(_same_group_as_next(keys)).then(pl.col("t").shift(-1)).alias(END))
        .filter(pl.col(END) > pl.col("t"))
        .rename({"t": START})
        .select(*keys, START, END, *labels)
    )
    return _ungrouped(segments, by)


def _sweep_flat(frames: list[pl.DataFrame], labels: list[str], shift: _Shift) -> pl.DataFrame:
    """:func:`sweep` of ``frames`` (key, start_ns, end_ns; one per label) with their groups
    laid end to end by ``shift``, in NumPy (no query, as :func:`_union_flat`): every start and
    end in time order, each label's depth a running sum; a segment runs from one point to the
    next of its group, and the points of one time leave the flags of the last of them."""
    keys = pl.concat([columns(f, shift.key) for f in frames for _ in (0, 1)], how="vertical_relaxed").to_series()
    at = np.concatenate([shift.shifted(f, c).to_numpy() for f in frames for c in (START, END)])
    off = np.concatenate([shift.offsets(f).to_numpy() for f in frames for _ in (0, 1)])
    code = np.concatenate([np.full(2 * f.height, i, dtype=np.int16) for i, f in enumerate(frames)])
    step = np.concatenate([np.repeat(np.array([1, -1], dtype=np.int8), f.height) for f in frames])
    order = np.argsort(at, kind="stable")
    at, off, code, step = at[order], off[order], code[order], step[order]
    key = keys[order]
    following = np.append(at[1:], at[-1])
    groups = key.to_numpy()
    same = np.append(groups[1:] == groups[:-1], False)
    cut = same & (following > at)
    flags = {name: (np.cumsum(np.where(code == i, step, 0)) > 0)[cut] for i, name in enumerate(labels)}
    # the times in the type the points' column had (every start and end, relaxed to one)
    time = pl.concat(
        [f.get_column(c).head(0).alias(START).to_frame() for f in frames for c in (START, END)],
        how="vertical_relaxed",
    )
    return pl.DataFrame(
        [
            key.filter(pl.Series(cut)),
            pl.Series(START, at[cut] - off[cut]).cast(time.schema[START]),
            pl.Series(END, following[cut] - off[cut]).cast(time.schema[START]),
            *(pl.Series(name, flag) for name, flag in flags.items()),
        ]
    )


def covered(df: pl.DataFrame, cover: pl.DataFrame, by: Sequence[str] = ()) -> pl.Series:
    """For each row of ``df`` (intervals), how much of it ``cover`` covers, in ``df``'s order.

    ``C(t)``, the covered length before ``t``, is a running sum over the union of ``cover``
    found with an as-of join; a row's answer is ``C(end) - C(start)``. Much cheaper than a
    sweep when ``cover`` has many intervals: no sort of every boundary, no cutting.
    """
    if df.height == 0:
        return pl.Series("covered_ns", [], dtype=pl.Int64)
    rows, keys = _grouped(columns(df, *by, START, END), by)
    merged, _ = _grouped(union(cover, by), by)
    if len(keys) > 1 or not rows.schema[keys[0]].is_integer():
        # one dense integer id per group, shared by both frames
        ids = pl.concat([rows.select(keys), merged.select(keys)], how="vertical_relaxed").select(
            pl.struct(keys).rank("dense").cast(pl.Int64).alias("_group")
        )["_group"]
        rows = rows.select(ids.head(rows.height), START, END)
        merged = merged.select(ids.tail(merged.height), START, END)
        keys = ["_group"]
    both = pl.concat([rows, merged], how="vertical_relaxed")
    offset = _offset(both, keys, [START, END])
    if offset is None:
        if both.get_column(keys[0]).n_unique() == 1:
            raise ValueError("times span more than 2**62 ns: not one trace's clock")
        # groups too many or too far apart to lay end to end: one group at a time
        parts = rows.with_row_index("_row").partition_by(keys, maintain_order=True)
        out = [
            part.select("_row", covered(part, merged.filter(pl.col(keys[0]) == part[keys[0]][0])).alias("c"))
            for part in parts
        ]
        return pl.concat(out).sort("_row")["c"].alias("covered_ns")
    if merged.height == 0:
        return pl.Series("covered_ns", [0] * df.height, dtype=pl.Int64)
    # groups laid end to end, so one running sum and one as-of join serve every group: a
    # point before its group's first interval finds the previous group's last one, whose
    # length it clips to in full, which is that group's running total: the same C(t)
    table = (
        merged.select((pl.col(START) + offset).alias("s"), (pl.col(END) - pl.col(START)).alias("len"))
        .sort("s")
        .with_columns(before=pl.col("len").cum_sum() - pl.col("len"))
    )

    def cumulative(column: str) -> pl.Series:
        points = rows.select((pl.col(column) + offset).alias("t")).with_row_index("_row").sort("t")
        found = points.join_asof(table, left_on="t", right_on="s", strategy="backward", check_sortedness=False)
        value = (pl.col("before") + (pl.col("t") - pl.col("s")).clip(0, pl.col("len"))).fill_null(0)
        return found.select("_row", value.alias("c")).sort("_row")["c"]

    lengths: pl.Series = cumulative(END) - cumulative(START)
    return lengths.alias("covered_ns")


def covered_first(df: pl.DataFrame, covers: Sequence[pl.DataFrame], by: Sequence[str] = ()) -> list[pl.Series]:
    """For each row of ``df`` (intervals), how much of it each of ``covers`` takes, an earlier
    cover taking an instant first: one series per cover, in ``df``'s order.

    The same as measuring each row against the union of the first ``k`` covers with
    :func:`covered`, for every ``k``, and taking differences, in one sweep: each stretch of
    covered time is labelled with the first cover over it, and one running sum per cover
    (over the groups laid end to end, as in :func:`covered`) gives every row's share.
    """
    if df.height == 0 or not covers:
        return [pl.Series("covered_ns", [], dtype=pl.Int64) for _ in covers]
    labels = [f"_{i}" for i in range(len(covers))]
    cut = sweep(dict(zip(labels, (columns(c, *by, START, END) for c in covers), strict=True)), by)
    first = pl.coalesce([pl.when(pl.col(name)).then(pl.lit(i, dtype=pl.Int16)) for i, name in enumerate(labels)])
    pieces = cut.select(*by, START, END, first.alias("_first")).filter(pl.col("_first").is_not_null())
    rows, keys = _grouped(columns(df, *by, START, END), by)
    pieces, _ = _grouped(pieces, by)
    offset = None
    if len(keys) == 1 and rows.schema[keys[0]].is_integer() and pieces.height:
        both = pl.concat([rows, pieces.select(keys[0], START, END)], how="vertical_relaxed")
        offset = _offset(both, keys, [START, END])
    if offset is None:  # no covered time, or groups that do not lay end to end: one cover at a time
        return [covered(df, pieces.filter(pl.col("_first") == i), by) for i in range(len(covers))]
    # in NumPy, one cover at a time: the pieces in time order, each row's last piece to start by
    # its end and by its start found once (a column of running sums per cover, over a 2 GB rank's
    # million pieces and then joined to every row, held 90 MB at once in the idle model)
    table = pieces.select(
        (pl.col(START) + offset).alias("s"), (pl.col(END) - pl.col(START)).alias("len"), "_first"
    ).sort("s")
    starts, lengths, firsts = (table.get_column(c).to_numpy() for c in ("s", "len", "_first"))

    def placed(column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each row's last piece to start at or before its ``column`` (-1: none), that index
        clipped to the table, and how far into that piece the time lies."""
        t = rows.select(pl.col(column) + offset).to_series().to_numpy()
        found = np.searchsorted(starts, t, side="right") - 1
        at = np.maximum(found, 0)
        inside = np.where(found >= 0, np.clip(t - starts[at], 0, lengths[at]), 0)
        return found, at, inside

    ends, begins = placed(END), placed(START)
    out = []
    for i in range(len(covers)):
        mine = np.where(firsts == i, lengths, 0)
        before = np.cumsum(mine) - mine  # cover i's time in the pieces before each
        end, begin = (
            np.where(found >= 0, before[at] + np.where(firsts[at] == i, inside, 0), 0)
            for found, at, inside in (ends, begins)
        )
        out.append(pl.Series("covered_ns", end - begin, dtype=pl.Int64))
    return out


def intersect(a: pl.DataFrame, b: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """The parts of time covered by both ``a`` and ``b``, per group, as disjoint intervals."""
    return _combine(a, b, by, pl.col("a") & pl.col("b"))


def subtract(a: pl.DataFrame, b: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """The parts of ``a`` not covered by ``b``, per group, as disjoint intervals."""
    return _combine(a, b, by, pl.col("a") & ~pl.col("b"))


def _combine(a: pl.DataFrame, b: pl.DataFrame, by: Sequence[str], keep: pl.Expr) -> pl.DataFrame:
    cut = sweep({"a": columns(a, *by, START, END), "b": columns(b, *by, START, END)}, by).filter(keep)
    return union(columns(cut, *by, START, END), by)


def gaps(df: pl.DataFrame, by: Sequence[str] = (), window: pl.DataFrame | None = None) -> pl.DataFrame:
    """The uncovered stretches between intervals of each group.

    Without ``window``, between the first start and the last end of each group; with a
    ``window`` frame (``by + [start_ns, end_ns]``), within those windows.
    """
    if window is None:
        window = (
            df.group_by(*by).agg(pl.col(START).min(), pl.col(END).max())
            if by
            else df.select(pl.col(START).min(), pl.col(END).max()).drop_nulls()
        )
    return subtract(window, df, by)


def outermost(df: pl.DataFrame, keys: Sequence[str], *, first_of_equal: bool = False) -> pl.DataFrame:
    """The rows of ``df`` not nested in an earlier row of the same ``keys`` group (a range that
    starts where an earlier one ends is not nested in it); rows of equal times keep their order.

    ``first_of_equal``: of rows with equal keys and times, only the first (a zero-length range
    is not nested in its twin, so both would be kept); the same as ``df.unique(keys + times,
    keep="first", maintain_order=True)`` first, without a pass of its own.

    Rows sorted by group, start and longest first: a row is outermost when it starts at or
    after the running maximum of the ends before it in its group. That maximum is taken over
    the whole frame on times shifted group by group (see :func:`_offset`), so that it never
    leaks from one group into the next: no per-group window, whose hash table and scatter hold
    several times the columns on millions of operators. Only the rows kept are copied.
    """
    order = [*keys, START, END]
    descending = [False] * (len(order) - 1) + [True]
    schema = df.schema
    if (
        df.height == 0
        or not (schema[START].is_integer() and schema[END].is_integer())
        or any(df.get_column(c).null_count() for c in order)
    ):
        return _outermost_by_window(df, keys, order, descending, first_of_equal=first_of_equal)
    at = df.select(pl.arg_sort_by(order, descending=descending, maintain_order=True)).to_series()
    first = pl.Series([True]).extend_constant(False, df.height - 1)  # the first row of its group
    for key in keys:
        values = df.get_column(key)[at]
        first |= values != values.shift(1, fill_value=values[0])
        del values
    start, end = df.get_column(START)[at], df.get_column(END)[at]
    tmin, tmax = min(_extent(start)[0], _extent(end)[0]), max(_extent(start)[1], _extent(end)[1])
    width = tmax - tmin + 1
    if (int(first.sum()) + 1) * width >= 1 << 62:
        return _outermost_by_window(df, keys, order, descending, first_of_equal=first_of_equal)
    twin = None
    if first_of_equal:  # sorted stably: twins lie together, the first in ``df``'s order first
        twin = ~first & (start == start.shift(1)) & (end == end.shift(1))
    offset = first.cast(pl.Int64).cum_sum() * width - tmin
    start += offset
    end += offset
    del offset
    reach = end.cum_max().shift(1)
    del end
    keep = (start >= reach).fill_null(True)
    del start, reach
    if twin is not None:  # a twin leaves the running maximum as it was: the others' test holds
        keep &= ~twin.fill_null(False)
    return taken(df, at.filter(keep))


def outermost_at(
    df: pl.DataFrame, time: str, ranges: pl.DataFrame, *, by: Sequence[str], keep: Sequence[str]
) -> pl.DataFrame:
    """The rows of ``df`` held by a range of ``outermost(ranges, by, first_of_equal=True)``,
    in ``df``'s order, with that range's ``keep`` columns: what :func:`locate` of ``time`` in
    those outermost ranges gives, without finding the outermost of every range (a sort of them
    by group, start and end: 2.6 of a 2 GB rank's 3.1 s of naming a few thousand syncs).

    With ``ranges`` in order of start within each group (ties in their order), ``reach`` the
    running maximum of their ends: the range an outermost one holding ``t`` would be is the
    first whose reach passes ``t``, if it starts by ``t``; of the ranges starting with it, the
    longest (the first of equal ones), which is outermost when every range that starts before
    it has ended by its start. One binary search per point, a sort of one integer (the groups
    laid end to end, :func:`_offset`). Where the groups do not lay end to end (a null, several
    keys, no integer times) or a range ends before it starts, the outermost ranges are found
    and located.
    """
    shift = _shift(by, [(df, [time]), (ranges, [START, END])])
    if shift is None or (ranges.get_column(END) < ranges.get_column(START)).any():
        located = locate(df.with_row_index("_at"), time, outermost(ranges, by, first_of_equal=True), by=by, keep=keep)
        return located.sort("_at").drop("_at", "frame_end_ns")
    # one group (a thread's operators) needs no shift, and its ranges in order no sort: the
    # columns' own arrays are read (a 2 GB rank's 4.6M operators: six copies of 37 MB less)
    if shift.single:
        starts, ends, at = (
            f.get_column(c).cast(pl.Int64).to_numpy() for f, c in ((ranges, START), (ranges, END), (df, time))
        )
    else:
        starts, ends = shift.shifted(ranges, START).to_numpy(), shift.shifted(ranges, END).to_numpy()
        at = shift.shifted(df, time).to_numpy()
    order = None if _ascending(starts) else np.argsort(starts, kind="stable")
    if order is not None:
        starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    first = np.minimum(np.searchsorted(reach, at, side="right"), starts.size - 1)
    held = (reach[first] > at) & (starts[first] <= at)
    lo = np.searchsorted(starts, starts[first], side="left")
    hi = np.searchsorted(starts, starts[first], side="right")
    chosen = lo.copy()
    tied = np.flatnonzero(held & (hi - lo > 1))
    if tied.size:  # of the ranges that start together, the first of the longest
        runs, where = np.unique(lo[tied], return_inverse=True)
        lengths = hi[tied][np.unique(where, return_index=True)[1]] - runs
        index = np.repeat(runs, lengths) + (np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths))
        bounds = np.cumsum(lengths) - lengths
        longest = np.repeat(np.maximum.reduceat(ends[index], bounds), lengths)
        best = np.minimum.reduceat(np.where(ends[index] == longest, index, np.iinfo(np.int64).max), bounds)
        chosen[tied] = best[where]
    before = np.where(lo > 0, reach[np.maximum(lo - 1, 0)], np.iinfo(np.int64).min)
    held &= before <= starts[chosen]
    rows = pl.Series(chosen[held] if order is None else order[chosen[held]])
    return kept(df, pl.Series(held)).hstack(taken(columns(ranges, *keep), rows).get_columns())


def holders(
    slices: Callable[[], Iterable[pl.DataFrame]], points: pl.DataFrame, time: str, *, by: Sequence[str]
) -> pl.DataFrame:
    """Of the ranges that ``slices()`` gives (slices of one frame, by + start_ns, end_ns and any
    other columns), the ones an answer of :func:`outermost_at` for ``points`` (by + ``time``)
    can depend on, in the slices' order: those that hold a point (the outermost range holding
    one is among them), and those that hold the start of one of those (they decide whether it
    is outermost: a range is when every range that starts before it has ended by its start).
    ``outermost_at(points, time, holders(...))`` is ``outermost_at(points, time, every range)``;
    of millions of ranges (a thread's operators), a few are kept, one slice held at a time.
    ``slices`` is called twice, and gives at least one slice (an empty one where there are none)."""

    def spans(times: pl.DataFrame) -> pl.DataFrame:  # the times as ranges of 1 ns, disjoint
        at = pl.col(time)
        return union(times.drop_nulls().select(*by, at.alias(START), (at + 1).alias(END)), by)

    def holding(times: pl.DataFrame) -> pl.DataFrame:
        around = spans(times)
        return pl.concat([overlapping(part, around, by=by) for part in slices()], how="vertical_relaxed")

    points = points.select(*by, time)
    held = holding(points)
    return holding(pl.concat([points, held.select(*by, pl.col(START).alias(time))], how="vertical_relaxed"))


def _outermost_by_window(
    df: pl.DataFrame, keys: Sequence[str], order: list[str], descending: list[bool], *, first_of_equal: bool
) -> pl.DataFrame:
    """:func:`outermost` by a window over each group: for times with nulls or of no integer type."""
    reach = pl.col(END).cum_max().shift(1).over(keys)
    keep = (pl.col(START) >= reach).fill_null(True)
    if first_of_equal:
        keep = keep & ~pl.all_horizontal(pl.col(c) == pl.col(c).shift(1) for c in order).fill_null(False)
    return df.sort(order, descending=descending, maintain_order=True).filter(keep)


def containing(df: pl.DataFrame, time: str, frames: pl.DataFrame, *, by: Sequence[str]) -> pl.Series:
    """For each row of ``df``, in its order, the row number in ``frames`` (non-overlapping
    intervals per group, ``by + [start_ns, end_ns]``) of the frame of its group that contains its
    ``time``, null where none: what :func:`locate` finds, with no row of ``df`` copied (a caller
    that groups by the frame adds this one column). A binary search on the groups laid end to end
    (see :func:`_offset`), else an as-of join."""
    shift = _shift(by, [(df, [time]), (frames, [START, END])])
    if shift is None:  # each row's frame as :func:`locate` finds it, put back at the row's place
        numbered = frames.select(*by, START, END).with_row_index("frame")
        placed = df.select(*by, time).with_row_index("_row")
        found = locate(placed, time, numbered, by=by, keep=["frame"], in_time_order=False)
        none = pl.Series("frame", [None] * df.height, dtype=pl.UInt32)
        return none.scatter(found.get_column("_row"), found.get_column("frame"))
    starts, ends = shift.shifted(frames, START).to_numpy(), shift.shifted(frames, END).to_numpy()
    order = None
    if not _ascending(starts):
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    points = shift.shifted(df, time).to_numpy()
    found_at = np.searchsorted(starts, points, side="right") - 1
    safe = np.maximum(found_at, 0)
    inside = (found_at >= 0) & (points < ends[safe])
    rows = (safe if order is None else order[safe]).astype(np.uint32)
    return pl.Series("frame", np.ma.masked_array(rows, mask=~inside))


def locate(
    df: pl.DataFrame,
    time: str,
    frames: pl.DataFrame,
    *,
    by: Sequence[str],
    keep: Sequence[str],
    in_time_order: bool = True,
) -> pl.DataFrame:
    """Attach to each row of ``df`` the frame that contains its ``time`` column.

    ``frames`` holds non-overlapping intervals per group (``by + [start_ns, end_ns] +
    keep``); the ``keep`` columns of the containing frame are added, with ``frame_end_ns``.
    Rows whose time falls in no frame are dropped. The rows come back in time order within
    their group; ``in_time_order=False`` keeps ``df``'s own order (no sort: for a caller that
    only groups them).
    """
    right = pl.DataFrame(
        [
            *(frames.get_column(c) for c in (*by, *keep)),
            frames.get_column(START).alias("frame_start_ns"),
            frames.get_column(END).alias("frame_end_ns"),
        ]
    )
    shift = _shift(by, [(df, [time]), (right, ["frame_start_ns", "frame_end_ns"])])
    if shift is not None:
        # groups laid end to end (see ``_offset``): each point's frame is the last to start at
        # or before it, found by a binary search on one integer (no ``by``, no sort of the
        # points, no join: only the rows kept are copied); a frame found in an earlier group
        # ends before the point's group begins
        at = shift.shifted(df, time)
        starts = shift.shifted(right, "frame_start_ns")
        ends = shift.shifted(right, "frame_end_ns")
        if not starts.is_sorted():
            order = starts.arg_sort()
            right, starts, ends = taken(right, order), starts[order], ends[order]
        # in NumPy: Series.search_sorted and clip each run a query
        points_at = at.to_numpy()
        found = np.searchsorted(starts.to_numpy(), points_at, side="right") - 1
        safe = np.maximum(found, 0)
        inside = (found >= 0) & (points_at < ends.to_numpy()[safe])
        frame = pl.Series(safe[inside])
        points = kept(df, pl.Series(inside)).hstack(taken(columns(right, *keep, "frame_end_ns"), frame).get_columns())
        kept_at = points_at[inside]
        return points if not in_time_order or _ascending(kept_at) else points.sort(pl.Series(kept_at))
    return (
        sort_within(df, by, time)
        .join_asof(
            sort_within(right, by, "frame_start_ns"),
            left_on=time,
            right_on="frame_start_ns",
            by=list(by),
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col(time) < pl.col("frame_end_ns"))
        .drop("frame_start_ns")
    )


def overlapping(df: pl.DataFrame, gaps: pl.DataFrame, *, by: Sequence[str]) -> pl.DataFrame:
    """The rows of ``df`` (intervals) that overlap one of the ``gaps`` of their group (disjoint
    intervals per group, ``by + [start_ns, end_ns]``), in ``df``'s order; a row with a null key
    or time overlaps nothing.

    Each row's gap is the first of its group to end after the row starts: a binary search on the
    groups laid end to end (see :func:`_offset`; a gap of another group then lies a whole width
    away), no join, and only the rows kept are copied; else an as-of join.
    """
    cols = (*by, START, END)
    df, gaps = (f.drop_nulls(cols) if any(f.get_column(c).null_count() for c in cols) else f for f in (df, gaps))
    if df.height == 0 or gaps.height == 0:
        return df.clear()
    shift = _shift(by, [(df, [START, END]), (gaps, [START, END])])
    if shift is None:
        right = pl.DataFrame(
            [*(gaps.get_column(c) for c in by), gaps.get_column(START).alias("_gap_start"), gaps.get_column(END)]
        )
        return (
            sort_within(df.with_row_index("_row"), by, START)
            .join_asof(
                sort_within(right.rename({END: "_gap_end"}), by, "_gap_end"),
                left_on=START,
                right_on="_gap_end",
                by=list(by),
                strategy="forward",
                allow_exact_matches=False,
                check_sortedness=False,
            )
            .filter(pl.col("_gap_start") < pl.col(END))
            .sort("_row")
            .drop("_row", "_gap_start", "_gap_end")
        )

    # in NumPy (Series.search_sorted runs a query): gaps disjoint in a group end in start order;
    # of one group, the times as they are (a shift common to all changes no comparison)
    def laid(frame: pl.DataFrame, column: str) -> np.ndarray:
        return (frame.get_column(column) if shift.single else shift.shifted(frame, column)).to_numpy()

    starts, ends = laid(gaps, START), laid(gaps, END)
    if not _ascending(ends):
        order = np.argsort(ends, kind="stable")
        starts, ends = starts[order], ends[order]
    at = laid(df, START)
    if ends.size < at.size and _ascending(at):
        # the rows in time order (a rank's events are): each gap's place among the rows, then
        # each row's count of the gaps placed at or before it, the same as a search per row
        # (a 2 GB rank's 5 million operators searched among its gaps took a seventh of its idle model)
        placed = np.searchsorted(at, ends, side="left")
        found = np.cumsum(np.bincount(placed, minlength=at.size + 1)[: at.size])
    else:
        found = np.searchsorted(ends, at, side="right")
    gap = np.minimum(found, ends.size - 1)
    return kept(df, pl.Series((found < ends.size) & (starts[gap] < laid(df, END))))


def _laid(
    points: pl.DataFrame, time: str, marks: pl.DataFrame, mark: str, by: Sequence[str]
) -> tuple[_Shift, pl.Series, pl.Series] | None:
    """The shift laying ``points``' and ``marks``' groups end to end, the marks' shifted values in
    order and the points' shifted times (None where the groups cannot be laid so)."""
    shift = _shift(by, [(points, [time]), (marks, [mark])])
    if shift is None:
        return None
    values = shift.shifted(marks, mark)
    return shift, values if values.is_sorted() else values.sort(), shift.shifted(points, time)


def first_at_or_after(
    points: pl.DataFrame, time: str, marks: pl.DataFrame, mark: str, *, by: Sequence[str]
) -> pl.Series | None:
    """For each row of ``points``, in its order, the first ``mark`` of the ``marks`` of its group
    at or after its ``time`` (null where none): a binary search on the groups laid end to end
    (see :func:`_offset`), no join and no sort of the points. None where the groups cannot be
    laid so (the caller joins instead)."""
    laid = _laid(points, time, marks, mark, by)
    if laid is None:
        return None
    shift, values, at = laid
    marks_at, points_at = values.to_numpy(), at.to_numpy()  # NumPy: search_sorted, clip and // each ran a query
    found = np.searchsorted(marks_at, points_at, side="left")
    value = marks_at[np.minimum(found, marks_at.size - 1)]
    # a mark of a later group lies a whole width further: its group is another
    same = (found < marks_at.size) & (value // shift.width == points_at // shift.width)
    first = pl.Series(mark, value - shift.offsets(points).to_numpy(), dtype=pl.Int64)
    return first.set(pl.Series(~same), None)


def count_before(
    points: pl.DataFrame, time: str, marks: pl.DataFrame, mark: str, *, by: Sequence[str]
) -> pl.Series | None:
    """For each row of ``points``, in its order, how many of the ``marks`` of its group lie
    before its ``time``: two binary searches on the groups laid end to end (see
    :func:`_offset`). None where the groups cannot be laid so (the caller joins instead)."""
    laid = _laid(points, time, marks, mark, by)
    if laid is None:
        return None
    shift, values, at = laid
    marks_at = values.to_numpy()
    group_start = shift.offsets(points).to_numpy() + shift.tmin  # the first value the group's marks can take
    before = np.searchsorted(marks_at, at.to_numpy(), side="left") - np.searchsorted(marks_at, group_start, side="left")
    return pl.Series(mark, before, dtype=pl.Int64)


def within(df: pl.DataFrame, time: str, frames: pl.DataFrame, *, by: Sequence[str]) -> pl.Series:
    """Whether the ``time`` of each row of ``df`` lies in one of the ``frames`` of its group
    (non-overlapping intervals per group, ``by + [start_ns, end_ns]``): the rows
    :func:`locate` keeps, as a mask in ``df``'s order, with no copy of ``df``."""
    right = columns(frames, *by, START, END)
    shift = _shift(by, [(df, [time]), (right, [START, END])])
    if shift is None:
        found = locate(df.select(*by, time).with_row_index("_row"), time, right, by=by, keep=[])
        mask: pl.Series = pl.repeat(False, df.height, eager=True).alias(time)
        return mask.scatter(found.get_column("_row"), True)
    starts, ends = shift.shifted(right, START), shift.shifted(right, END)
    if not starts.is_sorted():
        order = starts.arg_sort()
        starts, ends = starts[order], ends[order]
    at = shift.shifted(df, time)
    frame = starts.search_sorted(at, side="right").cast(pl.Int64) - 1
    del starts
    inside: pl.Series = (frame >= 0) & (at < ends[frame.clip(lower_bound=0)])
    return inside.alias(time)
