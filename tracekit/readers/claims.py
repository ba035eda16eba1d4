"""Which rank each trace is, and whether the files are one job: decided from what the files claim.

A file's claims (:class:`TraceClaim`: its recorded rank, world size, span, ...) are small, so
the decision can be made where the events are not: :func:`~tracekit.readers.load.load_run`
makes it after reading every file, :mod:`tracekit.pipeline.shards` after mapping them elsewhere.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from tracekit.errors import InputError
from tracekit.model.input_warnings import MISSING_RANGES, InputWarning
from tracekit.model.run import ProcessGroup, RankFound, RankInfo, SkippedFile
from tracekit.readers.plausible import Dropped
from tracekit.readers.ranks import rank_from_name
from tracekit.readers.trace import RankTrace

if TYPE_CHECKING:
    from collections.abc import Sequence
    from collections.abc import Set as AbstractSet
    from pathlib import Path

    from tracekit.model.by_kind import ByKind


#: Nothing decided the rank (yet).
NOTHING: Final = RankFound("none")
#: Traces recorded further apart than this are not one job.
SAME_JOB_MAX_GAP_NS: Final = 10 * 60 * 1_000_000_000
#: The ranks of one run record their events on one scale: a rank whose events last, on median,
#: over this many times longer or shorter than the other ranks' is in another unit (ns read as us
#: is 1000x; the ranks of real runs, even of different stages, stay within 10x).
SCALE_FACTOR: Final = 100.0
#: Ranks' recordings further apart than this (and than the longest of them), with no time in
#: common, are not one run (:func:`_other_runs`).
SAME_RUN_SLACK_NS: Final = 1_000_000_000
#: The metadata fields of a rank trace (a claim copies those it has).
_TRACE_FIELDS: Final = frozenset(f.name for f in fields(RankTrace))


@dataclass(frozen=True)
class TraceClaim:
    """A decoded rank trace without its events: what deciding ranks and checking the run read."""

    path: str
    #: the rank the file records, and how it was found there
    rank: int | None
    rank_source: RankFound
    world_size: int | None
    backend: str | None
    devices: tuple[str, ...]
    clock: str
    schema_version: str | None
    process_groups: tuple[ProcessGroup, ...]
    device_memory: tuple[tuple[int, int], ...]
    host: str | None
    warnings: tuple[InputWarning, ...]
    #: an event with a duration, or memory counters: something to analyze
    has_content: bool
    #: the first start and last end of its events (None without events)
    span: tuple[int, int] | None
    #: the median length of its kernels, else of its events with a length (None without any):
    #: the scale of its times, which the ranks of one run share
    typical_ns: int | None = None

    @classmethod
    def of(cls, trace: RankTrace) -> TraceClaim:
        """What ``trace`` claims."""
        events = trace.held
        span = None
        if events.height:
            first, last = (
                events.unordered(["start_ns", "end_ns"])
                .select(pl.col("start_ns").min(), pl.col("end_ns").max())
                .collect()
                .row(0)
            )
            span = (int(first), int(last))
        said = {f.name: getattr(trace, f.name) for f in fields(cls) if f.name in _TRACE_FIELDS}  # what the file said
        return cls(**said, has_content=_has_content(trace), span=span, typical_ns=_typical(events))

    def info(self, rank: int, how: RankFound) -> RankInfo:
        """The rank's metadata, once its rank is decided."""
        decided: dict[str, Any] = {"rank": rank, "source": self.path, "rank_source": how}
        return RankInfo(**decided, **{f.name: getattr(self, f.name) for f in fields(RankInfo) if f.name not in decided})


@dataclass(frozen=True)
class FileClaims:
    """A file as read: the claims of its rank traces, or why it could not be read."""

    path: str
    error: str | None
    traces: tuple[TraceClaim, ...] = ()


#: A rank trace: its file and its position among the file's traces.
TraceKey = tuple[str, int]


@dataclass(frozen=True)
class Resolved:
    """The ranks of a run decided from what its files claim."""

    #: the ranks analyzed (after ``--ranks``), in rank order
    infos: list[RankInfo]
    #: the rank of each trace analyzed
    assigned: dict[TraceKey, int]
    skipped: list[SkippedFile]
    #: the files' own warnings (once per file) and the ranks outside or missing from the world
    warnings: list[InputWarning]


