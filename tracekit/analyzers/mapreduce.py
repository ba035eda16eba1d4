"""The per-rank map and the cross-rank reduce.

:func:`map_ranks` runs every registered analysis's per-rank part on a shard of ranks (a plain
function of a :class:`~tracekit.model.run.Run` and :class:`Options`, so a local loop, a process
pool or a Dask worker can call it) and returns small typed frames (:mod:`tracekit.analyzers.parts`).
:func:`reduce_ranks` gathers the shards' frames (:meth:`Reduced.gather`) and runs the cross-rank
parts, each after the entries it requires (:func:`in_order`): collective matching, stragglers,
the verdict, the run-level tables. The core knows no analysis: each is an :class:`Entry`, the
built-ins included (:mod:`tracekit.analyzers.builtin`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import polars as pl

from tracekit.analyzers.parts import Parts
from tracekit.heap import trim_heap

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.analyzers.context import Options, RankContext
    from tracekit.model.run import RunMeta

P = TypeVar("P", bound=Parts)
R = TypeVar("R")
D = TypeVar("D", bound="Reduced")


@dataclass(frozen=True)
class Entry(Generic[R]):
    """One analysis (a section of the result, or an intermediate others read): its per-rank
    part, its cross-rank part (whose result, of type ``R``, :meth:`Reduced.result` returns
    typed), what it reads of the others, and where the result goes.

    ``name`` is the field of :class:`~tracekit.results.analysis.Analysis` it fills, or, for a
    section with ``title`` set, its key in ``Analysis.sections``: such a section needs no field,
    and every report shows it (:mod:`tracekit.reports.layout` renders its Struct's fields), so
    adding one is its module plus one registry line. An entry whose name is neither is an
    intermediate, kept only in the reduce (:mod:`tracekit.analyzers.shared`). ``requires``: the
    entries whose cross-rank results it reads; they run first. An ``Entry`` required runs
    whether the registry lists it or not; a name must be of a registered entry.
    """

    name: str
    per_rank: Callable[[RankContext], Parts] | None = None
    cross_rank: Callable[[Reduced], R] | None = None
    requires: tuple[Entry[Any] | str, ...] = ()
    #: the type its cross-rank part returns (checked against the Analysis field by the tests)
    result: type | None = None
    #: a section kept in ``Analysis.sections`` under this title (None: a field of Analysis)
    title: str | None = None
    #: its per-rank part's parts of the windows of a rank (:mod:`tracekit.analyzers.windows`), in
    #: time order, made into the part the whole rank gives (None: the part is made of the whole rank)
    fold: Callable[[list[Any]], Parts] | None = None
    #: what its per-rank part gives: bump it when that changes in a way its code does not show
    #: (a helper it calls, a library's behaviour). The map cache keys every stored result on each
    #: entry's name, version and per-rank code, so a new, removed or changed entry misses it.
    version: int = 1


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Shards' frames of one table, in rank order (a shard without the table gave no columns),
    in one chunk: a frame of a chunk per shard costs polars a pass per chunk in every sort,
    grouping and join (1,024 shards of a rank: the collectives' calls sorted by rank, operation,
    unit and start in 2.1 s, against 0.04 s rechunked first)."""
    frames = [f for f in frames if f.width]
    if not frames:
        return pl.DataFrame()
    if len(frames) == 1:
        return frames[0]
    out = _stacked(frames)
    if "rank" not in out.columns or out["rank"].is_sorted():  # shards come in rank order: mostly sorted
        return out
    return out.sort("rank", maintain_order=True)


def _stacked(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """``frames`` one under the other, in one chunk, each column of the type that holds every
    frame's. The shards' schemas are mostly the same, and stacked as they are (no common type
    worked out, no query: the 37 tables of 1,024 dense ranks gathered in 0.45 s less CPU);
    a column of another type in some shard (all null there, say) is made that common type."""
    try:
        return pl.concat(frames, how="vertical", rechunk=True)
    except pl.exceptions.PolarsError:
        return pl.concat(frames, how="vertical_relaxed", rechunk=True)


@dataclass(frozen=True)
class RankSummary:
    """What mapping a shard of ranks gives: each analysis's frames (picklable, small)."""

    ranks: tuple[int, ...]
    parts: dict[str, Parts]
    #: a part's type -> a handle of that whole part, left where the shard was mapped (a
    #: cluster's worker: :meth:`tracekit.executors.Executor.keep`), whose entry in ``parts``
    #: lacks the tables its analysis leaves there (the gains' tables of events, the ledger's
    #: communication time and entries by phase: :data:`tracekit.pipeline.shards.KEPT`)
    kept: dict[type, Any] = field(default_factory=dict)


def map_ranks(ctx: RankContext, entries: Sequence[Entry[Any]]) -> RankSummary:
    """Run the per-rank part of every entry on the ranks of ``ctx`` (the caller makes the context:
    the core knows no per-rank intermediate).

    The C heap's free pages are given back after each entry (:func:`~tracekit.heap.trim_heap`):
    NumPy's arrays of a few MB, freed, stay resident in glibc's heap, and an entry's would add to
    the next one's peak (one 2 GB rank: 80 to 100 MB of the map's peak, at no measurable cost)."""
    parts: dict[str, Parts] = {}
    for entry in in_order(entries):
        if entry.per_rank is not None:
            parts[entry.name] = entry.per_rank(ctx)
            trim_heap()
    return RankSummary(ranks=tuple(ctx.run.rank_ids), parts=parts)


@dataclass
class Reduced:
    """The shards' frames concatenated, with the cross-rank intermediates the analyses share."""

    shards: Sequence[RankSummary]
    options: Options
    run_meta: RunMeta
    results: dict[str, Any] = field(default_factory=dict)
    _gathered: dict[type, Parts] = field(default_factory=dict, repr=False)
    #: while an entry's cross-rank part runs, the names it may read: what it requires, and what
    #: those require (None once the reduce is done: then every result may be read)
    _reading: frozenset[str] | None = field(default=None, repr=False)

    def gather(self, kind: type[P]) -> P:
        """The per-rank parts of type ``kind`` of every shard, each table concatenated in rank order."""
        if (done := self._gathered.get(kind)) is not None:
            return done  # type: ignore[return-value]
        found = [p for s in self.shards for p in s.parts.values() if isinstance(p, kind)]
        tables = {name: _concat([getattr(p, name) for p in found]) for name in kind.names()}
        gathered = kind(**tables)
        self._gathered[kind] = gathered
        del found
        for shard in self.shards:  # read only here, and kept gathered: not held twice
            for name in [n for n, p in shard.parts.items() if type(p) is kind]:
                del shard.parts[name]
        return gathered

    def kept(self, kind: type[Parts]) -> list[tuple[tuple[int, ...], Any]]:
        """The shards whose whole part of type ``kind`` was left where they were mapped: their
        ranks and its handle (:attr:`RankSummary.kept`); :meth:`gather` has the rest of it."""
        return [(s.ranks, s.kept[kind]) for s in self.shards if kind in s.kept]

    def completed(self, parts: P, tables: Sequence[str]) -> P:
        """``parts`` (:meth:`gather`'s) with its ``tables`` that the shards' workers kept where
        they mapped them (:meth:`kept`) fetched, once: every rank's, whole, in rank order."""
        kept = self.kept(type(parts))
        if not kept or not tables:
            return parts
        spread = self.options.spread
        if spread is None:  # kept by an executor whose workers are elsewhere: its spread is given
            raise ValueError(f"{type(parts).__name__}'s tables were kept on workers the reduce cannot reach")
        got = [g for g in spread.fetch([handle for _, handle in kept]) if g is not None]
        whole = {}
        for name in tables:
            frames = [f for f in (getattr(parts, name), *(getattr(g, name) for g in got)) if f.width]
            table = _stacked(frames) if frames else pl.DataFrame()
            if table.height and not table["rank"].is_sorted():
                table = table.sort("rank", maintain_order=True)
            whole[name] = table
        return dataclasses.replace(parts, **whole)  # type: ignore[type-var]

    @overload
    def result(self, entry: Entry[R]) -> R: ...
    @overload
    def result(self, entry: str) -> Any: ...
    def result(self, entry: Entry[Any] | str) -> Any:
        """The cross-rank result of ``entry`` (an entry, for a typed result, or a name). During
        the reduce, an entry reads only what it requires (directly or through what it requires):
        an undeclared read is an error even when the order happens to allow it, so the order
        never carries a dependency."""
        name = entry if isinstance(entry, str) else entry.name
        if name not in self.results or (self._reading is not None and name not in self._reading):
            raise KeyError(f"{name!r} is read by an entry that does not require it: name it in the entry's requires")
        return self.results[name]

    @property
    def has_gpu(self) -> bool:
        """Whether the device timeline is the GPU's."""
        return self.options.has_gpu


def in_order(entries: Sequence[Entry[Any]]) -> list[Entry[Any]]:
    """``entries`` ordered so that each comes after the entries it requires (else in the order
    given), with every required ``Entry`` the list lacks added before its first reader (a listed
    entry of the same name stands for it); a required name that is not listed, or a cycle, is a
    programming error."""
    by_name = {e.name: e for e in entries}
    done: dict[str, Entry[Any]] = {}
    visiting: set[str] = set()

    def visit(entry: Entry[Any]) -> None:
        if entry.name in done:
            return
        if entry.name in visiting:
            raise ValueError(f"registry: {entry.name!r} requires itself through {sorted(visiting)}")
        visiting.add(entry.name)
        for need in entry.requires:
            name = need if isinstance(need, str) else need.name
            if name in by_name:
                visit(by_name[name])
            elif isinstance(need, str):
                raise ValueError(f"registry: {entry.name!r} requires {name!r}, which is not registered")
            else:
                visit(need)
        visiting.discard(entry.name)
        done[entry.name] = entry

    for entry in entries:
        visit(entry)
    return list(done.values())


def reduce_ranks(
    shards: Sequence[RankSummary],
    options: Options,
    entries: Sequence[Entry[Any]],
    run_meta: RunMeta,
    *,
    into: type[D] = Reduced,  # type: ignore[assignment]
) -> D:
    """Run the cross-rank part of every entry, each after those it requires; ``results`` holds
    each one's output.

    ``run_meta``: the run's metadata (ranks, files, warnings): no events are needed here.
    ``into``: the class of the result (a :class:`Reduced` with views of its own).
    """
    reduced = into(shards=shards, options=options, run_meta=run_meta)
    order = in_order(entries)
    by_name = {e.name: e for e in order}
    for entry in order:
        if entry.cross_rank is not None:
            reduced._reading = _required(entry, by_name)
            try:
                reduced.results[entry.name] = entry.cross_rank(reduced)
            finally:
                reduced._reading = None
    return reduced


def _required(entry: Entry[Any], by_name: dict[str, Entry[Any]]) -> frozenset[str]:
    """The names of every entry ``entry`` requires, directly or through those it requires."""
    seen: set[str] = set()
    todo = list(entry.requires)
    while todo:
        need = todo.pop()
        name = need if isinstance(need, str) else need.name
        if name not in seen:
            seen.add(name)
            todo.extend(by_name[name].requires)
    return frozenset(seen)
