"""What a per-rank part returns: a frozen dataclass of named frames (one per table), so the
cross-rank part reads ``red.gather(StepParts).stats`` (typed) rather than a string lookup.

A subclass of :class:`Parts` names its tables, ``name: pl.DataFrame = table("rank step ...")``
each, with the columns the table has: it is made a frozen, keyword-only dataclass whose every table is
an empty frame unless given (a shard that has none of a table leaves it out), and a table given
with other columns than declared is refused where it is made (:class:`PartsError`), not found
wrong by the reduce, which concatenates each table over the shards
(:meth:`tracekit.analyzers.mapreduce.Reduced.gather`). The built-in analyses' parts are here; a
new analysis declares its own beside its map (as :mod:`tracekit.analyzers.launches` does).
``= TABLE`` declares a table whose columns are not checked.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Final, cast

import polars as pl

if TYPE_CHECKING:  # typing has it from Python 3.11; for type checkers alone
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_options: Any) -> Any:
        return lambda cls: cls


def empty() -> pl.DataFrame:
    """A frame with no columns: what a shard that has none of a table returns."""
    return pl.DataFrame()


#: What a table of a :class:`Parts` subclass is set to in its class body when its columns are
#: not declared: a default for type checkers; the class replaces it by a fresh empty frame for
#: each instance that is not given one.
TABLE: Final = empty()


class _Columns(tuple[str, ...]):
    """The columns :func:`table` declares, until the class replaces them by a fresh empty frame."""


def table(*columns: str) -> pl.DataFrame:
    """A table of a :class:`Parts` subclass and its columns (in any order; each argument one
    name or several separated by spaces), which a frame given for it must have unless it has
    none (the empty default): what its class body sets it to, in place of :data:`TABLE`."""
    return cast("pl.DataFrame", _Columns(name for text in columns for name in text.split()))


class PartsError(ValueError):
    """A part's table was made with other columns than its class declares (an analysis's map
    and its declaration disagree: a fault of the code, not of the trace)."""


@dataclass_transform(kw_only_default=True, frozen_default=True)
class Parts:
    """Named frames of one analysis's per-rank part (subclasses name the tables)."""

    #: each table's declared columns (those declared with :func:`table`), the parents' too
    COLUMNS: ClassVar[dict[str, frozenset[str]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        columns = dict(cls.COLUMNS)
        for name in inspect.get_annotations(cls):
            declared = cls.__dict__.get(name)
            if isinstance(declared, _Columns):
                columns[name] = frozenset(declared)
            setattr(cls, name, field(default_factory=empty))
        cls.COLUMNS = columns
        dataclass(frozen=True, kw_only=True)(cls)

    def __post_init__(self) -> None:
        for name, columns in self.COLUMNS.items():
            frame: pl.DataFrame = getattr(self, name)
            if frame.width and frozenset(frame.columns) != columns:
                raise PartsError(
                    f"{type(self).__name__}.{name}: columns {sorted(frame.columns)}, declared {sorted(columns)}"
                )

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The tables' names, in their order."""
        return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]  # each subclass is a dataclass

    def tables(self) -> dict[str, pl.DataFrame]:
        """Each table by name."""
        return {name: getattr(self, name) for name in self.names()}

    @staticmethod
    def kinds() -> list[type[Parts]]:
        """Every subclass of :class:`Parts` defined so far, subclasses of subclasses too."""
        out: list[type[Parts]] = []
        todo = list(Parts.__subclasses__())
        while todo:
            kind = todo.pop()
            out.append(kind)
            todo.extend(kind.__subclasses__())
        return out


class FactParts(Parts):
    """Per rank: event counts, span, signs of a GPU job."""

    span: pl.DataFrame = table(
        "rank events gpu_events gpu_signs torch_ops start_ns end_ns comm_kernels comm_host fsdp_ops zero_ops"
        " ddp_ops busy_ns steps calls jumps launched early lead_ns syncs behind lag_ns"
    )


#: the columns of a table of steps
STEP_COLUMNS: Final = (
    "rank step name start_ns end_ns duration_ns gpu_start_ns gpu_end_ns gpu_ops win_start_ns win_end_ns"
)


class StepParts(Parts):
    """Steps and step-time statistics."""

    steps: pl.DataFrame = table(STEP_COLUMNS)
    stats: pl.DataFrame = table("rank count mean_ns median_ns p95_ns min_ns max_ns")
    #: every step found, the warm-up ones too
    all_steps: pl.DataFrame = table(STEP_COLUMNS)
    #: the steps left out as warm-up, and why
    warmup: pl.DataFrame = table(STEP_COLUMNS, "ratio reason")
    how_found: pl.DataFrame = table("rank source anchor pid tid found steady warmup")
    #: recorded time outside the measured window (:func:`tracekit.analyzers.left_out.left_out`)
    left_out: pl.DataFrame = table("rank reason ns start_ns end_ns share_pct steps ranks")


class BreakdownParts(Parts):
    """Device time by what it did."""

    per_step: pl.DataFrame = table(
        "rank step window_ns compute_ns comm_ns memory_ns transfer_ns idle_ns compute_pct comm_pct memory_pct idle_pct"
    )
    per_rank: pl.DataFrame = table(
        "rank window_ns compute_ns comm_ns memory_ns idle_ns transfer_ns compute_pct comm_pct memory_pct idle_pct"
    )


class OverlapParts(Parts):
    """Comm/compute overlap."""

    per_step: pl.DataFrame = table("rank step comm_ns overlapped_ns exposed_ns overlap_pct")
    per_rank: pl.DataFrame = table("rank comm_ns overlapped_ns exposed_ns overlap_pct")


class KernelParts(Parts):
    """GPU activities by rank and name."""

    by_rank: pl.DataFrame = table("rank name kind category count total_ns max_ns")


class AnnotationParts(Parts):
    """Top-level annotations per rank and step."""

    per_step: pl.DataFrame = table("rank step name cpu_ns gpu_ns count")


class CollectiveParts(Parts):
    """Every collective of each rank."""

    found: pl.DataFrame = table(
        "rank op launch_ns start_ns end_ns source stream correlation pg_name coll_name group_size seq members pg"
        " matched_by expected_ranks k duration_ns arrival_ns step window"
    )


class DataLoaderParts(Parts):
    """DataLoader gaps."""

    per_step: pl.DataFrame = table("rank step window_ns fetch_ns loader_ns idle_ns share_pct")
    per_rank: pl.DataFrame = table("rank window_ns fetch_ns loader_ns idle_ns share_pct")


class SyncParts(Parts):
    """Host syncs per step and rank, and by the operator that issued them."""

    per_step: pl.DataFrame = table("rank step sync_calls idle_after_ns blocking_copies sync_ops gpu_sync_events")
    per_rank: pl.DataFrame = table(
        "rank sync_calls blocking_copies sync_ops gpu_sync_events idle_after_ns per_step_calls per_step_ops"
    )
    by_op: pl.DataFrame = table("rank op kind phase points")
    #: the blocking calls themselves, the longest :data:`~tracekit.analyzers.syncs.KEPT_CALLS` of
    #: each rank (calls: how many the rank has): for the annotated trace, not for any figure
    calls: pl.DataFrame = table("rank start_ns end_ns name kind op calls")


#: The columns of a GPU idle interval (:data:`tracekit.analyzers.idle.INTERVAL_COLUMNS`).
_IDLE_INTERVAL: Final = "rank step start_ns end_ns length_ns cause ended_by launch_ns host_range launches"


class IdleParts(Parts):
    """GPU idle intervals and their causes."""

    #: every interval: for the details and the annotated trace only, not for any figure (not
    #: sent from where the rank was mapped when neither is asked for: ``AnalyzeOptions(details=False)``)
    intervals: pl.DataFrame = table(_IDLE_INTERVAL)
    per_rank: pl.DataFrame = table("rank cause idle_ns count share_pct")
    #: the longest intervals of each rank (:func:`~tracekit.analyzers.idle.longest_of_each`)
    longest: pl.DataFrame = table(_IDLE_INTERVAL)
    #: each rank's one-time idle by host range (:func:`~tracekit.analyzers.idle.one_time_by_range`)
    one_time: pl.DataFrame = table("rank name ns")


class LedgerParts(Parts):
    """The ledger's entries per step, the communication intervals, the measured windows."""

    #: each step's entries by phase (what a straggler's own slow phase is carved from)
    entries: pl.DataFrame = table("rank step phase entry ns")
    #: each step's entries, the phases summed (:func:`~tracekit.analyzers.ledger.summed`)
    per_step: pl.DataFrame = table("rank step entry ns")
    comms: pl.DataFrame = table("rank start_ns end_ns")
    frames: pl.DataFrame = table("rank step start_ns end_ns")


class MemoryParts(Parts):
    """Memory per device and its timeline; the categorized timeline's peaks and categories."""

    per_device: pl.DataFrame = table(
        "rank device_type device samples peak_allocated_bytes peak_reserved_bytes final_allocated_bytes"
        " final_reserved_bytes peak_time_ns gap_at_peak_bytes gap_at_peak_pct peak_phase peak_op capacity_bytes"
        " headroom_bytes headroom_pct"
    )
    timeline: pl.DataFrame = table("rank device_type device time_ns allocated_bytes reserved_bytes")
    peaks: pl.DataFrame = table("rank peak_bytes peak_time_ns rows")
    categories: pl.DataFrame = table("rank category at_peak_bytes at_peak_pct peak_bytes")


class WorkParts(Parts):
    """The work by name: kernels, host operators, syncs."""

    kernels: pl.DataFrame = table("rank name kind category count total_ns")
    host_ops: pl.DataFrame = table("rank name count total_ns")
    syncs: pl.DataFrame = table("rank sync_kind op phase count")
