"""A file's events held a kind at a time from the moment they are decoded.

A Kineto file is decoded in chunks of a few thousand events, each a frame of every column
for every event of the chunk. Concatenated, those frames are one frame of the file's every
event, in which a column holds a value (or a null) per event whatever its kind: a rank of
2 GB of JSON recorded with Python stacks holds 5.0M Python frames of its 7.2M events, whose
device, stream, launch and collective columns are null, and its one frame was 682 MB where
its events held by kind are 290 (:class:`~tracekit.model.by_kind.ByKind`). Here each chunk
is split by kind as it comes (:class:`Pieces`), a column no event of a kind fills in the
chunk a literal there (no buffer), so that the file's events are never held as one frame;
:func:`in_order` then puts each kind in the order of the events' starts, ties in the file's
order, with each event's place among all kinds (:data:`~tracekit.model.by_kind.ROW`), as a
stable sort of the one frame by start would.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import polars as pl

from tracekit.errors import TraceReadError
from tracekit.model.by_kind import ROW, ByKind
from tracekit.model.schema import null_literal, without_null_columns

#: The column of each event's place in its file (in the order its chunks are decoded).
POS: Final = "_pos"
#: The key of the events of no kind.
NO_KIND: Final = ""


#: Chunks are split by kind this many events at a time (at least): one split of a few thousand
#: events cost 5 ms, most of it the same few queries whatever the events; the chunks waiting
#: and their split are held in full meanwhile. Cold, 8 ranks of 125 MB (11k events a chunk), in
#: turns: 2^17 rows 9.0-9.5 s of CPU and 522-547 MB, 2^16 9.6-10.0 s and 482-497 MB, 2^15
#: 9.8-10.0 s and 476-482 MB (the one frame before: 9.8-10.4 s and 476-484 MB).
SPLIT_ROWS: Final = 1 << 16


class Pieces:
    """The prepared chunks of one file, in the file's order, split by kind as they are added
    (:data:`SPLIT_ROWS` events at a time)."""

    __slots__ = ("_by_kind", "_waiting", "_waiting_rows", "rows")

    def __init__(self) -> None:
        self._by_kind: dict[str, list[pl.DataFrame]] = {}
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
            self._by_kind.setdefault(NO_KIND if kind is None else str(kind), []).append(without_null_columns(piece))

    def taken(self) -> dict[str, pl.DataFrame]:
        """Each kind's events, in the file's order (the pieces are let go)."""
        self._split()
        out = {}
        for kind in list(self._by_kind):
            found = self._by_kind.pop(kind)
            out[kind] = found[0] if len(found) == 1 else pl.concat(found, how="vertical", rechunk=False)
            del found
        return out


def in_order(
    parts: dict[str, pl.DataFrame], places: dict[str, np.ndarray], *, literal: dict[str, frozenset[str]]
) -> dict[str, pl.DataFrame]:
    """Each kind's events of ``parts`` (in the file's order, ``places`` their places in the
    file, ascending; ``parts`` is emptied) in the order of their starts (``start_ns``), ties in
    the file's order, each with its place among the events of every kind (:data:`ROW`): the
    parts of :meth:`ByKind.held <tracekit.model.by_kind.ByKind.held>`, each column in one piece.
    ``literal``: per kind, its columns of no value there (kept literals: gathered, each would
    be a buffer)."""
    kinds = list(parts)
    found = [places[k] for k in kinds]
    height = sum(p.size for p in found)
    last = max((int(p[-1]) for p in found if p.size), default=-1)
    if last + 1 != height:  # events were left out: the places close over them
        present = np.zeros(last + 1, dtype=np.bool_)
        for p in found:
            present[p] = True
        renumbered = np.cumsum(present, dtype=np.int64) - 1
        del present
        found = [renumbered[p] for p in found]
        del renumbered
    starts = np.empty(height, dtype=np.int64)
    codes = np.empty(height, dtype=np.uint8 if len(kinds) < 256 else np.uint16)
    for code, (kind, p) in enumerate(zip(kinds, found, strict=True)):
        starts[p] = parts[kind].get_column("start_ns").to_numpy()
        codes[p] = code
    out = {}
    if height == 0 or bool(np.all(starts[1:] >= starts[:-1])):  # already in order: no sort, no gather
        del starts, codes
        for kind, p in zip(kinds, found, strict=True):
            out[kind] = _one_piece(parts.pop(kind), None, p, literal.get(kind, frozenset()))
        return out
    # stable: ties in the file's order
    order = pl.DataFrame({"s": starts}).select(pl.arg_sort_by("s", maintain_order=True)).to_series().to_numpy()
    del starts
    sorted_codes = codes[order]
    del codes
    for code, (kind, p) in enumerate(zip(kinds, found, strict=True)):
        rows = np.flatnonzero(sorted_codes == code)
        # the kind's own rows, in the order of the starts (its places ascend: the file's order)
        local = np.searchsorted(p, order[rows])
        out[kind] = _one_piece(parts.pop(kind), local, rows, literal.get(kind, frozenset()))
    return out


def _one_piece(
    frame: pl.DataFrame, rows: np.ndarray | None, places: np.ndarray, literal: frozenset[str]
) -> pl.DataFrame:
    """``frame``'s ``rows`` (None: all, in order) with their ``places`` (:data:`ROW`), each column
    in one piece, taken out of ``frame`` a column at a time (each let go as its copy is made);
    the ``literal`` columns stay literals. No query reads ``frame`` whole: its columns, chunked
    apart (those a query made and those it passed through), would all be copied into one piece
    at once first."""
    names = frame.columns
    taken = {}
    for name in names:
        if name not in literal:
            column = frame.drop_in_place(name)
            taken[name] = column.rechunk() if rows is None else column.gather(rows)
            del column
    kept = {n: frame.schema[n] for n in names if n in literal}
    del frame
    out = pl.DataFrame([*taken.values(), pl.Series(ROW, places.astype(np.uint32))])
    return out.with_columns(null_literal(n, t) for n, t in kept.items()).select(*names, ROW)


def held(
    parts: dict[str, pl.DataFrame],
    places: dict[str, np.ndarray],
    schema: pl.Schema,
    *,
    literal: dict[str, frozenset[str]],
) -> ByKind:
    """The events of one file (each kind's, in the file's order, ``places`` their places in it,
    of ``schema``) held by kind in the order of their starts (:func:`in_order`)."""
    height = sum(p.height for p in parts.values())
    return ByKind.held(in_order(parts, places, literal=literal), height, schema)