def resolve(
    files: Sequence[FileClaims],
    special: Sequence[SkippedFile],
    *,
    rank: int | None,
    ranks: AbstractSet[int] | None,
) -> Resolved:
    """Decide each trace's rank from what ``files`` (in the order given) claim; check that they
    are one job. ``special``: the paths discovery left out; ``rank``, ``ranks``: as :func:`load_run`.

    Raises :class:`~tracekit.errors.InputError` when nothing can be analyzed, for two files
    claiming one rank, for files of different jobs, and for ``rank`` given to several ranks.
    """
    skipped = list(special) + [SkippedFile(f.path, f.error) for f in files if f.error is not None]
    claims = {(f.path, i): c for f in files for i, c in enumerate(f.traces)}
    good = {key: c for key, c in claims.items() if c.has_content}
    skipped += [SkippedFile(c.path, _no_content(c)) for c in claims.values() if not c.has_content]
    if rank is not None and len(good) > 1:
        raise InputError(
            f"--rank applies to a file holding one rank; this one holds {len(good)} processes with GPU work",
            path=next(iter(good.values())).path,
        )
    if not good:
        detail = "; ".join(f"{s.path}: {s.reason}" for s in skipped)
        raise InputError(
            f"no readable trace ({detail})" if len(skipped) > 1 else skipped[0].reason,
            path=None if len(skipped) > 1 else skipped[0].path,
        )
    infos, assigned, rank_skips = _assign_ranks(good, override=rank)
    skipped.extend(rank_skips)
    if not infos:
        raise InputError("; ".join(f"{s.path}: {s.reason}" for s in skipped))
    _check_one_job(infos)
    others = _other_runs(infos, {r: good[key].span for key, r in assigned.items()})
    others |= _other_scale(
        [i for i in infos if i.rank not in others], {r: good[key].typical_ns for key, r in assigned.items()}
    )
    if others:
        skipped.extend(others.values())
        infos = [i for i in infos if i.rank not in others]
        assigned = {key: r for key, r in assigned.items() if r not in others}
    if ranks is not None:
        infos = [i for i in infos if i.rank in ranks]
        if not infos:
            raise InputError("--ranks selects none of the ranks present")
        assigned = {key: r for key, r in assigned.items() if r in ranks}
    infos.sort(key=lambda i: i.rank)
    warnings = list(  # once per file
        dict.fromkeys(dataclasses.replace(w, path=c.path) for c in good.values() for w in c.warnings)
    )
    return Resolved(
        infos=infos,
        assigned=assigned,
        skipped=skipped,
        warnings=warnings + _rank_warnings(infos, selected=ranks is not None),
    )


def _no_content(claim: TraceClaim) -> str:
    """Why a trace with nothing to analyze is skipped: the events its reader dropped for times
    that cannot be right, where it dropped any, else that none has a duration."""
    dropped = next((w for w in claim.warnings if w.kind == "dropped_events"), None)
    if dropped is not None:
        return Dropped.of(dropped).nothing_left()
    return "no events with a duration: nothing to analyze (was the profiler's schedule ever active?)"


def _typical(events: ByKind) -> int | None:
    """The median length of ``events``' kernels, else of its events with a length."""
    if events.height == 0:
        return None
    length = (pl.col("end_ns") - pl.col("start_ns")).alias("length")
    lasting = pl.col("length") > 0
    # the kernels' first: every event's length (7.2M on a 2 GB rank) is read only where there is no kernel
    value = (
        events.unordered([length], kinds=["kernel"]).filter(lasting).select(pl.col("length").median()).collect().item()
    )
    if value is None:
        # every kind's but the instants' (and the events' of no kind, as ``kind != "instant"`` left them out)
        kinds = [k for k in events.parts if k not in ("instant", "")]
        value = (
            events.unordered([length], kinds=kinds).filter(lasting).select(pl.col("length").median()).collect().item()
        )
    return None if value is None else int(value)


