"""``RankTrace``: what every reader returns for one rank of one file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracekit.model.counters import empty_counters
from tracekit.model.run import DISTRIBUTED_INFO, RankFound

if TYPE_CHECKING:
    import polars as pl

    from tracekit.model.input_warnings import InputWarning
    from tracekit.model.run import ProcessGroup


@dataclass(frozen=True)
class RankTrace:
    """One rank's decoded events and counters (``rank`` still null) and what its file says about it.

    A Kineto file holds one rank; an Nsight Systems export may hold several processes, each
    a ``RankTrace`` with its own ``rank`` (and ``rank_source`` saying how it was decided).
    """

    path: str
    events: pl.DataFrame
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
