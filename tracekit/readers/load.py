"""Files on disk -> one :class:`~tracekit.model.Run`: discovery, parallel parsing, ranks.

One unreadable file does not stop the others: it is skipped and named in the run. Input
that cannot be analyzed as one job (two files claiming one rank, files of different jobs)
is an error naming the files.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.errors import InputError
from tracekit.model.classify import classify_run
from tracekit.model.comm_evidence import user_kernel_pattern
from tracekit.model.counters import empty_categories, empty_counters
from tracekit.model.run import RankInfo, Run, SkippedFile
from tracekit.model.schema import GPU_ACTIVITY_KINDS, empty_events
from tracekit.readers.cache import EventCache, default_cache_dir
from tracekit.readers.discover import discover_files, memory_timelines
from tracekit.readers.formats import read_file
from tracekit.readers.memory_timeline import read_memory_timeline
from tracekit.readers.parse import ProgressCallback, parse_files
from tracekit.readers.ranks import MAX_RANK, is_rank, rank_from_name

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from tracekit.readers.trace import RankTrace

__all__ = ["ProgressCallback", "load_run", "read_file"]

#: Traces recorded further apart than this are not one job.
SAME_JOB_MAX_GAP_NS: Final = 10 * 60 * 1_000_000_000


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
    record one; ``jobs`` is the number of parsing processes (default: the number of cores);
    ``progress`` is called after each file with (file, files done, files in all). Decoded
    events are cached per file in ``cache_dir`` (default: ``$TRACEKIT_CACHE_DIR``, else
    ``~/.cache/tracekit``; see :mod:`tracekit.readers.cache`), and so are the SQLite exports of
    ``.nsys-rep`` reports, unless ``use_cache`` is False (exports then go to a temporary folder).
    ``comm_kernels``: regular expressions of kernel names that are communication, beside the
    taxonomy (:mod:`tracekit.model.taxonomy`); communication is also found from launching host
    ops and dedicated streams, after the cache (:func:`~tracekit.model.classify.classify_run`).
    Raises :class:`~tracekit.errors.TracekitError` when nothing can be analyzed, or when a
    pattern is not a valid regular expression.
    """
    user_kernel_pattern(comm_kernels)  # a bad pattern fails before any file is read
    if rank is not None and not is_rank(rank):
        raise InputError(f"--rank {rank} is not a rank (0 to {MAX_RANK})")
    files, special = discover_files(paths)
    timelines = memory_timelines(paths)
    if not files and timelines and not special:
        return _timelines_alone(timelines, rank=rank)
    if not files:
        raise InputError("; ".join(f"{s.path}: {s.reason}" for s in special))
    if rank is not None and len(files) != 1:
        raise InputError(f"--rank applies to a single trace file, not {len(files)}")
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache = EventCache(root) if use_cache else None
    parsed = parse_files(files, jobs=jobs or os.cpu_count() or 1, cache=cache, progress=progress)
    skipped = special + [SkippedFile(p.path, p.error) for p in parsed if p.error is not None]
    traces = [t for p in parsed for t in p.traces]
    has_content = [_has_content(t) for t in traces]
    good = [t for t, keep in zip(traces, has_content, strict=True) if keep]
    skipped += [
        SkippedFile(t.path, "no events with a duration: nothing to analyze (was the profiler's schedule ever active?)")
        for t, keep in zip(traces, has_content, strict=True)
        if not keep
    ]
    if rank is not None and len(good) > 1:
        raise InputError(
            f"--rank applies to a file holding one rank; this one holds {len(good)} processes with GPU work",
            path=good[0].path,
        )
    if not good:
        detail = "; ".join(f"{s.path}: {s.reason}" for s in skipped)
        raise InputError(
            f"no readable trace ({detail})" if len(skipped) > 1 else skipped[0].reason,
            path=None if len(skipped) > 1 else skipped[0].path,
        )
    infos, frames, counters, rank_skips = _assign_ranks(good, override=rank)
    skipped.extend(rank_skips)
    if not infos:
        raise InputError("; ".join(f"{s.path}: {s.reason}" for s in skipped))
    _check_one_job(infos, frames)
    if ranks is not None:
        infos = [i for i in infos if i.rank in ranks]
        if not infos:
            raise InputError("--ranks selects none of the ranks present")
    infos.sort(key=lambda i: i.rank)
    # each rank's frame is sorted by start (readers sort, the cache keeps the order): in rank
    # order they make the run's order without a sort; one chunk, since polars would otherwise
    # re-chunk the whole frame again in every query the analyses make
    events = pl.concat([_by_start(frames[i.rank]) for i in infos], how="vertical", rechunk=True)
    warnings = list(dict.fromkeys(f"{t.path}: {w}" for t in good for w in t.warnings))  # once per file
    del frames, good, parsed
    events = classify_run(events, comm_kernels=comm_kernels)
    warnings += _rank_warnings(infos, selected=ranks is not None)
    categories, timeline_skips = _timelines_beside([i.rank for i in infos], timelines)
    return Run(
        events=events,
        ranks=tuple(infos),
        skipped=tuple(skipped + timeline_skips),
        warnings=tuple(warnings + _collective_warnings(infos, events)),
        counters=pl.concat([empty_counters(), *(_by_time(counters[i.rank]) for i in infos)], rechunk=True),
        memory_categories=categories,
    )


