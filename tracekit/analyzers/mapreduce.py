"""The per-rank map and the cross-rank reduce.

:func:`map_ranks` runs every registered analysis's per-rank part on a shard of ranks (a plain
function of a :class:`~tracekit.model.run.Run` and :class:`Options`, so a local loop, a process
pool or a Dask worker can call it) and returns small typed frames (:mod:`tracekit.analyzers.parts`).
:func:`reduce_ranks` gathers the shards' frames (:meth:`Reduced.gather`) and runs the cross-rank
parts in registry order, each after the entries it requires: collective matching, stragglers,
the verdict, the run-level tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from tracekit.analyzers.annotations import AnnotationResult, summarize_annotations
from tracekit.analyzers.breakdown import BreakdownResult
from tracekit.analyzers.collectives import CollectiveResult, match_found
from tracekit.analyzers.context import Options, RankContext
from tracekit.analyzers.dataloader import DataLoaderResult, data_measure
from tracekit.analyzers.idle import IdleResult
from tracekit.analyzers.kernels import KernelResult, summarize_kernels
from tracekit.analyzers.ledger import LedgerResult, reduce_ledger
from tracekit.analyzers.overlap import OverlapResult
from tracekit.analyzers.parts import (
    AnnotationParts,
    BreakdownParts,
    CollectiveParts,
    DataLoaderParts,
    FactParts,
    IdleParts,
    KernelParts,
    LedgerParts,
    OverlapParts,
    Parts,
    StepParts,
    SyncParts,
)
from tracekit.analyzers.steps import StepResult
from tracekit.analyzers.stragglers import StragglerResult, find_stragglers
from tracekit.analyzers.syncs import SyncResult

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.model.run import Run, RunMeta
    from tracekit.results.analysis import RunFacts, Verdict

P = TypeVar("P", bound=Parts)


@dataclass(frozen=True)
class Entry:
    """One analysis (a section of the result): its per-rank part, its cross-rank part, its typed
    result, what it reads of the others, and where the result goes.

    ``name`` is the field of :class:`~tracekit.results.analysis.Analysis` it fills, or, for a
    section with ``title`` set, its key in ``Analysis.sections``: such a section needs no field,
    and every report shows it (:mod:`tracekit.reports.layout` renders its Struct's fields), so
    adding one is its module plus one registry line. ``requires``: the entries whose cross-rank
    results it reads (:meth:`Reduced.result`); they run first.
    """

    name: str
    per_rank: Callable[[RankContext], Parts] | None = None
    cross_rank: Callable[[Reduced], Any] | None = None
    requires: tuple[str, ...] = ()
    #: the type its cross-rank part returns (checked against the Analysis field by the tests)
    result: type | None = None
    #: a section kept in ``Analysis.sections`` under this title (None: a field of Analysis)
    title: str | None = None
    #: what its per-rank part gives: bump it when that changes in a way its code does not show
    #: (a helper it calls, a library's behaviour). The map cache keys every stored result on each
    #: entry's name, version and per-rank code, so a new, removed or changed entry misses it.
    version: int = 1


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Shards' frames of one table, in rank order (a shard without the table gave no columns)."""
    frames = [f for f in frames if f.width]
    if not frames:
        return pl.DataFrame()
    if len(frames) == 1:
        return frames[0]
    out = pl.concat(frames, how="vertical_relaxed")
    if "rank" not in out.columns or out["rank"].is_sorted():  # shards come in rank order: mostly sorted
        return out
    return out.sort("rank", maintain_order=True)


@dataclass(frozen=True)
class RankSummary:
    """What mapping a shard of ranks gives: each analysis's frames (picklable, small)."""

    ranks: tuple[int, ...]
    parts: dict[str, Parts]


def map_ranks(run: Run, options: Options, entries: Sequence[Entry]) -> RankSummary:
    """Run the per-rank part of every entry on the ranks of ``run``."""
    ctx = RankContext(run, options)
    parts = {e.name: e.per_rank(ctx) for e in entries if e.per_rank is not None}
    return RankSummary(ranks=tuple(run.rank_ids), parts=parts)


@dataclass
class Reduced:
    """The shards' frames concatenated, with the cross-rank intermediates the analyses share."""

    shards: Sequence[RankSummary]
    options: Options
    run_meta: RunMeta
    results: dict[str, Any] = field(default_factory=dict)
    _gathered: dict[type, Parts] = field(default_factory=dict, repr=False)

    def gather(self, kind: type[P]) -> P:
        """The per-rank parts of type ``kind`` of every shard, each table concatenated in rank order."""
        if (done := self._gathered.get(kind)) is not None:
            return done  # type: ignore[return-value]
        found = [p for s in self.shards for p in s.parts.values() if isinstance(p, kind)]
        tables = {f.name: _concat([getattr(p, f.name) for p in found]) for f in fields(kind)}
        gathered = kind(**tables)
        self._gathered[kind] = gathered
        return gathered

    def result(self, entry: str) -> Any:
        """The cross-rank result of ``entry``, which must have run (be in the caller's ``requires``)."""
        if entry not in self.results:
            raise KeyError(f"{entry!r} has not run yet: name it in the entry's requires")
        return self.results[entry]

    @property
    def has_gpu(self) -> bool:
        """Whether the device timeline is the GPU's."""
        return self.options.has_gpu

    @cached_property
    def steps(self) -> StepResult:
        """Every rank's steps."""
        return StepResult(
            steps=self.gather(StepParts).steps,
            stats=self.gather(StepParts).stats,
            all_steps=self.gather(StepParts).all_steps,
            warmup=self.gather(StepParts).warmup,
            how_found=self.gather(StepParts).how_found,
            selection=self.options.steps,
            include_warmup=self.options.include_warmup,
        )

    @cached_property
    def measured(self) -> BreakdownResult:
        """The device time breakdown (GPU, or host on a CPU-only run)."""
        return BreakdownResult(
            per_step=self.gather(BreakdownParts).per_step,
            per_rank=self.gather(BreakdownParts).per_rank,
            window=self.options.window,
        )

    @property
    def breakdown(self) -> BreakdownResult:
        """The device time breakdown (an alias of :attr:`measured`)."""
        return self.measured

    @property
    def host_breakdown(self) -> BreakdownResult | None:
        """The host's time breakdown on a CPU-only run (where the host is the device), else None."""
        return None if self.has_gpu else self.measured

    @property
    def facts(self) -> RunFacts:
        """The typed facts of the run, once the reduce has gathered them."""
        facts: RunFacts = self.result("run")
        return facts

    @property
    def verdict(self) -> Verdict:
        """The typed verdict, once the reduce has decided it."""
        verdict: Verdict = self.result("verdict")
        return verdict

    @cached_property
    def overlap(self) -> OverlapResult:
        """Comm/compute overlap."""
        return OverlapResult(per_step=self.gather(OverlapParts).per_step, per_rank=self.gather(OverlapParts).per_rank)

    @cached_property
    def kernels(self) -> KernelResult:
        """Kernels over the run."""
        return summarize_kernels(self.gather(KernelParts).by_rank)

    @cached_property
    def annotations(self) -> AnnotationResult:
        """Phases over the run."""
        return summarize_annotations(self.gather(AnnotationParts).per_step, self.steps)

    @cached_property
    def collectives(self) -> CollectiveResult:
        """Collectives matched across ranks."""
        return match_found(
            self.gather(CollectiveParts).found,
            groups=self.options.groups,
            ranks_present=self.options.ranks_present,
            world_size=self.options.world_size,
            hosts=self.options.hosts,
        )

    @cached_property
    def span_ns(self) -> int:
        """From the first event of any rank to the last."""
        spans = self.gather(FactParts).span
        value = spans.select(pl.col("end_ns").max() - pl.col("start_ns").min()).item()
        return int(value or 0)

    @cached_property
    def stragglers(self) -> StragglerResult:
        """Stragglers from the matched collectives."""
        return find_stragglers(self.collectives, self.steps, self.annotations, span_ns=self.span_ns)

    @cached_property
    def dataloader(self) -> DataLoaderResult:
        """DataLoader gaps."""
        measure = data_measure(has_gpu=self.has_gpu)
        return DataLoaderResult(
            per_step=self.gather(DataLoaderParts).per_step,
            per_rank=self.gather(DataLoaderParts).per_rank,
            measure=measure,
        )

    @cached_property
    def syncs(self) -> SyncResult:
        """Host syncs (the blocking calls themselves stay in the map)."""
        calls = pl.DataFrame(schema={"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64})
        return SyncResult(
            per_step=self.gather(SyncParts).per_step,
            per_rank=self.gather(SyncParts).per_rank,
            calls=calls,
            reads=calls,
        )

    @cached_property
    def idle(self) -> IdleResult | None:
        """GPU idle by cause (None on a CPU-only run)."""
        if not self.has_gpu:
            return None
        return IdleResult(intervals=self.gather(IdleParts).intervals, per_rank=self.gather(IdleParts).per_rank)

    @cached_property
    def ledger(self) -> LedgerResult:
        """Every ns of each rank's window under one entry, stragglers carved out (the verdict's numbers)."""
        return reduce_ledger(
            self.gather(LedgerParts).entries,
            self.gather(LedgerParts).comms,
            self.gather(LedgerParts).frames,
            collectives=self.collectives,
            stragglers=self.stragglers,
        )


def in_order(entries: Sequence[Entry]) -> list[Entry]:
    """``entries`` ordered so that each comes after the entries it requires (else in registry
    order); a requirement that is missing or circular is a programming error."""
    by_name = {e.name: e for e in entries}
    done: dict[str, Entry] = {}
    visiting: set[str] = set()

    def visit(entry: Entry) -> None:
        if entry.name in done:
            return
        if entry.name in visiting:
            raise ValueError(f"registry: {entry.name!r} requires itself through {sorted(visiting)}")
        visiting.add(entry.name)
        for name in entry.requires:
            if name not in by_name:
                raise ValueError(f"registry: {entry.name!r} requires {name!r}, which is not registered")
            visit(by_name[name])
        visiting.discard(entry.name)
        done[entry.name] = entry

    for entry in entries:
        visit(entry)
    return list(done.values())


def reduce_ranks(
    shards: Sequence[RankSummary], options: Options, entries: Sequence[Entry], run_meta: RunMeta
) -> Reduced:
    """Run the cross-rank part of every entry, each after those it requires; ``results`` holds
    each one's output.

    ``run_meta``: the run's metadata (ranks, files, warnings): no events are needed here.
    """
    reduced = Reduced(shards=shards, options=options, run_meta=run_meta)
    for entry in in_order(entries):
        if entry.cross_rank is not None:
            reduced.results[entry.name] = entry.cross_rank(reduced)
    return reduced
