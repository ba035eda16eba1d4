"""Steps: each rank's steps (found or inferred), their GPU work, windows and steady state.

Steps come from the trace's markers (tracekit's ``step#N``, ``ProfilerStep#N``) or, without
them, are inferred from repeated structure (:mod:`tracekit.analyzers.step_inference`); every
rank records how (:class:`~tracekit.results.vocab.StepSource`). Found and inferred steps have
the same columns, so every analysis downstream works on either.

A step's GPU work is the GPU activity launched while the step's range was open on the host
(linked through correlation ids; activity with no recorded launch counts where it starts).
A step's *window* is the stretch of time the step costs: from the earlier of its host start
and its first GPU activity to the start of the next step's window (the last step ends at
the later of its host end and its last GPU activity). Windows of one rank tile time without
overlap, so per-step measures add up to the run's.

Warm-up steps (:mod:`tracekit.analyzers.warmup`) are reported apart and kept out of
``StepResult.steps``, the steady state every downstream figure is measured on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.keys import CORRELATION_KEY, packs
from tracekit.analyzers.stats import summary_exprs
from tracekit.analyzers.step_inference import host_steps
from tracekit.analyzers.warmup import flag_warmup, step_filter
from tracekit.errors import InputError
from tracekit.model.by_kind import with_literals
from tracekit.model.schema import GPU_ACTIVITY_KINDS
from tracekit.results.vocab import StepSource

if TYPE_CHECKING:
    from tracekit.model.run import Run

#: The runtime and driver calls that replay a captured graph (read by :mod:`tracekit.analyzers.run_traits`).
GRAPH_LAUNCH: Final = r"^(?:cuda|hip|cu)GraphLaunch(?:_|$)"

#: The columns of every step frame, found or inferred.
STEP_COLUMNS: Final = (
    "rank",
    "step",
    "name",
    "start_ns",
    "end_ns",
    "duration_ns",
    "gpu_start_ns",
    "gpu_end_ns",
    "gpu_ops",
    "win_start_ns",
    "win_end_ns",
)


def _empty(columns: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=columns)


@dataclass(frozen=True)
class StepResult:
    """Per-step rows, per-rank step-time statistics, warm-up and how the steps were found.

    Inferred steps are numbered by ordinal position from 0 (named ``inferred step#N``);
    found steps keep the trace's numbers.
    """

    #: the steady-state steps every downstream figure uses: rank, step, name, start_ns,
    #: end_ns, duration_ns, gpu_start_ns, gpu_end_ns, gpu_ops, win_start_ns, win_end_ns
    steps: pl.DataFrame
    #: rank, count, mean_ns, median_ns, p95_ns, min_ns, max_ns (of the steady steps' host duration)
    stats: pl.DataFrame
    #: every step found or inferred, warm-up included (same columns as ``steps``)
    all_steps: pl.DataFrame = field(default_factory=lambda: _empty({"rank": pl.Int32(), "step": pl.Int64()}))
    #: the steps detected as warm-up: the ``steps`` columns, ratio (the step's host duration
    #: over the median of the others'), reason (a :class:`~tracekit.results.vocab.WarmupReason`
    #: value). Kept out of ``steps`` unless ``include_warmup`` or a selection keeps them.
    warmup: pl.DataFrame = field(default_factory=lambda: _empty({"rank": pl.Int32(), "step": pl.Int64()}))
    #: one row per rank: rank, source (a StepSource value), anchor (the name inferred from),
    #: pid, tid (the thread of the steps), found, steady, warmup (step counts)
    how_found: pl.DataFrame = field(default_factory=lambda: _empty({"rank": pl.Int32(), "source": pl.String()}))
    #: the user's step selection, when one was given
    selection: str | None = None
    #: whether warm-up steps were kept in the steady state
    include_warmup: bool = False

    @property
    def has_steps(self) -> bool:
        """Whether any rank has steady-state steps (found or inferred)."""
        return self.steps.height > 0

    @property
    def sources(self) -> dict[int, StepSource]:
        """How each rank's steps were found."""
        return {int(r): StepSource(s) for r, s in self.how_found.select("rank", "source").iter_rows()}

    @property
    def threads(self) -> pl.DataFrame:
        """rank, pid, tid: the host thread each rank's steps are on (ranks with steps only)."""
        return self.how_found.select("rank", "pid", "tid").drop_nulls()


def graph_launches(run: Run) -> pl.DataFrame:
    """The runtime and driver calls of ``run`` that replay a captured graph (:data:`GRAPH_LAUNCH`):
    rank, correlation, once each."""
    return run.select(["runtime", "driver"], "rank", "correlation", name=GRAPH_LAUNCH).unique()


def gpu_activity(run: Run) -> pl.DataFrame:
    """GPU activities (kernels, copies, sets) with ``launch_ns``: when the host launched them.

    Columns: rank, kind, name, category, start_ns, end_ns, device, stream, correlation,
    launch_ns, launch_pid (the process that launched it; null when no launch was recorded),
    launch_call_ns (how long the launch call took on the host; null likewise).
    """
    launches = run.select(
        ["runtime", "driver"],
        "rank",
        "correlation",
        pl.col("start_ns").alias("launch_ns"),
        pl.col("pid").alias("launch_pid"),
        (pl.col("end_ns") - pl.col("start_ns")).alias("launch_call_ns"),
        where=pl.col("correlation").is_not_null(),
    )
    activity = run.select(
        GPU_ACTIVITY_KINDS, "rank", "kind", "name", "category", "start_ns", "end_ns", "device", "stream", "correlation"
    )
    linked = _link(activity, launches).with_columns(pl.col("launch_ns").fill_null(pl.col("start_ns")))
    # a table held through every analysis of the rank (through all its windows): its columns of
    # one value held once (a 2 GB rank's 0.7M activities: its rank, device and launching process)
    return with_literals(linked)


def _link(activity: pl.DataFrame, launches: pl.DataFrame) -> pl.DataFrame:
    """``activity`` with the launch (rank, correlation) of each row: launch_ns, launch_pid,
    launch_call_ns.

    Joins on one integer, ``rank * 2**40 + correlation``, when the ids allow it (a join on
    two columns costs twice as much), and skips grouping the launches by id unless some id
    was launched more than once: then the earliest launch's time counts, and the first call's
    (in event order: ``launches``' order) process and duration.
    """
    one = packs(activity, launches)
    keys = ["_key"] if one else ["rank", "correlation"]

    def keyed(df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(CORRELATION_KEY.alias("_key")) if one else df

    right = keyed(launches).select(*keys, "launch_ns", "launch_pid", "launch_call_ns")
    joined = keyed(activity).join(right, on=keys, how="left")
    if joined.height != activity.height:  # an id launched more than once: the earliest launch
        right = right.group_by(keys).agg(
            pl.col("launch_ns").min(), pl.col("launch_pid").first(), pl.col("launch_call_ns").first()
        )
        joined = keyed(activity).join(right, on=keys, how="left")
    return joined.drop("_key", strict=False)


def analyze_steps(
    run: Run, *, activity: pl.DataFrame | None = None, select: str | None = None, include_warmup: bool = False
) -> StepResult:
    """Find (or infer) every rank's steps, their GPU windows, and the steady state.

    ``select``: the steps to measure, as ``"3-"``, ``"2-5"``, ``"0,2,4"`` (see
    :func:`tracekit.analyzers.warmup.step_filter`: the trace's step numbers, or ordinal
    positions from 0 for inferred steps); it replaces the automatic warm-up exclusion.
    ``include_warmup``: keep the warm-up steps in the steady state. Raises
    :class:`~tracekit.errors.InputError` when ``select`` is malformed or leaves a rank that
    has steps with none.
    """
    activity = gpu_activity(run) if activity is None else activity
    host, found = host_steps(run)
    every = _windows(host, activity)
    flagged = flag_warmup(run, every)
    warm = every.join(flagged, on=["rank", "step"], how="inner").select(*STEP_COLUMNS, "ratio", "reason")
    if select is not None:
        steady = every.filter(step_filter(select))
        _check_selection(every, steady, select)
    elif include_warmup:
        steady = every
    else:
        steady = every.join(flagged, on=["rank", "step"], how="anti")
    steady, every = steady.select(STEP_COLUMNS), every.select(STEP_COLUMNS)
    stats = steady.group_by("rank").agg(summary_exprs("duration_ns")).sort("rank")
    counts = [(every, "found"), (steady, "steady"), (warm, "warmup")]
    how = found
    for frame, name in counts:
        n = frame.group_by("rank").agg(pl.len().cast(pl.Int64).alias(name))
        how = how.join(n, on="rank", how="left").with_columns(pl.col(name).fill_null(0))
    return StepResult(
        steps=steady,
        stats=stats,
        all_steps=every,
        warmup=warm,
        how_found=how,
        selection=select,
        include_warmup=include_warmup,
    )


def _check_selection(every: pl.DataFrame, chosen: pl.DataFrame, spec: str) -> None:
    """A selection must leave every rank that has steps with at least one."""
    empty = sorted(set(every["rank"].to_list()) - set(chosen["rank"].to_list()))
    if empty:
        numbers = every.filter(pl.col("rank") == empty[0])["step"].to_list()
        raise InputError(
            f"step selection {spec!r} selects no step of rank {', '.join(map(str, empty))} "
            f"(its steps: {min(numbers)}-{max(numbers)})"
        )


def _windows(host: pl.DataFrame, activity: pl.DataFrame) -> pl.DataFrame:
    """Host steps (rank, step, name, start_ns, end_ns, edge) with their GPU work and windows."""
    host = host.with_row_index("_row").with_columns(duration_ns=pl.col("end_ns") - pl.col("start_ns"))
    owned = (
        iv.locate(activity, "launch_ns", host, by=["rank"], keep=["_row"])
        .group_by("_row")
        .agg(gpu_start_ns=pl.col("start_ns").min(), gpu_end_ns=pl.col("end_ns").max(), gpu_ops=pl.len())
    )
    return (
        host.join(owned, on="_row", how="left")
        .with_columns(pl.col("gpu_ops").fill_null(0).cast(pl.Int64))
        .with_columns(win_start_ns=pl.min_horizontal("start_ns", "gpu_start_ns"))
        .sort("rank", "win_start_ns")
        .with_columns(
            win_end_ns=pl.col("win_start_ns")
            .shift(-1)
            .over("rank")
            .fill_null(pl.max_horizontal("end_ns", "gpu_end_ns"))
        )
        .select(*STEP_COLUMNS, "edge")
    )
