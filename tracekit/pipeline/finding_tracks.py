"""tracekit's findings as intervals of each rank, one table per track of the annotated trace.

Each track is read from the frames the analysis already reduced (:class:`~tracekit.analyzers.mapreduce.Reduced`):
nothing is measured again, so the slices show exactly the intervals behind the report's numbers.

- ``steps``: every step found, warm-up or steady (or outside ``--steps``), from the step analysis;
- ``phases``: the top-level phases of each rank (the ranges the phase breakdown reads);
- ``idle``: on a GPU run every GPU idle interval with its cause (the idle-cause analysis); on a
  CPU run, where the host is the device, the stretches the host was blocked (waiting on a host
  collective, or a blocking sync);
- ``straggler_waits``: the time each rank waited inside each collective for the last rank to
  arrive (its duration beyond the collective's latency floor), with the rank it waited for;
- ``host_syncs``: the host's blocking calls (syncs, copies to or from pageable memory).

Each track keeps at most :data:`KEPT_PER_TRACK` slices of a rank, the longest; what it left out
is in :attr:`Track.totals`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers.gains import GainParts
from tracekit.analyzers.parts import SyncParts
from tracekit.analyzers.shared import COLLECTIVES, IDLE, STEPS

if TYPE_CHECKING:
    from tracekit.analyzers.mapreduce import Reduced

#: The slices of one rank a track keeps at most (the longest).
KEPT_PER_TRACK: Final = 5000
#: The columns every track's slices have; the others are the slice's arguments.
SLICE: Final = ("rank", "name", "start_ns", "end_ns")


@dataclass(frozen=True)
class Track:
    """One kind of finding over every rank."""

    #: a short key (``steps``, ``phases``, ``idle``, ``straggler_waits``, ``host_syncs``)
    key: str
    #: the track's name in a trace viewer
    title: str
    #: rank, name, start_ns, end_ns, then the finding's numbers (its args), at most
    #: :data:`KEPT_PER_TRACK` rows of a rank
    slices: pl.DataFrame
    #: rank, total: how many slices each rank had before the cap
    totals: pl.DataFrame


def finding_tracks(red: Reduced, *, kept: int = KEPT_PER_TRACK) -> list[Track]:
    """Every track of findings of the reduced analysis ``red`` (tracks without a slice left out)."""
    idle_title = "idle by cause" if red.has_gpu else "idle by cause (host blocked)"
    tracks = [
        ("steps", "steps: warm-up / steady", _steps(red)),
        ("phases", "phases", _phases(red)),
        ("idle", idle_title, _idle(red)),
        ("straggler_waits", "straggler waits", _waits(red)),
        ("host_syncs", "host syncs", _syncs(red)),
    ]
    out = []
    for key, title, found in tracks:
        if found.height == 0:
            continue
        typed = found.with_columns(pl.col("rank").cast(pl.Int64), pl.col("name").cast(pl.String))
        total = pl.col("_total").first() if "_total" in typed.columns else pl.len()
        totals = typed.group_by("rank").agg(total=total.cast(pl.Int64)).sort("rank")
        capped = (
            typed.drop("_total", strict=False)
            .with_columns(_length=pl.col("end_ns") - pl.col("start_ns"))
            .sort(["rank", "_length", "start_ns"], descending=[False, True, False])
            .group_by("rank", maintain_order=True)
            .head(kept)
            .drop("_length")
            .sort("rank", "start_ns", "end_ns", descending=[False, False, True])
        )
        out.append(Track(key=key, title=title, slices=capped, totals=totals))
    return out


def _steps(red: Reduced) -> pl.DataFrame:
    """Every step found, with whether it is warm-up, steady (measured) or left out by ``--steps``."""
    steps = red.result(STEPS)
    every = steps.all_steps
    if every.height == 0:
        return pl.DataFrame()
    key = ["rank", "step"]
    warm = steps.warmup.select(*key, pl.col("ratio").alias("warmup_ratio"), pl.col("reason").alias("warmup_reason"))
    measured = steps.steps.select(*key, _measured=pl.lit(True))
    status = (
        pl.when(pl.col("warmup_reason").is_not_null() | pl.col("warmup_ratio").is_not_null())
        .then(pl.lit("warm-up"))
        .when(pl.col("_measured"))
        .then(pl.lit("steady"))
        .otherwise(pl.lit("not measured"))
    )
    joined = every.join(warm, on=key, how="left").join(measured, on=key, how="left")
    kept = ("rank", "start_ns", "end_ns", "step", "duration_ns", "warmup_ratio", "warmup_reason")
    return joined.select(*kept, name=pl.format("step {} ({})", "step", status), status=status)


def _phases(red: Reduced) -> pl.DataFrame:
    """The top-level phases (annotations) of each rank inside its measured window."""
    phases = red.gather(GainParts).phases
    if phases.height == 0:
        return pl.DataFrame()
    return phases.select(*SLICE, duration_ns=pl.col("end_ns") - pl.col("start_ns"))


def _idle(red: Reduced) -> pl.DataFrame:
    """GPU idle intervals by cause; on a CPU run, where the host was blocked."""
    if (found := red.result(IDLE)) is not None:
        idle = found.intervals
        if idle.height == 0:
            return pl.DataFrame()
        cause = pl.col("cause").cast(pl.String)
        kept = ("rank", "start_ns", "end_ns", "length_ns", "step", "ended_by", "host_range", "launches")
        return idle.select(*kept, name=cause, cause=cause)
    blocks = red.gather(GainParts).blocks
    if blocks.height == 0:
        return pl.DataFrame()
    cause = pl.when(pl.col("on_collectives")).then(pl.lit("collective wait")).otherwise(pl.lit("blocking sync"))
    return blocks.select(
        "rank",
        name=cause,
        start_ns="start_ns",
        end_ns="end_ns",
        cause=cause,
        length_ns=pl.col("end_ns") - pl.col("start_ns"),
    )


def _waits(red: Reduced) -> pl.DataFrame:
    """Each rank's wait in each collective for the last rank to arrive: from its start, for its
    duration beyond the collective's latency floor (``wait_ns`` of the matched collectives)."""
    per_rank = red.result(COLLECTIVES).per_rank
    if per_rank.height == 0 or "wait_ns" not in per_rank.columns:
        return pl.DataFrame()
    instance = ["pg", "op", "k"]
    last = per_rank.filter(pl.col("is_last")).unique(instance, keep="first").select(*instance, waited_for="rank")
    waits = per_rank.filter(pl.col("wait_ns") > 0).join(last, on=instance, how="left", nulls_equal=True)
    numbers = ("wait_ns", "floor_ns", "duration_ns", "lateness_ns", "explained_wait_ns", "unexplained_wait_ns")
    return waits.select(
        *("rank", "start_ns", "op", "step", *numbers),
        name=pl.format("wait in {}", "op"),
        end_ns=pl.col("start_ns") + pl.col("wait_ns"),
        process_group="pg",
        instance="k",
        waited_for_rank="waited_for",
    )


def _syncs(red: Reduced) -> pl.DataFrame:
    """The host's blocking calls (the longest of each rank: :func:`~tracekit.analyzers.syncs.longest_calls`)."""
    calls = red.gather(SyncParts).calls
    if calls.height == 0:
        return pl.DataFrame()
    return calls.select(*SLICE, kind="kind", op="op", duration_ns=pl.col("end_ns") - pl.col("start_ns"), _total="calls")
