"""Trace files to an analysis without the run in one place: the map over shards of files where an
executor runs it, the reduce here.

The files are cut into shards of a few files each (by size). Mapping a shard
(:func:`map_shard`, a plain function of plain data, run by an
:class:`~tracekit.executors.Executor`: in this process, local processes or Dask workers) reads
each file as :func:`~tracekit.readers.load.load_run` does (through the cache, with the same
warnings and unreadable files), decides the rank of each of its traces where the file alone
decides it, classifies the events and runs the per-rank part of every registered analysis.
What comes back is small: each trace's claims (:class:`~tracekit.readers.claims.TraceClaim`)
and the shard's :class:`~tracekit.analyzers.mapreduce.RankSummary`. Here the ranks are decided
from every file's claims, with the rules and errors of ``load_run`` (two files claiming one
rank, files of different jobs, a rank from the file name), then the cross-rank reduce runs.

Two facts of the whole run are guessed by a shard and checked here: a rank that only the
absence of other traces decides (a single trace without one is rank 0), and whether the run
has GPU activity at all (a CPU-only rank among GPU ranks is measured on the GPU timeline, as in
one run). The rare shards that guessed wrong are mapped again; the result is the same as that
of :func:`~tracekit.analyzers.analysis.run_analysis` on the whole run.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import polars as pl

from tracekit.analyzers import registry
from tracekit.analyzers.analysis import reduce_outcome, run_analysis, run_options
from tracekit.analyzers.context import Options, RankContext
from tracekit.analyzers.gains import GainParts
from tracekit.analyzers.gains_held import KEPT_TABLES
from tracekit.analyzers.mapreduce import RankSummary, map_ranks
from tracekit.analyzers.memory_counters import timeline_parts
from tracekit.analyzers.parts import IdleParts, LedgerParts, Parts, SyncParts
from tracekit.analyzers.windows import map_windows
from tracekit.analyzers.windows import plan as windows_plan
from tracekit.executors import TaskFailed
from tracekit.heap import given_back
from tracekit.pipeline.map_cache import CacheWarning, look_up, through_cache
from tracekit.pipeline.mapped import Mapped, Settings, Shard
from tracekit.pipeline.whatif_cache import whatif_cache
from tracekit.readers.claims import FileClaims, TraceClaim, TraceKey, rank_for, resolve
from tracekit.readers.load import (
    collective_counts,
    event_cache,
    find_inputs,
    has_gpu_activity,
    load_run,
    rank_run,
    run_meta,
    timelines_beside,
)
from tracekit.readers.parse import PARALLEL_MIN_BYTES, data_bytes, parse_files
from tracekit.readers.spilled import SPILLED_EVENTS, Spilled

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from tracekit.analyzers.analysis import Outcome
    from tracekit.executors import Executor
    from tracekit.readers.parse import ProgressCallback
    from tracekit.results.vocab import Parallelism

#: A shard holds files of about this many bytes to decode at most (decoded, they are held at once).
SHARD_MAX_BYTES: Final = 128 * 1024 * 1024
#: Shards per worker, at least, so that workers finishing early take more.
SHARDS_PER_WORKER: Final = 4
#: A rank of more events is analysed in windows of its steps from its events spilled to a file
#: (:func:`_map_files`). Held whole, a rank's map peaks at about 125 B live an event (the 2 GB A100,
#: DLRM and MI300 ranks: 665, 797 and 675 MB for 5.4M, 6.9M and 7.2M events; stop 99), so 4M
#: events are about 0.5 GB; in windows of 2^19 events from the file, those ranks' maps peak at
#: 400, 449 and 358 MB, for 2.6 to 3.4 times the CPU (each window reads its events from the
#: file and analyses them apart: benchmarks/README.md, stop 99), so smaller ranks stay whole.
WINDOWED_EVENTS: Final = SPILLED_EVENTS
#: The registry entry that the memory timelines (read here, not by a shard) belong to.
MEMORY_ENTRY: Final = "memory"
#: The tables a shard's result leaves on the worker that mapped it, on a cluster elsewhere, by
#: the part they are of: what the reduce reads of them, it fetches (:meth:`Reduced.kept`). The
#: gains' tables of events, which the what-ifs held there re-time; the ledger's communication
#: time and its entries by phase, which only a named straggler's cost is carved from (on an A100
#: rank of a GB, 105k pieces of communication and 9k entries, where its per-step entries are 1.5k
#: and its other tables a few thousand rows: :func:`tracekit.analyzers.ledger.straggler_reads`).
KEPT: Final[dict[type[Parts], tuple[str, ...]]] = {GainParts: KEPT_TABLES, LedgerParts: ("comms", "entries")}

T = TypeVar("T")
R = TypeVar("R")


def map_shard(shard: Shard) -> Mapped:
    """What mapping ``shard`` gives: from the map cache when it holds it (the same files, version
    and options; see :mod:`~tracekit.pipeline.map_cache`), else its files read (through the event
    cache) and each rank of them analyzed, and the result stored in the map cache."""
    return through_cache(shard, _map_files)


def _map_files(shard: Shard) -> Mapped:
    """Read the files of ``shard`` (through the event cache) and analyze each rank of them."""
    settings = shard.settings
    cache = event_cache(settings.cache_dir, use_cache=settings.use_cache)
    parsed = parse_files([Path(p) for p in shard.paths], jobs=settings.jobs, cache=cache)
    files = tuple(FileClaims(p.path, p.error, tuple(TraceClaim.of(t) for t in p.traces)) for p in parsed)
    traces = {(p.path, i): t for p in parsed for i, t in enumerate(p.traces)}
    del parsed
    claims = {(f.path, i): c for f in files for i, c in enumerate(f.traces)}
    gpu = frozenset(k for k, t in traces.items() if has_gpu_activity(t.held))
    ranks = shard.ranks if shard.ranks is not None else _own_ranks(files, settings)
    keep = settings.ranks
    chosen = {k: r for k, r in ranks.items() if claims[k].has_content and (keep is None or r in keep)}
    if not chosen or len(set(chosen.values())) < len(chosen):  # two files claiming one rank: the client says so
        return _unmapped(files, gpu)
    order = sorted(chosen, key=lambda k: chosen[k])
    run = rank_run(
        [(claims[k].info(chosen[k], claims[k].rank_source), traces.pop(k)) for k in order],  # held by the run alone
        comm_kernels=settings.comm_kernels,
    )
    del traces
    has_gpu = shard.has_gpu if shard.has_gpu is not None else any(k in gpu for k in chosen)
    options = Options(**settings.chosen(), has_gpu=has_gpu)
    counts = collective_counts(run.by_kind)
    if len(run.rank_ids) != 1 or run.height <= WINDOWED_EVENTS:
        summary = map_ranks(RankContext(run, options), registry.ANALYSES)
        return Mapped(files, chosen, has_gpu=has_gpu, gpu=gpu, summary=summary, counts=counts)
    # one rank of many events: written to a file of its own and read from it a window of its
    # steps at a time (Spilled, map_windows): the same parts, the peak set by a window's events
    # and the few facts of the whole rank the windows read, not by the rank's length
    with contextlib.ExitStack() as stack:
        try:
            folder = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="tracekit-rank-", ignore_cleanup_errors=True)
            )
            held = Spilled.written(run.by_kind, Path(folder) / "events.parquet")
        except (OSError, pl.exceptions.PolarsError):  # no folder, or no room: analysed held, whole
            held = None
        if held is None:
            summary = map_ranks(RankContext(run, options), registry.ANALYSES)
        else:
            run = replace(run, by_kind=held)
            given_back()  # the events held are let go: their pages given back before the windows
            ctx = RankContext(run, options)
            summary = map_windows(ctx, registry.ANALYSES, windows_plan(ctx))
    return Mapped(files, chosen, has_gpu=has_gpu, gpu=gpu, summary=summary, counts=counts)


def _unmapped(files: tuple[FileClaims, ...], gpu: frozenset[TraceKey] = frozenset()) -> Mapped:
    """A shard's files with no rank analyzed."""
    return Mapped(files, {}, has_gpu=False, gpu=gpu, summary=None, counts=pl.DataFrame())


