"""``analyze``: every registered analysis of a ``Run``, mapped per rank and reduced across ranks,
into one typed :class:`~tracekit.results.analysis.Analysis`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import msgspec
import polars as pl

from tracekit.analyzers import registry, shared
from tracekit.analyzers.clocks import rank_hosts
from tracekit.analyzers.collectives import INSTANCE, group_members
from tracekit.analyzers.context import Options, RankContext
from tracekit.analyzers.mapreduce import Entry, RankSummary, Reduced, map_ranks, reduce_ranks
from tracekit.errors import InputError
from tracekit.model.run import Run
from tracekit.results.analysis import Analysis, SectionData
from tracekit.results.choices import CHOICES, AnalysisChoices
from tracekit.results.sections import field_meta

R = TypeVar("R")

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.analyzers.breakdown import BreakdownResult
    from tracekit.analyzers.gains_memo import Memo
    from tracekit.analyzers.retime_parallel import Spread
    from tracekit.model.run import RunMeta
    from tracekit.results.analysis import RunFacts, Verdict
    from tracekit.results.vocab import Parallelism


class _Result(Generic[R]):
    """An attribute that reads one entry's cross-rank result (typed as the entry's)."""

    def __init__(self, entry: Entry[R] | str) -> None:
        self.entry = entry

    @overload
    def __get__(self, obj: None, owner: type) -> _Result[R]: ...
    @overload
    def __get__(self, obj: Reduced, owner: type) -> R: ...
    def __get__(self, obj: Reduced | None, owner: type) -> _Result[R] | R:
        if obj is None:
            return self
        found: R = obj.result(self.entry)
        return found


class Frames(Reduced):
    """The reduce of an analysis, with its shared intermediates as typed attributes: every
    frame behind the typed result (``outcome.frames.collectives.per_rank``). The core's
    :class:`~tracekit.analyzers.mapreduce.Reduced` knows none of them; this view, of the built-in
    analyses, names them (:mod:`tracekit.analyzers.shared` says what each is)."""

    steps = _Result(shared.STEPS)
    #: the device time breakdown (GPU, or host on a CPU-only run); ``breakdown`` too
    measured = breakdown = _Result(shared.MEASURED)
    overlap = _Result(shared.OVERLAP)
    kernels = _Result(shared.KERNELS)
    annotations = _Result(shared.ANNOTATIONS)
    collectives = _Result(shared.COLLECTIVES)
    span_ns = _Result(shared.SPAN)
    stragglers = _Result(shared.STRAGGLERS)
    dataloader = _Result(shared.DATALOADER)
    syncs = _Result(shared.SYNCS)
    idle = _Result(shared.IDLE)
    ledger = _Result(shared.LEDGER)
    facts: _Result[RunFacts] = _Result("run")
    verdict: _Result[Verdict] = _Result("verdict")

    @property
    def host_breakdown(self) -> BreakdownResult | None:
        """The host's time breakdown on a CPU-only run (where the host is the device), else None."""
        return None if self.has_gpu else self.measured


@dataclass(frozen=True)
class Outcome:
    """The typed analysis; the polars frames behind it; the large per-instance tables (``details``)."""

    analysis: Analysis
    #: every intermediate result as polars frames (steps, breakdown, collectives per rank, ...)
    frames: Frames
    #: whether every GPU idle interval came to this process (``frames.idle.intervals``): False
    #: when the analysis did not bring them from where each rank was mapped
    #: (``AnalyzeOptions(details=False)``)
    details_kept: bool = True

    @property
    def details(self) -> dict[str, pl.DataFrame]:
        """The per-instance tables that the typed result leaves out.

        Raises ValueError when the analysis did not bring them from where the ranks were mapped."""
        if not self.details_kept:
            raise ValueError(
                "the per-instance tables were not brought from where each rank was analyzed: analyze with "
                "AnalyzeOptions(details=True) (the default) to have them"
            )
        out = {"collectives_per_rank": self.frames.collectives.per_rank.drop(INSTANCE, strict=False)}
        if (idle := self.frames.idle) is not None:
            out["idle_intervals"] = idle.intervals.with_columns(pl.col("cause").cast(pl.String))
        return out


def options_for(run: Run, choices: AnalysisChoices | None = None) -> Options:
    """The options of an analysis of ``run``: the user's choices and the run-level facts."""
    return run_options(run.meta, choices or AnalysisChoices(), has_gpu=run.has_gpu)


