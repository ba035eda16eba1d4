"""A file's events held by kind from its chunks (:mod:`tracekit.readers.kinds`): the same events,
places and order as its one frame sorted by start (ties in the file's order) held by kind, and a
column no event of a kind fills a literal there, never a buffer."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.model.by_kind import ROW, ByKind, Literals
from tracekit.readers import kinds as kinds_module
from tracekit.readers.kinds import POS, Pieces, in_order
from tracekit.readers.plausible import NEGATIVE, screen_parts

_SCHEMA = pl.Schema({"kind": pl.String(), "start_ns": pl.Int64(), "x": pl.Int64(), "y": pl.Int64()})
_KINDS = ("cpu_op", "python", "kernel")


def _frame(rows: list[tuple[str, int, int | None, int | None]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_SCHEMA, orient="row")


def _held(chunks: list[pl.DataFrame], *, literal_rows: int = 1, chunked: bool = False) -> ByKind:
    pieces = Pieces()
    for chunk in chunks:
        pieces.add(chunk)
    parts = pieces.taken()
    height = sum(p.height for p in parts.values())
    places = {k: p.drop_in_place(POS).to_numpy() for k, p in parts.items()}
    # the columns of one value or none in every piece, as the reader keeps them
    literal: Literals = {k: {c: v for c, v in pieces.ones[k].items() if c in ("x", "y")} for k in parts}
    ordered = in_order(parts, places, literal=literal, chunked=chunked)
    return ByKind.held(ordered, height, _SCHEMA, literal_rows=literal_rows)


def _same(held: ByKind, expected: ByKind) -> None:
    assert held.height == expected.height
    assert set(held.parts) == set(expected.parts)
    for kind, part in expected.parts.items():
        assert held.parts[kind].select(*_SCHEMA, ROW).equals(part), kind


_events = st.lists(
    st.tuples(
        st.sampled_from(_KINDS),
        st.integers(0, 20),  # few starts: many ties, across kinds and within one
        st.one_of(st.none(), st.integers(0, 5)),
    ),
    min_size=0,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(
    events=_events,
    cuts=st.lists(st.integers(0, 60), max_size=5),
    split=st.integers(1, 40),
    block=st.integers(1, 8),
    ordered=st.booleans(),
    chunked=st.booleans(),
)
def test_held_by_kind_from_chunks_is_the_one_frame_sorted_and_held_by_kind(
    *, events: list[tuple[str, int, int | None]], cuts: list[int], split: int, block: int, ordered: bool, chunked: bool
) -> None:
    if ordered:  # in order of starts already (read a ``block`` of starts at a time, not sorted)
        events = sorted(events, key=lambda e: e[1])
    # the Python frames fill no ``x``; ``y`` is filled by the kernels alone
    rows = [(k, s, None if k == "python" else x, x if k == "kernel" else None) for k, s, x in events]
    frame = _frame(rows)
    edges = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    chunks = [frame.slice(a, b - a) for a, b in itertools.pairwise(edges)]
    before = kinds_module.SPLIT_ROWS, kinds_module.ORDER_BLOCK
    kinds_module.SPLIT_ROWS = split  # chunks split by kind a few at a time, or one by one
    kinds_module.ORDER_BLOCK = block
    try:
        held = _held(chunks, chunked=chunked)
    finally:
        kinds_module.SPLIT_ROWS, kinds_module.ORDER_BLOCK = before
    _same(held, ByKind.of(frame.sort("start_ns", maintain_order=True), literal_rows=1))
    assert held.frame().equals(frame.sort("start_ns", maintain_order=True))


@pytest.mark.parametrize("chunked", [True, False])
def test_a_rank_in_order_to_be_spilled_keeps_its_columns_in_their_pieces(
    chunked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a rank of more events than SPILLED_EVENTS is written to a file of its own before its
    # analysis: its columns are not copied into one piece first (the same events either way)
    monkeypatch.setattr(kinds_module, "SPLIT_ROWS", 1000)
    n = 5000
    frame = _frame([("cpu_op" if i % 3 else "kernel", i, i, None) for i in range(n)])
    chunks = [frame.slice(a, 700) for a in range(0, n, 700)]
    held = _held(chunks, literal_rows=1 << 30, chunked=chunked)
    column = held.parts["cpu_op"].get_column("x")
    assert (column.n_chunks() > 1) == chunked
    assert held.frame().equals(frame)
    # the reader leaves them so for a rank of more than SPILLED_EVENTS events
    monkeypatch.setattr(kinds_module, "SPILLED_EVENTS", n - 1 if chunked else n)
    pieces = Pieces()
    for chunk in chunks:
        pieces.add(chunk)
    parts = pieces.taken()
    places = {k: p.drop_in_place(POS).to_numpy() for k, p in parts.items()}
    read = kinds_module.held(parts, places, _SCHEMA, literal={})
    assert (read.parts["cpu_op"].get_column("x").n_chunks() > 1) == chunked
    assert read.frame().equals(frame)


def _cut(series: pl.Series, size: int) -> pl.Series:
    return pl.concat([series.slice(a, size) for a in range(0, series.len(), size)], rechunk=False)


def test_a_spilled_kind_whose_columns_are_cut_apart_keeps_them_in_pieces() -> None:
    # a column a query made in pieces of its own (a kind's category, its places) beside those
    # passed through as decoded: a query on them together would copy every column into one
    # piece (a 2 GB rank's operators and kernels, all at once: the read's peak)
    n = 3000
    frame = pl.DataFrame(
        [_cut(pl.Series("x", range(n)), 250), _cut(pl.Series("y", range(n, 2 * n)), 1000), pl.Series("z", [None] * n)]
    )
    out = kinds_module._one_piece(frame, None, np.arange(n), {"z": None}, chunked=True)
    assert [out.get_column(c).n_chunks() for c in out.columns] == [12, 12, 1, 12]  # z: a literal
    expected = pl.DataFrame({"x": range(n), "y": range(n, 2 * n)})
    assert out.equals(
        expected.with_columns(z=pl.lit(None, dtype=pl.Null), **{ROW: pl.Series(np.arange(n, dtype=np.uint32))})
    )


@pytest.mark.parametrize(
    ("sizes", "pieces"),
    [
        ((250, 1000, 3000, 250), 12),  # the cut most columns share
        ((1000, 3000), 3),
        ((3000, 3000), 1),  # none in pieces: as they are
        ((7, 250, 250, 1000, 1000, 1000), 3),
    ],
)
def test_columns_are_cut_where_most_of_them_are(sizes: tuple[int, ...], pieces: int) -> None:
    n = 3000
    columns = [_cut(pl.Series(f"c{i}", range(i, i + n)), size) for i, size in enumerate(sizes)]
    aligned = kinds_module._aligned(columns)
    assert {c.n_chunks() for c in aligned} == {pieces}
    assert len({tuple(c.chunk_lengths()) for c in aligned}) == 1
    assert all(a.equals(c) for a, c in zip(aligned, columns, strict=True))


@pytest.mark.parametrize("shuffled", [True, False])
def test_a_column_no_event_of_a_kind_fills_stays_a_literal_there(
    shuffled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kinds_module, "SPLIT_ROWS", 5000)  # the chunks split by kind two at a time
    n = 20_000
    starts = [(i * 7919) % n if shuffled else i for i in range(n)]
    kinds = ["python" if i % 4 else "cpu_op" for i in range(n)]
    frame = pl.DataFrame(
        {"kind": kinds, "start_ns": starts, "x": [None if k == "python" else i for i, k in enumerate(kinds)]},
        schema={"kind": pl.String, "start_ns": pl.Int64, "x": pl.Int64},
    ).with_columns(y=pl.lit(None, dtype=pl.Int64))
    chunks = [frame.slice(a, 3000) for a in range(0, n, 3000)]
    held = _held(chunks, literal_rows=1 << 30)  # no literal made after: only those the chunks' split made
    python = held.parts["python"]
    # a buffer would be 8 bytes an event and its validity
    assert python.select("x").estimated_size() < 100
    assert python.select("y").estimated_size() < 100
    assert held.parts["cpu_op"].select("x").estimated_size() >= 8 * (n // 4)
    assert held.frame().equals(frame.sort("start_ns", maintain_order=True))


def test_a_column_of_one_value_in_every_piece_of_a_kind_is_one_literal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kinds_module, "SPLIT_ROWS", 5000)  # the chunks split by kind two at a time
    n = 20_000
    kinds = ["python" if i % 4 else "cpu_op" for i in range(n)]
    # the operators' ``x`` is 0 in the first pieces, 1 in the last: one value in each, not in all
    frame = pl.DataFrame(
        {"kind": kinds, "start_ns": range(n), "x": [7 if k == "python" else i // 10_000 for i, k in enumerate(kinds)]},
        schema={"kind": pl.String, "start_ns": pl.Int64, "x": pl.Int64},
    ).with_columns(y=pl.lit(None, dtype=pl.Int64))
    pieces = Pieces()
    for a in range(0, n, 3000):
        pieces.add(frame.slice(a, 3000))
    parts = pieces.taken()
    assert pieces.ones["python"] == {"kind": "python", "x": 7, "y": None}
    assert pieces.ones["cpu_op"] == {"kind": "cpu_op", "y": None}
    # literals of the python frames: no buffer of 8 bytes an event
    assert parts["python"].select("kind", "x", "y").estimated_size() < 100
    for kind, part in parts.items():
        expected = frame.with_row_index(POS).filter(pl.col("kind") == kind)
        assert part.select(expected.columns).equals(expected), kind


def test_places_close_over_the_events_left_out() -> None:
    frame = _frame(
        [("cpu_op", 5, 1, None), ("python", 1, None, None), ("cpu_op", 3, 2, None), ("python", 0, None, None)]
    )
    pieces = Pieces()
    pieces.add(frame)
    parts = pieces.taken()
    # the event at place 2 (cpu_op at 3) left out, as a screen for impossible times would
    parts["cpu_op"] = parts["cpu_op"].filter(pl.col(POS) != 2)
    places = {k: p.drop_in_place(POS).to_numpy() for k, p in parts.items()}
    held = ByKind.held(in_order(parts, places, literal={}), 3, _SCHEMA)
    assert held.parts["python"].get_column(ROW).to_list() == [0, 1]
    assert held.parts["cpu_op"].get_column(ROW).to_list() == [2]
    assert held.frame().get_column("start_ns").to_list() == [0, 1, 5]


def test_no_event() -> None:
    pieces = Pieces()
    pieces.add(_frame([]))
    assert pieces.taken() == {}
    held = ByKind.held(in_order({}, {}, literal={}), 0, _SCHEMA)
    assert held.height == 0
    assert held.frame().equals(pl.DataFrame(schema=_SCHEMA))


def test_ranks_held_by_kind_make_the_run_as_their_frames_would() -> None:
    one = _frame([("cpu_op", 0, 1, None), ("kernel", 1, None, 7), ("cpu_op", 2, 3, None)])
    two = _frame([("python", 0, None, None), ("kernel", 4, None, 8)])
    unranked = pl.lit(None, pl.Int32).alias("rank")
    held = [(3, ByKind.of(one.with_columns(unranked), literal_rows=1))]
    held.append((5, ByKind.of(two.with_columns(unranked), literal_rows=1)))
    ranked = ByKind.ranked(held)
    assert not held  # taken
    whole = pl.concat([one.with_columns(rank=pl.lit(3, pl.Int32)), two.with_columns(rank=pl.lit(5, pl.Int32))])
    assert ranked.height == 5
    assert ranked.frame().equals(whole)
    assert ranked.parts["kernel"].get_column(ROW).to_list() == [1, 4]


def test_a_kind_replaced_closes_the_places_it_left() -> None:
    held = ByKind.of(_frame([("step", 0, None, None), ("cpu_op", 1, 1, None), ("step", 2, None, None)]), literal_rows=1)
    step = held.parts["step"].filter(pl.col(ROW) != 0)
    out = held.replaced("step", step, pl.Series([0], dtype=pl.UInt32))
    assert out.height == 2
    assert out.frame().get_column("start_ns").to_list() == [1, 2]
    assert out.parts["cpu_op"].get_column(ROW).to_list() == [0]


def test_the_example_dropped_is_the_first_in_the_files_order_whatever_its_kind() -> None:
    # places 0..3 over two kinds: the ones at 2 (a kernel) and 3 (an operator) end before they start
    parts = {
        "cpu_op": pl.DataFrame({POS: [1, 3], "name": ["ok", "late"], "ts": [1.0, 2.0], "dur": [1.0, -1.0]}),
        "kernel": pl.DataFrame({POS: [0, 2], "name": ["ok", "first"], "ts": [1.0, 2.0], "dur": [1.0, -1.0]}),
    }
    end = pl.col("ts") + pl.col("dur")
    kept, dropped, _ = screen_parts(
        parts, start=pl.col("ts"), end=end, needs_extent=True, unit_ns=1000, unit="us", order=POS
    )
    assert dropped.count == 2
    assert dropped.reasons == {NEGATIVE: 2}
    assert dropped.example is not None
    assert dropped.example.name == "first"
    assert {k: p.get_column(POS).to_list() for k, p in kept.items()} == {"cpu_op": [1], "kernel": [0]}


def _taken(frame: pl.DataFrame, cuts: list[int], split: int) -> dict[str, pl.DataFrame]:
    """``frame`` added to :class:`Pieces` in chunks cut at ``cuts``, split by kind ``split``
    events at a time, and taken."""
    edges = sorted({0, frame.height, *(c for c in cuts if c <= frame.height)})
    before = kinds_module.SPLIT_ROWS
    kinds_module.SPLIT_ROWS = split
    try:
        pieces = Pieces()
        for a, b in itertools.pairwise(edges):
            pieces.add(frame.slice(a, b - a))
        return pieces.taken()
    finally:
        kinds_module.SPLIT_ROWS = before


_NARROWED = pl.Schema({"kind": pl.String(), "start_ns": pl.Int64(), "tid": pl.Int64(), "correlation": pl.Int64()})


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(_KINDS),
            st.integers(0, 20),
            st.integers(1, 3),
            # now and then a value past 32 bits, in a piece of its own or beside others
            st.one_of(st.none(), st.integers(-5, 5), st.just(2**40), st.just(-(2**31))),
        ),
        max_size=40,
    ),
    cuts=st.lists(st.integers(0, 40), max_size=4),
    split=st.integers(1, 20),
    literal_rows=st.sampled_from([1, 8, 1 << 16]),
)
def test_columns_that_fit_are_held_narrower_and_read_back_whole(
    *, events: list[tuple[str, int, int, int | None]], cuts: list[int], split: int, literal_rows: int
) -> None:
    # a column of NARROW is held in 32 bits in each piece where it fits, and so by a kind of
    # literal_rows events or more where it fits in every piece (else in 64): the same types as
    # the one frame held by kind, the same values read back, in the schema's types
    frame = pl.DataFrame(events, schema=_NARROWED, orient="row")
    parts = _taken(frame, cuts, split)
    height = sum(p.height for p in parts.values())
    places = {k: p.drop_in_place(POS).to_numpy() for k, p in parts.items()}
    ordered = in_order(parts, places, literal={})
    held = ByKind.held(ordered, height, _NARROWED, literal_rows=literal_rows)
    expected = ByKind.of(frame.sort("start_ns", maintain_order=True), literal_rows=literal_rows)
    literals = held.literals(literal_rows=literal_rows)
    for kind, part in expected.parts.items():
        mine = held.parts[kind]
        assert mine.schema == part.schema and mine.select(*_NARROWED, ROW).equals(part), kind
        values = frame.filter(pl.col("kind") == kind).get_column("tid")
        narrow = part.height >= literal_rows and "tid" not in literals.get(kind, {})
        assert (mine.schema["tid"] == pl.Int32) == (narrow and values.max() < 2**31), kind  # type: ignore[operator]
    assert held.frame().equals(frame.sort("start_ns", maintain_order=True))
    assert held.frame().schema == _NARROWED


_DURATIONS = pl.Schema({"kind": pl.String(), "start_ns": pl.Int64(), "dur": pl.Float64()})


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(_KINDS),
            st.integers(0, 20),
            st.one_of(
                st.none(),
                # whole ns as Kineto writes them (231.569 us: polars' x / 1000 reads 231.56900000000002)
                st.integers(0, 2**31 - 1).map(lambda ns: ns / 1000),
                st.sampled_from([231.569, 0.47, 1.88, 55.809, 0.0, -0.0]),
                # a part of a ns, negative, too long for 32 bits, no number: kept as floats
                st.sampled_from([0.0004, 1.2345678, -1.0, 2**31 / 1000, 1e30, float("nan"), float("inf")]),
            ),
        ),
        max_size=40,
    ),
    cuts=st.lists(st.integers(0, 40), max_size=4),
    split=st.integers(1, 20),
)
def test_durations_held_in_whole_ns_read_back_as_the_floats_they_were(
    *, events: list[tuple[str, int, float | None]], cuts: list[int], split: int
) -> None:
    # a piece whose every duration is a whole number of ns that fits 32 bits holds them so; a
    # kind's frame holds both columns (one a literal of no value) and reads back, in float us,
    # the very floats of the file (bit for bit: the screen judges the same ends), in whole ns
    # what the events' times are made of
    frame = pl.DataFrame(events, schema=_DURATIONS, orient="row")
    parts = _taken(frame, cuts, split)
    edges = sorted({0, len(events), *(c for c in cuts if c <= len(events))})
    for kind, part in parts.items():
        assert {kinds_module.DURATION, kinds_module.DURATION_NS} <= set(part.columns)
        mine = part.sort(POS).select(us=kinds_module.duration_us(), ns=kinds_module.duration_ns())
        given_ = frame.filter(pl.col("kind") == kind).get_column("dur")
        assert mine.get_column("us").to_numpy().tobytes() == given_.to_numpy().tobytes(), kind
        assert mine.get_column("us").is_null().equals(given_.is_null())
        in_ns = given_.to_frame().select((pl.col("dur") * 1000).round()).to_series()
        assert mine.get_column("ns").equals(in_ns, null_equal=True)
        values = given_.drop_nulls().to_numpy()
        whole = values.size and bool(np.all(~np.signbit(values) & (np.round(values * 1000) < 2**31)))
        whole = whole and bool(np.all(np.round(values * 1000) / 1000.0 == values))
        if whole and len(edges) == 2 and split >= len(events):  # one piece of the kind: in ns
            assert part.schema[kinds_module.DURATION_NS] == pl.Int32
            assert part.get_column(kinds_module.DURATION).null_count() == part.height


def test_a_piece_of_whole_ns_holds_them_in_half_the_bytes() -> None:
    frame = pl.DataFrame(
        {"kind": ["cpu_op"] * 4, "start_ns": [0, 1, 2, 3], "dur": [231.569, 0.47, 1.88, None]}, schema=_DURATIONS
    )
    pieces = Pieces()
    pieces.add(frame)
    part = pieces.taken()["cpu_op"]
    assert part.get_column(kinds_module.DURATION_NS).to_list() == [231569, 470, 1880, None]
    assert part.get_column(kinds_module.DURATION_NS).dtype == pl.Int32
    assert part.select(kinds_module.duration_us()).to_series().to_list() == [231.569, 0.47, 1.88, None]