def _own_ranks(files: Sequence[FileClaims], settings: Settings) -> dict[TraceKey, int]:
    """The rank of each trace with content that its file decides (the run's rules, see
    :func:`~tracekit.readers.claims.rank_for`); a trace it does not decide is left out."""
    out: dict[TraceKey, int] = {}
    for f in files:
        good = [(i, c) for i, c in enumerate(f.traces) if c.has_content]
        for i, claim in good:
            found = rank_for(
                claim.path,
                override=settings.rank,
                recorded=(claim.rank, claim.rank_source),
                alone=settings.alone and len(good) == 1,
            )
            if found is not None:
                out[(f.path, i)] = found[0]
    return out


def plan(paths: Sequence[Path], *, workers: int) -> list[tuple[str, ...]]:
    """``paths`` cut into shards: one shard when there is little to read, else shards of at most
    :data:`SHARD_MAX_BYTES` to decode, at least :data:`SHARDS_PER_WORKER` per worker.

    The files go in the order of the numbers in their names (``rank2`` before ``rank10``), so
    that a shard holds neighbouring ranks and the shards' tables, in rank order, join without a
    sort (with 1,024 ranks in name order, every table was sorted: a copy of each held beside
    the shards' own)."""
    paths = sorted(paths, key=_numbered)
    sizes = [data_bytes(p) for p in paths]
    total = sum(sizes)
    if total < PARALLEL_MIN_BYTES:
        return [tuple(str(p) for p in paths)]
    target = min(SHARD_MAX_BYTES, total // (max(1, workers) * SHARDS_PER_WORKER))
    shards: list[tuple[str, ...]] = []
    current: list[str] = []
    held = 0
    for path, size in zip(paths, sizes, strict=True):
        if current and held + size > target:
            shards.append(tuple(current))
            current, held = [], 0
        current.append(str(path))
        held += size
    return [*shards, tuple(current)] if current else shards


def _numbered(path: Path) -> tuple[str | int, ...]:
    """A sort key of ``path`` comparing the digits in it as numbers: text and numbers alternate."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(_DIGITS.split(str(path))))


_DIGITS: Final = re.compile(r"(\d+)")


def analyze_files(
    paths: Iterable[str | Path],
    *,
    executor: Executor,
    settings: Settings,
    progress: ProgressCallback | None = None,
    stage: Callable[[str], None] | None = None,
    cores_shared: bool = False,
    captured_parallelism: Parallelism | None = None,
    details: bool = True,
) -> Outcome:
    """The analysis of the traces at ``paths``, mapped by ``executor`` (see the module's docstring).

    ``settings`` holds ``tracekit analyze``'s options; its ``alone`` and ``jobs`` are set here.
    ``cores_shared``: the ranks outnumbered their machine's cores (the capture summary's word,
    :func:`~tracekit.analyzers.caveats.ranks_over_cores`); the re-timed gains are floors.
    ``captured_parallelism``: how the run is data-parallel by its capture's config, where it says.
    ``details``: every GPU idle interval and the longest blocking calls come here (else each shard's are not
    sent from where it was mapped).
    Raises :class:`~tracekit.errors.TracekitError` as :func:`~tracekit.readers.load.load_run` does.
    """
    paths = list(paths)
    inputs = find_inputs(paths, rank=settings.rank, comm_kernels=settings.comm_kernels)
    if inputs.timelines_only:  # no events to map: memory timelines alone
        run = load_run(paths, rank=settings.rank)
        return run_analysis(run, settings)
    shards = plan(inputs.files, workers=executor.workers)
    settings = replace(settings, alone=len(inputs.files) == 1, jobs=executor.workers if len(shards) == 1 else 1)
    tasks = [Shard(paths=p, settings=settings) for p in shards]
    mapped = _map(executor, tasks, progress=progress, details=details)
    by_path = {f.path: f for m in mapped for f in m.files}
    resolved = resolve(
        [by_path[str(p)] for p in inputs.files], inputs.special, rank=settings.rank, ranks=settings.ranks
    )
    has_gpu = any(k in m.gpu for m in mapped for k in resolved.assigned)
    decided = [_decided(t, resolved.assigned, has_gpu) for t in tasks]
    wrong = [i for i, (d, m) in enumerate(zip(decided, mapped, strict=True)) if _guessed_wrong(m, d)]
    for i, m in zip(wrong, _map(executor, [decided[i] for i in wrong], progress=None, details=details), strict=True):
        mapped[i] = m
    executor.rest()  # its map is done: what it keeps idle is released before the reduce
    for note in dict.fromkeys(n for m in mapped for n in m.notes):
        warnings.warn(note, CacheWarning, stacklevel=2)
    if stage is not None:
        stage(f"combining {len(resolved.infos)} rank(s)")
    categories, timeline_skips, timeline_warnings = timelines_beside([i.rank for i in resolved.infos], inputs.timelines)
    summaries = sorted((m.summary for m in mapped if m.summary is not None), key=lambda s: min(s.ranks, default=-1))
    if categories.height:  # memory timelines, read here: their part of the memory analysis
        summaries.append(RankSummary(ranks=(), parts={MEMORY_ENTRY: timeline_parts(categories)}))
    counted = [m.counts for m in mapped if m.counts.height]
    counts = pl.concat(counted, how="vertical") if counted else pl.DataFrame()
    meta = run_meta(resolved, skipped=timeline_skips, counts=counts, warnings=timeline_warnings)
    options = run_options(
        meta,
        settings,
        has_gpu=has_gpu,
        jobs=min(executor.workers, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1),
        spread=Spread(executor) if executor.elsewhere else None,
        memo=whatif_cache(settings),
        cores_shared=cores_shared,
        captured_parallelism=captured_parallelism,
    )
    return replace(reduce_outcome(summaries, options, meta), details_kept=details)


@dataclass(frozen=True)
class Spread:
    """``executor``, to run more of the reduce where the map ran
    (:class:`tracekit.analyzers.retime_parallel.Spread`): only where its workers are elsewhere,
    so that they add cores to this machine's (a local cluster's or pool's share them)."""

    executor: Executor

    @property
    def workers(self) -> int:
        return self.executor.workers

    def hold(self, items: list[T]) -> list[Any] | None:
        try:
            return self.executor.hold(items)
        except Exception:  # the workers are lost: the caller does the work here
            return None

    def keep(self, fn: Callable[[T], R], items: list[T]) -> list[Any] | None:
        try:
            return self.executor.keep(fn, [_unwrapped(x) for x in items])
        except Exception:  # the workers are lost: the caller does the work here
            return None

    def places(self, handles: list[Any]) -> list[str | None]:
        try:
            return self.executor.places([_unwrapped(h) for h in handles])
        except Exception:  # the workers are lost: no handle's place is known
            return [None] * len(handles)

    def fetch(self, kept: list[Any]) -> list[Any]:
        """What each of ``kept`` (:class:`KeptPart`) stands for, sent here; mapped again here
        where the workers lost it."""
        got = self(_itself, kept)
        if got is not None and all(g is not None for g in got):
            return got
        return [_part_of(map_shard(k.shard), k.kind) for k in kept]

    def __call__(self, fn: Callable[[T], R], items: list[T]) -> list[R] | None:
        out: list[R] = []
        try:
            got = dict(self.executor.map(fn, [_unwrapped(x) for x in items]))
        except Exception:  # the workers are lost: the caller does the work here
            return None
        for i in range(len(items)):
            if i not in got or isinstance(got[i], TaskFailed):
                return None
            out.append(got[i])  # type: ignore[arg-type]
        return out


def _decided(task: Shard, assigned: dict[TraceKey, int], has_gpu: bool) -> Shard:
    """``task`` with the ranks and ``has_gpu`` the client decided."""
    mine = set(task.paths)
    return replace(task, has_gpu=has_gpu, ranks={k: r for k, r in assigned.items() if k[0] in mine})


def _guessed_wrong(mapped: Mapped, decided: Shard) -> bool:
    """Whether a shard analyzed other ranks, or with another ``has_gpu``, than the client decided."""
    if decided.ranks != mapped.ranks:
        return True
    return bool(mapped.ranks) and mapped.has_gpu != decided.has_gpu


def _map(
    executor: Executor, tasks: Sequence[Shard], *, progress: ProgressCallback | None, details: bool = True
) -> list[Mapped]:
    """Every shard mapped by ``executor``, in the order of ``tasks``; a shard the executor could
    not run gives its files as unreadable, with the reason. ``details``: with every GPU idle
    interval and the longest blocking calls (else without: :func:`_without_details`, where the
    shard was mapped)."""
    total = sum(len(t.paths) for t in tasks)
    out: dict[int, Mapped] = {}
    notes: dict[int, tuple[str, ...]] = {}

    def done(i: int, mapped: Mapped) -> None:
        out[i] = replace(mapped, notes=notes[i] + mapped.notes) if notes.get(i) else mapped
        if progress is not None:
            finished = sum(len(tasks[j].paths) for j in out)
            for k, path in enumerate(tasks[i].paths):
                progress(path, finished - len(tasks[i].paths) + k + 1, total)

    for i, task in enumerate(tasks):  # what the map cache holds is read here: no worker is needed for it
        found, notes[i] = look_up(task)
        if found is not None:
            done(i, found if details else _without_details(found))
    todo = [i for i in range(len(tasks)) if i not in out]
    kept: dict[type[Parts], list[Any]] = {}
    if executor.elsewhere and todo:
        # the tables of KEPT stay on the workers that mapped them (the gains' for the what-ifs
        # held there: tracekit.analyzers.gains_held); the rest of each result comes here
        whole = executor.keep(map_shard, [tasks[i] for i in todo])
        kept = {kind: executor.keep(_KEEPERS[kind], whole) for kind in KEPT}
        results = executor.map(_light if details else _light_alone, whole)
        del whole  # each whole result leaves its worker once its parts are made
    else:
        results = executor.map(map_shard if details else _map_alone, [tasks[i] for i in todo])
    for j, result in results:
        i = todo[j]
        if isinstance(result, TaskFailed):
            reason = f"not analyzed: the {executor.name} executor failed to run it ({result.reason})"
            done(i, _unmapped(tuple(FileClaims(p, reason) for p in tasks[i].paths)))
        elif kept and result.summary is not None:
            held = {kind: KeptPart(handles[j], tasks[i], kind) for kind, handles in kept.items()}
            done(i, replace(result, summary=replace(result.summary, kept=held)))
        else:
            done(i, result)
    return [out[i] for i in range(len(tasks))]


@dataclass(frozen=True)
class KeptPart:
    """A shard's part of type ``kind`` left where it was mapped: the executor's handle of it,
    and the shard, mapped again here if the workers lose it (:meth:`Spread.fetch`)."""

    handle: Any
    shard: Shard
    kind: type[Parts]


def _unwrapped(item: Any) -> Any:
    """``item`` as the executor takes it: each :class:`KeptPart` its handle."""
    if isinstance(item, KeptPart):
        return item.handle
    if isinstance(item, tuple):
        return tuple(_unwrapped(x) for x in item)
    return item


def _part_of(mapped: Mapped, kind: type[Parts]) -> Parts | None:
    """The part of type ``kind`` of a shard's result (run where the result is)."""
    summary = mapped.summary
    if summary is None:
        return None
    return next((p for p in summary.parts.values() if isinstance(p, kind)), None)


def _gains_of(mapped: Mapped) -> Parts | None:
    """The gains' part of a shard's result (run where the result is)."""
    return _part_of(mapped, GainParts)


def _ledger_of(mapped: Mapped) -> Parts | None:
    """The ledger's part of a shard's result (run where the result is)."""
    return _part_of(mapped, LedgerParts)


#: What takes each part of :data:`KEPT` out of a shard's result, where the result is.
_KEEPERS: Final = {GainParts: _gains_of, LedgerParts: _ledger_of}


def _itself(value: T) -> T:
    """What a handle stands for (run where it is: the value comes back)."""
    return value


def _light(mapped: Mapped) -> Mapped:
    """A shard's result without the tables that stay where it was mapped (:data:`KEPT`)."""
    return _cleared(mapped, KEPT)


def _without_details(mapped: Mapped) -> Mapped:
    """A shard's result without what only the details and the annotated trace read: every GPU
    idle interval (:attr:`IdleParts.intervals`; the reduce reads each rank's longest and its
    one-time idle by host range) and the host's longest blocking calls (:attr:`SyncParts.calls`:
    up to 5,000 a rank, with their names; the reduce reads the counts per step)."""
    return _cleared(mapped, _DETAILS)


#: The tables of :func:`_without_details`, by the part they are of.
_DETAILS: Final[dict[type[Parts], tuple[str, ...]]] = {IdleParts: ("intervals",), SyncParts: ("calls",)}


def _cleared(mapped: Mapped, tables: dict[type[Parts], tuple[str, ...]]) -> Mapped:
    """A shard's result with the ``tables`` of each part of those types emptied (their columns kept)."""
    summary = mapped.summary
    if summary is None or not any(type(p) in tables for p in summary.parts.values()):
        return mapped
    parts = {
        name: replace(p, **{t: getattr(p, t).clear() for t in tables[type(p)]})  # type: ignore[type-var]
        if type(p) in tables
        else p
        for name, p in summary.parts.items()
    }
    return replace(mapped, summary=replace(summary, parts=parts))


def _map_alone(shard: Shard) -> Mapped:
    """:func:`map_shard` without the details (:func:`_without_details`; run where the shard is mapped)."""
    return _without_details(map_shard(shard))


def _light_alone(mapped: Mapped) -> Mapped:
    """:func:`_light` without the details (:func:`_without_details`; run where the result is)."""
    return _without_details(_light(mapped))