def _timeline_rank(path: Path, ranks: Sequence[int]) -> int | None:
    """The rank a memory timeline belongs to: from its name, else the only rank there is."""
    named = rank_from_name(path)
    if named is not None:
        return named
    return ranks[0] if len(ranks) == 1 else None


def _timelines_beside(ranks: Sequence[int], timelines: Sequence[Path]) -> tuple[pl.DataFrame, list[SkippedFile]]:
    """The categorized memory timelines of the ranks analyzed, and the files that are none of theirs."""
    frames = [empty_categories()]
    skipped: list[SkippedFile] = []
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
            frames.append(read_memory_timeline(path, rank=rank))
        except InputError as exc:
            skipped.append(SkippedFile(str(path), exc.reason))
            continue
        owners[rank] = path
    return pl.concat(frames, how="vertical"), skipped


def _timelines_alone(timelines: Sequence[Path], *, rank: int | None) -> Run:
    """A run of memory timelines only (``tracekit analyze x.raw.json.gz``): no events."""
    if rank is not None and len(timelines) != 1:
        raise InputError(f"--rank applies to a single file, not {len(timelines)}")
    infos: list[RankInfo] = []
    for path in timelines:
        found = _rank_for(path, override=rank, alone=len(timelines) == 1)
        if found is None:
            raise InputError("several memory timelines without a rank in their names (memory_timeline.rank<N>...)")
        r, how = found
        if any(i.rank == r for i in infos):
            raise InputError(f"two memory timelines claim rank {r}", path=path)
        infos.append(RankInfo(rank=r, source=str(path), rank_source=how, clock="memory timeline (raw)"))
    infos.sort(key=lambda i: i.rank)
    frames = [read_memory_timeline(Path(i.source), rank=i.rank) for i in infos]
    return Run(
        events=empty_events(),
        ranks=tuple(infos),
        warnings=("memory timelines only: no trace events, so no time breakdown or verdict; memory is reported",),
        memory_categories=pl.concat([empty_categories(), *frames], how="vertical"),
    )


def _has_content(trace: RankTrace) -> bool:
    """Whether a trace holds anything to analyze: an event with a duration, or memory counters."""
    return bool(trace.counters.height) or bool(trace.events.select((pl.col("kind") != "instant").any()).item())


def _by_start(events: pl.DataFrame) -> pl.DataFrame:
    return events if events["start_ns"].is_sorted() else events.sort("start_ns")


def _by_time(counters: pl.DataFrame) -> pl.DataFrame:
    return counters if counters["time_ns"].is_sorted() else counters.sort("time_ns", maintain_order=True)


def _assign_ranks(
    traces: list[RankTrace], *, override: int | None
) -> tuple[list[RankInfo], dict[int, pl.DataFrame], dict[int, pl.DataFrame], list[SkippedFile]]:
    """Each trace's rank: its info, and its events and counters with the ``rank`` column set."""
    infos: list[RankInfo] = []
    frames: dict[int, pl.DataFrame] = {}
    counters: dict[int, pl.DataFrame] = {}
    owners: dict[int, str] = {}
    skipped: list[SkippedFile] = []
    for trace in traces:
        found = _rank_for(
            trace.path, override=override, recorded=(trace.rank, trace.rank_source), alone=len(traces) == 1
        )
        if found is not None:
            rank, how = found
        else:
            skipped.append(
                SkippedFile(
                    trace.path,
                    "no rank recorded in the file (Kineto distributedInfo, nsys RANK env) or in "
                    "its name (rank3, rank-3, worker3); rename it, or analyze it alone with --rank N",
                )
            )
            continue
        if rank in owners:
            raise InputError(f"two files claim rank {rank}: {owners[rank]} and {trace.path}")
        owners[rank] = trace.path
        frames[rank] = trace.events.with_columns(pl.lit(rank, dtype=pl.Int32).alias("rank"))
        counters[rank] = trace.counters.with_columns(pl.lit(rank, dtype=pl.Int32).alias("rank"))
        infos.append(
            RankInfo(
                rank=rank,
                source=trace.path,
                world_size=trace.world_size,
                backend=trace.backend,
                devices=trace.devices,
                rank_source=how,
                clock=trace.clock,
                schema_version=trace.schema_version,
                event_count=trace.events.height,
                process_groups=trace.process_groups,
                device_memory=trace.device_memory,
            )
        )
    return infos, frames, counters, skipped


