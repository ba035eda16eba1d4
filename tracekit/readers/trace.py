"""``RankTrace``: what every reader returns for one rank of one file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracekit.model.counters import empty_counters
from tracekit.model.run import DISTRIBUTED_INFO, RankFound

if TYPE_CHECKING:
    import polars as pl

    from tracekit.model.by_kind import ByKind
    from tracekit.model.input_warnings import InputWarning
    from tracekit.model.run import ProcessGroup


@dataclass(frozen=True)
class RankTrace:
    """One rank's decoded events and counters (``rank`` still null) and what its file says about it.

    A Kineto file holds one rank; an Nsight Systems export may hold several processes, each
    a ``RankTrace`` with its own ``rank`` (and ``rank_source`` saying how it was decided).
    The events are held a kind at a time (:class:`~tracekit.model.by_kind.ByKind`, in the
    order of their starts, ties in the file's order) from the read on: one frame of every
    event holds each column for every event, whatever its kind (a 2 GB rank of Python frames,
    682 MB against 290 held by kind), and a run is made of its ranks' kinds.
    """

    path: str
    held: ByKind
    rank: int | None
    world_size: int | None
    backend: str | None
    devices: tuple[str, ...]
    schema_version: str | None
    #: How ``rank`` was decided when the file itself decided it (Kineto ``distributedInfo``, ...).
    rank_source: RankFound = DISTRIBUTED_INFO
    #: The format and clock, e.g. "kineto: host clock, us -> ns".
    clock: str = "kineto: host clock, us -> ns"
    #: Memory over time (:data:`tracekit.model.counters.COUNTER_SCHEMA`), on the events' clock.
    counters: pl.DataFrame = field(default_factory=empty_counters)
    #: The process groups the file lists (Kineto ``distributedInfo.pg_config``).
    process_groups: tuple[ProcessGroup, ...] = ()
    #: What the reader found wrong in the file and worked around (dropped events).
    warnings: tuple[InputWarning, ...] = ()
    #: (device id, total bytes) of each device the file describes (Kineto ``deviceProperties``
    #: ``totalGlobalMem``, nsys ``TARGET_INFO_GPU.totalMemory``): the capacity memory peaks are
    #: measured against
    device_memory: tuple[tuple[int, int], ...] = ()
    #: The host the file was recorded on, when it says (:attr:`tracekit.model.run.RankInfo.host`).
    host: str | None = None

    @property
    def events(self) -> pl.DataFrame:
        """Every event in one frame, in order (a copy of every column: for the few readers of the whole)."""
        return self.held.frame()