def _other_scale(infos: list[RankInfo], typical: dict[int, int | None]) -> dict[int, SkippedFile]:
    """The ranks whose events last orders of magnitude longer or shorter than the other ranks'
    (their median lengths over :data:`SCALE_FACTOR` apart): a file whose times are in another
    unit. Judged among three ranks or more (of two, nothing says which is right)."""
    known = {i.rank: (t, i.source) for i in infos if (t := typical.get(i.rank)) is not None and t > 0}
    if len(known) < 3:
        return {}
    values = sorted(t for t, _ in known.values())
    middle = values[len(values) // 2]
    out = {}
    for rank, (value, source) in known.items():
        ratio = value / middle
        if ratio > SCALE_FACTOR or ratio < 1 / SCALE_FACTOR:
            out[rank] = SkippedFile(
                source,
                f"its events last {f'{ratio:,.0f}x' if ratio > 1 else f'1/{1 / ratio:,.0f}'} as long as the other "
                f"ranks' on median ({value / 1e6:.3g} ms against "
                f"{middle / 1e6:.3g} ms): its times are probably in another unit; left out",
            )
    return out


def _has_content(trace: RankTrace) -> bool:
    """Whether a trace holds anything to analyze: an event with a duration, or memory counters."""
    return bool(trace.counters.height) or any(k not in ("instant", "") for k in trace.held.parts)


def _assign_ranks(
    good: dict[TraceKey, TraceClaim], *, override: int | None
) -> tuple[list[RankInfo], dict[TraceKey, int], list[SkippedFile]]:
    """Each trace's rank and info, in the order of ``good``; the traces no rank could be found for."""
    infos: list[RankInfo] = []
    assigned: dict[TraceKey, int] = {}
    owners: dict[int, str] = {}
    skipped: list[SkippedFile] = []
    for key, claim in good.items():
        found = rank_for(claim.path, override=override, recorded=(claim.rank, claim.rank_source), alone=len(good) == 1)
        if found is None:
            skipped.append(
                SkippedFile(
                    claim.path,
                    "no rank recorded in the file (Kineto distributedInfo, nsys RANK env) or in "
                    "its name (rank3, rank-3, worker3); rename it, or analyze it alone with --rank N",
                )
            )
            continue
        rank, how = found
        if rank in owners:
            raise InputError(f"two files claim rank {rank}: {owners[rank]} and {claim.path}")
        owners[rank] = claim.path
        assigned[key] = rank
        infos.append(claim.info(rank, how))
    return infos, assigned, skipped


def rank_for(
    path: str | Path, *, override: int | None, recorded: tuple[int | None, RankFound] = (None, NOTHING), alone: bool
) -> tuple[int, RankFound] | None:
    """A file's rank and how it was decided: --rank, what the file records, its name, or 0 for a
    single file; None when nothing decides it."""
    if override is not None:
        return override, RankFound("override")
    if recorded[0] is not None:
        return recorded[0], recorded[1]
    if (named := rank_from_name(path)) is not None:
        return named, RankFound("file_name")
    if alone:
        return 0, RankFound("assumed_zero")
    return None


def _check_one_job(infos: list[RankInfo]) -> None:
    sizes = {i.world_size for i in infos if i.world_size is not None}
    if len(sizes) > 1:
        by_size = {i.world_size: i.source for i in infos if i.world_size is not None}
        listed = ", ".join(f"{path} (world size {size})" for size, path in sorted(by_size.items()))
        raise InputError(f"files of different jobs: {listed}")


def _other_runs(infos: list[RankInfo], spans: dict[int, tuple[int, int] | None]) -> dict[int, SkippedFile]:
    """The ranks recorded apart from the others, with no time in common: a file of another run.

    The ranks' recordings are grouped where they overlap or lie within a slack of each other
    (the larger of :data:`SAME_RUN_SLACK_NS` and the longest recording: clocks of different hosts
    differ by far less). One group: one run. Otherwise the largest group is the run and each
    rank of the others is left out (named, with how far apart it was recorded); with no single
    largest group (two files, recorded apart) nothing says which is the run: an
    :class:`InputError` naming two of them.
    """
    known = sorted((span[0], span[1], i.rank, i.source) for i in infos if (span := spans[i.rank]) is not None)
    if len(known) < 2:
        return {}
    slack = max(SAME_RUN_SLACK_NS, *(end - start for start, end, _, _ in known))
    groups: list[list[tuple[int, int, int, str]]] = [[known[0]]]
    reach = known[0][1]
    for item in known[1:]:
        if item[0] - reach > slack:
            groups.append([])
        groups[-1].append(item)
        reach = max(reach, item[1])
    if len(groups) == 1:
        return {}
    largest = max(groups, key=len)
    start, last = min(r[0] for r in largest), max(r[1] for r in largest)
    if sum(len(g) == len(largest) for g in groups) > 1:
        a, b = groups[0][-1], groups[1][0]
        gap = b[0] - max(r[1] for r in groups[0])
        if gap > SAME_JOB_MAX_GAP_NS:
            raise InputError(f"files of different jobs: {a[3]} and {b[3]} were recorded {gap / 3.6e12:.1f} hours apart")
        raise InputError(
            f"files of different runs: {a[3]} and {b[3]} were recorded {_apart(gap)} apart, with no time in "
            "common; analyze each run's files apart"
        )
    out = {}
    for group in groups:
        if group is largest:
            continue
        for begin, end, rank, source in group:
            before = end < start
            gap = start - end if before else begin - last
            out[rank] = SkippedFile(
                source,
                f"recorded {_apart(gap)} {'before' if before else 'after'} the other {len(largest)} ranks, with no "
                "time in common: a file of another run of this job? left out",
            )
    return out


def _apart(ns: int) -> str:
    """A gap in words: ``61.2 s``, ``4.0 min``, ``2.5 hours``."""
    if ns >= 3600e9:
        return f"{ns / 3.6e12:.1f} hours"
    if ns >= 120e9:
        return f"{ns / 60e9:.1f} min"
    return f"{ns / 1e9:.1f} s"


def _rank_warnings(infos: list[RankInfo], *, selected: bool) -> list[InputWarning]:
    """Ranks outside the world their files claim, and (unless ``selected``) ranks missing from it."""
    out = [
        InputWarning(kind="rank_outside_world", path=i.source, rank=i.rank, world_size=i.world_size)
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
            kept = tuple(gaps[:MISSING_RANGES])
            more = len(gaps) - len(kept)
            out.append(InputWarning(kind="missing_ranks", count=missing, world_size=world, ranges=kept, more=more))
    return out
