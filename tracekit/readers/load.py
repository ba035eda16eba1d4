"""Files on disk -> one :class:`~tracekit.model.Run`: discovery, parallel parsing, ranks.

One unreadable file does not stop the others: it is skipped and named in the run. Input
that cannot be analyzed as one job (two files claiming one rank, files of different jobs)
is an error naming the files.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.arguments import number, path_list, text_list
from tracekit.errors import InputError
from tracekit.model.by_kind import ByKind
from tracekit.model.classify import classify_held
from tracekit.model.comm_evidence import user_kernel_pattern
from tracekit.model.counters import empty_categories, empty_counters
from tracekit.model.input_warnings import InputWarning
from tracekit.model.run import RankInfo, Run, RunMeta, SkippedFile
from tracekit.model.schema import GPU_ACTIVITY_KINDS, empty_events
from tracekit.model.taxonomy import HOST_BACKENDS
from tracekit.readers.cache import EventCache, default_cache_dir
from tracekit.readers.claims import FileClaims, Resolved, TraceClaim, rank_for, resolve
from tracekit.readers.discover import discover_files, memory_timelines
from tracekit.readers.formats import read_file
from tracekit.readers.memory_timeline import read_memory_timeline_checked
from tracekit.readers.own_outputs import is_own_output
from tracekit.readers.parse import ProgressCallback, parse_files
from tracekit.readers.ranks import MAX_RANK, is_rank, rank_from_name

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from tracekit.readers.trace import RankTrace


__all__ = ["ProgressCallback", "load_run", "read_file"]

#: The most processes or threads ``jobs`` may ask for.
MAX_JOBS: Final = 4096


def load_run(
    paths: Iterable[str | Path],
    *,
    ranks: set[int] | None = None,
    rank: int | None = None,
    jobs: int | None = None,
    progress: ProgressCallback | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    comm_kernels: Sequence[str] = (),
) -> Run:
    """Read trace files and folders into a :class:`Run`.

    ``ranks`` keeps only those ranks; ``rank`` sets the rank of a single file that does not
    record one; ``jobs`` is the number of cores parsing uses, as processes that read files, or threads
    that decode the chunks of one big file (default: the number of cores);
    ``progress`` is called after each file with (file, files done, files in all). Decoded
    events are cached per file in ``cache_dir`` (default: ``$TRACEKIT_CACHE_DIR``, else
    ``~/.cache/tracekit``; see :mod:`tracekit.readers.cache`), and so are the SQLite exports of
    ``.nsys-rep`` reports, unless ``use_cache`` is False (exports then go to a temporary folder).
    ``comm_kernels``: regular expressions of kernel names that are communication, beside the
    taxonomy (:mod:`tracekit.model.taxonomy`); communication is also found from launching host
    ops and dedicated streams, after the cache (:func:`~tracekit.model.classify.classify_held`).
    Raises :class:`~tracekit.errors.TracekitError` when nothing can be analyzed, or when a
    pattern is not a valid regular expression.
    """
    paths = path_list(paths, name="load_run: paths")
    comm_kernels = text_list(comm_kernels, name="load_run: comm_kernels")
    if jobs is not None:  # (a rank is checked where files are matched to ranks)
        number(jobs, name="load_run: jobs", low=1, high=MAX_JOBS, integer=True)
    found = find_inputs(paths, rank=rank, comm_kernels=comm_kernels)
    if found.timelines_only:
        return _timelines_alone(found.timelines, rank=rank, skipped=found.special)
    cache = event_cache(cache_dir, use_cache=use_cache)
    parsed = parse_files(found.files, jobs=jobs or os.cpu_count() or 1, cache=cache, progress=progress)
    traces = {(p.path, i): t for p in parsed for i, t in enumerate(p.traces)}
    claims = [FileClaims(p.path, p.error, tuple(TraceClaim.of(t) for t in p.traces)) for p in parsed]
    resolved = resolve(claims, found.special, rank=rank, ranks=ranks)
    del parsed
    by_rank = {r: traces.pop(key) for key, r in resolved.assigned.items()}
    del traces
    infos = resolved.infos
    held, counters = rank_tables([(i.rank, by_rank.pop(i.rank)) for i in infos], comm_kernels=comm_kernels)
    categories, timeline_skips, timeline_warnings = timelines_beside([i.rank for i in infos], found.timelines)
    counts = collective_counts(held)
    meta = run_meta(resolved, skipped=timeline_skips, counts=counts, warnings=timeline_warnings)
    return Run(
        by_kind=held,
        ranks=meta.ranks,
        skipped=meta.skipped,
        warnings=meta.warnings,
        counters=counters,
        memory_categories=categories,
    )


@dataclass(frozen=True)
class Inputs:
    """What the paths given name: trace files, paths left out, memory timelines."""

    files: list[Path]
    special: list[SkippedFile]
    timelines: list[Path]

    @property
    def timelines_only(self) -> bool:
        """Memory timelines alone (beside tracekit's own outputs, if any): a run without events."""
        return not self.files and bool(self.timelines) and all(is_own_output(s) for s in self.special)


def find_inputs(paths: Iterable[str | Path], *, rank: int | None, comm_kernels: Sequence[str] = ()) -> Inputs:
    """The inputs ``paths`` name, after the checks that need no file read (see :func:`load_run`)."""
    user_kernel_pattern(comm_kernels)  # a bad pattern fails before any file is read
    if rank is not None and not is_rank(rank):
        raise InputError(f"--rank {rank} is not a rank (0 to {MAX_RANK})")
    files, special = discover_files(paths)
    found = Inputs(files=files, special=special, timelines=memory_timelines(paths))
    if found.timelines_only:
        return found
    if not files:
        raise InputError("; ".join(f"{s.path}: {s.reason}" for s in special))
    if rank is not None and len(files) != 1:
        raise InputError(f"--rank applies to a single trace file, not {len(files)}")
    return found


def event_cache(cache_dir: str | Path | None, *, use_cache: bool) -> EventCache | None:
    """The cache of decoded traces at ``cache_dir`` (else the default folder), or None without one."""
    if not use_cache:
        return None
    return EventCache(Path(cache_dir) if cache_dir is not None else default_cache_dir())


def rank_tables(
    traces: list[tuple[int, RankTrace]], *, comm_kernels: Sequence[str] = ()
) -> tuple[ByKind, pl.DataFrame]:
    """The events (classified, held by kind) and the counters of rank traces given in rank
    order, as one run's. ``traces`` is emptied: where nothing else holds the traces, each rank's
    kinds are let go as the run's are made (:meth:`ByKind.ranked`), not held twice."""
    # each rank's events are held by kind in the order of their starts (readers hold them so, the
    # cache keeps them so): in rank order they make the run's order without a sort
    held = [(r, t.held) for r, t in traces]
    counters = pl.concat([empty_counters(), *(_with_rank(_by_time(t.counters), r) for r, t in traces)], rechunk=True)
    del traces[:]
    return classify_held(ByKind.ranked(held), comm_kernels=comm_kernels), counters


def rank_run(traces: list[tuple[RankInfo, RankTrace]], *, comm_kernels: Sequence[str] = ()) -> Run:
    """The run of rank traces given in rank order, each with what is known of its rank
    (:func:`rank_tables`; no file skipped, no warning). ``traces`` is emptied, as there."""
    ranks = tuple(info for info, _ in traces)
    owned = [(info.rank, trace) for info, trace in traces]
    del traces[:]
    held, counters = rank_tables(owned, comm_kernels=comm_kernels)
    return Run(by_kind=held, ranks=ranks, counters=counters)


def run_meta(
    resolved: Resolved,
    *,
    skipped: Sequence[SkippedFile] = (),
    counts: pl.DataFrame,
    warnings: Sequence[InputWarning] = (),
) -> RunMeta:
    """What is known of a run without its events: the ranks ``resolved`` decided, the files it and
    ``skipped`` leave out, its warnings and those of ``counts`` (:func:`collective_counts` of the
    ranks' events)."""
    return RunMeta(
        ranks=tuple(resolved.infos),
        skipped=(*resolved.skipped, *skipped),
        warnings=(
            *resolved.warnings,
            *collective_warnings(resolved.infos, counts),
            *uneven_ranks(resolved.infos, counts),
            *warnings,
        ),
    )


#: A rank's count of steps or collectives off the ranks' median by more than this share of it
#: (and by more than one) is not the same work as its peers'.
UNEVEN_SHARE: Final = 0.1


def uneven_ranks(infos: Sequence[RankInfo], counts: pl.DataFrame) -> list[InputWarning]:
    """The ranks whose step markers or collectives number differently from the other ranks'
    (``counts``: :func:`collective_counts`): a trace cut short, or a rank of other work. The
    collective matching then pairs only what every rank recorded; each such rank is named, with
    its file (``infos``: the ranks' metadata)."""
    sources = {i.rank: i.source for i in infos}
    if counts.height < 2 or "steps" not in counts.columns:
        return []
    counts = counts.with_columns(coll=pl.col("coll_kernels") + pl.col("coll_host")).sort("rank")
    out: list[InputWarning] = []
    for key in ("steps", "coll"):  # a rank of fewer steps has fewer collectives too: said once
        median = float(counts.select(pl.col(key).median()).item() or 0)
        if median == 0:
            continue
        named = {w.rank for w in out}
        off = counts.filter(
            (pl.col(key) - median).abs() > max(1.0, UNEVEN_SHARE * median), ~pl.col("rank").is_in(named)
        )
        out += [
            InputWarning(
                kind="uneven_ranks",
                path=sources.get(int(row["rank"])),
                rank=int(row["rank"]),
                count=int(row[key]),
                key="steps" if key == "steps" else "collectives",
                value=f"{median:g}",
            )
            for row in off.iter_rows(named=True)
        ]
    return sorted(out, key=lambda w: w.rank or 0)


def has_gpu_activity(events: ByKind) -> bool:
    """Whether ``events`` hold any GPU activity (kernels, copies, sets)."""
    return any(k in GPU_ACTIVITY_KINDS for k in events.parts)


def _with_rank(frame: pl.DataFrame, rank: int) -> pl.DataFrame:
    return frame.with_columns(pl.lit(rank, dtype=pl.Int32).alias("rank"))


def _timeline_rank(path: Path, ranks: Sequence[int]) -> int | None:
    """The rank a memory timeline belongs to: from its name, else the only rank there is."""
    named = rank_from_name(path)
    if named is not None:
        return named
    return ranks[0] if len(ranks) == 1 else None


def timelines_beside(
    ranks: Sequence[int], timelines: Sequence[Path]
) -> tuple[pl.DataFrame, list[SkippedFile], list[InputWarning]]:
    """The categorized memory timelines of the ranks analyzed, the files that are none of theirs,
    and what was wrong with the rows of those read (each warning naming its file)."""
    frames = [empty_categories()]
    skipped: list[SkippedFile] = []
    warned: list[InputWarning] = []
    owners: dict[int, Path] = {}
    for path in timelines:
        rank = _timeline_rank(path, ranks)
        if rank is None or rank not in ranks:
            skipped.append(
                SkippedFile(str(path), "a memory timeline of no rank analyzed (name it memory_timeline.rank<N>...)")
            )
            continue
        if rank in owners:
            skipped.append(SkippedFile(str(path), f"a second memory timeline of rank {rank} (first: {owners[rank]})"))
            continue
        try:
            frame, said = read_memory_timeline_checked(path, rank=rank)
        except InputError as exc:
            skipped.append(SkippedFile(str(path), exc.reason))
            continue
        frames.append(frame)
        warned += [dataclasses.replace(w, path=str(path)) for w in said]
        owners[rank] = path
    return pl.concat(frames, how="vertical"), skipped, warned


def _timelines_alone(timelines: Sequence[Path], *, rank: int | None, skipped: Sequence[SkippedFile] = ()) -> Run:
    """A run of memory timelines only (``tracekit analyze x.raw.json.gz``): no events;
    ``skipped``: the files left out (tracekit's own outputs)."""
    if rank is not None and len(timelines) != 1:
        raise InputError(f"--rank applies to a single file, not {len(timelines)}")
    infos: list[RankInfo] = []
    for path in timelines:
        found = rank_for(path, override=rank, alone=len(timelines) == 1)
        if found is None:
            raise InputError("several memory timelines without a rank in their names (memory_timeline.rank<N>...)")
        r, how = found
        if any(i.rank == r for i in infos):
            raise InputError(f"two memory timelines claim rank {r}", path=path)
        infos.append(RankInfo(rank=r, source=str(path), rank_source=how, clock="memory timeline (raw)"))
    infos.sort(key=lambda i: i.rank)
    read = [read_memory_timeline_checked(Path(i.source), rank=i.rank) for i in infos]
    frames = [frame for frame, _ in read]
    said = [dataclasses.replace(w, path=i.source) for i, (_, ws) in zip(infos, read, strict=True) for w in ws]
    return Run(
        events=empty_events(),
        ranks=tuple(infos),
        skipped=tuple(skipped),
        warnings=(InputWarning(kind="memory_only"), *said),
        memory_categories=pl.concat([empty_categories(), *frames], how="vertical"),
    )


def _by_time(counters: pl.DataFrame) -> pl.DataFrame:
    return counters if counters["time_ns"].is_sorted() else counters.sort("time_ns", maintain_order=True)


def collective_counts(held: ByKind) -> pl.DataFrame:
    """Per rank of the events ``held`` (classified): GPU activities, collective kernels, host
    collectives, and the step numbers its step markers hold (``steps``).

    Counted a kind at a time, the columns read alone, and added up: the four columns of every
    event put together were a copy of 54 MB on a 2 GB rank of 5.4M events, its read's highest
    point after the file was decoded (511 MB, the rank held at 492)."""
    columns = ("rank", "kind", "category", "name")
    kinds = held.kinds()
    parts = [held.unordered(columns, [k]) for k in kinds] or [held.unordered(columns)]
    sums = {
        "gpu": pl.col("kind").is_in(GPU_ACTIVITY_KINDS).sum(),
        "coll_kernels": ((pl.col("kind") == "kernel") & (pl.col("category") == "collective")).sum(),
        "coll_host": ((pl.col("kind") != "kernel") & (pl.col("category") == "collective")).sum(),
    }
    # the step markers' names only as text (every event's: 30 MB of strings on a 125 MB rank)
    number = pl.col("name").cast(pl.String).str.extract(r"#(\d+)$").cast(pl.Int64, strict=False)
    markers = [p.filter(pl.col("kind") == "step").select("rank", step=number) for p in parts]
    numbered = [m.drop_nulls("step").unique() for m in markers]
    ranks = pl.col("rank")
    # each kind's sums and the ranks it holds, in one pass over it
    totals = [
        p.select(low=ranks.min(), high=ranks.max(), nulls=ranks.null_count(), rows=pl.len(), **sums) for p in parts
    ]
    done = pl.collect_all([*totals, *numbered])
    counted = pl.concat(done[: len(parts)])
    seen = counted.filter(pl.col("rows") > 0)
    numbers = pl.concat(done[len(parts) :])
    if seen.height and not seen.get_column("nulls").sum() and seen["low"].min() == seen["high"].max():
        # one rank (a shard of one large file): no grouping, whose hashing of every event's rank
        # cost 15 times the counting (7 of 7.5 ms on a 125 MB rank)
        rank = pl.Series("rank", [seen.get_column("low")[0]], dtype=held.schema["rank"])
        steps = pl.Series("steps", [numbers.get_column("step").n_unique()], dtype=pl.UInt32)
        return counted.select(*sums).sum().select(pl.lit(rank), *sums, pl.lit(steps))
    grouped = pl.concat(pl.collect_all([p.group_by("rank").agg(**sums) for p in parts]))
    steps_by_rank = numbers.group_by("rank").agg(steps=pl.len())
    return (
        grouped.group_by("rank")
        .agg(pl.col(c).sum() for c in sums)
        .join(steps_by_rank, on="rank", how="left", nulls_equal=True)
        .with_columns(pl.col("steps").fill_null(0))
    )


def collective_warnings(infos: list[RankInfo], counts: pl.DataFrame) -> list[InputWarning]:
    """A distributed GPU run whose kernels match no collective is a bug to surface.

    Not on a host backend (gloo, mpi: the CPU runs the collectives, the GPU only copies to and
    from it) nor in a group of one rank (NCCL copies locally, on a GPU seen on an H200: one
    ``Memcpy DtoD`` per all-reduce, no kernel). ``counts``: :func:`collective_counts` of the
    ranks' events.
    """
    by_rank = {row["rank"]: row for row in counts.iter_rows(named=True)}
    out = []
    for info in infos:
        row = by_rank.get(info.rank)
        if row is None or row["gpu"] == 0 or row["coll_kernels"] > 0:
            continue
        if info.backend in HOST_BACKENDS or info.world_size == 1:
            continue
        if row["coll_host"] > 0 or (info.world_size or 1) > 1:
            out.append(
                InputWarning(
                    kind="no_comm_kernels", rank=info.rank, world_size=info.world_size, count=int(row["coll_host"])
                )
            )
    return out
