"""What a per-rank part returns: a frozen dataclass of named frames (one per table), so the
cross-rank part reads ``red.gather(StepParts).stats`` (typed) rather than a string lookup.

A subclass of :class:`Parts` only names its tables, ``name: pl.DataFrame = TABLE`` each: it is
made a frozen, keyword-only dataclass whose every table is an empty frame unless given (a shard
that has none of a table leaves it out), and the reduce concatenates each table over the shards
(:meth:`tracekit.analyzers.mapreduce.Reduced.gather`). The built-in analyses' parts are here; a
new analysis declares its own beside its map (as :mod:`tracekit.analyzers.launches` does).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final

import polars as pl

if TYPE_CHECKING:  # typing has it from Python 3.11; for type checkers alone
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_options: Any) -> Any:
        return lambda cls: cls


def empty() -> pl.DataFrame:
    """A frame with no columns: what a shard that has none of a table returns."""
    return pl.DataFrame()


#: What a table of a :class:`Parts` subclass is set to in its class body: a default for type
#: checkers; the class replaces it by a fresh empty frame for each instance that is not given one.
TABLE: Final = empty()


@dataclass_transform(kw_only_default=True, frozen_default=True)
class Parts:
    """Named frames of one analysis's per-rank part (subclasses name the tables)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in inspect.get_annotations(cls):
            setattr(cls, name, field(default_factory=empty))
        dataclass(frozen=True, kw_only=True)(cls)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The tables' names, in their order."""
        return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]  # each subclass is a dataclass

    def tables(self) -> dict[str, pl.DataFrame]:
        """Each table by name."""
        return {name: getattr(self, name) for name in self.names()}


class PerStepAndRank(Parts):
    """A table per step and one per rank: the parts of the analyses that have just these two
    subclass it, each its own type, so that ``gather`` tells them apart."""

    per_step: pl.DataFrame = TABLE
    per_rank: pl.DataFrame = TABLE


class FactParts(Parts):
    """Per rank: event counts, span, signs of a GPU job."""

    span: pl.DataFrame = TABLE


class StepParts(Parts):
    """Steps and step-time statistics."""

    steps: pl.DataFrame = TABLE
    stats: pl.DataFrame = TABLE
    all_steps: pl.DataFrame = TABLE
    warmup: pl.DataFrame = TABLE
    how_found: pl.DataFrame = TABLE
    #: recorded time outside the measured window (:func:`tracekit.analyzers.left_out.left_out`)
    left_out: pl.DataFrame = TABLE


class BreakdownParts(PerStepAndRank):
    """Device time by what it did."""


class OverlapParts(PerStepAndRank):
    """Comm/compute overlap."""


class KernelParts(Parts):
    """GPU activities by rank and name."""

    by_rank: pl.DataFrame = TABLE


class AnnotationParts(Parts):
    """Top-level annotations per rank and step."""

    per_step: pl.DataFrame = TABLE


class CollectiveParts(Parts):
    """Every collective of each rank."""

    found: pl.DataFrame = TABLE


class DataLoaderParts(PerStepAndRank):
    """DataLoader gaps."""


class SyncParts(Parts):
    """Host syncs per step and rank, and by the operator that issued them."""

    per_step: pl.DataFrame = TABLE
    per_rank: pl.DataFrame = TABLE
    by_op: pl.DataFrame = TABLE
    #: the blocking calls themselves, the longest :data:`~tracekit.analyzers.syncs.KEPT_CALLS` of
    #: each rank (rank, start_ns, end_ns, name, kind, op, calls: how many the rank has): for the
    #: annotated trace, not for any figure
    calls: pl.DataFrame = TABLE


class IdleParts(Parts):
    """GPU idle intervals and their causes."""

    intervals: pl.DataFrame = TABLE
    per_rank: pl.DataFrame = TABLE


class LedgerParts(Parts):
    """The ledger's entries per step, the communication intervals, the measured windows."""

    entries: pl.DataFrame = TABLE
    comms: pl.DataFrame = TABLE
    frames: pl.DataFrame = TABLE


class MemoryParts(Parts):
    """Memory per device and its timeline; the categorized timeline's peaks and categories."""

    per_device: pl.DataFrame = TABLE
    timeline: pl.DataFrame = TABLE
    peaks: pl.DataFrame = TABLE
    categories: pl.DataFrame = TABLE


class WorkParts(Parts):
    """The work by name: kernels, host operators, syncs."""

    kernels: pl.DataFrame = TABLE
    host_ops: pl.DataFrame = TABLE
    syncs: pl.DataFrame = TABLE