def _rank_for(
    path: str | Path, *, override: int | None, recorded: tuple[int | None, str] = (None, ""), alone: bool
) -> tuple[int, str] | None:
    """A file's rank and how it was decided: --rank, what the file records, its name, or 0 for a
    single file; None when nothing decides it."""
    if override is not None:
        return override, "--rank"
    if recorded[0] is not None:
        return recorded[0], recorded[1]
    if (named := rank_from_name(path)) is not None:
        return named, "file name"
    if alone:
        return 0, "assumed 0 (a single file without a rank; set it with --rank)"
    return None


def _check_one_job(infos: list[RankInfo], frames: dict[int, pl.DataFrame]) -> None:
    sizes = {i.world_size for i in infos if i.world_size is not None}
    if len(sizes) > 1:
        by_size = {i.world_size: i.source for i in infos if i.world_size is not None}
        listed = ", ".join(f"{path} (world size {size})" for size, path in sorted(by_size.items()))
        raise InputError(f"files of different jobs: {listed}")
    spans: list[tuple[int, int, str]] = [
        (int(df["start_ns"].min()), int(df["end_ns"].max()), i.source)  # type: ignore[arg-type]
        for i in infos
        if (df := frames[i.rank]).height
    ]
    if len(spans) > 1:
        first = min(spans, key=lambda s: s[1])
        last = max(spans, key=lambda s: s[0])
        gap = last[0] - first[1]
        if gap > SAME_JOB_MAX_GAP_NS:
            raise InputError(
                f"files of different jobs: {first[2]} and {last[2]} were recorded {gap / 3.6e12:.1f} hours apart"
            )


def _rank_warnings(infos: list[RankInfo], *, selected: bool) -> list[str]:
    """Ranks outside the world their files claim, and (unless ``selected``) ranks missing from it."""
    out = [
        f"{i.source}: rank {i.rank} is outside the world of {i.world_size} ranks its file records"
        for i in infos
        if i.world_size is not None and i.rank >= i.world_size
    ]
    sizes = [i.world_size for i in infos if i.world_size is not None]
    if sizes and not selected:
        world = max(sizes)
        present = sorted({i.rank for i in infos if i.rank < world})
        gaps = [(a + 1, b - 1) for a, b in itertools.pairwise([-1, *present, world]) if b - a > 1]
        missing = sum(b - a + 1 for a, b in gaps)
        if missing:
            shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in gaps[:12])
            shown += f" and {len(gaps) - 12} more ranges" if len(gaps) > 12 else ""
            out.append(
                f"{missing} of the {world} ranks of this world have no trace here "
                f"({'rank' if missing == 1 else 'ranks'} {shown}): "
                "cross-rank figures cover only the ranks present"
            )
    return out


def _collective_warnings(infos: list[RankInfo], events: pl.DataFrame) -> list[str]:
    """A distributed GPU run whose kernels match no collective is a bug to surface."""
    per_rank = events.group_by("rank").agg(
        gpu=pl.col("kind").is_in(GPU_ACTIVITY_KINDS).sum(),
        coll_kernels=((pl.col("kind") == "kernel") & (pl.col("category") == "collective")).sum(),
        coll_host=((pl.col("kind") != "kernel") & (pl.col("category") == "collective")).sum(),
    )
    counts = {row["rank"]: row for row in per_rank.iter_rows(named=True)}
    out = []
    for info in infos:
        row = counts.get(info.rank)
        if row is None or row["gpu"] == 0 or row["coll_kernels"] > 0:
            continue
        if row["coll_host"] > 0 or (info.world_size or 1) > 1:
            out.append(
                f"rank {info.rank}: distributed run (world size {info.world_size}, "
                f"{row['coll_host']} host-side collective ops) but no GPU kernel was recognized as "
                "communication; communication time will read as zero (name its kernels with --comm-kernel REGEX)"
            )
    return out
