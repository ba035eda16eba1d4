"""DataLoader gaps: time the device sits idle while the host fetches the next batch.

Measured from the device's side (DESIGN.md): GPU idle time that overlaps a host fetch
(``enumerate(DataLoader)#...__next__``, ``tracekit.phase/dataload_wait``), not the fetch's
own duration, which a prefetching loader hides. On a CPU-only run the host is the device:
the fetch time itself is the cost. Beside the fetch time, the part of it inside the DataLoader's
own range (``loader_ns``: its ``__next__``, where more workers shorten the wait): a capture's
fetch phase also holds what the loop does around the loader (a wrapper's work, the previous batch
released), which no number of workers shortens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.results.vocab import DataMeasure

if TYPE_CHECKING:
    from tracekit.model.run import Run

#: The DataLoader's own range: its iterator's ``__next__`` (torch's ``record_function``).
LOADER_PATTERN: Final = r"(?i)dataloader.*__next__"
#: Host ranges that fetch a batch: the DataLoader's own, and tracekit capture's fetch phase.
FETCH_PATTERN: Final = LOADER_PATTERN + r"|^tracekit\.phase/dataload_wait$"


@dataclass(frozen=True)
class DataLoaderResult:
    """Per rank and step: host fetch time and the device idle it causes."""

    #: rank, step, window_ns, fetch_ns, loader_ns (of the fetch, inside the DataLoader's own
    #: range), idle_ns (device idle during fetches), share_pct
    per_step: pl.DataFrame
    #: rank, window_ns, fetch_ns, loader_ns, idle_ns, share_pct
    per_rank: pl.DataFrame
    #: device idle during fetches, or (a CPU-only run) the host's fetch time
    measure: DataMeasure


def data_measure(*, has_gpu: bool) -> DataMeasure:
    """What the DataLoader's cost is measured as: the device's idle during fetches, or on a
    CPU-only run (the host is the device) the fetch time itself."""
    return DataMeasure.GPU_IDLE if has_gpu else DataMeasure.HOST_FETCH


def fetch_ranges(run: Run, pattern: str = FETCH_PATTERN) -> pl.DataFrame:
    """Union of host fetch ranges per rank (those named by ``pattern``: every fetch, or with
    :data:`LOADER_PATTERN` the DataLoader's own): rank, start_ns, end_ns."""
    fetches = run.select(["cpu_op", "annotation", "python"], "rank", "start_ns", "end_ns", name=pattern)
    return iv.union(fetches, ["rank"])


def dataloader_gaps(
    run: Run, segments: pl.DataFrame, frames: pl.DataFrame, *, has_gpu: bool, fetch: pl.DataFrame | None = None
) -> DataLoaderResult:
    """DataLoader cost per rank and step; ``frames`` are the measured windows (rank, step, start, end).

    ``fetch``: the host fetch ranges, when already found (:func:`fetch_ranges`).
    """
    fetch = fetch_ranges(run) if fetch is None else fetch
    window = frames.group_by("rank", "step").agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("window_ns"))
    spans = frames.select("rank", "start_ns", "end_ns")
    host = _per_window(iv.intersect(fetch, spans, ["rank"]), frames, "fetch_ns")
    own = fetch_ranges(run, LOADER_PATTERN)
    loader = _per_window(iv.intersect(own, spans, ["rank"]), frames, "loader_ns")
    if has_gpu:
        idle = segments.filter(~pl.col("compute") & ~pl.col("collective") & ~pl.col("memory"))
        gpu = _per_window(iv.intersect(idle.select("rank", "start_ns", "end_ns"), fetch, ["rank"]), frames, "idle_ns")
    else:
        gpu = host.rename({"fetch_ns": "idle_ns"})
    per_step = (
        window.join(host, on=["rank", "step"], how="left", nulls_equal=True)
        .join(loader, on=["rank", "step"], how="left", nulls_equal=True)
        .join(gpu, on=["rank", "step"], how="left", nulls_equal=True)
        .with_columns(pl.col("fetch_ns", "loader_ns", "idle_ns").fill_null(0))
        .sort("rank", "step")
    )
    return DataLoaderResult(
        per_step=_with_shares(per_step), per_rank=per_rank_of(per_step), measure=data_measure(has_gpu=has_gpu)
    )


def per_rank_of(per_step: pl.DataFrame) -> pl.DataFrame:
    """Each rank's totals and share (:attr:`DataLoaderResult.per_rank`) from its steps' rows: the
    whole rank's, or its windows' steps stacked (:mod:`tracekit.analyzers.windows`)."""
    totals = per_step.group_by("rank").agg(pl.col("window_ns", "fetch_ns", "loader_ns", "idle_ns").sum())
    return _with_shares(totals.sort("rank"))


def _with_shares(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with ``share_pct``: its device idle during fetches, in % of its window (null where
    the window is empty)."""
    return df.with_columns(
        share_pct=pl.when(pl.col("window_ns") > 0).then(100 * pl.col("idle_ns") / pl.col("window_ns"))
    )


def _per_window(parts: pl.DataFrame, frames: pl.DataFrame, name: str) -> pl.DataFrame:
    located = iv.locate(parts, "start_ns", frames, by=["rank"], keep=["step"])
    return located.group_by("rank", "step").agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias(name))
