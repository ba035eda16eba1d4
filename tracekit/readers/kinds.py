"""A file's events held a kind at a time from the moment they are decoded.

A Kineto file is decoded in chunks of a few thousand events, each a frame of every column
for every event of the chunk. Concatenated, those frames are one frame of the file's every
event, in which a column holds a value (or a null) per event whatever its kind: a rank of
2 GB of JSON recorded with Python stacks holds 5.0M Python frames of its 7.2M events, whose
device, stream, launch and collective columns are null, and its one frame was 682 MB where
its events held by kind are 290 (:class:`~tracekit.model.by_kind.ByKind`). Here each chunk
is split by kind as it comes (:class:`Pieces`), a column no event of a kind fills in the
chunk, or that holds one value there, a literal (no buffer), so that the file's events are
never held as one frame;
:func:`in_order` then puts each kind in the order of the events' starts, ties in the file's
order, with each event's place among all kinds (:data:`~tracekit.model.by_kind.ROW`), as a
stable sort of the one frame by start would.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import polars as pl

from tracekit.errors import TraceReadError
from tracekit.heap import trim_heap
from tracekit.model.by_kind import NARROW, NARROW_TYPE, ROW, ByKind, Literals, fits_narrow
from tracekit.model.schema import null_literal
from tracekit.readers.spilled import SPILLED_EVENTS

#: The column of each event's place in its file (in the order its chunks are decoded).
POS: Final = "_pos"
#: The key of the events of no kind.
NO_KIND: Final = ""
#: A prepared event's duration as Kineto writes it (float microseconds)...
DURATION: Final = "dur"
#: ... and the same held as whole nanoseconds in :data:`~tracekit.model.by_kind.NARROW_TYPE`
#: (:func:`_in_ns`), half the bytes, in a piece whose every duration is a whole number of ns
#: that fits: a kind's pieces hold one of the two, its frame both (:meth:`Pieces.taken`; the
#: other a literal of no value), read as one by :func:`duration_us` and :func:`duration_ns`.
DURATION_NS: Final = "_dur_ns"


#: Chunks are split by kind this many events at a time (at least): one split of a few thousand
#: events cost 5 ms, most of it the same few queries whatever the events; the chunks waiting
#: and their split are held in full meanwhile. Cold, 8 ranks of 125 MB (11k events a chunk), in
#: turns: 2^17 rows 9.0-9.5 s of CPU and 522-547 MB, 2^16 9.6-10.0 s and 482-497 MB, 2^15
#: 9.8-10.0 s and 476-482 MB (the one frame before: 9.8-10.4 s and 476-484 MB).
SPLIT_ROWS: Final = 1 << 16


class Pieces:
    """The prepared chunks of one file, in the file's order, split by kind as they are added
    (:data:`SPLIT_ROWS` events at a time), a column of one value or none in a piece a literal
    there (:func:`_compact`)."""

    __slots__ = ("_by_kind", "_waiting", "_waiting_rows", "ones", "rows")

    def __init__(self) -> None:
        self._by_kind: dict[str, list[pl.DataFrame]] = {}
        #: per kind, its columns that are one literal (value, or None: no value) in every piece
        self.ones: Literals = {}
        self._waiting: list[pl.DataFrame] = []
        self._waiting_rows = 0
        #: the events added so far
        self.rows = 0

    def add(self, chunk: pl.DataFrame) -> None:
        """Add ``chunk`` (prepared columns, with ``kind``), each event's place in the file
        (:data:`POS`) beside it."""
        if chunk.height == 0:
            return
        if self.rows + chunk.height >= 2**32:
            raise TraceReadError(f"more than {2**32 - 1:,} events in one file: not a trace tracekit reads")
        self._waiting.append(chunk.with_row_index(POS, offset=self.rows))
        self.rows += chunk.height
        self._waiting_rows += chunk.height
        if self._waiting_rows >= SPLIT_ROWS:
            self._split()

    def _split(self) -> None:
        """Split the chunks waiting by kind, a column no event of a kind fills a literal there."""
        if not self._waiting:
            return
        batch = self._waiting[0] if len(self._waiting) == 1 else pl.concat(self._waiting, rechunk=False)
        self._waiting, self._waiting_rows = [], 0
        kinds = batch.get_column("kind")
        pieces = (
            batch.partition_by("kind", as_dict=True, maintain_order=True)
            if kinds.n_unique() > 1
            else {(kinds.first(),): batch}
        )
        del batch, kinds
        for (kind,), piece in pieces.items():
            key = NO_KIND if kind is None else str(kind)
            compact, ones = _compact(_in_ns(piece))
            self._by_kind.setdefault(key, []).append(compact)
            known = self.ones.get(key)
            self.ones[key] = ones if known is None else {c: v for c, v in known.items() if c in ones and ones[c] == v}

    def taken(self) -> dict[str, pl.DataFrame]:
        """Each kind's events, in the file's order (the pieces are let go)."""
        self._split()
        out = {}
        for kind in list(self._by_kind):
            found = _one_duration(self._by_kind.pop(kind))
            out[kind] = _both_durations(found[0] if len(found) == 1 else _concat(found))
            del found
        return out


def duration_us() -> pl.Expr:
    """The duration of a prepared event in Kineto's float microseconds, whichever of the two
    columns its kind holds it in (from :data:`DURATION_NS`: the very float it was made from)."""
    return pl.coalesce(pl.col(DURATION), _ns_in_us())


def duration_ns() -> pl.Expr:
    """The duration of a prepared event in whole nanoseconds (floats: rounded to the ns)."""
    return pl.coalesce((pl.col(DURATION) * 1000).round(), pl.col(DURATION_NS).cast(pl.Float64))


def _ns_in_us() -> pl.Expr:
    """:data:`DURATION_NS` in float microseconds (:func:`_as_us`)."""
    return pl.col(DURATION_NS).map_batches(_as_us, pl.Float64, is_elementwise=True)


def _as_us(ns: pl.Series) -> pl.Series:
    """Whole nanoseconds as float microseconds, each the float nearest to it (NumPy's division,
    correctly rounded: polars' multiplies by the reciprocal, 231569 ns -> 231.56900000000002 us
    where the file's 231.569 is read 231.569); a null stays one."""
    return pl.Series(ns.name, ns.cast(pl.Float64).to_numpy() / 1000.0, nan_to_null=True)


def _in_ns(piece: pl.DataFrame) -> pl.DataFrame:
    """``piece`` with its durations (:data:`DURATION`) held as :data:`DURATION_NS` in their
    place where each is a whole number of nanoseconds, none negative, that fits, made back
    (:func:`_as_us`) the very float it was (a null stays one; some not null), so that the
    screen judges the same ends and the events get the same times; else as it is (a duration
    of a part of a ns, or over two seconds: a long Python frame; a piece of no duration
    becomes a literal)."""
    if DURATION not in piece.columns or piece.schema[DURATION] != pl.Float64:
        return piece
    column = piece.get_column(DURATION)
    if column.null_count() == piece.height:
        return piece
    us = column.drop_nulls().to_numpy()
    ns = np.round(us * 1000)
    if not (
        not bool(np.signbit(us).any())  # (nor -0.0, which would come back 0.0)
        and bool(np.all(ns < 2**31))  # (nor a NaN)
        and bool(np.all(ns / 1000.0 == us))  # (an infinity is not)
    ):
        return piece
    del us, ns, column
    made = (pl.col(DURATION) * 1000).round().cast(NARROW_TYPE).alias(DURATION_NS)
    return piece.select(made if c == DURATION else pl.col(c) for c in piece.columns)


def _one_duration(pieces: list[pl.DataFrame]) -> list[pl.DataFrame]:
    """A kind's ``pieces``, the durations of all of them in :data:`DURATION_NS`, else all in
    :data:`DURATION` (those in ns made the floats they were made from, in their place)."""
    if len({DURATION in p.columns for p in pieces}) == 1:
        return pieces
    back = _ns_in_us().alias(DURATION)
    return [p.select(back if c == DURATION_NS else pl.col(c) for c in p.columns) for p in pieces]


def _both_durations(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (a kind's events) with the duration column it does not hold added, a literal
    of no value: every kind's frame then has both (:func:`duration_us`)."""
    if DURATION_NS in frame.columns and DURATION not in frame.columns:
        return frame.with_columns(null_literal(DURATION, pl.Float64()))
    if DURATION in frame.columns and DURATION_NS not in frame.columns:
        return frame.with_columns(null_literal(DURATION_NS, NARROW_TYPE))
    return frame


def _concat(pieces: list[pl.DataFrame]) -> pl.DataFrame:
    """A kind's ``pieces`` as one frame (not copied): where a column of a piece did not fit the
    narrower type the others hold it in (a copy's bytes over 2 GiB), made the wider type."""
    try:
        return pl.concat(pieces, how="vertical", rechunk=False)
    except pl.exceptions.SchemaError:
        return pl.concat(pieces, how="vertical_relaxed", rechunk=False)


def _compact(piece: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int | str | None]]:
    """``piece`` (of one kind) with each column of no value, each integer column of one value
    (the process of a kind's host events, often) and its kind made literals (no buffer), each
    :data:`~tracekit.model.by_kind.NARROW` column whose values fit held in the narrower type, and
    the literal columns with their values (None: no value). Pieces of equal literals concatenate into
    one literal: a 2 GB rank's pieces held 294 MB with its processes and kinds as buffers, 243 so
    (finding the values: 0.05 to 0.1 s of CPU more than finding the columns of none)."""
    if piece.height == 0:
        return piece, {}
    schema = piece.schema
    nulls = dict(zip(piece.columns, piece.null_count().row(0), strict=True))
    ones: dict[str, int | str | None] = {c: None for c, n in nulls.items() if n == piece.height}
    # the integer columns' extremes: of those with no null, for their one value; of those that
    # may be held narrower, for whether their values fit
    plain = [c for c, t in schema.items() if c != POS and t.is_integer() and not nulls[c]]
    ends = [*plain, *(c for c in NARROW if schema.get(c) == pl.Int64 and c not in ones and c not in plain)]
    fit: set[str] = {c for c in NARROW if c in ones}  # (no value fits)
    if ends:
        found = piece.select(*(pl.col(c).min().alias(f"{c}\0min") for c in ends), *(pl.col(c).max() for c in ends))
        low, high = found.row(0)[: len(ends)], found.row(0)[len(ends) :]
        ones |= {c: a for c, a, b in zip(plain, low, high, strict=False) if a == b}
        fit |= {c for c, a, b in zip(ends, low, high, strict=True) if c in NARROW and fits_narrow(a, b)}
    if "kind" in piece.columns and "kind" not in ones:
        ones["kind"] = str(piece.get_column("kind")[0])
    # a column that may be held narrower is so in every piece where it fits, literal or not, so
    # that a kind's pieces are one type (:meth:`Pieces.taken`), the type a kind of many events
    # keeps (:func:`~tracekit.model.by_kind.narrowed`): its pieces held in half the bytes
    types = {c: NARROW_TYPE if c in fit else t for c, t in schema.items()}
    made = [null_literal(c, types[c]) if v is None else pl.lit(v, dtype=types[c]).alias(c) for c, v in ones.items()]
    made += [pl.col(c).cast(NARROW_TYPE) for c in fit if c not in ones]
    return (piece.with_columns(made) if made else piece), ones


def in_order(
    parts: dict[str, pl.DataFrame], places: dict[str, np.ndarray], *, literal: Literals, chunked: bool = False
) -> dict[str, pl.DataFrame]:
    """Each kind's events of ``parts`` (in the file's order, ``places`` their places in the
    file, ascending; ``parts`` is emptied) in the order of their starts (``start_ns``), ties in
    the file's order, each with its place among the events of every kind (:data:`ROW`): the
    parts of :meth:`ByKind.held <tracekit.model.by_kind.ByKind.held>`, each column in one piece.
    ``literal``: per kind, its columns of one value or none there, and that value (None: none;
    kept literals: gathered, each would be a buffer). ``chunked``: events already in order keep
    their columns in the pieces they were decoded in (not copied into one piece: a rank written
    to a file of its own before its analysis, :data:`~tracekit.readers.spilled.SPILLED_EVENTS`)."""
    kinds = list(parts)
    found = [places[k] for k in kinds]
    height = sum(p.size for p in found)
    last = max((int(p[-1]) for p in found if p.size), default=-1)
    if last + 1 != height:  # events were left out: the places close over them
        present = np.zeros(last + 1, dtype=np.bool_)
        for p in found:
            present[p] = True
        # the places of those left in (those left out, never read, may wrap round below 0)
        renumbered = np.cumsum(present, dtype=np.uint32 if height < 2**32 else np.int64) - 1
        del present
        found = [renumbered[p] for p in found]
        del renumbered
    out = {}
    columns = [parts[k].get_column("start_ns") for k in kinds]
    if height == 0 or _ascending(columns, found, height, block=ORDER_BLOCK):  # already in order: no sort, no gather
        del columns
        for kind, p in zip(kinds, found, strict=True):
            out[kind] = _one_piece(parts.pop(kind), None, p, literal.get(kind, {}), chunked=chunked)
        return out
    starts = np.empty(height, dtype=np.int64)
    _fill(starts, columns, found, 0)
    del columns
    codes = np.empty(height, dtype=np.uint8 if len(kinds) < 256 else np.uint16)
    for code, p in enumerate(found):
        codes[p] = code
    # stable: ties in the file's order (numpy's merges the runs of the starts, nearly in order,
    # beside 8 bytes an event: polars' sort of 6.9M such starts held 260 MB at once, numpy's 55)
    order = np.argsort(starts, kind="stable")
    del starts
    if height < 2**32:  # half the bytes for what follows
        order = order.astype(np.uint32)
    sorted_codes = codes[order]
    del codes
    for code, (kind, p) in enumerate(zip(kinds, found, strict=True)):
        rows = np.flatnonzero(sorted_codes == code)
        # the kind's own rows, in the order of the starts (its places ascend: the file's order)
        local = np.searchsorted(p, order[rows])
        out[kind] = _one_piece(parts.pop(kind), local, rows, literal.get(kind, {}))
    return out


#: The events whose starts :func:`_ascending` reads at once (2 MB; a block's starts are read
#: from each kind's column, a copy: 2^20 held a 2 GB DLRM rank's read 20 MB higher).
ORDER_BLOCK: Final = 1 << 18
#: A file of this many events or more has the C heap trimmed once its events are in order.
TRIM_EVENTS: Final = 1 << 20


def _blocks(height: int, size: int) -> list[tuple[int, int]]:
    """The places [lo, hi) of ``height`` events ``size`` at a time."""
    return [(lo, min(lo + size, height)) for lo in range(0, height, size)]


def _fill(into: np.ndarray, columns: list[pl.Series], places: list[np.ndarray], lo: int) -> None:
    """``into`` made the starts of the events at the places from ``lo`` on (``columns``: each
    kind's starts, ``places`` their places, ascending), a slice of each kind's column at a time
    (its chunks' own values, no copy of the column whole)."""
    hi = lo + into.size
    for column, p in zip(columns, places, strict=True):
        first, end = np.searchsorted(p, [lo, hi], side="left")
        if end > first:
            into[p[first:end] - lo] = column.slice(int(first), int(end - first)).to_numpy()


def _ascending(columns: list[pl.Series], places: list[np.ndarray], height: int, *, block: int) -> bool:
    """Whether the starts of the ``height`` events (``columns``: each kind's, ``places`` their
    places, a permutation of them) ascend in the order of their places, ties allowed, read a
    ``block`` of places at a time: a file in order is never held as one array of its starts (a
    2 GB rank's 55 MB)."""
    last, buffer = None, np.empty(min(block, height), dtype=np.int64)
    for lo, hi in _blocks(height, block):
        starts = buffer[: hi - lo]
        _fill(starts, columns, places, lo)
        if (last is not None and starts[0] < last) or not bool(np.all(starts[1:] >= starts[:-1])):
            return False
        last = starts[-1]
    return True


def _one_piece(
    frame: pl.DataFrame,
    rows: np.ndarray | None,
    places: np.ndarray,
    literal: dict[str, int | str | None],
    *,
    chunked: bool = False,
) -> pl.DataFrame:
    """``frame``'s ``rows`` (None: all, in order) with their ``places`` (:data:`ROW`), each column
    in one piece (``chunked``, and ``rows`` None: as it is), taken out of ``frame`` a column at a
    time (each let go as its copy is made); the ``literal`` columns stay literals. No query reads
    ``frame`` whole: its columns, chunked apart (those a query made and those it passed through),
    would all be copied into one piece at once first."""
    names = frame.columns
    taken = {}
    for name in names:
        if name not in literal:
            column = frame.drop_in_place(name)
            if rows is not None:
                taken[name] = column[rows]  # a gather without a query (a few hundred us each on a small file)
            else:
                taken[name] = column if chunked else column.rechunk()
            del column
    schema = frame.schema
    kept = {
        n: null_literal(n, schema[n]) if literal[n] is None else pl.lit(literal[n], dtype=schema[n]).alias(n)
        for n in names
        if n in literal
    }
    del frame
    series = [*taken.values(), pl.Series(ROW, places.astype(np.uint32))]
    if chunked and rows is None:
        series = _aligned(series)
    out = pl.DataFrame(series)
    return out.select(*(kept.get(n, n) for n in names), ROW)  # the literals in place: one query


def _aligned(columns: list[pl.Series]) -> list[pl.Series]:
    """``columns`` (of one length) cut where most of them are cut into pieces: those cut
    elsewhere (the places, a column a query made in pieces of its own) made one piece, then cut
    there, by views. A query on a frame whose columns are cut in different places first copies
    every column into one piece: a 2 GB rank's operators and kernels, all their columns at once,
    the read's peak (the other kinds' pieces already matched)."""
    layouts = [tuple(c.chunk_lengths()) for c in columns]
    cut = max((layout for layout in layouts if len(layout) > 1), key=layouts.count, default=None)
    if cut is None:
        return columns
    ends = np.cumsum(cut).tolist()
    starts = [0, *ends[:-1]]
    out = []
    for column, layout in zip(columns, layouts, strict=True):
        if layout == cut:
            out.append(column)
        else:
            whole = column.rechunk()
            out.append(pl.concat([whole.slice(a, n) for a, n in zip(starts, cut, strict=True)], rechunk=False))
    return out


def held(
    parts: dict[str, pl.DataFrame],
    places: dict[str, np.ndarray],
    schema: pl.Schema,
    *,
    literal: Literals,
) -> ByKind:
    """The events of one file (each kind's, in the file's order, ``places`` their places in it,
    of ``schema``) held by kind in the order of their starts (:func:`in_order`)."""
    height = sum(p.height for p in parts.values())
    # a rank analysed from a file of its own: its pieces are written there as they are (copied
    # into one piece each, the 2 GB ranks' columns were 250-300 MB made anew at the read's peak)
    ordered = in_order(parts, places, literal=literal, chunked=height > SPILLED_EVENTS)
    if height >= TRIM_EVENTS:  # the blocks, places and order freed in glibc's heap (a 2 GB rank's 20-30 MB)
        trim_heap()
    return ByKind.held(ordered, height, schema)
