"""The cross-rank intermediates several analyses read, each an entry with no section of its own.

An entry here gathers one kind of per-rank parts over the shards (and, for some, matches them
across ranks); its result is no field of :class:`~tracekit.results.analysis.Analysis`, so it is
kept only in the reduce, for the entries that require it. A section reads one with
``red.result(STEPS)`` (typed: ``Entry`` is generic in its result) after naming it in its
``requires``; the reduce runs it first, whether or not the registry lists it. The generic
reduce (:mod:`tracekit.analyzers.mapreduce`) knows none of them: they use the seam a new
section uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers.annotations import AnnotationResult, summarize_annotations
from tracekit.analyzers.breakdown import BreakdownResult
from tracekit.analyzers.collectives import CollectiveResult, match_found
from tracekit.analyzers.dataloader import DataLoaderResult, data_measure
from tracekit.analyzers.idle import IdleResult
from tracekit.analyzers.kernels import KernelResult, summarize_kernels
from tracekit.analyzers.ledger import LedgerResult, reduce_ledger, straggler_reads
from tracekit.analyzers.mapreduce import Entry
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
    StepParts,
    SyncParts,
)
from tracekit.analyzers.steps import StepResult
from tracekit.analyzers.stragglers import StragglerResult, find_stragglers
from tracekit.analyzers.syncs import SyncResult

if TYPE_CHECKING:
    from tracekit.analyzers.mapreduce import Reduced


def _steps(red: Reduced) -> StepResult:
    """Every rank's steps."""
    p = red.gather(StepParts)
    return StepResult(
        steps=p.steps,
        stats=p.stats,
        all_steps=p.all_steps,
        warmup=p.warmup,
        how_found=p.how_found,
        selection=red.options.steps,
        include_warmup=red.options.include_warmup,
    )


def _measured(red: Reduced) -> BreakdownResult:
    """The device time breakdown (GPU, or host on a CPU-only run)."""
    p = red.gather(BreakdownParts)
    return BreakdownResult(per_step=p.per_step, per_rank=p.per_rank, window=red.options.window)


def _overlap(red: Reduced) -> OverlapResult:
    """Comm/compute overlap."""
    p = red.gather(OverlapParts)
    return OverlapResult(per_step=p.per_step, per_rank=p.per_rank)


def _kernels(red: Reduced) -> KernelResult:
    """Kernels over the run."""
    return summarize_kernels(red.gather(KernelParts).by_rank)


def _annotations(red: Reduced) -> AnnotationResult:
    """Phases over the run."""
    return summarize_annotations(red.gather(AnnotationParts).per_step, red.result(STEPS))


def _collectives(red: Reduced) -> CollectiveResult:
    """Collectives matched across ranks."""
    o = red.options
    return match_found(
        red.gather(CollectiveParts).found,
        groups=o.groups,
        ranks_present=o.ranks_present,
        world_size=o.world_size,
        hosts=o.hosts,
    )


def _span(red: Reduced) -> int:
    """From the first event of any rank to the last, ns."""
    spans = red.gather(FactParts).span
    value = spans.select(pl.col("end_ns").max() - pl.col("start_ns").min()).item()
    return int(value or 0)


def _stragglers(red: Reduced) -> StragglerResult:
    """Stragglers from the matched collectives."""
    return find_stragglers(
        red.result(COLLECTIVES), red.result(STEPS), red.result(ANNOTATIONS), span_ns=red.result(SPAN)
    )


def _dataloader(red: Reduced) -> DataLoaderResult:
    """DataLoader gaps."""
    p = red.gather(DataLoaderParts)
    return DataLoaderResult(per_step=p.per_step, per_rank=p.per_rank, measure=data_measure(has_gpu=red.has_gpu))


def _syncs(red: Reduced) -> SyncResult:
    """Host syncs (the blocking calls themselves stay in the map)."""
    p = red.gather(SyncParts)
    calls = pl.DataFrame(schema={"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64})
    return SyncResult(per_step=p.per_step, per_rank=p.per_rank, calls=calls, reads=calls)


def _idle(red: Reduced) -> IdleResult | None:
    """GPU idle by cause (None on a CPU-only run)."""
    if not red.has_gpu:
        return None
    p = red.gather(IdleParts)
    return IdleResult(intervals=p.intervals, per_rank=p.per_rank, longest=p.longest, one_time=p.one_time)


def _ledger(red: Reduced) -> LedgerResult:
    """Every ns of each rank's window under one entry, stragglers carved out (the verdict's numbers)."""
    stragglers = red.result(STRAGGLERS)
    # read to carve a named straggler's cost only: on a cluster elsewhere, fetched then
    waits, own = straggler_reads(stragglers)
    p = red.completed(red.gather(LedgerParts), [t for t, read in (("entries", own), ("comms", waits)) if read])
    return reduce_ledger(
        p.entries, p.comms, p.frames, collectives=red.result(COLLECTIVES), stragglers=stragglers, per_step=p.per_step
    )


STEPS: Final = Entry[StepResult]("shared.steps", cross_rank=_steps)
#: The device time breakdown: the GPU's, or the host's on a CPU-only run.
MEASURED: Final = Entry[BreakdownResult]("shared.measured", cross_rank=_measured)
OVERLAP: Final = Entry[OverlapResult]("shared.overlap", cross_rank=_overlap)
KERNELS: Final = Entry[KernelResult]("shared.kernels", cross_rank=_kernels)
ANNOTATIONS: Final = Entry[AnnotationResult]("shared.annotations", cross_rank=_annotations, requires=(STEPS,))
COLLECTIVES: Final = Entry[CollectiveResult]("shared.collectives", cross_rank=_collectives)
SPAN: Final = Entry[int]("shared.span_ns", cross_rank=_span)
STRAGGLERS: Final = Entry[StragglerResult](
    "shared.stragglers", cross_rank=_stragglers, requires=(COLLECTIVES, STEPS, ANNOTATIONS, SPAN)
)
DATALOADER: Final = Entry[DataLoaderResult]("shared.dataloader", cross_rank=_dataloader)
SYNCS: Final = Entry[SyncResult]("shared.syncs", cross_rank=_syncs)
IDLE: Final = Entry[IdleResult | None]("shared.idle", cross_rank=_idle)
LEDGER: Final = Entry[LedgerResult]("shared.ledger", cross_rank=_ledger, requires=(COLLECTIVES, STRAGGLERS))
