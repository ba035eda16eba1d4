"""A ``Run``: every rank's events and what is known about each rank."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Final, Literal

import polars as pl

from tracekit.model.by_kind import ByKind
from tracekit.model.counters import empty_categories, empty_counters
from tracekit.model.schema import GPU_ACTIVITY_KINDS, empty_events

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from tracekit.model.input_warnings import InputWarning


#: Events per slice of :meth:`Run.select_slices`: a few megabytes per column.
SLICE_ROWS: Final = 1 << 20


def row_slices(df: pl.DataFrame, rows: int = SLICE_ROWS) -> Iterator[pl.DataFrame]:
    """``df`` in consecutive slices of ``rows`` rows (views, no copy); at least one, empty
    when ``df`` is."""
    for offset in range(0, max(df.height, 1), rows):
        yield df.slice(offset, rows)


@dataclass(frozen=True)
class ProcessGroup:
    """A process group as a trace lists it (Kineto ``distributedInfo.pg_config``)."""

    name: str
    #: the global ranks of its members
    ranks: tuple[int, ...]
    description: str = ""


#: How a trace's rank was decided (the values of :class:`tracekit.results.vocab.RankSource` but
#: ``text``, which only an older analysis holds): what the file records (Kineto
#: ``distributedInfo``, a rank variable or argument of an nsys export), its name, ``--rank``, the
#: order of the processes of one file, assumed 0 for a single file, or nothing yet.
RankSourceName = Literal[
    "distributed_info", "env", "argument", "process_order", "file_name", "override", "assumed_zero", "none"
]


@dataclass(frozen=True)
class RankFound:
    """How a trace's rank was decided, and what decided it: ``key`` the environment variable or
    command-line argument that holds it; ``processes`` and ``pid`` for the process order of one file."""

    kind: RankSourceName
    key: str | None = None
    processes: int | None = None
    pid: int | None = None


#: The rank a Kineto trace records in ``distributedInfo``.
DISTRIBUTED_INFO: Final = RankFound("distributed_info")


@dataclass(frozen=True)
class RankInfo:
    """What a trace file says about the rank that wrote it."""

    rank: int
    source: str
    world_size: int | None = None
    backend: str | None = None
    devices: tuple[str, ...] = ()
    #: How the rank was decided.
    rank_source: RankFound = DISTRIBUTED_INFO
    #: The format and clock of the file, e.g. "kineto (host us)".
    clock: str = ""
    schema_version: str | None = None
    #: the process groups the rank belongs to, when the trace lists them
    process_groups: tuple[ProcessGroup, ...] = ()
    #: (device id, total bytes) of each device the trace describes
    device_memory: tuple[tuple[int, int], ...] = ()
    #: the host the trace was recorded on, when it records one (Kineto ``host_name``, the
    #: ``HOST_PID.TIME.pt.trace.json`` name torch's trace handler gives, nsys ``Hostname``):
    #: ranks of one host share one clock
    host: str | None = None


@dataclass(frozen=True)
class SkippedFile:
    """A file that was not analyzed, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class RunMeta:
    """What is known about a run without its events: each rank, the files skipped, the warnings.

    All the cross-rank reduce reads of a run besides the per-rank summaries, so that the run's
    events never need to be in one place (:mod:`tracekit.pipeline.shards`).
    """

    ranks: tuple[RankInfo, ...]
    skipped: tuple[SkippedFile, ...] = ()
    warnings: tuple[InputWarning, ...] = ()

    @property
    def rank_ids(self) -> list[int]:
        """The ranks present, ascending."""
        return sorted(r.rank for r in self.ranks)

    @property
    def world_size(self) -> int | None:
        """The world size the traces claim (the largest claimed), or None."""
        sizes = [r.world_size for r in self.ranks if r.world_size]
        return max(sizes) if sizes else None

    @property
    def solitary_ranks(self) -> list[int]:
        """The ranks whose trace records a world of one (``world_size`` 1), ascending: their
        collectives have no peer to exchange with or to wait for."""
        return sorted(r.rank for r in self.ranks if r.world_size == 1)

    @property
    def backend(self) -> str | None:
        """The distributed backend, when the traces record it."""
        names = sorted({r.backend for r in self.ranks if r.backend})
        return ",".join(names) if names else None

    @property
    def devices(self) -> list[str]:
        """Distinct device names over all ranks."""
        return sorted({d for r in self.ranks for d in r.devices})


