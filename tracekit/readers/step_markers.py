"""Step markers that cannot be a loop's steps: left out, cut, or the file refused, and said.

A rank's steps come first from its step markers (``ProfilerStep#N``, tracekit's ``step#N``), and
every figure of the analysis is per step, so one implausible marker changes the answer silently:
zero-length steps make every step 0.0 ms; a step recorded twice (nested in another) adds steps;
steps that run past the next one's start make steps longer than the loop's period. Each file's
markers (each family apart: tracekit's own ``step#N`` beside the profiler's) are screened where
the file is read, before any analysis:

- a marker whose step number is missing or beyond 64 bits (``ProfilerStep#18446744073709551621``)
  is left out;
- a marker of zero (or negative) length is left out;
- a marker inside an earlier one of its family (a step marked twice) is left out;
- a marker that ends after the next one starts is cut there (steps of one loop do not overlap);

each counted in a warning naming the file. A file whose markers say its times are in another
unit is refused (the file is skipped, with the reason), since none of its times can be trusted:

- its markers last, on median, over :data:`OVERLAP_FACTOR` times the mean time between their
  starts (durations in ns read as us: steps of 209 s starting every 0.2 s);
- its steps last under :data:`MIN_STEP_NS` on median (times in seconds read as us: a training
  step of 0.2 us, shorter than one kernel launch).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.errors import TraceReadError
from tracekit.model.by_kind import ROW
from tracekit.model.input_warnings import InputWarning

if TYPE_CHECKING:
    from tracekit.readers.trace import RankTrace

#: Markers lasting more than this many times the median time between their starts are not one
#: loop's steps on one clock (a real loop's steps last about their period: at most 1x).
OVERLAP_FACTOR: Final = 10.0
#: No training step lasts less (a kernel launch alone takes a few us).
MIN_STEP_NS: Final = 1_000
#: The fewest markers the unit checks judge from.
MIN_JUDGED: Final = 3
#: tracekit's own step markers, a family apart from the profiler's.
_TRACEKIT: Final = r"^step#\d+$"


def screen_steps(trace: RankTrace) -> RankTrace:
    """``trace`` with its implausible step markers left out or cut (a warning per kind of fix);
    raises :class:`TraceReadError` when its markers say its times are in another unit."""
    if trace.held.rows_of("step") == 0:
        return trace
    markers = trace.held.lazy("step").collect()  # (in the schema's types: its ends as ends)
    steps = markers.select(
        ROW,
        "start_ns",
        "end_ns",
        family=pl.col("name").cast(pl.String).str.contains(_TRACEKIT),
        number=pl.col("name").cast(pl.String).str.extract(r"#(\d+)$").cast(pl.Int64, strict=False),
    )
    unnumbered = steps.filter(pl.col("number").is_null())
    steps = steps.filter(pl.col("number").is_not_null())
    zero = steps.filter(pl.col("end_ns") <= pl.col("start_ns"))
    rest = steps.filter(pl.col("end_ns") > pl.col("start_ns")).sort("family", "start_ns", pl.col("end_ns").reverse())
    _check_units(rest, trace.path)
    inside = (pl.col("end_ns") <= pl.col("end_ns").cum_max().shift(1).over("family")).fill_null(False)
    nested = rest.filter(inside)
    kept = rest.filter(~inside).with_columns(next_ns=pl.col("start_ns").shift(-1).over("family"))
    over = kept.filter(pl.col("end_ns") > pl.col("next_ns"))
    warnings = [
        InputWarning(kind="bad_steps", count=frame.height, key=what)
        for frame, what in ((unnumbered, "number"), (zero, "zero_length"), (nested, "nested"), (over, "overlapping"))
        if frame.height
    ]
    if not warnings:
        return trace
    dropped = pl.concat([unnumbered.get_column(ROW), zero.get_column(ROW), nested.get_column(ROW)]).sort()
    cut = over.select(ROW, pl.col("next_ns").alias("_cut_ns"))
    fixed = (
        markers.join(cut, on=ROW, how="left", maintain_order="left")
        .filter(~pl.col(ROW).is_in(dropped.implode()))
        .with_columns(end_ns=pl.coalesce("_cut_ns", "end_ns"))
        .drop("_cut_ns")
    )
    return dataclasses.replace(
        trace, held=trace.held.replaced("step", fixed, dropped), warnings=(*trace.warnings, *warnings)
    )


def _check_units(steps: pl.DataFrame, path: str) -> None:
    """Refuse the file when its markers' lengths (``steps``: every marker of a length, before any
    is left out) say its times are in another unit."""
    for family, group in steps.group_by("family"):
        if group.height < MIN_JUDGED:
            continue
        lengths = group.select((pl.col("end_ns") - pl.col("start_ns")).median()).item()
        # the mean time between starts: markers doubled (a step marked twice) halve it, not more
        period = group.select((pl.col("start_ns").max() - pl.col("start_ns").min()) / (pl.len() - 1)).item()
        marker = "step#N" if family[0] else "ProfilerStep"
        if lengths < MIN_STEP_NS:
            raise TraceReadError(
                f"its {marker} markers last {lengths:.3g} ns on median, shorter than any training step: its times "
                "are probably in another unit (seconds where microseconds are expected?); not analyzed",
                path=path,
            )
        if period and lengths > OVERLAP_FACTOR * period:
            raise TraceReadError(
                f"its {marker} markers last {lengths / 1e9:.3g} s on median but start every {period / 1e9:.3g} s: "
                "its durations are probably in another unit (nanoseconds where microseconds are expected?); "
                "not analyzed",
                path=path,
            )
