"""``dataloader.json``: what ``tracekit dataloader`` measured, as typed Structs.

The DataLoader alone (the training config's dataset, sharding, workers, prefetch and pinning, on
the same ranks under the same launcher, with no model, optimizer or collective) is timed batch
by batch. Times are nanoseconds, rates per second. Layout of schema 1.x:

- ``config``: the capture configuration it ran (plain JSON, as in ``summary.json``);
- ``per_rank``: per rank, the fetch time of each measured batch (time blocked in ``next()``),
  its mean / median / p95, its two modes when the fetches are bimodal (``modes``: batches a
  worker had ready versus batches the loop waited for a worker to make), and the rank's
  batches per second over the measured batches' wall time;
- ``samples_per_s``: the cluster's ceiling, the global batch (per-rank batch x ranks) times
  the batches per second of the slowest rank (``samples_per_s_by`` says so);
- ``headroom``: against a capture of the same config, the loader's samples/s over training's
  and whether training is input-bound (below ``threshold``);
- ``notes``: remarks as kinds and figures (:class:`LoaderNote`).

Schema 1.1 (from 1.0): ``samples_per_s_by`` is a :class:`~tracekit.results.vocab.CeilingBy` and
``notes`` are :class:`LoaderNote` objects, where 1.0 held sentences (read into them when a 1.0
record is loaded).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from tracekit.results import upgrade
from tracekit.results.records import load_record
from tracekit.results.vocab import CeilingBy, LoaderNoteKind  # noqa: TC001  (msgspec reads them at run time)

__all__ = [
    "LOADER_PROBE_SCHEMA",
    "LOADER_PROBE_SCHEMA_VERSION",
    "ConfigChange",
    "FetchModes",
    "Headroom",
    "LoaderNote",
    "LoaderProbe",
    "RankFetches",
    "load_loader_probe",
]

LOADER_PROBE_SCHEMA: Final = "tracekit.dataloader_probe"
LOADER_PROBE_SCHEMA_VERSION: Final = "1.1"


class FetchModes(msgspec.Struct, kw_only=True, frozen=True):
    """Two modes of fetch times: fast (a batch was ready: a prefetch hit) and slow (the loop
    waited for a worker to make it). ``split_ns`` is the boundary, ``explained`` the share of
    the variance of log fetch times that the split explains (:mod:`tracekit.capture.loader_stats`)."""

    fast_share: float
    fast_median_ns: float
    slow_share: float
    slow_median_ns: float
    split_ns: float
    explained: float


class RankFetches(msgspec.Struct, kw_only=True, frozen=True):
    """One rank's measured batches."""

    rank: int
    batches: int
    fetch_ns: list[int]
    mean_ns: float
    median_ns: float
    p95_ns: float
    #: None: one mode (every fetch of about the same kind)
    modes: FetchModes | None = None
    wall_ns: int
    batches_per_s: float


class Headroom(msgspec.Struct, kw_only=True, frozen=True):
    """The loader's ceiling against what training consumed."""

    capture: str
    training_samples_per_s: float
    ratio: float
    #: ratio under which training is called input-bound
    threshold: float
    input_bound: bool


class ConfigChange(msgspec.Struct, kw_only=True, frozen=True):
    """One setting of the config that the capture compared with ran otherwise."""

    key: str
    captured: Any  # its value in the capture's config
    probed: Any  # its value in the probe's


class LoaderNote(msgspec.Struct, kw_only=True, frozen=True):
    """A remark of the probe: its kind and figures (see :class:`~tracekit.results.vocab.LoaderNoteKind`)."""

    kind: LoaderNoteKind
    capture: str | None = None  # the capture folder compared with
    differences: list[ConfigChange] = []
    text: str | None = None


class LoaderProbe(msgspec.Struct, kw_only=True, frozen=True):
    """``dataloader.json``."""

    schema: str = LOADER_PROBE_SCHEMA
    schema_version: str = LOADER_PROBE_SCHEMA_VERSION
    config: dict[str, Any]
    world_size: int
    batch_size: int
    warmup_batches: int
    per_rank: list[RankFetches]
    slowest_rank: int
    samples_per_s: float
    samples_per_s_by: CeilingBy
    headroom: Headroom | None = None
    notes: list[LoaderNote] = []


def load_loader_probe(data: bytes | str, *, source: str) -> LoaderProbe:
    """Parse a saved record (:func:`tracekit.results.records.load_record`); write one with ``dump_record``."""
    return load_record(data, LoaderProbe, what="tracekit dataloader probe", source=source, upgrade=upgrade.loader_1_0)
