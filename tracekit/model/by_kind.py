"""A run's events held a kind at a time.

One frame of every event holds, for each column, a value (or a null) per event whatever its
kind: the host's operators and runtime calls (nine events in ten) hold the device columns
(device, stream, bytes, threads) as nulls, and the device's work holds the host's. Held a kind
at a time, a column that is null on every event of a kind, or one value on every event of it
(the kind itself; the process of the host's events, often), is a literal there: one value, no
buffer (:func:`tracekit.model.schema.without_null_columns`). One rank of 2 GB of Kineto JSON
(5.4M events) holds 236 MB so against 403 MB in one frame.

A kind of many events also holds each of its integer columns that never needs 64 bits there
(a thread, a stream, a correlation id: :data:`NARROW`) in 32, half the bytes: the 2 GB DLRM
rank's 4.6M operators and 1.5M runtime calls hold their threads, external and correlation ids
so; and the ends of its events as their lengths (:data:`SPAN`), where each fits 32 bits. The
types are the holder's business: every frame read out of it has the schema's (:meth:`ByKind.lazy`,
the cast made in the query that reads the column), so that no analysis sees a narrower column or
computes in one.

The analyses read events by kind (:meth:`ByKind.select`), which reads the kinds asked for
alone: where no condition narrows them, their columns are the frames' own (no copy: the
runtime calls every idle model reads; a column held narrower is cast, a copy of that column),
and no filter passes over the other kinds' events.
Each kept event carries its place in the run's order (:data:`ROW`), so that events of several
kinds come out in that order, as one frame's would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, cast

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence

#: The column of each kind's frame holding each event's place in the run's order.
ROW: Final = "_row"
#: Runs of fewer events hold every column as a buffer: a kind's columns are then a few MB at
#: most, and finding those of no value or one (a query over every column) costs more than it saves.
LITERAL_ROWS: Final = 1 << 16
#: The rows of a block of :class:`Reach` (the greatest end of each block is kept).
REACH_BLOCK: Final = 64
#: The schema's Int64 columns that a kind of :data:`LITERAL_ROWS` events or more holds as
#: :data:`NARROW_TYPE` where every value there fits (a process, a thread, a stream, a launch's
#: correlation and external id, a copy's bytes, a collective's elements: the times never): half
#: their bytes. What is read out of a :class:`ByKind` has them cast back (:meth:`ByKind.lazy`),
#: in the query that reads them.
NARROW: Final = ("pid", "tid", "stream", "correlation", "external_id", "bytes", "msg_nelems")
NARROW_TYPE: Final = pl.Int32()
#: The column in whose place a kind of :data:`LITERAL_ROWS` events or more holds its events'
#: ends (``end_ns``) as their lengths, in :data:`NARROW_TYPE`, where every length there fits (2.1
#: s) and every event with an end has a start (:func:`narrowed`): half the bytes of a column
#: every event fills. Read back as ends (:func:`end_of`), in the query that reads the column.
SPAN: Final = "_span_ns"
#: The events of a kind :meth:`ByKind.select` filters at once, at most, where it holds columns
#: narrower (one slice after another: the 2 GB DLRM rank's classification read its 1.5M runtime
#: calls' launches in slices of 2^20 collected together at 505 MB in-process, one at a time in
#: slices of 2^19 at 482).
FILTER_ROWS: Final = 1 << 19

#: What :func:`_stats` finds of a kind's column: (column, "nulls" | "min" | "max") -> value.
_Held = dict[tuple[str, str], object]


class ByKind:
    """The events of a run (a frame of :data:`tracekit.model.schema.SCHEMA` in the run's order),
    a frame per kind present, each in that order with its events' places (:data:`ROW`)."""

    __slots__ = ("_casts", "_extents", "_literals", "_reaches", "height", "parts", "schema")

    def __init__(self, parts: dict[str, pl.DataFrame], height: int, schema: pl.Schema) -> None:
        #: each kind's frame: the schema's columns (a :data:`NARROW` one perhaps narrower) and :data:`ROW`
        self.parts = parts
        #: how many events in all
        self.height = height
        #: the columns of the events (without :data:`ROW`)
        self.schema = schema
        self._extents: dict[int, pl.DataFrame] = {}
        self._reaches: dict[str, Reach] = {}
        self._literals: Literals | None = None
        self._casts: dict[str, list[pl.Expr] | None] = {}

    @classmethod
    def of(cls, events: pl.DataFrame, *, literal_rows: int = LITERAL_ROWS) -> ByKind:
        """``events`` (in the run's order) held a kind at a time; from ``literal_rows`` events
        up, a column of no value or of one within a kind is a literal there."""
        return cls.taken([events], literal_rows=literal_rows)

    @classmethod
    def taken(cls, owned: list[pl.DataFrame], *, literal_rows: int = LITERAL_ROWS) -> ByKind:
        """:meth:`of` the one frame of ``owned`` (which this empties), a column at a time: each
        column is let go once every kind has its part, so that, where nothing else holds the
        frame, the events are held once and a column, not twice (a Python call keeps its
        arguments alive until it returns, hence the list this takes the frame out of)."""
        events = owned.pop()
        schema, height = events.schema, events.height
        if height == 0:
            return cls({}, 0, schema)
        rows = _rows_by_kind(events.get_column("kind"))
        stats = _stats(events) if height >= literal_rows else None
        columns: dict[str, list[pl.Series | pl.Expr]] = {kind: [] for kind in rows}
        for c, dtype in schema.items():
            ones = {
                kind: None if stats is None else _literal(kind, c, dtype, stats.get(kind, {}), places.len())
                for kind, places in rows.items()
            }
            # a column literal in every kind is not read (read, a literal of the frame, such as
            # a column no event fills or a rank's rank, would first be made a buffer); one read
            # is gathered from one piece: from a column in chunks (as read) each row is looked
            # up in them, three times the work (the piece is let go before the next column's)
            column = None if all(one is not None for one in ones.values()) else events.get_column(c).rechunk()
            events = events.drop(c)
            for kind, places in rows.items():
                one = ones[kind]  # a column not read is a literal in every kind
                columns[kind].append(one if one is not None else cast("pl.Series", column).gather(places))
            del column
        literal = {k: {c for c, one in zip(schema, columns[k], strict=True) if isinstance(one, pl.Expr)} for k in rows}
        parts = {k: places.to_frame().with_columns(columns.pop(k)).select(*schema, ROW) for k, places in rows.items()}
        return cls(narrowed(parts, schema, literal, literal_rows=literal_rows), height, schema)

    @classmethod
    def held(
        cls, parts: dict[str, pl.DataFrame], height: int, schema: pl.Schema, *, literal_rows: int = LITERAL_ROWS
    ) -> ByKind:
        """The events of ``parts`` (each kind's frame of ``schema`` and :data:`ROW`, in the order of
        its places among the ``height`` events of all kinds), each column of no value or of one
        within a kind of ``literal_rows`` events or more made a literal there (as :meth:`taken`
        does). ``parts`` is emptied (each kind's frame let go as it is held anew: its ends, made
        lengths, are then not held twice)."""
        _in_place(parts, lambda _, p: p.select(*schema, ROW) if p.height else None)
        literals = literals_of(parts, schema, literal_rows=literal_rows)
        return cls.read(parts, height, schema, literals, literal_rows=literal_rows)

    @classmethod
    def read(
        cls,
        parts: dict[str, pl.DataFrame],
        height: int,
        schema: pl.Schema,
        literals: Literals,
        *,
        literal_rows: int = LITERAL_ROWS,
    ) -> ByKind:
        """The events of ``parts`` (as :meth:`held` takes them) held as :meth:`held` held them,
        its ``literals`` (:meth:`literals`) given: each kind's frame holding every other column,
        these made literals again (no column of no value read as a buffer: a 2 GB rank's
        operators are 323 MB read whole, 119 held), the columns :func:`narrowed` says narrower.
        ``parts`` is emptied, as :meth:`held` empties it."""

        def read(kind: str, part: pl.DataFrame) -> pl.DataFrame | None:
            if not part.height:
                return None
            ones = literals.get(kind, {})
            if ones:
                part = part.with_columns(as_literal(c, schema[c], v) for c, v in ones.items())
            return part.select(*schema, ROW)

        _in_place(parts, read)
        made = cls(narrowed(parts, schema, literals, literal_rows=literal_rows), height, schema)
        made._literals = literals
        return made

    def literals(self, *, literal_rows: int = LITERAL_ROWS) -> Literals:
        """Per kind of ``literal_rows`` events or more, its columns of no value or one there and
        that value (None: no value), as :meth:`held` finds them: found once (:meth:`held` and
        :meth:`read` know them)."""
        if self._literals is None:
            self._literals = literals_of(self.parts, self.schema, literal_rows=literal_rows)
        return self._literals

    @classmethod
    def ranked(cls, held: list[tuple[int, ByKind]], *, rank: str = "rank") -> ByKind:
        """The events of ranks each held by kind (in rank order: ``held``, which this empties),
        as one run's: each event's ``rank`` set, its place after those of the ranks before."""
        schema = held[0][1].schema if held else pl.Schema()
        kinds = dict.fromkeys(k for _, h in held for k in h.parts)
        rank_type, height = schema[rank], sum(h.height for _, h in held)
        index = pl.UInt32 if height < 2**32 else pl.UInt64
        pieces: dict[str, list[pl.DataFrame]] = {k: [] for k in kinds}
        offset = 0
        for number, h in held:
            place = pl.col(ROW).cast(index) + pl.lit(offset, dtype=index)
            for kind, part in h.parts.items():
                pieces[kind].append(part.with_columns(place, pl.lit(number, dtype=rank_type).alias(rank)))
            offset += h.height
        del held[:]
        parts = {}
        for kind in kinds:
            # one rank's kind stays as it is; several ranks' are made one piece (their ranks, one
            # value a frame, would come out a piece a rank, which the other columns' chunks do
            # not meet, and each query would copy them all into one piece again)
            found = pieces.pop(kind)
            if len({SPAN in f.columns for f in found}) > 1:  # ends held as lengths by some ranks: made ends
                found = [_with_ends(f) for f in found]
            # (a column one rank holds narrower than another's is made the wider type)
            parts[kind] = found[0] if len(found) == 1 else pl.concat(found, how="vertical_relaxed", rechunk=True)
            del found
        return cls(parts, height, schema)

    def replaced(self, kind: str, part: pl.DataFrame, dropped: pl.Series) -> ByKind:
        """These events with ``kind``'s replaced by ``part`` (some of them, changed in place:
        none moved), the events at the places ``dropped`` (ascending) gone, and the places
        after them moved up to close the gaps."""
        parts = {**self.parts, kind: part}
        gone = dropped.to_numpy()
        if gone.size:
            for k, p in parts.items():
                rows = p.get_column(ROW).to_numpy()
                parts[k] = p.with_columns(pl.Series(ROW, rows - np.searchsorted(gone, rows).astype(rows.dtype)))
        return ByKind({k: p for k, p in parts.items() if p.height}, self.height - gone.size, self.schema)

    def kinds(self) -> list[str]:
        """The kinds present, in the order their frames are held."""
        return list(self.parts)

    def rows_of(self, kind: str) -> int:
        """How many events of ``kind`` there are (0: none)."""
        part = self.parts.get(kind)
        return 0 if part is None else part.height

    def starting_before(self, kind: str, times: np.ndarray) -> np.ndarray:
        """For each of ``times``, how many events of ``kind`` start before it (its events in
        order of their starts: one rank's)."""
        part = self.parts.get(kind)
        if part is None:
            return np.zeros(len(times), dtype=np.int64)
        return part.get_column("start_ns").search_sorted(pl.Series(times), side="left").to_numpy()

    def part_slice(self, kind: str, first: int, length: int) -> pl.DataFrame:
        """The events of ``kind`` from its ``first`` (in their order) on, ``length`` of them at most."""
        return self._wide(kind, self.parts[kind].slice(first, length))

    def _present(self, kinds: Iterable[str]) -> list[str]:
        """Those of ``kinds`` present, once each, in the order asked."""
        held = set(self.kinds())
        return [k for k in dict.fromkeys(kinds) if k in held]

    def _cast(self, kind: str) -> list[pl.Expr] | None:
        """``kind``'s columns (and :data:`ROW`) as read, in the schema's types, where some is held
        narrower (cast back; its ends from their lengths: :data:`SPAN`); None where none is
        (found once)."""
        if kind not in self._casts:
            held = self.parts[kind].schema
            narrower = SPAN in held or any(held.get(c, t) != t for c, t in self.schema.items())
            self._casts[kind] = [*wide_columns(held, self.schema), pl.col(ROW)] if narrower else None
        return self._casts[kind]

    def lazy(self, kind: str) -> pl.LazyFrame:
        """``kind``'s events (with :data:`ROW`) to be read, in the schema's types."""
        return self._lazy_rows(kind, self.parts[kind])

    def _wide(self, kind: str, rows: pl.DataFrame) -> pl.DataFrame:
        """``rows`` of ``kind``'s frame in the schema's types."""
        casts = self._cast(kind)
        return rows if casts is None else rows.select(casts)

    def empty(self) -> pl.DataFrame:
        """No event, with the events' columns."""
        return pl.DataFrame(schema=self.schema)

    def select(
        self, kinds: Sequence[str], columns: Sequence[str | pl.Expr], conditions: Sequence[pl.Expr] = ()
    ) -> pl.DataFrame:
        """The ``columns`` (row by row expressions) of the events of these ``kinds`` that meet
        every one of ``conditions`` (row by row too), in the run's order.

        A condition on a column held narrower reads it cast back for every event of the kind: a
        kind of more than :data:`FILTER_ROWS` events is filtered that many at a time (a 2 GB
        rank's 4.6M operators, their correlations cast at once: 37 MB)."""
        present = self._present(kinds)
        sliced = [k for k in present if conditions and self.rows_of(k) > FILTER_ROWS and self._cast(k) is not None]
        if not sliced:
            return selected_from(self, [self.lazy(k) for k in present], columns, conditions)
        # such a kind's rows in their order (its slices in turn), then the kinds' merged
        found = []
        for kind in present:
            if kind not in sliced:
                found.append(_selected(self.lazy(kind), [*columns, ROW], conditions))
                continue
            part = self.parts[kind]
            # one slice after another (collected together, every slice's casts and masks were held at once)
            lazies = [self._lazy_rows(kind, part.slice(lo, FILTER_ROWS)) for lo in range(0, part.height, FILTER_ROWS)]
            found.append(pl.concat([_selected(f, [*columns, ROW], conditions).collect() for f in lazies]).lazy())
        return _merged(found)

    def _lazy_rows(self, kind: str, rows: pl.DataFrame) -> pl.LazyFrame:
        """``rows`` of ``kind``'s frame to be read, in the schema's types."""
        casts = self._cast(kind)
        return rows.lazy() if casts is None else rows.lazy().select(casts)

    def slices(
        self,
        kinds: Sequence[str],
        columns: Sequence[str | pl.Expr],
        rows: int,
        within: tuple[int, int] | None,
        kept: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
    ) -> Iterator[pl.DataFrame]:
        """:meth:`select` of the run's events ``rows`` at a time, in order (at least one, empty
        when none is read); ``within``: a slice none of whose events (of any kind) reaches into
        this stretch (lo, hi) is left unread; ``kept``: a filter of rows that keeps each row or
        not whatever the others, in their order and with their columns, applied to each kind's
        events of a slice before they are put in order, so that only the rows it keeps are
        merged (a slice of a million Python, annotation and step events merged whole: 40 MB)."""
        keep = kept if kept is not None else every_row
        present = self._present(kinds)
        extents = self._extent(rows) if within is not None and self.parts else None
        read = 0
        for number, offset in enumerate(range(0, max(self.height, 1), rows)):
            if extents is not None and within is not None:
                first, last = extents.row(number)
                # (a slice whose events have no start, or no end, may reach in: it is read)
                if first is not None and last is not None and (first >= within[1] or last <= within[0]):
                    continue
            read += 1
            pieces = [self._wide(k, _rows_of(self.parts[k], offset, offset + rows)) for k in present]
            yield slice_of(self, pieces, columns, keep)
        if not read:
            yield keep(self.empty().select(*columns))

    def _extent(self, rows: int) -> pl.DataFrame:
        """The first start and last end of the events of each slice of ``rows`` (of any kind)."""
        if (done := self._extents.get(rows)) is not None:
            return done
        slice_of = (pl.col(ROW) // rows).alias("_slice")
        per_kind = [
            p.lazy().group_by(slice_of).agg(first=pl.col("start_ns").min(), last=end_of(p.schema).max())
            for p in self.parts.values()
        ]
        slices = pl.DataFrame({"_slice": range(-(-self.height // rows))}, schema={"_slice": pl.Int64})
        found = (
            pl.concat(per_kind)
            .with_columns(pl.col("_slice").cast(pl.Int64))
            .group_by("_slice")
            .agg(pl.col("first").min(), pl.col("last").max())
        )
        extents = slices.lazy().join(found, on="_slice", how="left").sort("_slice").select("first", "last").collect()
        self._extents[rows] = extents
        return extents

    def unordered(self, columns: Sequence[str | pl.Expr], kinds: Sequence[str] | None = None) -> pl.LazyFrame:
        """The ``columns`` (row by row) of every event (of these ``kinds``, if given), a kind
        after another: for what does not depend on the order (sums, counts, extremes by rank)."""
        chosen = self.kinds() if kinds is None else self._present(kinds)
        frames = [self.lazy(k).select(*columns) for k in chosen] or [self.empty().lazy().select(*columns)]
        return pl.concat(frames, how="vertical")

    def names(self) -> pl.Series:
        """Every distinct name, as strings."""
        if not self.parts:
            return pl.Series("name", [], dtype=pl.String)
        found = pl.concat([p.get_column("name").unique() for p in self.parts.values()])
        names: pl.Series = found.unique().cast(pl.String).drop_nulls()
        return names

    def frame(self) -> pl.DataFrame:
        """Every event in one frame, in the run's order (a copy of every column: for the few
        readers of the whole)."""
        return selected_from(self, [self.lazy(k) for k in self.kinds()], list(self.schema), ())

    def within(self, lo: int, hi: int) -> ByKind:
        """The events that reach into the stretch [``lo``, ``hi``): each that starts before ``hi``
        and ends after ``lo``, or starts in it (an instant at ``lo``), held the same way, each
        with its place among them (:data:`ROW`, renumbered: the events kept, in the same order).
        A kind in order of its starts (one rank's) is read by position (:class:`Reach`), any
        other filtered."""
        kept = {k: self._reach(k).within(p, lo, hi) for k, p in self.parts.items()}
        return ByKind.renumbered({k: p for k, p in kept.items() if p.height}, self.schema)

    @classmethod
    def renumbered(cls, kept: dict[str, pl.DataFrame], schema: pl.Schema) -> ByKind:
        """Some events of a run (each kind's, in its order, with their places in the run), held
        with their places among them (:data:`ROW`, renumbered: the events kept, in the same order)."""
        if not kept:
            return ByKind({}, 0, schema)
        places = {k: p.get_column(ROW).to_numpy() for k, p in kept.items()}
        # each kind's places ascend: a stable sort (a merge of runs) of a few runs
        every = np.sort(np.concatenate(list(places.values())), kind="stable")
        parts = {
            k: p.with_columns(pl.Series(ROW, np.searchsorted(every, places[k]).astype(places[k].dtype)))
            for k, p in kept.items()
        }
        return ByKind(parts, int(every.size), schema)

    def _reach(self, kind: str) -> Reach:
        """How :meth:`within` reads ``kind``'s events (found once)."""
        if (found := self._reaches.get(kind)) is None:
            found = self._reaches[kind] = Reach.of(self.parts[kind])
        return found

    def only(self, condition: pl.Expr) -> ByKind:
        """The events that meet ``condition`` (row by row), held the same way."""
        kept = {k: self.lazy(k).filter(condition).collect() for k in self.parts}
        kept = {k: p for k, p in kept.items() if p.height}
        return ByKind.of(_merged([p.lazy() for p in kept.values()])) if kept else ByKind({}, 0, self.schema)


def reaching(lo: int, hi: int, *, closed: bool = False, end: pl.Expr | None = None) -> pl.Expr:
    """Whether an event reaches into the stretch [``lo``, ``hi``): it starts before ``hi`` and
    ends after ``lo``, or starts in it (an instant at ``lo``); ``closed``: into [``lo``, ``hi``],
    its ends included (it starts at ``hi`` or before, and ends at ``lo`` or after, or starts in it).
    ``end``: the events' ends (``end_ns``, unless given: :func:`end_of` a held kind's)."""
    start, end = pl.col("start_ns"), pl.col("end_ns") if end is None else end
    if closed:
        return (start <= hi) & ((end >= lo) | (start >= lo))
    return (start < hi) & ((end > lo) | (start >= lo))


class Reach:
    """The rows of a frame (of ``start_ns`` and ``end_ns``) that reach into a stretch of time
    (:func:`reaching`), found by position where its rows are in order of their starts and
    neither column holds a null (a kind's events of one rank), by the filter elsewhere.

    In order of starts, the rows that start before ``hi`` are a prefix, and those of it that
    start at ``lo`` or after its end. Of those that start before ``lo``, none before the first
    block of :data:`REACH_BLOCK` rows whose running greatest end passes ``lo`` ends after it
    (the ends of a block each: an eighth of a byte a row, not a copy of the ends); what is left
    between is read end by end: as many rows as start while the longest event before ``lo``
    runs (a kernel or an operator: a few; a range over the whole trace: all of them)."""

    __slots__ = ("block", "ends", "reach", "starts")

    def __init__(self, starts: pl.Series | None, ends: pl.Series | None, reach: np.ndarray | None, block: int) -> None:
        #: the rows' starts and ends (ascending starts: the frame's own columns, not a copy, a
        #: 2 GB rank's 86 MB; the ends as lengths where the frame holds them so, :data:`SPAN`),
        #: and the greatest end up to the end of each ``block`` of rows; None where the rows are
        #: read by the filter
        self.starts = starts
        self.ends = ends
        self.reach = reach
        self.block = block

    @classmethod
    def of(cls, frame: pl.DataFrame, *, block: int = REACH_BLOCK) -> Reach:
        """How ``frame``'s rows are read (by position when they are in order of starts), the
        greatest end kept a ``block`` of rows at a time."""
        start = frame.get_column("start_ns")
        end = frame.get_column(SPAN if SPAN in frame.columns else "end_ns")  # (a length: no end without a start)
        if start.null_count() or end.null_count() or not start.is_sorted():
            return cls(None, None, None, block)
        ends = _ends(start, end)  # a copy, let go on return
        blocks = np.maximum.reduceat(ends, np.arange(0, ends.size, block)) if ends.size else ends
        return cls(start, end, np.maximum.accumulate(blocks), block)

    def within(self, frame: pl.DataFrame, lo: int, hi: int, *, closed: bool = False) -> pl.DataFrame:
        """The rows of ``frame`` (the one this was found of) that reach into [``lo``, ``hi``)
        (``closed``: [``lo``, ``hi``], :func:`reaching`), in its order: a slice of it, or a copy
        of those of a slice."""
        if self.starts is None or self.ends is None or self.reach is None:
            return frame.filter(reaching(lo, hi, closed=closed, end=end_of(frame.schema)))
        before = int(self.starts.search_sorted(lo, side="left"))
        until = int(self.starts.search_sorted(hi, side="right" if closed else "left"))
        early = min(before, until)  # those that start before ``lo`` (and by ``hi``)
        inside = max(until - before, 0)  # then those that start in the stretch
        # the first block whose rows may end after ``lo`` (at it, closed)
        block = int(np.searchsorted(self.reach, lo, side="left" if closed else "right"))
        start = min(block * self.block, early)
        ends = _ends(self.starts.slice(start, early - start), self.ends.slice(start, early - start))
        ended = ends >= lo if closed else ends > lo
        skip = int(ended.argmax()) if ended.any() else ended.size  # the block's rows that end before
        first, ended = start + skip, ended[skip:]
        if ended.all():
            return frame.slice(first, early - first + inside)
        keep = np.concatenate([ended, np.ones(inside, dtype=bool)])
        return frame.slice(first, keep.size).filter(pl.Series(keep))


def _in_place(parts: dict[str, pl.DataFrame], made: Callable[[str, pl.DataFrame], pl.DataFrame | None]) -> None:
    """Each kind's frame of ``parts`` replaced by what ``made`` makes of it (None: left out), each
    let go before the next is made."""
    for kind in list(parts):
        new = made(kind, parts.pop(kind))
        if new is not None:
            parts[kind] = new


def _spans(part: pl.DataFrame, *, rows: int = FILTER_ROWS) -> pl.Series | None:
    """The lengths of ``part``'s events (end - start) in :data:`NARROW_TYPE`, as :data:`SPAN`,
    in the pieces its starts are held in (a query on a frame whose columns are cut apart first
    copies every column into one piece: the 2 GB ranks' kinds, 100 MB), each made ``rows``
    events at a time (the lengths in 64 bits never held at once); None where one does not fit
    or an event with an end has no start."""
    made, lo = [], 0
    for size in part.get_column("start_ns").chunk_lengths():
        piece = []
        for first in range(lo, lo + size, rows):
            n = min(rows, lo + size - first)
            length = part.slice(first, n).select((pl.col("end_ns") - pl.col("start_ns")).alias(SPAN)).to_series()
            if length.null_count() != part.get_column("end_ns").slice(first, n).null_count():
                return None
            if not fits_narrow(length.min(), length.max()):
                return None
            piece.append(length.cast(NARROW_TYPE))
            del length
        made.append(piece[0] if len(piece) == 1 else pl.concat(piece, rechunk=True))
        del piece
        lo += size
    return pl.concat(made, rechunk=False) if made else None


def _ends(starts: pl.Series, ends: pl.Series) -> np.ndarray:
    """The ends of events (``ends``: their ends, or their lengths, :data:`SPAN`), an array."""
    if ends.name != SPAN:
        return ends.to_numpy()
    made: np.ndarray = starts.to_numpy() + ends.to_numpy().astype(np.int64)
    return made


def end_of(held: pl.Schema) -> pl.Expr:
    """The ends of the events of a kind's frame of this ``held`` schema (``end_ns``: from their
    lengths where it holds them so, :data:`SPAN`)."""
    return (pl.col("start_ns") + pl.col(SPAN).cast(pl.Int64)).alias("end_ns") if SPAN in held else pl.col("end_ns")


def wide_columns(held: pl.Schema, schema: pl.Schema) -> list[pl.Expr]:
    """The columns of a kind's frame of this ``held`` schema in ``schema``'s types and order
    (those held narrower cast back, the ends made of their lengths)."""
    return [
        end_of(held) if c == "end_ns" else pl.col(c).cast(t) if held.get(c, t) != t else pl.col(c)
        for c, t in schema.items()
    ]


def _with_ends(part: pl.DataFrame) -> pl.DataFrame:
    """``part`` (a kind's frame) with its events' ends held as ends, in their place."""
    if SPAN not in part.columns:
        return part
    return part.select(end_of(part.schema) if c == SPAN else pl.col(c) for c in part.columns)


def _rows_by_kind(kind: pl.Series) -> dict[str, pl.Series]:
    """The places of the events of each kind present (``""``: of none), ascending."""
    dtype = kind.dtype
    if not isinstance(dtype, pl.Enum):  # the schema's kind is an enum; any other, made one
        text = kind.cast(pl.String)
        dtype = pl.Enum(text.drop_nulls().unique().sort().to_list())
        kind = text.cast(dtype)
    names = dtype.categories.to_list()
    codes = kind.to_physical().cast(pl.Int64).fill_null(len(names)).to_numpy()
    counts = np.bincount(codes, minlength=len(names) + 1)
    index = np.uint32 if kind.len() < 2**32 else np.uint64
    # a pass over the codes per kind present (a handful): cheaper than sorting them
    return {
        ("" if code == len(names) else names[code]): pl.Series(ROW, np.flatnonzero(codes == code).astype(index))
        for code in np.flatnonzero(counts)
    }


#: Per kind, its columns that are one value or none (None) there: column -> value.
Literals = dict[str, dict[str, int | str | None]]


def literals_of(parts: dict[str, pl.DataFrame], schema: pl.Schema, *, literal_rows: int = LITERAL_ROWS) -> Literals:
    """Per kind of ``parts`` of ``literal_rows`` events or more, its columns (of ``schema``) of no
    value or one there (:func:`_literal`), with that value (None: no value)."""
    found: Literals = {}
    for kind, part in parts.items():
        if part.height >= literal_rows:
            held = _stats_of_one(part.drop(ROW))
            found[kind] = {
                c: _value(kind, c, held)
                for c, t in schema.items()
                if _literal(kind, c, t, held, part.height) is not None
            }
    return found


def narrowed(
    parts: dict[str, pl.DataFrame],
    schema: pl.Schema,
    literal: Mapping[str, Collection[str]],
    *,
    literal_rows: int = LITERAL_ROWS,
) -> dict[str, pl.DataFrame]:
    """``parts`` (each kind's frame) with each :data:`NARROW` column of a kind of ``literal_rows``
    events or more whose values all fit :data:`NARROW_TYPE` held so (but its ``literal`` columns,
    no buffer), and every column of a smaller kind in the ``schema``'s type: whichever types a
    kind's columns came in (a file's pieces narrowed as they were read, a cache's read wide),
    the same events are held in the same types; its ends as lengths (:data:`SPAN`) where each
    fits. ``parts`` is emptied, each kind's frame let go as its own is made."""
    out = {}
    for kind in list(parts):
        part = parts.pop(kind)  # (let go as its new frame is made: its ends are not held twice)
        held = part.schema
        if part.height < literal_rows:
            wide = [pl.col(c).cast(t) for c, t in schema.items() if held.get(c, t) != t]
            out[kind] = part.with_columns(wide) if wide else part
            continue
        ones = literal.get(kind, ())
        wide_ones = [c for c in NARROW if c in held and c not in ones and held[c] == schema.get(c) == pl.Int64]
        made: dict[str, pl.Expr | pl.Series] = {}
        if wide_ones:
            ends = part.select(
                *(pl.col(c).min().alias(f"{c}\0min") for c in wide_ones), *(pl.col(c).max() for c in wide_ones)
            ).row(0)
            lows, highs = ends[: len(wide_ones)], ends[len(wide_ones) :]
            fit = [c for c, low, high in zip(wide_ones, lows, highs, strict=True) if fits_narrow(low, high)]
            made |= {c: pl.col(c).cast(NARROW_TYPE) for c in fit}
        if "end_ns" in held and "end_ns" not in ones and held["end_ns"] == schema.get("end_ns") == pl.Int64:
            spans = _spans(part)  # the ends as lengths, where each fits
            if spans is not None:
                made["end_ns"] = spans
        out[kind] = part.select(made.get(c, pl.col(c)) for c in part.columns) if made else part
        del part
    return out


def fits_narrow(low: object, high: object) -> bool:
    """Whether integers from ``low`` to ``high`` (None: no value) fit :data:`NARROW_TYPE`."""
    return low is None or high is None or (cast("int", low) >= -(2**31) and cast("int", high) < 2**31)


def _value(kind: str, column: str, held: _Held) -> int | str | None:
    """The one value of a literal ``column`` of ``kind`` (:func:`_literal`), None where it has none."""
    # a column of no value has no least value either (and only integer columns' are found)
    return kind if column == "kind" and kind else cast("int | None", held.get((column, "min")))


def as_literal(column: str, dtype: pl.DataType, value: int | str | None) -> pl.Expr:
    """``column`` as the literal ``value`` of ``dtype``."""
    return pl.lit(value, dtype=dtype).alias(column)


def _literal(kind: str, column: str, dtype: pl.DataType, held: _Held, rows: int) -> pl.Expr | None:
    """``column`` of the ``rows`` events of ``kind`` as a literal, where it is one value or none
    there (``held``: :func:`_stats` of the kind, which holds an integer column's extremes)."""
    if column == "kind" and kind:
        return pl.lit(kind, dtype=dtype).alias(column)
    if held.get((column, "nulls")) == rows:
        return pl.lit(None, dtype=dtype).alias(column)
    one = held.get((column, "min"))
    if dtype.is_integer() and held.get((column, "nulls")) == 0 and one == held.get((column, "max")):
        return pl.lit(one, dtype=dtype).alias(column)
    return None


def _aggregates(events: pl.DataFrame) -> list[pl.Expr]:
    """Each column's nulls, and each integer column's least and largest value."""
    plain = [c for c, t in events.schema.items() if t.is_integer()]
    aggs = [pl.col(c).null_count().alias(f"{c}\0nulls") for c in events.columns]
    aggs += [pl.col(c).min().alias(f"{c}\0min") for c in plain]
    aggs += [pl.col(c).max().alias(f"{c}\0max") for c in plain]
    return aggs


def _as_held(row: dict[str, object]) -> _Held:
    """A row of :func:`_aggregates` (``column\0what`` -> value) keyed by (column, what)."""
    return {tuple(k.split("\0")): v for k, v in row.items()}  # type: ignore[misc]


def _stats(events: pl.DataFrame) -> dict[str, _Held]:
    """Per kind, each column's nulls, and each integer column's least and largest value."""
    found = events.lazy().group_by("kind").agg(_aggregates(events)).collect()
    out: dict[str, _Held] = {}
    for row in found.iter_rows(named=True):
        kind = row.pop("kind")
        out["" if kind is None else str(kind)] = _as_held(row)
    return out


def with_literals(frame: pl.DataFrame, *, literal_rows: int = LITERAL_ROWS) -> pl.DataFrame:
    """``frame`` (a table of many rows held long: a rank's GPU activity) with each column of no
    value, and each integer column of one value, a literal (no buffer), as a kind's are in a
    :class:`ByKind`; a frame of fewer than ``literal_rows`` rows as it is."""
    if frame.height == 0 or frame.height < literal_rows:
        return frame
    held = _stats_of_one(frame)
    made = [e for c, t in frame.schema.items() if (e := _literal("", c, t, held, frame.height)) is not None]
    return frame.with_columns(made) if made else frame


def _stats_of_one(events: pl.DataFrame) -> _Held:
    """:func:`_stats` of events of one kind: the aggregates of the whole frame, no grouping by a
    kind that is one value (a 2 GB DLRM rank's parts grouped: 0.66 s of CPU; selected: 0.05)."""
    return _as_held(events.select(_aggregates(events)).row(0, named=True))


def selected_from(
    held: ByKind, kinds: list[pl.LazyFrame], columns: Sequence[str | pl.Expr], conditions: Sequence[pl.Expr]
) -> pl.DataFrame:
    """:meth:`ByKind.select` of ``held``'s events of ``kinds`` (each kind's, in the run's order)."""
    if not kinds:
        return _selected(held.empty().lazy(), columns, conditions).collect()
    if len(kinds) == 1:
        return _selected(kinds[0], columns, conditions).collect()
    return _merged([_selected(p, [*columns, ROW], conditions) for p in kinds])


def _selected(frame: pl.LazyFrame, columns: Sequence[str | pl.Expr], conditions: Sequence[pl.Expr]) -> pl.LazyFrame:
    return (frame.filter(*conditions) if conditions else frame).select(*columns)


def every_row(frame: pl.DataFrame) -> pl.DataFrame:
    """Every row of ``frame`` (:meth:`ByKind.slices`' filter where none is given)."""
    return frame


def slice_of(
    held: ByKind,
    pieces: list[pl.DataFrame],
    columns: Sequence[str | pl.Expr],
    keep: Callable[[pl.DataFrame], pl.DataFrame],
) -> pl.DataFrame:
    """One slice of :meth:`ByKind.slices`: the ``columns`` of ``pieces`` (``held``'s events of a
    slice, a kind's each, with their places) the ``keep`` filter keeps, in the run's order."""
    if len(pieces) == 1:
        return keep(pieces[0].select(*columns))
    if not pieces:
        return keep(held.empty().select(*columns))
    return _merged([keep(p.select(*columns, ROW)).lazy() for p in pieces])


def _rows_of(part: pl.DataFrame, lo: int, hi: int) -> pl.DataFrame:
    """The events of ``part`` whose places are in [lo, hi) (a view)."""
    first, last = np.searchsorted(part.get_column(ROW).to_numpy(), [lo, hi], side="left")
    return part.slice(int(first), int(last - first))


def _merged(frames: list[pl.LazyFrame]) -> pl.DataFrame:
    """Frames each in the run's order (with :data:`ROW`) as one, in that order, without it
    (concatenated and sorted: polars' ``merge_sorted`` took twice the time)."""
    done = pl.collect_all(frames)  # one call, not a query each (a small rank's few dozen)
    held = [f for f in done if f.height] or done[:1]
    if len(held) == 1:
        return held[0].drop(ROW)
    return pl.concat(held, how="vertical").sort(ROW).drop(ROW)
