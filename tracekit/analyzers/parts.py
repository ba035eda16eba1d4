"""What a per-rank part returns: a frozen dataclass of named frames (one per table), so the
cross-rank part reads ``red.gather(StepParts).stats`` (typed) rather than a string lookup.

The built-in analyses' parts are here; a new analysis declares its own beside its map (as
:mod:`tracekit.analyzers.launches` does). A field a shard leaves out is an empty frame, and the
reduce concatenates each field over the shards (:meth:`tracekit.analyzers.mapreduce.Reduced.gather`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import polars as pl


def empty() -> pl.DataFrame:
    """A frame with no columns: what a shard that has none of a table returns."""
    return pl.DataFrame()


@dataclass(frozen=True)
class Parts:
    """Named frames of one analysis's per-rank part (subclasses declare the fields)."""

    def tables(self) -> dict[str, pl.DataFrame]:
        """Each field's frame by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class PerStepAndRank(Parts):
    """A table per step and one per rank: the parts of the analyses that have just these two
    subclass it, each its own type, so that ``gather`` tells them apart."""

    per_step: pl.DataFrame = field(default_factory=empty)
    per_rank: pl.DataFrame = field(default_factory=empty)


@dataclass(frozen=True)
class FactParts(Parts):
    """Per rank: event counts, span, signs of a GPU job."""

    span: pl.DataFrame = field(default_factory=empty)


@dataclass(frozen=True)
class StepParts(Parts):
    """Steps and step-time statistics."""

    steps: pl.DataFrame = field(default_factory=empty)
    stats: pl.DataFrame = field(default_factory=empty)
    all_steps: pl.DataFrame = field(default_factory=empty)
    warmup: pl.DataFrame = field(default_factory=empty)
    how_found: pl.DataFrame = field(default_factory=empty)
    #: recorded time outside the measured window (:func:`tracekit.analyzers.left_out.left_out`)
    left_out: pl.DataFrame = field(default_factory=empty)


@dataclass(frozen=True)
class BreakdownParts(PerStepAndRank):
    """Device time by what it did."""


@dataclass(frozen=True)
class OverlapParts(PerStepAndRank):
    """Comm/compute overlap."""


@dataclass(frozen=True)
class KernelParts(Parts):
    """GPU activities by rank and name."""

    by_rank: pl.DataFrame = field(default_factory=empty)


@dataclass(frozen=True)
class AnnotationParts(Parts):
    """Top-level annotations per rank and step."""

    per_step: pl.DataFrame = field(default_factory=empty)


@dataclass(frozen=True)
class CollectiveParts(Parts):
    """Every collective of each rank."""

    found: pl.DataFrame = field(default_factory=empty)


@dataclass(frozen=True)
class DataLoaderParts(PerStepAndRank):
    """DataLoader gaps."""


@dataclass(frozen=True)
class SyncParts(Parts):
    """Host syncs per step and rank, and by the operator that issued them."""

    per_step: pl.DataFrame = field(default_factory=empty)
    per_rank: pl.DataFrame = field(default_factory=empty)
    by_op: pl.DataFrame = field(default_factory=empty)
    #: the blocking calls themselves, the longest :data:`~tracekit.analyzers.syncs.KEPT_CALLS` of
    #: each rank (rank, start_ns, end_ns, name, kind, op, calls: how many the rank has): for the
    #: annotated trace, not for any figure
    calls: pl.DataFrame = field(default_factory=empty)


@dataclass(frozen=True)
class IdleParts(Parts):
    """GPU idle intervals and their causes."""

    intervals: pl.DataFrame = field(default_factory=empty)
    per_rank: pl.DataFrame = field(default_factory=empty)


@dataclass(frozen=True)
class LedgerParts(Parts):
    """The ledger's entries per step, the communication intervals, the measured windows."""

    entries: pl.DataFrame = field(default_factory=empty)
    comms: pl.DataFrame = field(default_factory=empty)
    frames: pl.DataFrame = field(default_factory=empty)


@dataclass(frozen=True)
class MemoryParts(Parts):
    """Memory per device and its timeline; the categorized timeline's peaks and categories."""

    per_device: pl.DataFrame = field(default_factory=empty)
    timeline: pl.DataFrame = field(default_factory=empty)
    peaks: pl.DataFrame = field(default_factory=empty)
    categories: pl.DataFrame = field(default_factory=empty)


@dataclass(frozen=True)
class WorkParts(Parts):
    """The work by name: kernels, host operators, syncs."""

    kernels: pl.DataFrame = field(default_factory=empty)
    host_ops: pl.DataFrame = field(default_factory=empty)
    syncs: pl.DataFrame = field(default_factory=empty)
