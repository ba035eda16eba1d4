"""Warm-up and the steady state: which steps every steady-state figure is measured on.

A step is kept out of the steady state (per rank, only with at least :data:`MIN_STEPS_FOR_WARMUP`
steps, so that "the median of the others" means something) when

* ``long first iteration``: it is the first and takes at least :data:`FIRST_FACTOR` times the
  median of the others (cudnn benchmark, compilation, allocator growth, lazy init);
* ``one-time work``: it is the first, is no shorter than the median of the others
  (:data:`ONE_TIME_FACTOR`), and holds autotune/compile/lazy-init work
  (:data:`ONE_TIME_PATTERN`) under a name that no later step holds;
* ``outlier``: it takes at least :data:`OUTLIER_FACTOR` times the median of the others, and
  such steps are rare: at most :data:`MAX_OUTLIER_SHARE` of at least :data:`MIN_STEPS_FOR_OUTLIER`
  steps (with fewer, one long step in three may as well recur every third step), and its
  excess is not a wait for data (a DataLoader fetch covering at least :data:`DATA_WAIT_SHARE`
  of it: a prefetching loader feeds most steps and falls behind now and then, every run). A
  long step that recurs is part of the steady state (a periodic checkpoint costs every run);
* ``profiler stop``: the last step, when it launches no GPU work and lasts under
  :data:`PARTIAL_FACTOR` times the median of the others: the tail between the last step the
  profiler marked and its stop (with 2 steps or more);
* ``partial iteration``: an inferred edge step (see :mod:`tracekit.analyzers.step_inference`)
  shorter than :data:`PARTIAL_FACTOR` times the median of the others: the last
  ``DataLoader.__next__`` of a loop that ends, or the tail of an iteration cut off by the
  profiler.

A step's length here is its host duration (an inferred step's tile), not its window: where
the GPU runs behind the host, the last window holds the whole drain of the queue.

A user may instead name the steps: :func:`step_filter` parses a selection such as ``"3-"``,
``"2-5"``, ``"0,2,4"`` or ``"-4,7"`` (ranges inclusive) into a condition on the ``step``
column: the numbers the trace gives its steps (``ProfilerStep#N``, ``step#N``), or, for
inferred steps, their ordinal position from 0. An explicit selection replaces the automatic
exclusion.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.dataloader import fetch_ranges
from tracekit.errors import InputError
from tracekit.model.schema import KINDS
from tracekit.model.taxonomy import ONE_TIME_WORK
from tracekit.results.vocab import WarmupReason

if TYPE_CHECKING:
    from tracekit.model.run import Run

MIN_STEPS_FOR_WARMUP: Final = 3
FIRST_FACTOR: Final = 2.0
ONE_TIME_FACTOR: Final = 1.0
OUTLIER_FACTOR: Final = 3.0
MAX_OUTLIER_SHARE: Final = 0.2
#: Fewer steps cannot show that a long one is rare (one in five at most).
MIN_STEPS_FOR_OUTLIER: Final = 5
#: A long step whose excess is at least this much DataLoader fetch is the loader falling behind.
DATA_WAIT_SHARE: Final = 0.5
PARTIAL_FACTOR: Final = 0.5
#: Names of one-time work (cudnn/Triton autotune, TorchDynamo/Inductor compilation, lazy CUDA
#: init and module loading, allocator growth): one definition, shared with the idle causes.
ONE_TIME_PATTERN: Final = ONE_TIME_WORK
_PART: Final = re.compile(r"^(?:(\d+)|(\d*)\s*-\s*(\d*))$")


def median_of_others(column: str, by: str) -> pl.Expr:
    """Per row, the median of ``column`` over the other rows of its ``by`` group.

    Exact, without a self-join: removing the row at sorted position ``i`` from ``n`` sorted
    values leaves a median made of the values at positions ``n//2 - 1``, ``n//2`` and
    ``n//2 + 1``, picked by whether ``i`` lies above or below them. Null for groups of
    fewer than 3 rows.
    """
    x, n = pl.col(column), pl.len().cast(pl.Int64)
    pos = x.rank("ordinal").cast(pl.Int64) - 1
    half = n // 2
    a = x.sort().get((half - 1).clip(lower_bound=0))
    b = x.sort().get(half)
    c = x.sort().get((half + 1).clip(upper_bound=n - 1))
    even = pl.when(pos >= half).then(a).otherwise(b)
    odd = (pl.when(pos > half - 1).then(a).otherwise(b) + pl.when(pos > half).then(b).otherwise(c)) / 2
    value = pl.when(n < MIN_STEPS_FOR_WARMUP).then(None).when(n % 2 == 0).then(even).otherwise(odd)
    return value.cast(pl.Float64).over(by)


def one_time_steps(run: Run, steps: pl.DataFrame) -> pl.DataFrame:
    """rank, step: steps holding one-time work under a name that no other step of the rank holds.

    ``steps``: rank, step, win_start_ns, win_end_ns. An event belongs to the window it starts in.
    """
    signs = run.select(KINDS, "rank", pl.col("name").cast(pl.String), "start_ns", name=ONE_TIME_PATTERN)
    frames = steps.select(
        "rank", "step", pl.col("win_start_ns").alias("start_ns"), pl.col("win_end_ns").alias("end_ns")
    )
    held = iv.locate(signs, "start_ns", frames, by=["rank"], keep=["step"]).select("rank", "step", "name").unique()
    alone = held.filter(pl.len().over("rank", "name") == 1)
    return alone.select("rank", "step").unique()


def flag_warmup(run: Run, steps: pl.DataFrame) -> pl.DataFrame:
    """The steps to keep out of the steady state: rank, step, ratio, reason.

    ``steps``: rank, step, duration_ns, gpu_ops, start_ns, end_ns, win_start_ns, win_end_ns,
    edge (an inferred step bounded by no anchor on one side). ``ratio`` is the step's duration
    over the median of the others'.
    """
    once = one_time_steps(run, steps).with_columns(once=pl.lit(True))
    fetched = _fetch_in_steps(run, steps)
    rated = (
        steps.sort("rank", "win_start_ns")
        .with_columns(
            ratio=pl.col("duration_ns") / median_of_others("duration_ns", "rank"),
            first=pl.int_range(pl.len()).over("rank") == 0,
            last=pl.int_range(pl.len()).over("rank") == pl.len().over("rank") - 1,
            n=pl.len().over("rank"),
            before_last=pl.col("duration_ns").slice(0, pl.len() - 1).median().over("rank"),
        )
        .join(once, on=["rank", "step"], how="left")
        .join(fetched, on=["rank", "step"], how="left")
        .with_columns(pl.col("once").fill_null(False), pl.col("fetch_ns").fill_null(0))
    )
    ratio = pl.col("ratio")
    excess = pl.col("duration_ns") - pl.col("duration_ns") / ratio
    waits_for_data = pl.col("fetch_ns") >= DATA_WAIT_SHARE * excess
    outlier = ((ratio >= OUTLIER_FACTOR) & ~waits_for_data).fill_null(False)
    rare = (pl.col("n") >= MIN_STEPS_FOR_OUTLIER) & (
        outlier.sum().over("rank") <= (pl.col("n") * MAX_OUTLIER_SHARE).floor()
    )
    stop = (
        pl.col("last")
        & (pl.col("n") >= 2)
        & (pl.col("gpu_ops") == 0)
        & (pl.col("duration_ns") < PARTIAL_FACTOR * pl.col("before_last"))
    )
    reason = (
        pl.when(pl.col("first") & (ratio >= FIRST_FACTOR))
        .then(pl.lit(WarmupReason.LONG_FIRST.value))
        .when(pl.col("first") & pl.col("once") & (ratio >= ONE_TIME_FACTOR))
        .then(pl.lit(WarmupReason.ONE_TIME.value))
        .when(outlier & rare)
        .then(pl.lit(WarmupReason.OUTLIER.value))
        .when(pl.col("edge") & (ratio < PARTIAL_FACTOR))
        .then(pl.lit(WarmupReason.PARTIAL.value))
        .when(stop)
        .then(pl.lit(WarmupReason.PROFILER_STOP.value))
    )
    flagged = rated.with_columns(reason=reason).filter(pl.col("reason").is_not_null())
    return flagged.filter(pl.len().over("rank") < pl.col("n")).select("rank", "step", "ratio", "reason")


def _fetch_in_steps(run: Run, steps: pl.DataFrame) -> pl.DataFrame:
    """rank, step, fetch_ns: DataLoader fetch time inside each step's host range."""
    fetch = fetch_ranges(run)
    if fetch.height == 0:
        return pl.DataFrame(schema={"rank": steps.schema["rank"], "step": pl.Int64, "fetch_ns": pl.Int64})
    ranges = steps.select(pl.col("rank").cast(pl.Int32), "step", "start_ns", "end_ns")
    inside = iv.intersect(fetch.select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns"), ranges, ["rank"])
    located = iv.locate(inside, "start_ns", ranges, by=["rank"], keep=["step"])
    return located.group_by(pl.col("rank").cast(steps.schema["rank"]), "step").agg(
        fetch_ns=(pl.col("end_ns") - pl.col("start_ns")).sum()
    )


def step_filter(spec: str) -> pl.Expr:
    """A condition on ``step`` from a selection: ``"3-"``, ``"2-5"``, ``"0,2,4"``, ``"-4,7"``.

    Raises :class:`~tracekit.errors.InputError` on anything else.
    """
    step = pl.col("step")
    terms: list[pl.Expr] = []
    for part in spec.split(","):
        match = _PART.match(part.strip())
        if match is None or (match.group(1) is None and not (match.group(2) or match.group(3))):
            raise InputError(f"step selection {spec!r}: expected step numbers and ranges such as '3-', '2-5', '0,2,4'")
        single, low, high = match.groups()
        if single is not None:
            terms.append(step == int(single))
        else:
            terms.append((step >= int(low) if low else pl.lit(True)) & (step <= int(high) if high else pl.lit(True)))
    return pl.any_horizontal(terms)
