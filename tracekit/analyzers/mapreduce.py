"""The per-rank map and the cross-rank reduce.

:func:`map_ranks` runs every registered analysis's per-rank part on a shard of ranks (a plain
function of a :class:`~tracekit.model.run.Run` and :class:`Options`, so a local loop, a process
pool or a Dask worker can call it) and returns small frames. :func:`reduce_ranks` concatenates
the shards' frames and runs the cross-rank parts in registry order: collective matching,
stragglers, the verdict, the run-level tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

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
from tracekit.analyzers.steps import StepResult
from tracekit.analyzers.stragglers import StragglerResult, find_stragglers
from tracekit.analyzers.syncs import SyncResult

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.model.run import Run, RunMeta
    from tracekit.results.analysis import RunFacts, Verdict

#: What one analysis's per-rank part returns: named frames, one row per rank (or rank and step...).
Parts = dict[str, pl.DataFrame]


@dataclass(frozen=True)
class Entry:
    """One analysis: its per-rank part, its cross-rank part, and the field of the result it fills."""

    name: str
    per_rank: Callable[[RankContext], Parts] | None = None
    cross_rank: Callable[[Reduced], Any] | None = None


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

    def part(self, entry: str, table: str) -> pl.DataFrame:
        """One per-rank table of one entry, over every shard, in rank order."""
        frames = [f for s in self.shards if (f := s.parts.get(entry, {}).get(table)) is not None]
        if not frames:
            return pl.DataFrame()
        if len(frames) == 1:
            return frames[0]
        out = pl.concat(frames, how="vertical_relaxed")
        return out.sort("rank", maintain_order=True) if "rank" in out.columns else out

    @property
    def has_gpu(self) -> bool:
        """Whether the device timeline is the GPU's."""
        return self.options.has_gpu

    @cached_property
    def steps(self) -> StepResult:
        """Every rank's steps."""
        return StepResult(
            steps=self.part("steps", "steps"),
            stats=self.part("steps", "stats"),
            all_steps=self.part("steps", "all_steps"),
            warmup=self.part("steps", "warmup"),
            how_found=self.part("steps", "how_found"),
            selection=self.options.steps,
            include_warmup=self.options.include_warmup,
        )

    @cached_property
    def measured(self) -> BreakdownResult:
        """The device time breakdown (GPU, or host on a CPU-only run)."""
        return BreakdownResult(
            per_step=self.part("breakdown", "per_step"),
            per_rank=self.part("breakdown", "per_rank"),
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
        facts: RunFacts = self.results["run"]
        return facts

    @property
    def verdict(self) -> Verdict:
        """The typed verdict, once the reduce has decided it."""
        verdict: Verdict = self.results["verdict"]
        return verdict

    @cached_property
    def overlap(self) -> OverlapResult:
        """Comm/compute overlap."""
        return OverlapResult(per_step=self.part("overlap", "per_step"), per_rank=self.part("overlap", "per_rank"))

    @cached_property
    def kernels(self) -> KernelResult:
        """Kernels over the run."""
        return summarize_kernels(self.part("kernels", "by_rank"))

    @cached_property
    def annotations(self) -> AnnotationResult:
        """Phases over the run."""
        return summarize_annotations(self.part("annotations", "per_step"), self.steps)

    @cached_property
    def collectives(self) -> CollectiveResult:
        """Collectives matched across ranks."""
        return match_found(
            self.part("collectives", "found"),
            groups=self.options.groups,
            ranks_present=self.options.ranks_present,
            world_size=self.options.world_size,
        )

    @cached_property
    def span_ns(self) -> int:
        """From the first event of any rank to the last."""
        spans = self.part("facts", "span")
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
            per_step=self.part("dataloader", "per_step"), per_rank=self.part("dataloader", "per_rank"), measure=measure
        )

    @cached_property
    def syncs(self) -> SyncResult:
        """Host syncs (the blocking calls themselves stay in the map)."""
        calls = pl.DataFrame(schema={"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64})
        return SyncResult(
            per_step=self.part("host_syncs", "per_step"),
            per_rank=self.part("host_syncs", "per_rank"),
            calls=calls,
            reads=calls,
        )

    @cached_property
    def idle(self) -> IdleResult | None:
        """GPU idle by cause (None on a CPU-only run)."""
        if not self.has_gpu:
            return None
        return IdleResult(
            intervals=self.part("idle_causes", "intervals"), per_rank=self.part("idle_causes", "per_rank")
        )

    @cached_property
    def ledger(self) -> LedgerResult:
        """Every ns of each rank's window under one entry, stragglers carved out (the verdict's numbers)."""
        return reduce_ledger(
            self.part("ledger", "entries"),
            self.part("ledger", "comms"),
            self.part("ledger", "frames"),
            collectives=self.collectives,
            stragglers=self.stragglers,
        )


def reduce_ranks(
    shards: Sequence[RankSummary], options: Options, entries: Sequence[Entry], run_meta: RunMeta
) -> Reduced:
    """Run the cross-rank part of every entry, in order; ``results`` holds each one's output.

    ``run_meta``: the run's metadata (ranks, files, warnings): no events are needed here.
    """
    reduced = Reduced(shards=shards, options=options, run_meta=run_meta)
    for entry in entries:
        if entry.cross_rank is not None:
            reduced.results[entry.name] = entry.cross_rank(reduced)
    return reduced
