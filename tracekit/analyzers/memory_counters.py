"""What a rank's memory counters alone tell (no event read): its peaks per device, the timeline
for charts, and the categorized timeline's peaks (:mod:`tracekit.analyzers.memory`, which adds
what ran at each peak and the headroom). Made once per rank: a window of a rank
(:mod:`tracekit.analyzers.windows`) takes them from the whole rank's context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers.parts import MemoryParts

if TYPE_CHECKING:
    from tracekit.model.run import Run


@dataclass(frozen=True)
class Counted:
    """A rank's memory as its counters tell it (no event read): the peaks per rank and device
    (:func:`~tracekit.analyzers.memory.memory_map`'s ``per_device`` before what ran at the peak
    and the headroom), the timeline for charts, and the categorized timeline's peaks and
    categories."""

    peaks: pl.DataFrame
    timeline: pl.DataFrame
    categorized: MemoryParts


def counted(run: Run) -> Counted:
    """The memory of ``run``'s ranks from its counters and its categorized timeline (:class:`Counted`)."""
    buckets = _buckets(run.counters)
    keys = ["rank", "device_type", "device"]
    first_peak = pl.col("max_allocated").fill_null(-1).arg_max()
    peaks = (
        buckets.sort([*keys, "bucket"], nulls_last=True)
        .group_by(keys, maintain_order=True)
        .agg(
            samples=pl.col("samples").sum(),
            peak_allocated_bytes=pl.col("max_allocated").max(),
            peak_reserved_bytes=pl.col("max_reserved").max(),
            final_allocated_bytes=pl.col("last_allocated").drop_nulls().last(),
            final_reserved_bytes=pl.col("last_reserved").drop_nulls().last(),
            # the moment allocated first reached its peak
            peak_time_ns=pl.col("peak_time_ns").gather(first_peak).first(),
            reserved_then=pl.col("reserved_then").gather(first_peak).first(),
            allocated_then=pl.col("max_allocated").gather(first_peak).first(),
        )
        .with_columns(
            # the host has no caching allocator (reserved 0 on CPU): no gap there
            gap_at_peak_bytes=pl.when(pl.col("allocated_then").is_not_null() & (pl.col("reserved_then") > 0))
            .then(pl.col("reserved_then") - pl.col("allocated_then"))
            .otherwise(None)
        )
        .with_columns(
            gap_at_peak_pct=pl.when(pl.col("reserved_then") > 0).then(
                100.0 * pl.col("gap_at_peak_bytes") / pl.col("reserved_then")
            )
        )
        .drop("reserved_then", "allocated_then")
        .sort(keys, nulls_last=True)
    )
    timeline = buckets.select(
        *keys,
        "time_ns",
        pl.col("point_allocated").alias("allocated_bytes"),
        pl.col("point_reserved").alias("reserved_bytes"),
    ).sort([*keys, "time_ns"], nulls_last=True)
    return Counted(peaks=peaks, timeline=timeline, categorized=timeline_parts(run.memory_categories))


#: Points per rank and device in the timeline kept for charts.
CHART_POINTS: Final = 256


def _buckets(counters: pl.DataFrame) -> pl.DataFrame:
    """One pass over the samples: each rank and device's span cut into :data:`CHART_POINTS`
    stretches of time, and per stretch what the peaks, the final values and the chart need:
    the sample count, the largest allocated and reserved, the last of each, when allocated first
    reached its largest and reserved then, and the chart's point: the sample holding the most
    allocated (reserved, where allocated is not recorded), so no peak is lost."""
    keys = ["rank", "device_type", "device"]
    time = pl.col("time_ns")
    t0, t1 = time.min().over(keys), time.max().over(keys)
    value = pl.coalesce("total_allocated", "total_reserved").fill_null(-1)
    at_alloc = pl.col("total_allocated").fill_null(-1).arg_max()
    # the counters are in time order within each rank (Run's contract), and so within each group
    return (
        counters.lazy()
        .with_columns(bucket=(time - t0) * CHART_POINTS // (t1 - t0 + 1))
        .group_by([*keys, "bucket"])
        .agg(
            samples=pl.len(),
            max_allocated=pl.col("total_allocated").max(),
            max_reserved=pl.col("total_reserved").max(),
            last_allocated=pl.col("total_allocated").drop_nulls().last(),
            last_reserved=pl.col("total_reserved").drop_nulls().last(),
            peak_time_ns=time.gather(at_alloc).first(),
            reserved_then=pl.col("total_reserved").gather(at_alloc).first(),
            time_ns=time.gather(value.arg_max()).first(),
            point_allocated=pl.col("total_allocated").gather(value.arg_max()).first(),
            point_reserved=pl.col("total_reserved").gather(value.arg_max()).first(),
        )
        .with_columns(pl.col("device_type").cast(pl.String))
        .collect()
    )


def timeline_parts(timeline: pl.DataFrame) -> MemoryParts:
    """Per rank: the categorized timeline's peak, and each category at the peak and at its own peak."""
    if timeline.height == 0:
        return MemoryParts()
    ordered = timeline.with_row_index("order").sort("rank", "time_ns", "order", nulls_last=False)
    ordered = ordered.with_columns(
        total=pl.col("bytes").cum_sum().over("rank"),
        held=pl.col("bytes").cum_sum().over("rank", "category"),
    ).with_columns(index=pl.int_range(pl.len()).over("rank"))
    peak = (
        ordered.group_by("rank")
        .agg(
            peak_bytes=pl.col("total").max(),
            peak_index=pl.col("index").sort_by("total").last(),
            peak_time_ns=pl.col("time_ns").sort_by("total").last(),
            rows=pl.len(),
        )
        .sort("rank")
    )
    # each category's holding at the peak: its running sum at the last row at or before the peak
    upto = ordered.join(peak.select("rank", "peak_index"), on="rank").filter(pl.col("index") <= pl.col("peak_index"))
    at_peak = upto.group_by("rank", "category").agg(at_peak_bytes=pl.col("held").last())
    own_peak = ordered.group_by("rank", "category").agg(peak_bytes=pl.col("held").max())
    categories = (
        own_peak.join(at_peak, on=["rank", "category"], how="left")
        .join(peak.select("rank", total="peak_bytes"), on="rank")
        .with_columns(pl.col("at_peak_bytes").fill_null(0))
        .with_columns(
            at_peak_pct=pl.when(pl.col("total") > 0).then(100.0 * pl.col("at_peak_bytes") / pl.col("total")),
            category=pl.col("category").cast(pl.String),
        )
        .select("rank", "category", "at_peak_bytes", "at_peak_pct", "peak_bytes")
        .sort(["rank", "at_peak_bytes", "category"], descending=[False, True, False])
    )
    return MemoryParts(peaks=peak.drop("peak_index"), categories=categories)