@dataclass(frozen=True, init=False)
class Run:
    """Every rank's events, counters and per-rank metadata.

    The events follow :data:`tracekit.model.schema.SCHEMA` and are in the run's order, by rank
    and start; they are held a kind at a time (:class:`~tracekit.model.by_kind.ByKind`) and read
    by kind (:meth:`select`); :attr:`events` makes them one frame. ``counters`` (memory over
    time) follows :data:`tracekit.model.counters.COUNTER_SCHEMA` and is sorted by rank and
    time; it has no rows when the traces recorded none.
    """

    by_kind: ByKind
    ranks: tuple[RankInfo, ...]
    skipped: tuple[SkippedFile, ...] = ()
    warnings: tuple[InputWarning, ...] = field(default=())
    counters: pl.DataFrame = field(default_factory=empty_counters)
    #: the categorized memory timeline (:data:`tracekit.model.counters.CATEGORY_SCHEMA`), when a
    #: ``export_memory_timeline`` file came with the traces or alone
    memory_categories: pl.DataFrame = field(default_factory=empty_categories)

    def __init__(
        self,
        events: pl.DataFrame | None = None,
        *,
        ranks: tuple[RankInfo, ...] = (),
        skipped: tuple[SkippedFile, ...] = (),
        warnings: tuple[InputWarning, ...] = (),
        counters: pl.DataFrame | None = None,
        memory_categories: pl.DataFrame | None = None,
        by_kind: ByKind | None = None,
    ) -> None:
        """``events``: a frame in the run's order (held a kind at a time from here on), or
        ``by_kind``: the events already held so."""
        if events is not None:
            by_kind = ByKind.of(events)
        elif by_kind is None:
            by_kind = ByKind.of(empty_events())
        object.__setattr__(self, "by_kind", by_kind)
        object.__setattr__(self, "ranks", ranks)
        object.__setattr__(self, "skipped", skipped)
        object.__setattr__(self, "warnings", warnings)
        object.__setattr__(self, "counters", empty_counters() if counters is None else counters)
        object.__setattr__(
            self, "memory_categories", empty_categories() if memory_categories is None else memory_categories
        )

    @property
    def events(self) -> pl.DataFrame:
        """Every event in one frame, in the run's order: a copy of every column (the analyses
        read by kind, :meth:`select`)."""
        return self.by_kind.frame()

    @property
    def height(self) -> int:
        """How many events the run holds."""
        return self.by_kind.height

    def unordered(self, *columns: str | pl.Expr, kinds: Sequence[str] | None = None) -> pl.LazyFrame:
        """The ``columns`` (row by row) of every event (of these ``kinds``, if given), not in
        the run's order: for sums, counts and extremes (:meth:`ByKind.unordered`)."""
        return self.by_kind.unordered(columns, kinds)

    @property
    def meta(self) -> RunMeta:
        """The run without its events: ranks, skipped files, warnings."""
        return RunMeta(ranks=self.ranks, skipped=self.skipped, warnings=self.warnings)

    @property
    def rank_ids(self) -> list[int]:
        """The ranks present, ascending."""
        return self.meta.rank_ids

    @property
    def world_size(self) -> int | None:
        """The world size the traces claim (the largest claimed), or None."""
        return self.meta.world_size

    @property
    def solitary_ranks(self) -> list[int]:
        """The ranks alone in their world (:attr:`RunMeta.solitary_ranks`)."""
        return self.meta.solitary_ranks

    @property
    def backend(self) -> str | None:
        """The distributed backend, when the traces record it."""
        return self.meta.backend

    @property
    def devices(self) -> list[str]:
        """Distinct device names over all ranks."""
        return self.meta.devices

    @property
    def has_gpu(self) -> bool:
        """Whether any rank recorded GPU activity (kernels, copies, sets)."""
        return any(k in self.by_kind.kinds() for k in GPU_ACTIVITY_KINDS)

    @cached_property
    def names(self) -> pl.Series:
        """Every distinct event name (strings), for matching patterns once per name."""
        return self.by_kind.names()

    def names_matching(self, pattern: str) -> pl.Series:
        """The distinct event names that match the regular expression ``pattern`` (each name is
        tested once, however many events carry it)."""
        matching: pl.Series = self.names.filter(self.names.str.contains(pattern))
        return matching

    def select(
        self,
        kinds: Sequence[str],
        *columns: str | pl.Expr,
        where: pl.Expr | None = None,
        name: str | None = None,
    ) -> pl.DataFrame:
        """The ``columns`` of the events of these ``kinds``, in event order (rank, start).

        ``where``: a further condition; ``name``: a regular expression the name must match,
        tested once per distinct name rather than once per event. Only the kinds asked for are
        read, and only the columns asked for copied, which on millions of events is most of the
        cost of a filter (one kind with no condition: its columns, no copy).
        """
        conditions = [] if where is None else [where]
        if name is not None:
            conditions.append(pl.col("name").is_in(self.names_matching(name).implode()))
        return self.by_kind.select(kinds, columns, conditions)

    def select_slices(
        self,
        kinds: Sequence[str],
        *columns: str | pl.Expr,
        rows: int = SLICE_ROWS,
        within: tuple[int, int] | None = None,
        kept: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
    ) -> Iterator[pl.DataFrame]:
        """:meth:`select` of consecutive slices of ``rows`` events, in event order (at least
        one, empty when there are no events): a caller that keeps a few of millions of events
        holds one slice of them at a time, not all. ``within``: the slices holding no event that
        reaches into this stretch (lo, hi) are left unread (a caller reading a piece of the time
        reads the slices of that time); ``kept``: a filter of rows that keeps each row or not
        whatever the others (in their order, with their columns), applied to each kind's events
        of a slice before the kinds are put in order (:meth:`ByKind.slices`)."""
        return self.by_kind.slices(kinds, columns, rows, within, kept)

    def only(self, ranks: Sequence[int]) -> Run:
        """The same run restricted to ``ranks`` (events, counters and metadata)."""
        keep = list(set(ranks))
        return Run(
            by_kind=self.by_kind.only(pl.col("rank").is_in(keep)),
            ranks=tuple(r for r in self.ranks if r.rank in keep),
            skipped=self.skipped,
            warnings=self.warnings,
            counters=self.counters.filter(pl.col("rank").is_in(keep)),
            memory_categories=self.memory_categories.filter(pl.col("rank").is_in(keep)),
        )

    def within(self, lo: int, hi: int) -> Run:
        """The same run with only the events that reach into the stretch [``lo``, ``hi``) of time
        (:meth:`ByKind.within`); the counters and metadata whole."""
        return Run(
            by_kind=self.by_kind.within(lo, hi),
            ranks=self.ranks,
            skipped=self.skipped,
            warnings=self.warnings,
            counters=self.counters,
            memory_categories=self.memory_categories,
        )

    def rank_counters(self, rank: int) -> pl.DataFrame:
        """The counters of one rank, in time order."""
        return self.counters.filter(pl.col("rank") == rank)
