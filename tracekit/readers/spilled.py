"""A rank's events written to a file of their own and read from it as asked: :class:`Spilled`.

A rank of 2 GB of Kineto JSON holds 5.4M events, 250 MB held by kind (:class:`ByKind`), which
the analyses of a rank in windows of its steps (:mod:`tracekit.analyzers.windows`) need only a
window at a time, and the facts of the whole rank (its steps, its GPU activity, its launch
calls) a few columns of a few kinds at a time. :class:`Spilled` answers what a :class:`ByKind`
answers from a Parquet file of the rank's events written as the events cache writes an entry
(:mod:`tracekit.readers.cache`: a kind's events after another's, each in order of their starts,
with their places; :meth:`Spilled.written`): a selection
reads the columns and kinds it names, a window (:meth:`Spilled.within`) the rows of each kind
that may reach into it, found by position from an index of each block of
:data:`BLOCK` rows (its first start, and the latest end up to it). What it holds is that index
(about 3 bytes an event a kind); what it reads is let go by its reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import polars as pl

from tracekit.model.by_kind import ROW, ByKind, Literals, as_literal, every_row, reaching, slice_of
from tracekit.readers.cache import write_held

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

#: A rank of more events is analysed from a file of its own (:class:`Spilled`, in windows of its
#: steps: ``tracekit.pipeline.shards``), so a reader leaves such a rank's columns in the pieces it
#: decoded them in (:func:`tracekit.readers.kinds.held`: the file is written from them as well as
#: from one piece).
SPILLED_EVENTS: Final = 1 << 22
#: The rows of a block of the index of a kind's events (:class:`_Index`).
BLOCK: Final = 256
#: The most times :meth:`Spilled.starting_before` finds block by block (more: from every start).
FEW_TIMES: Final = 4


@dataclass(frozen=True)
class _Index:
    """Where a kind's events lie in time, by block of :data:`BLOCK` rows (they are in order of
    their starts): each block's first start and its first place (:data:`ROW`), and the latest
    end of the blocks up to it."""

    #: None where a time of the kind is null (its events then read whole and filtered)
    starts: np.ndarray | None
    places: np.ndarray
    reach: np.ndarray | None


class Spilled(ByKind):
    """The events of one rank read from a Parquet file (:meth:`written`) as asked, held as
    :class:`ByKind` holds them where a reader takes them whole (:attr:`parts`, :meth:`frame`:
    for the few readers of every event; the analyses select)."""

    __slots__ = ("_file", "_index", "_spans")

    def __init__(
        self, parquet: Path, kinds: Sequence[tuple[str, int]], literals: Literals, height: int, schema: pl.Schema
    ) -> None:
        """``parquet``: the file, its events ``kinds`` (kind, events) a kind after another, each
        kind's ``literals`` (:meth:`ByKind.literals`), ``height`` events in all, of ``schema``."""
        self.height = height
        self.schema = schema
        self._extents = {}
        self._reaches = {}
        self._literals = literals
        self._file = parquet
        offsets = np.cumsum([0, *(n for _, n in kinds)]).tolist()
        self._spans = {k: (int(offsets[i]), n) for i, (k, n) in enumerate(kinds) if n}
        self._index: dict[str, _Index] = {}

    @classmethod
    def written(cls, held: ByKind, parquet: Path) -> Spilled:
        """``held``'s events written to ``parquet`` (as the events cache writes them) and read
        from it as asked."""
        write_held(held, parquet)
        return cls(parquet, [(k, held.rows_of(k)) for k in held.kinds()], held.literals(), held.height, held.schema)

    @property
    def parts(self) -> dict[str, pl.DataFrame]:  # type: ignore[override]  # the base's slot, read whole here
        """Every kind's events, read whole (each call reads them again)."""
        return {k: self.lazy(k).collect() for k in self._spans}

    def _cast(self, kind: str) -> list[pl.Expr] | None:
        """None: its file holds every column in the schema's type."""
        del kind
        return None

    def lazy(self, kind: str) -> pl.LazyFrame:
        """``kind``'s events, to be read: its literal columns are not."""
        first, rows = self._spans[kind]
        frame = pl.scan_parquet(self._file).slice(first, rows)
        ones = self.literals().get(kind, {})
        if ones:
            frame = frame.with_columns(as_literal(c, self.schema[c], v) for c, v in ones.items())
        return frame

    def kinds(self) -> list[str]:
        """The kinds present, in the file's order."""
        return list(self._spans)

    def rows_of(self, kind: str) -> int:
        """How many events of ``kind`` there are (0: none)."""
        span = self._spans.get(kind)
        return 0 if span is None else span[1]

    def _indexed(self, kind: str) -> _Index:
        if (found := self._index.get(kind)) is None:
            read = self.lazy(kind).select("start_ns", "end_ns", ROW).collect()
            at = np.arange(0, read.height, BLOCK)
            places = read.get_column(ROW).to_numpy()[at].copy()
            if read.get_column("start_ns").null_count() or read.get_column("end_ns").null_count():
                found = _Index(None, places, None)
            else:
                starts, ends = (read.get_column(c).to_numpy() for c in ("start_ns", "end_ns"))
                latest = np.maximum.reduceat(ends, at) if starts.size else ends
                found = _Index(starts[at].copy(), places, np.maximum.accumulate(latest))
            del read
            self._index[kind] = found
        return found

    def starting_before(self, kind: str, times: np.ndarray) -> np.ndarray:
        """For each of ``times``, how many events of ``kind`` start before it: for a few, from
        the index's block and its starts read; for many, from the kind's starts read (a column,
        let go)."""
        if kind not in self._spans:
            return np.zeros(len(times), dtype=np.int64)
        asked = np.asarray(times, dtype=np.int64)
        index = self._indexed(kind)
        if index.starts is None or asked.size > FEW_TIMES:
            starts = self.lazy(kind).select("start_ns").collect().get_column("start_ns")
            return starts.search_sorted(pl.Series(asked), side="left").to_numpy()
        out = np.empty(asked.size, dtype=np.int64)
        for i, t in enumerate(asked.tolist()):
            # the block before the first whose first start is at or after ``t`` holds the place
            first = max(int(np.searchsorted(index.starts, t, side="left")) - 1, 0) * BLOCK
            read = self.lazy(kind).slice(first, BLOCK).select("start_ns").collect().get_column("start_ns")
            out[i] = first + int(read.search_sorted(t, side="left"))
        return out

    def part_slice(self, kind: str, first: int, length: int) -> pl.DataFrame:
        """The events of ``kind`` from its ``first`` on, ``length`` of them at most."""
        rows = self.rows_of(kind)
        first = min(max(first, 0), rows)
        return self.lazy(kind).slice(first, max(min(length, rows - first), 0)).collect()

    def slices(
        self,
        kinds: Sequence[str],
        columns: Sequence[str | pl.Expr],
        rows: int,
        within: tuple[int, int] | None,
        kept: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
    ) -> Iterator[pl.DataFrame]:
        """:meth:`ByKind.slices`, each slice's events of each kind read from the file (found by
        their places in the index)."""
        present = self._present(kinds)
        keep = kept if kept is not None else every_row
        read = 0
        for offset in range(0, max(self.height, 1), rows):
            pieces = [self._places(k, offset, offset + rows) for k in present]
            if within is not None and not _reaches(pieces, within):
                continue
            read += 1
            yield slice_of(self, pieces, columns, keep)
        if not read:
            yield keep(self.empty().select(*columns))

    def _places(self, kind: str, lo: int, hi: int) -> pl.DataFrame:
        """The events of ``kind`` whose places are in [``lo``, ``hi``)."""
        index = self._indexed(kind)
        first = max(int(np.searchsorted(index.places, lo, side="right")) - 1, 0) * BLOCK
        last = int(np.searchsorted(index.places, hi, side="left")) * BLOCK
        piece = self.part_slice(kind, first, last - first)
        return piece.filter(pl.col(ROW).is_between(lo, hi, closed="left"))

    def names(self) -> pl.Series:
        """Every distinct name, as strings."""
        if not self._spans:
            return pl.Series("name", [], dtype=pl.String)
        found = pl.concat([self.lazy(k).select(pl.col("name").unique()) for k in self._spans]).collect()
        names: pl.Series = found.get_column("name").unique().cast(pl.String).drop_nulls()
        return names

    def within(self, lo: int, hi: int) -> ByKind:
        """:meth:`ByKind.within`, held: each kind's rows from the first block whose events may
        end after ``lo`` to the last that starts before ``hi`` read, those that reach into the
        stretch kept."""
        kept = {}
        for kind in self._spans:
            index = self._indexed(kind)
            if index.starts is None or index.reach is None:
                first, last = 0, self.rows_of(kind)
            else:
                # a block whose events all end before ``lo`` holds none that reaches in (an
                # instant at ``lo`` ends at it: its block is read)
                first = int(np.searchsorted(index.reach, lo, side="left")) * BLOCK
                last = int(np.searchsorted(index.starts, hi, side="left")) * BLOCK
            if last > first:
                part = self.part_slice(kind, first, last - first).filter(reaching(lo, hi))
                if part.height:
                    kept[kind] = part
        return ByKind.renumbered(kept, self.schema)

    def only(self, condition: pl.Expr) -> ByKind:
        """The events that meet ``condition``, held."""
        return ByKind.held(self.parts, self.height, self.schema).only(condition)


def _reaches(pieces: list[pl.DataFrame], within: tuple[int, int]) -> bool:
    """Whether an event of ``pieces`` reaches into the stretch (lo, hi) (:meth:`ByKind.slices`)."""
    firsts = [p.get_column("start_ns").min() for p in pieces]
    lasts = [p.get_column("end_ns").max() for p in pieces]
    first = min((int(f) for f in firsts if f is not None), default=None)  # type: ignore[arg-type]
    last = max((int(t) for t in lasts if t is not None), default=None)  # type: ignore[arg-type]
    return first is None or last is None or not (first >= within[1] or last <= within[0])
