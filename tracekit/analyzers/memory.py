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
from tracekit.analyzers.parts import MemoryParts, table
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


class MemoryPieces(MemoryParts):
    """A window's memory (:mod:`tracekit.analyzers.windows`): the rank's :class:`MemoryParts` (its
    counters' alone, each window's the same) with what ran at the peak moments that lie in the
    window, and those moments apart for :func:`memory_fold`, which alone reads them: the rank's
    part it makes is a plain :class:`MemoryParts`, as the whole rank's is."""

    #: what ran at each peak moment (rank, peak_time_ns) of the window
    running: pl.DataFrame = table("rank peak_time_ns peak_phase peak_op")


def memory_map(ctx: RankContext) -> MemoryParts:
    """Peaks, gaps and what ran at the peak per rank and device; the timeline for charts; the
    categorized timeline's peak. On a window (:mod:`tracekit.analyzers.windows`): the rank's
    (its counters', :attr:`RankContext.memory <tracekit.analyzers.context.RankContext.memory>`)
    with what ran at the peak moments that lie in the window (:class:`MemoryPieces`), from the
    events open then: every one reaches into the window."""
    c = ctx.memory
    per_device = _with_headroom(ctx, _running_at_peak(ctx, c.peaks))
    tables = {
        "per_device": per_device,
        "timeline": c.timeline,
        "peaks": c.categorized.peaks,
        "categories": c.categorized.categories,
    }
    if ctx.window is None:
        return MemoryParts(**tables)
    keys = ["rank", "peak_time_ns"]
    running = per_device.filter(ctx.owned("peak_time_ns")).select(*keys, "peak_phase", "peak_op").unique(keys)
    return MemoryPieces(**tables, running=running)


def memory_fold(parts: list[MemoryParts]) -> MemoryParts:
    """The rank's memory from its windows' (:class:`MemoryPieces`): the rank's tables (each
    window's are its counters'), with what ran at each peak moment from the window it lies in."""
    if not parts:
        return MemoryParts()
    first = parts[0]
    per_device = first.per_device
    found = [p.running for p in parts if isinstance(p, MemoryPieces) and p.running.width]
    if per_device.width and found:
        running = pl.concat(found, how="vertical")
        keys = ["rank", "peak_time_ns"]
        per_device = (
            per_device.drop("peak_phase", "peak_op")
            .join(running, on=keys, how="left")
            .select(per_device.columns)
            .cast(per_device.schema)
        )
    return MemoryParts(per_device=per_device, timeline=first.timeline, peaks=first.peaks, categories=first.categories)


def _running_at_peak(ctx: RankContext, peaks: pl.DataFrame) -> pl.DataFrame:
    """``peaks`` with the outermost annotation and the innermost operator open at each peak (at
    each that lies in the window of ``ctx``: none elsewhere)."""
    if peaks.height == 0:
        return peaks.with_columns(peak_phase=pl.lit(None, pl.String), peak_op=pl.lit(None, pl.String))
    moments = peaks.select("rank", "peak_time_ns").drop_nulls().unique()
    if ctx.window is not None:
        moments = moments.filter(ctx.owned("peak_time_ns"))
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
