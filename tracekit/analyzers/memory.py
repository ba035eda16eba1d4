"""Memory counters: the peak and final memory of each rank and device, from the counters table.

Per rank (the map): over the ``[memory]`` samples of each (device type, device), the peak of
``total_allocated`` and ``total_reserved``, the last value of each, and the number of samples
(allocations and frees). Across ranks (the reduce): the rows, and the rank with the highest
peak. A run without counters (``profile_memory=False``, or an nsys export without CUDA memory
usage) has no rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tracekit.analyzers.convert import rows
from tracekit.results.analysis import MemorySection
from tracekit.results.rows import MemoryRow

if TYPE_CHECKING:
    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.mapreduce import Parts, Reduced


def memory_map(ctx: RankContext) -> Parts:
    """Peak and final allocated / reserved bytes per rank and device."""
    counters = ctx.run.counters
    peaks = (
        counters.sort("rank", "time_ns", maintain_order=True)
        .group_by("rank", "device_type", "device", maintain_order=True)
        .agg(
            samples=pl.len(),
            peak_allocated_bytes=pl.col("total_allocated").max(),
            peak_reserved_bytes=pl.col("total_reserved").max(),
            final_allocated_bytes=pl.col("total_allocated").drop_nulls().last(),
            final_reserved_bytes=pl.col("total_reserved").drop_nulls().last(),
            peak_time_ns=pl.col("time_ns").sort_by(pl.col("total_allocated").fill_null(-1)).last(),
        )
        .with_columns(pl.col("device_type").cast(pl.String))
        .sort("rank", "device_type", "device", nulls_last=True)
    )
    return {"per_device": peaks}


def memory_reduce(red: Reduced) -> MemorySection:
    """Every rank's peaks, and the rank with the highest peak allocated."""
    per_device = red.part("memory", "per_device")
    if per_device.height == 0:
        return MemorySection(per_device=[], peak_rank=None)
    top = per_device.sort("peak_allocated_bytes", descending=True, nulls_last=True).row(0, named=True)
    return MemorySection(per_device=rows(per_device, MemoryRow), peak_rank=top["rank"])
