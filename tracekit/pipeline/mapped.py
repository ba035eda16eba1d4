"""What the per-rank map of :mod:`tracekit.pipeline.shards` takes and gives: the settings of a run,
a shard of files, and what mapping it gives (cached by :mod:`tracekit.pipeline.map_cache`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracekit.results.choices import AnalysisChoices

if TYPE_CHECKING:
    import polars as pl

    from tracekit.analyzers.mapreduce import RankSummary
    from tracekit.readers.claims import FileClaims, TraceKey


@dataclass(frozen=True)
class Settings(AnalysisChoices):
    """How every file is read and analyzed: the same for every shard (the user's choices, and
    how the files are read)."""

    cache_dir: str | None = None
    use_cache: bool = True
    #: ``--rank``: the rank of a single file that records none
    rank: int | None = None
    #: ``--ranks``: only these ranks are analyzed (every file is still read for its claims)
    ranks: frozenset[int] | None = None
    #: the run is one file: a trace without a rank is rank 0 when it is the file's only one
    alone: bool = False
    #: processes a shard may use to decode its files
    jobs: int = 1


@dataclass(frozen=True)
class Shard:
    """Files to map together; after a wrong guess, the ranks and ``has_gpu`` the client decided."""

    paths: tuple[str, ...]
    settings: Settings
    has_gpu: bool | None = None
    ranks: dict[TraceKey, int] | None = None


@dataclass(frozen=True)
class Mapped:
    """What mapping a shard gives: every file's claims, and the summary of the ranks analyzed."""

    files: tuple[FileClaims, ...]
    #: the rank each analyzed trace was analyzed as
    ranks: dict[TraceKey, int]
    #: the ``has_gpu`` the ranks were analyzed with
    has_gpu: bool
    #: the traces with GPU activity
    gpu: frozenset[TraceKey]
    summary: RankSummary | None
    #: :func:`~tracekit.readers.load.collective_counts` of the ranks analyzed
    counts: pl.DataFrame
    #: what was wrong with the shard's map cache entry, if anything (said by the client, once)
    notes: tuple[str, ...] = ()