def run_options(
    meta: RunMeta,
    choices: AnalysisChoices,
    *,
    has_gpu: bool,
    jobs: int = 1,
    spread: Spread | None = None,
    memo: Memo | None = None,
    cores_shared: bool = False,
    captured_parallelism: Parallelism | None = None,
) -> Options:
    """The options of an analysis of a run known by its metadata and whether any rank has GPU
    activity: what the map needs (the user's choices, ``has_gpu``) and what the reduce needs."""
    return Options(
        **choices.chosen(),
        has_gpu=has_gpu,
        world_size=meta.world_size,
        ranks_present=len(meta.ranks),
        groups=group_members(meta.ranks),
        hosts=rank_hosts(meta.ranks),
        jobs=jobs,
        spread=spread,
        memo=memo,
        cores_shared=cores_shared,
        captured_parallelism=captured_parallelism,
    )


def shards(run: Run, size: int | None = None) -> list[Run]:
    """``run`` split into runs of at most ``size`` ranks each (all of it when ``size`` is None)."""
    ids = run.rank_ids
    if size is None or size >= len(ids):
        return [run]
    return [run.only(ids[i : i + size]) for i in range(0, len(ids), size)]


def choices_of(choices: AnalysisChoices | None, given: dict[str, Any], *, caller: str) -> AnalysisChoices:
    """The user's choices: ``choices``, with the ones ``given`` by name (``window="gpu_span"``:
    the fields of :class:`~tracekit.results.choices.AnalysisChoices`) over it."""
    if choices is not None and not isinstance(choices, AnalysisChoices):
        raise TypeError(f"{caller}: choices must be an AnalysisChoices, not a {type(choices).__name__}")
    unknown = sorted(set(given) - set(CHOICES))
    if unknown:
        raise TypeError(f"{caller}: no choice named {', '.join(unknown)} (the choices: {', '.join(CHOICES)})")
    try:
        return AnalysisChoices(**{**(choices.chosen() if choices else {}), **given})
    except TypeError as exc:
        raise TypeError(f"{caller}: {exc}") from None
    except ValueError as exc:  # a value: an input error, as the CLI refuses it
        raise InputError(f"{caller}: {exc}") from None


def run_analysis(
    run: Run, choices: AnalysisChoices | None = None, *, shard_ranks: int | None = None, **given: Any
) -> Outcome:
    """Map every rank (in shards of ``shard_ranks``; one shard by default), reduce, and keep the details.

    ``choices`` (or its fields by name, ``steps="3-"``): the window, which steps to measure
    ("3-", "2-5", "0,2,4"; default: the steady state, warm-up excluded), whether warm-up counts.
    """
    options = options_for(run, choices_of(choices, given, caller="run_analysis"))
    mapped = [map_ranks(RankContext(part, options), registry.ANALYSES) for part in shards(run, shard_ranks)]
    return reduce_outcome(mapped, options, run.meta)


def reduce_outcome(mapped: Sequence[RankSummary], options: Options, meta: RunMeta) -> Outcome:
    """The outcome of mapped shards and the run's metadata (ranks, files, warnings)."""
    reduced = reduce_ranks(mapped, options, registry.ANALYSES, meta, into=Frames)
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


def analyze(run: Run, choices: AnalysisChoices | None = None, **given: Any) -> Analysis:
    """Run every analysis on ``run`` and decide the verdict.

    ``choices`` (or its fields by name): ``window``, measure time over the steps (default) or
    over each rank's whole GPU span (``"gpu_span"``, HTA's definition); ``steps``,
    ``include_warmup``: see :func:`run_analysis`.
    """
    if not isinstance(run, Run):
        what = "None" if run is None else f"a {type(run).__name__}"
        raise TypeError(f"analyze: run must be a Run (tracekit.readers.load_run(paths) reads one), not {what}")
    return run_analysis(run, choices_of(choices, given, caller="analyze")).analysis


def details_frame(details: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The per-instance tables as one frame, a ``table`` column naming each row's table."""
    frames = [df.with_columns(pl.lit(name).alias("table")) for name, df in details.items() if df.height]
    if not frames:
        return pl.DataFrame({"table": []}, schema={"table": pl.String})
    return pl.concat(frames, how="diagonal_relaxed")
