"""Time left out of the measured window: each rank's recorded time that no measured window
holds, how long and why.

A rank's *recorded span* runs from its first to its last activity on the host (operators,
annotations, runtime and driver calls, step markers; on any thread) or on the device. Its
measured window (:func:`tracekit.analyzers.timeline.windows`) is the windows of its steady
steps, or, without steps (or with ``--window gpu_span``), its device span: from its first GPU
operation to its last (on a CPU-only run, its first and last operator). What lies outside
(:class:`~tracekit.results.vocab.LeftOutReason`):

* before the window: before the first step's window, or, on a device span, before the first
  device operation (a host that loads data, builds the model or compiles before it launches
  anything);
* the steps kept out of the steady state: warm-up steps, or those a ``--steps`` selection
  leaves out (their windows, summed: the warm-up table lists them one by one);
* after the window: after the last step's window or the last device operation (the
  profiler's stop and flush, or host work after the loop).

Only what is material is kept: a stretch of at least
:data:`~tracekit.results.thresholds.LEFT_OUT_MIN_SHARE` of the rank's recorded span and at least
:data:`~tracekit.results.thresholds.LEFT_OUT_MIN_NS` (the reports quote them). On the real
traces here, what healthy traces leave out is the profiler's stop after the last step: at most
2.7% of their span (17 ms of 684 ms on HTA's NCCL trace); what a window without steps leaves
out elsewhere is 40-90% of a trace (25 s of host setup before the first kernel of a 42 s trace).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers.step_inference import HOST_KINDS
from tracekit.model.schema import GPU_ACTIVITY_KINDS
from tracekit.results.thresholds import LEFT_OUT_MIN_NS, LEFT_OUT_MIN_SHARE
from tracekit.results.vocab import LeftOutReason

if TYPE_CHECKING:
    from tracekit.analyzers.steps import StepResult
    from tracekit.model.run import Run

#: What a rank's recorded span is made of.
RECORDED_KINDS: Final = (*HOST_KINDS, *GPU_ACTIVITY_KINDS)
_RANK: Final = pl.col("rank").cast(pl.Int32)
#: The columns of a left-out table.
COLUMNS: Final = ("rank", "reason", "ns", "start_ns", "end_ns", "share_pct", "steps", "ranks")


def left_out(run: Run, steps: StepResult, frames: pl.DataFrame) -> pl.DataFrame:
    """The material stretches of each rank's recorded span outside its measured ``frames``.

    ``frames``: the measured windows (rank, step, start_ns, end_ns; ``step`` null for a device
    span). Returns :data:`COLUMNS`: ``reason`` a :class:`LeftOutReason` value, ``ns`` the time
    left out, ``start_ns``/``end_ns`` where (from the first start to the last end), ``share_pct``
    of the rank's recorded span, ``steps`` the steps it holds, ``ranks`` 1.
    """
    return left_out_of(recorded_span(run), steps.all_steps, steps.steps, frames, excluded_reason(steps))


def recorded_span(run: Run, owned: pl.Expr | None = None) -> pl.DataFrame:
    """rank, first_ns, last_ns: each rank's recorded span, the first start and the last end of
    its host and device events (of those ``owned`` is true of: a window's, say)."""
    events = run.unordered("rank", "start_ns", "end_ns", kinds=RECORDED_KINDS)
    if owned is not None:
        events = events.filter(owned)
    return events.group_by(_RANK).agg(first_ns=pl.col("start_ns").min(), last_ns=pl.col("end_ns").max()).collect()


def excluded_reason(steps: StepResult) -> LeftOutReason:
    """Why the steps found but kept out of the steady state are left out: a ``--steps``
    selection left them out, or they are warm-up."""
    return LeftOutReason.UNSELECTED if steps.selection is not None else LeftOutReason.WARMUP


def left_out_of(
    span: pl.DataFrame, all_steps: pl.DataFrame, steps: pl.DataFrame, frames: pl.DataFrame, excluded: LeftOutReason
) -> pl.DataFrame:
    """:func:`left_out` from its pieces: each rank's recorded ``span`` (:func:`recorded_span`),
    every step found (``all_steps``), the steady ones (``steps``), the measured ``frames``, and
    why the steps kept out of the steady state are (:func:`excluded_reason`)."""
    every = all_steps.select(_RANK, "step", "win_start_ns", "win_end_ns")
    bounds = _bounds(frames, every).join(span, on="rank")

    def edge(start: str, end: str, stepped: LeftOutReason, device: LeftOutReason) -> pl.DataFrame:
        reason = pl.when("stepped").then(pl.lit(stepped.value)).otherwise(pl.lit(device.value))
        return bounds.select("rank", reason=reason, start_ns=pl.col(start), end_ns=pl.col(end))

    before = edge("first_ns", "start", LeftOutReason.BEFORE_FIRST_STEP, LeftOutReason.BEFORE_FIRST_DEVICE_OP)
    after = edge("end", "last_ns", LeftOutReason.AFTER_LAST_STEP, LeftOutReason.AFTER_LAST_DEVICE_OP)
    pieces = pl.concat([before, after]).with_columns(
        ns=(pl.col("end_ns") - pl.col("start_ns")).clip(lower_bound=0), steps=pl.lit(0, dtype=pl.UInt32)
    )
    # the steps of a rank measured by its steps that its windows leave out: warm-up, or unselected
    out = every.join(steps.select(_RANK, "step"), on=["rank", "step"], how="anti")
    out = out.join(bounds.filter("stepped").select("rank"), on="rank", how="semi")
    kept_out = out.group_by("rank").agg(
        reason=pl.lit(excluded.value),
        start_ns=pl.col("win_start_ns").min(),
        end_ns=pl.col("win_end_ns").max(),
        ns=(pl.col("win_end_ns") - pl.col("win_start_ns")).sum(),
        steps=pl.len(),
    )
    whole = span.select("rank", recorded=pl.col("last_ns") - pl.col("first_ns"))
    return (
        pl.concat([pieces, kept_out.select(pieces.columns)])
        .join(whole, on="rank")
        .with_columns(share_pct=100 * pl.col("ns") / pl.col("recorded"), ranks=pl.lit(1))
        .filter(pl.col("ns") >= LEFT_OUT_MIN_NS, pl.col("ns") >= LEFT_OUT_MIN_SHARE * pl.col("recorded"))
        .select(*COLUMNS)
        .with_columns(pl.col("ns", "start_ns", "end_ns", "steps", "ranks").cast(pl.Int64))
        .sort("rank", "start_ns")
    )


def _bounds(frames: pl.DataFrame, every: pl.DataFrame) -> pl.DataFrame:
    """rank, stepped, start, end: where each rank's measured window begins and ends. A rank
    measured by its steps (``stepped``) spans all of them, warm-up included (what its windows
    leave out between is counted apart); any other, its device span."""
    measured = frames.group_by(_RANK).agg(
        stepped=pl.col("step").is_not_null().any(), start=pl.col("start_ns").min(), end=pl.col("end_ns").max()
    )
    outer = every.group_by("rank").agg(first=pl.col("win_start_ns").min(), last=pl.col("win_end_ns").max())
    return measured.join(outer, on="rank", how="left").select(
        "rank",
        "stepped",
        start=pl.when("stepped").then("first").otherwise("start"),
        end=pl.when("stepped").then("last").otherwise("end"),
    )


def run_left_out(per_rank: pl.DataFrame) -> pl.DataFrame:
    """One row per reason over the ranks of ``per_rank`` (:func:`left_out`) where it is material:
    ``ranks`` of them, ``ns`` and ``share_pct`` their mean, ``steps`` their sum, from the earliest
    start to the latest end; ``rank`` null."""
    if per_rank.height == 0:
        return per_rank.clear()
    return (
        per_rank.group_by("reason")
        .agg(
            pl.col("ns").mean().round().cast(pl.Int64),
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            pl.col("share_pct").mean(),
            pl.col("steps").sum(),
            ranks=pl.len().cast(pl.Int64),
        )
        .with_columns(rank=pl.lit(None, dtype=per_rank.schema["rank"]))
        .select(*COLUMNS)
        .sort("start_ns", "reason")
    )
