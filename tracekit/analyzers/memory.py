"""Memory: the peak of each rank and device, what was running then, what fills it, and findings.

Per rank (the map):

* from the counters table (Kineto ``[memory]`` events, nsys memory usage): over the samples of
  each (device type, device), the peak of ``total_allocated`` and ``total_reserved``, the last
  value of each, the number of samples; at the sample where allocated peaked, the *gap*:
  reserved minus allocated, memory the caching allocator holds that no tensor uses (the
  "reserved but unallocated" of an out-of-memory message), and its share of reserved; and what
  was running then: the outermost annotation (the phase) and the innermost operator open;
* from a categorized memory timeline (``export_memory_timeline``): the running total after
  each row (rows in time order, memory from before profiling first), its peak, and each
  category's bytes at that moment and at its own peak.

Across ranks (the reduce): the rows; the rank with the highest peak; the imbalance (the worst
rank's peak over the median rank's); and the findings: a fragmentation gap of at least
:data:`GAP_MIN_SHARE` of reserved memory at the peak (advice: expandable segments), the
category that fills memory at the peak (advice by category), a rank peaking at least
:data:`IMBALANCE_MIN` times the median (uneven sharding or data).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers.convert import rows
from tracekit.analyzers.parts import MemoryParts
from tracekit.results.analysis import MemoryFinding, MemoryPeak, MemorySection
from tracekit.results.rows import MemoryCategoryRow, MemoryRow, MemorySample
from tracekit.results.vocab import MemoryNote

if TYPE_CHECKING:
    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.mapreduce import Reduced

#: Reserved-but-unallocated memory at the peak, as a share of reserved, from which it is a
#: finding. The caching allocator rounds blocks (512 B, 2 MiB segments) and keeps freed blocks
#: for reuse, so a few percent of slack is its normal working; a sixth of the device held by
#: no tensor at the moment memory peaks is memory a larger batch could have used.
GAP_MIN_SHARE: Final = 0.15
#: A rank whose peak is this many times the median rank's is a finding (uneven shards or data).
IMBALANCE_MIN: Final = 1.2
#: A category holding at least this share of the peak "fills" memory.
FILLED_MIN_SHARE: Final = 0.4
#: Headroom (device capacity not reserved at the peak) below this share of the capacity is
#: "at the limit". The CUDA context, NCCL's buffers and other processes take device memory the
#: allocator's counters do not show (typically 0.5 to 2 GiB of an 80 GiB device), and a step
#: longer than the traced ones (a longer sequence, a larger last batch) needs more: under a
#: tenth of the device free, a larger batch does not fit and an unlucky batch may not.
HEADROOM_LOW_SHARE: Final = 0.1


def memory_map(ctx: RankContext) -> MemoryParts:
    """Peaks, gaps and what ran at the peak per rank and device; the timeline for charts; the
    categorized timeline's peak."""
    buckets = _buckets(ctx.run.counters)
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
    categorized = timeline_parts(ctx.run.memory_categories)
    return MemoryParts(
        per_device=_with_headroom(ctx, _running_at_peak(ctx, peaks)),
        timeline=timeline,
        peaks=categorized.peaks,
        categories=categorized.categories,
    )


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


def _running_at_peak(ctx: RankContext, peaks: pl.DataFrame) -> pl.DataFrame:
    """``peaks`` with the outermost annotation and the innermost operator open at each peak."""
    if peaks.height == 0:
        return peaks.with_columns(peak_phase=pl.lit(None, pl.String), peak_op=pl.lit(None, pl.String))
    moments = peaks.select("rank", "peak_time_ns").drop_nulls().unique()
    if moments.height == 0:
        return peaks.with_columns(peak_phase=pl.lit(None, pl.String), peak_op=pl.lit(None, pl.String))
    # only what was open at one of the moments (one pass, a few columns)
    first, last = moments["peak_time_ns"].min(), moments["peak_time_ns"].max()
    near = (pl.col("start_ns") <= last) & (pl.col("end_ns") > first)
    columns = ("rank", "kind", pl.col("name").cast(pl.String), "start_ns", "end_ns")
    open_at = (
        ctx.run.select(["annotation", "cpu_op"], *columns, where=near)
        .join(moments, on="rank")
        .filter((pl.col("start_ns") <= pl.col("peak_time_ns")) & (pl.col("end_ns") > pl.col("peak_time_ns")))
    )
    phase = (
        open_at.filter(kind="annotation")
        .sort("start_ns")
        .group_by("rank", "peak_time_ns")
        .agg(peak_phase=pl.col("name").first())
    )
    op = (
        open_at.filter(kind="cpu_op")
        .sort("start_ns")
        .group_by("rank", "peak_time_ns")
        .agg(peak_op=pl.col("name").last())
    )
    return peaks.join(phase, on=["rank", "peak_time_ns"], how="left").join(op, on=["rank", "peak_time_ns"], how="left")


