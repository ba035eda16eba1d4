"""``analyze``: every registered analysis of a ``Run``, mapped per rank and reduced across ranks,
into one typed :class:`~tracekit.results.analysis.Analysis`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec
import polars as pl

from tracekit.analyzers import registry
from tracekit.analyzers.clocks import rank_hosts
from tracekit.analyzers.collectives import group_members
from tracekit.analyzers.context import Options
from tracekit.analyzers.mapreduce import RankSummary, Reduced, map_ranks, reduce_ranks
from tracekit.model.run import Run
from tracekit.results.analysis import Analysis, SectionData
from tracekit.results.sections import field_meta
from tracekit.results.vocab import WindowKind

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.model.run import RunMeta


@dataclass(frozen=True)
class Outcome:
    """The typed analysis; the polars frames behind it; the large per-instance tables (``details``)."""

    analysis: Analysis
    #: every intermediate result as polars frames (steps, breakdown, collectives per rank, ...)
    frames: Reduced

    @property
    def details(self) -> dict[str, pl.DataFrame]:
        """The per-instance tables that the typed result leaves out."""
        out = {"collectives_per_rank": self.frames.collectives.per_rank}
        if self.frames.idle is not None:
            out["idle_intervals"] = self.frames.idle.intervals.with_columns(pl.col("cause").cast(pl.String))
        return out


def options_for(
    run: Run, *, window: WindowKind | str = WindowKind.STEPS, steps: str | None = None, include_warmup: bool = False
) -> Options:
    """The options of an analysis of ``run``: the user's choices and the run-level facts."""
    return run_options(run.meta, has_gpu=run.has_gpu, window=window, steps=steps, include_warmup=include_warmup)


def run_options(
    meta: RunMeta,
    *,
    has_gpu: bool,
    window: WindowKind | str = WindowKind.STEPS,
    steps: str | None = None,
    include_warmup: bool = False,
    jobs: int = 1,
    cores_shared: bool = False,
) -> Options:
    """The options of an analysis of a run known by its metadata and whether any rank has GPU
    activity: what the map needs (the user's choices, ``has_gpu``) and what the reduce needs."""
    return Options(
        window=WindowKind(window),
        has_gpu=has_gpu,
        steps=steps,
        include_warmup=include_warmup,
        world_size=meta.world_size,
        ranks_present=len(meta.ranks),
        groups=group_members(meta.ranks),
        hosts=rank_hosts(meta.ranks),
        jobs=jobs,
        cores_shared=cores_shared,
    )


def shards(run: Run, size: int | None = None) -> list[Run]:
    """``run`` split into runs of at most ``size`` ranks each (all of it when ``size`` is None)."""
    ids = run.rank_ids
    if size is None or size >= len(ids):
        return [run]
    return [run.only(ids[i : i + size]) for i in range(0, len(ids), size)]


def run_analysis(
    run: Run,
    *,
    window: WindowKind | str = WindowKind.STEPS,
    steps: str | None = None,
    include_warmup: bool = False,
    shard_ranks: int | None = None,
) -> Outcome:
    """Map every rank (in shards of ``shard_ranks``; one shard by default), reduce, and keep the details.

    ``steps``: which steps to measure ("3-", "2-5", "0,2,4"; default: the steady state, warm-up
    excluded); ``include_warmup``: keep warm-up steps in the figures.
    """
    options = options_for(run, window=window, steps=steps, include_warmup=include_warmup)
    mapped = [map_ranks(part, options, registry.ANALYSES) for part in shards(run, shard_ranks)]
    return reduce_outcome(mapped, options, run.meta)


def reduce_outcome(mapped: Sequence[RankSummary], options: Options, meta: RunMeta) -> Outcome:
    """The outcome of mapped shards and the run's metadata (ranks, files, warnings)."""
    reduced = reduce_ranks(mapped, options, registry.ANALYSES, meta)
    fields = {
        e.name: reduced.results[e.name]
        for e in registry.ANALYSES
        if e.title is None and e.name in Analysis.__struct_fields__
    }
    sections = {
        e.name: SectionData(
            title=e.title, data=msgspec.to_builtins(reduced.results[e.name]), fields=field_meta(e.result)
        )
        for e in registry.ANALYSES
        if e.title is not None and reduced.results.get(e.name) is not None
    }
    return Outcome(analysis=Analysis(**fields, sections=sections), frames=reduced)


def analyze(
    run: Run, *, window: WindowKind | str = WindowKind.STEPS, steps: str | None = None, include_warmup: bool = False
) -> Analysis:
    """Run every analysis on ``run`` and decide the verdict.

    ``window``: measure time over the steps (default) or over each rank's whole GPU span
    (``"gpu_span"``, HTA's definition); ``steps``, ``include_warmup``: see :func:`run_analysis`.
    """
    if not isinstance(run, Run):
        what = "None" if run is None else f"a {type(run).__name__}"
        raise TypeError(f"analyze: run must be a Run (tracekit.readers.load_run(paths) reads one), not {what}")
    if steps is not None and not isinstance(steps, str):
        raise TypeError(f"analyze: steps is a str as --steps takes it ('2:8', '3,5'), not a {type(steps).__name__}")
    return run_analysis(run, window=window, steps=steps, include_warmup=include_warmup).analysis


def details_frame(details: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The per-instance tables as one frame, a ``table`` column naming each row's table."""
    frames = [df.with_columns(pl.lit(name).alias("table")) for name, df in details.items() if df.height]
    if not frames:
        return pl.DataFrame({"table": []}, schema={"table": pl.String})
    return pl.concat(frames, how="diagonal_relaxed")