def _with_headroom(ctx: RankContext, peaks: pl.DataFrame) -> pl.DataFrame:
    """``peaks`` with each device's capacity (as its trace describes it) and the headroom at the
    peak: capacity minus peak reserved (peak allocated where reserved is not recorded)."""
    capacity = pl.DataFrame(
        [(info.rank, device, total) for info in ctx.run.ranks for device, total in info.device_memory],
        schema={"rank": pl.Int32, "device": peaks.schema.get("device", pl.Int64), "capacity_bytes": pl.Int64},
        orient="row",
    )
    held = pl.coalesce("peak_reserved_bytes", "peak_allocated_bytes")
    return (
        peaks.join(capacity, on=["rank", "device"], how="left")
        .with_columns(
            # the host's memory is shared by the ranks on it and not a device's capacity
            capacity_bytes=pl.when(pl.col("device_type") != "cpu").then(pl.col("capacity_bytes"))
        )
        .with_columns(headroom_bytes=pl.col("capacity_bytes") - held)
        .with_columns(headroom_pct=100.0 * pl.col("headroom_bytes") / pl.col("capacity_bytes"))
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


def memory_reduce(red: Reduced) -> MemorySection:
    """Every rank's peaks, the rank with the highest peak, the imbalance, the findings."""
    parts = red.gather(MemoryParts)
    per_device, timeline, peaks, categories = parts.per_device, parts.timeline, parts.peaks, parts.categories
    peak_rank = None
    if per_device.height:
        highest = per_device.sort(["peak_allocated_bytes", "rank"], descending=[True, False], nulls_last=True)
        peak_rank = highest.row(0, named=True)["rank"]  # ties to the lowest rank, however the ranks were sharded
    imbalance = _imbalance(per_device, peaks)
    return MemorySection(
        per_device=rows(per_device, MemoryRow) if per_device.height else [],
        peak_rank=peak_rank,
        peaks=rows(peaks, MemoryPeak) if peaks.height else [],
        categories=rows(categories, MemoryCategoryRow) if categories.height else [],
        imbalance=None if imbalance is None else round(imbalance[1], 4),
        findings=_findings(per_device, categories, imbalance),
        timeline=rows(timeline, MemorySample) if timeline.height else [],
    )


def _rank_peaks(per_device: pl.DataFrame, peaks: pl.DataFrame) -> pl.DataFrame:
    """rank, peak: each rank's peak allocated on its devices (not the host), else its timeline's peak."""
    if per_device.height:
        device = (
            per_device.filter(pl.col("device_type") != "cpu")
            if per_device["device_type"].ne("cpu").any()
            else per_device
        )
        out = device.group_by("rank").agg(peak=pl.col("peak_allocated_bytes").max()).drop_nulls()
        if out.height:
            return out
    if peaks.height:
        return peaks.select("rank", peak="peak_bytes")
    return pl.DataFrame(schema={"rank": pl.Int32, "peak": pl.Int64})


def _imbalance(per_device: pl.DataFrame, peaks: pl.DataFrame) -> tuple[int, float] | None:
    """The rank with the highest peak and its peak over the median rank's (two ranks or more)."""
    by_rank = _rank_peaks(per_device, peaks)
    if by_rank.height < 2:
        return None
    median = float(by_rank["peak"].median())  # type: ignore[arg-type]
    top = by_rank.sort("peak", "rank", descending=[True, False]).row(0, named=True)
    return (int(top["rank"]), float(top["peak"]) / median) if median > 0 else None


def _findings(
    per_device: pl.DataFrame, categories: pl.DataFrame, imbalance: tuple[int, float] | None
) -> list[MemoryFinding]:
    out: list[MemoryFinding] = []
    known = per_device.filter(pl.col("headroom_pct").is_not_null()) if per_device.height else per_device
    if known.height:
        # the rank with the least room: what decides whether a larger batch fits on every rank
        least = known.sort("headroom_pct", "rank", nulls_last=True).row(0, named=True)
        out.append(
            MemoryFinding(
                note=MemoryNote.HEADROOM,
                rank=least["rank"],
                value=round(least["headroom_pct"], 4),
                bytes=least["headroom_bytes"],
                capacity_bytes=least["capacity_bytes"],
                low=least["headroom_pct"] < 100 * HEADROOM_LOW_SHARE,
            )
        )
    gaps = per_device.filter(pl.col("gap_at_peak_pct") >= 100 * GAP_MIN_SHARE) if per_device.height else per_device
    if gaps.height:
        worst = gaps.sort("gap_at_peak_pct", "rank", descending=[True, False]).row(0, named=True)
        out.append(
            MemoryFinding(
                note=MemoryNote.FRAGMENTATION,
                rank=worst["rank"],
                value=round(worst["gap_at_peak_pct"], 4),
                bytes=worst["gap_at_peak_bytes"],
            )
        )
    if categories.height:
        top = (
            categories.filter(pl.col("category") != "unknown")
            .sort("at_peak_bytes", "rank", descending=[True, False])
            .filter(pl.col("at_peak_pct") >= 100 * FILLED_MIN_SHARE)
        )
        if top.height:
            row = top.row(0, named=True)
            out.append(
                MemoryFinding(
                    note=MemoryNote.FILLED_BY,
                    rank=row["rank"],
                    value=round(row["at_peak_pct"], 4),
                    bytes=row["at_peak_bytes"],
                    category=row["category"],
                )
            )
    if imbalance is not None and imbalance[1] >= IMBALANCE_MIN:
        out.append(MemoryFinding(note=MemoryNote.IMBALANCE, rank=imbalance[0], value=round(imbalance[1], 4)))
    return out
