"""The typed comparison of two runs (``tracekit compare A B``): what changed, by how much, and
whether it is more than noise.

Built by :func:`tracekit.analyzers.compare.compare` from two (or, with repeats, several)
:class:`~tracekit.results.analysis.Analysis` per side, saved as JSON like an analysis, and
rendered by the same renderers.

Conventions: ``delta`` is always B minus A, in the measure's unit; ``delta_pct`` is that
over A's value; ``step_pct`` is that over A's mean step time (so a phase's change reads as a
share of the step). Times are nanoseconds, shares percentages, memory bytes. Findings (how the
runs differ, the gate's outcome, how the intervals were made, what a sync is) are kinds and
figures; their sentences are written by :mod:`tracekit.reports.compare_text`.

Schema 2.0 (from 1.0): ``warnings`` are :class:`RunDifference` objects, ``gate`` results hold
their outcome and figures (no ``message``, ``observed`` or limit text), ``noise.method`` is a
:class:`NoiseMethod` and ``syncs.measure`` a :class:`SyncMeasure`, where 1.0 held sentences.

Schema 2.1 (from 2.0): a :class:`Measure` and a :class:`GateResult` hold no ``label`` (reports name a
measure from its ``key``, its ``unit`` and, for peak memory, ``peak_of``); a measure's ``note`` is a
:class:`MeasureNote`; throughput in samples per second has the unit ``samples_per_s`` (2.0: ``per_s``).

Schema 2.2 adds ``outliers``; 2.3 the measure ``cpu``: the CPU time per step of each rank's
process (the mean over ranks), from capture summaries of 1.7 and later, present when either
side has it.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from tracekit.results.analysis import Finding  # noqa: TC001  (msgspec reads annotations at run time)
from tracekit.results.vocab import (
    BoundKind,
    Change,
    GateOutcome,
    MeasuredOn,
    MeasureNote,
    NoiseMethod,
    PeakSource,
    PerUnit,
    SideKey,
    StepSource,
    SyncKind,
    SyncMeasure,
    Unit,
    WarningKind,
    WorkKind,
)

COMPARISON_SCHEMA: Final = "tracekit.comparison"
COMPARISON_SCHEMA_VERSION: Final = "2.3"


class Struct(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the comparison Structs."""


class Interval(Struct, frozen=True, kw_only=True):
    """A confidence interval of a difference (B - A), at ``level`` (0.95 is 95%)."""

    low: float
    high: float
    level: float


class Measure(Struct, frozen=True, kw_only=True):
    """One quantity measured on both runs, its change, and whether the change is beyond noise."""

    #: what is measured, and what reports name it by: "step", "throughput", "syncs",
    #: "compute_pct" (and "comm_pct", "memory_pct", "idle_pct"), "exposed_comm", "overlap_pct",
    #: "peak_memory", "peak_reserved", "peak_gap", "cpu" (CPU time per step, from the capture;
    #: since 2.3), "rank:<r>", "phase:<name>"
    key: str
    unit: Unit
    #: for "peak_memory": where the peak was read (None: nowhere, on either side)
    peak_of: PeakSource | None = None
    #: True when less is better (times), False when more is (throughput), None when neither
    lower_is_better: bool | None = None
    a: float | None = None  # A's mean (or its value, measured once)
    b: float | None = None
    a_median: float | None = None
    b_median: float | None = None
    delta: float | None = None  # b - a
    delta_pct: float | None = None  # delta over a, percent
    delta_median: float | None = None
    #: delta over A's mean step time, percent (times only)
    step_pct: float | None = None
    ci: Interval | None = None  # of the difference of means
    ci_median: Interval | None = None  # of the difference of medians
    #: the smallest change of the mean this comparison could have detected (same unit)
    detectable: float | None = None
    n_a: int = 0  # samples behind a (steps, or runs x steps)
    n_b: int = 0
    change: Change = Change.NOT_MEASURED
    rank: int | None = None
    note: MeasureNote | None = None


class Distribution(Struct, frozen=True, kw_only=True):
    """The step times of one side (``rank`` None: per step, the mean over ranks), for the charts."""

    side: SideKey
    rank: int | None = None
    count: int
    mean_ns: float | None = None
    median_ns: float | None = None
    p5_ns: float | None = None
    p95_ns: float | None = None
    min_ns: float | None = None
    max_ns: float | None = None
    values_ns: list[float] = msgspec.field(default_factory=list)


class OutlierRun(Struct, frozen=True, kw_only=True):
    """A run whose mean step is far from the other runs of its side
    (:mod:`tracekit.analyzers.compare.outliers`): named, since it widens its side's interval."""

    side: SideKey
    #: its place among its side's runs, from 1 (run1, run2... of a folder of repeats, in name order)
    run: int
    #: the folder of its traces, when known
    source: str | None = None
    mean_ns: float
    #: the other runs' means, and the median of every run's mean on its side
    others_ns: list[float] = msgspec.field(default_factory=list)
    side_median_ns: float
    #: its distance from the median in robust standard deviations (1.4826 x the MAD of the side's
    #: run means); None when every other run has the same mean (the MAD is zero)
    score: float | None = None


class WorkChange(Struct, frozen=True, kw_only=True):
    """One name of work on both sides, per step (per second of trace when a side has no steps)."""

    kind: WorkKind
    name: str
    category: str | None = None
    #: for syncs: the phase (outermost annotation) the sync was issued in, and its kind
    phase: str | None = None
    sync_kind: SyncKind | None = None
    a_count: float | None = None  # per unit (step or second); None when absent
    b_count: float | None = None
    a_ns: float | None = None  # time per unit
    b_ns: float | None = None
    delta_count: float = 0.0
    delta_ns: float = 0.0
    change: Change = Change.SAME


class SyncComparison(Struct, frozen=True, kw_only=True):
    """Host syncs per step on both sides, by what counts as one on the device measured."""

    measure: SyncMeasure
    a_per_step: float | None = None
    b_per_step: float | None = None
    delta: float | None = None
    #: "does B sync per step?" answered: the rows of :class:`WorkChange` of kind sync
    sources: list[WorkChange] = msgspec.field(default_factory=list)


class CostShift(Struct, frozen=True, kw_only=True):
    """One candidate bound's share on both sides."""

    bound: BoundKind
    a_pct: float | None = None
    b_pct: float | None = None
    delta_pct: float | None = None


class VerdictComparison(Struct, frozen=True, kw_only=True):
    """The two verdicts side by side, and what moved between them."""

    a: Finding
    b: Finding
    a_measured_on: MeasuredOn
    b_measured_on: MeasuredOn
    same_bound: bool
    costs: list[CostShift] = msgspec.field(default_factory=list)


class Side(Struct, frozen=True, kw_only=True):
    """What one side of the comparison is."""

    label: str  # "A" or "B" (or the user's label)
    sources: list[str]
    #: how many runs (captures) were pooled on this side (--repeats)
    runs: int = 1
    world_size: int | None = None
    ranks: list[int] = msgspec.field(default_factory=list)
    devices: list[str] = msgspec.field(default_factory=list)
    backend: str | None = None
    measured_on: MeasuredOn
    #: measured steps per run, over every rank; 0 when the trace has no steps
    steps: int = 0
    step_source: StepSource | None = None
    #: from the capture summary, when the run was captured by tracekit
    workload: str | None = None
    batch_size: int | None = None
    config: dict[str, Any] | None = None
    tracekit_version: str | None = None


class NoiseModel(Struct, frozen=True, kw_only=True):
    """How "within noise" was decided (written beside the results, so the reader can judge)."""

    method: NoiseMethod
    level: float  # confidence level of the intervals
    resamples: int
    #: a change smaller than this share of A's value is within noise even when the interval
    #: excludes zero (run-to-run drift a single pair of runs cannot measure), percent
    threshold_pct: float
    #: what "per step" means
    unit: PerUnit
    seed: int


class GateResult(Struct, frozen=True, kw_only=True):
    """One ``--fail-if`` condition, the figures it read, and whether B breaks it."""

    spec: str  # the condition as given
    key: str  # the measure it reads
    unit: Unit
    peak_of: PeakSource | None = None  # the measure's
    #: the limit as a share of A's value (percent) when the condition gave a share
    limit_pct: float | None = None
    #: the limit in the measure's unit (a share worked out on A's value)
    limit: float
    #: the measure's change B - A, that over A (percent), and its interval
    delta: float
    delta_pct: float | None = None
    ci: Interval | None = None
    outcome: GateOutcome
    failed: bool  # outcome is regressed


class RunDifference(Struct, frozen=True, kw_only=True):
    """One way the runs differ in what they measure: its kind and figures (see :class:`WarningKind`)."""

    kind: WarningKind
    a: int | str | None = None
    b: int | str | None = None
    a_items: list[int | str] = msgspec.field(default_factory=list)
    b_items: list[int | str] = msgspec.field(default_factory=list)
    keys: list[str] = msgspec.field(default_factory=list)


class Comparison(Struct, frozen=True, kw_only=True):
    """Two runs compared: A the baseline, B the change."""

    schema: str = COMPARISON_SCHEMA
    schema_version: str = COMPARISON_SCHEMA_VERSION
    tracekit_version: str
    a: Side
    b: Side
    noise: NoiseModel
    #: the step time (each step the mean over ranks): the headline
    step: Measure
    #: run-level measures: median step, throughput, peak memory, shares, exposed comm, overlap
    measures: list[Measure] = msgspec.field(default_factory=list)
    #: step time of each rank present on both sides
    per_rank: list[Measure] = msgspec.field(default_factory=list)
    #: each phase (outermost annotation) per step
    phases: list[Measure] = msgspec.field(default_factory=list)
    distributions: list[Distribution] = msgspec.field(default_factory=list)
    #: kernels, host ops and collectives that appeared, disappeared or changed, largest first
    work: list[WorkChange] = msgspec.field(default_factory=list)
    syncs: SyncComparison
    verdicts: VerdictComparison
    #: how the runs differ in what they measure (world size, devices, batch, steps)
    warnings: list[RunDifference] = msgspec.field(default_factory=list)
    gate: list[GateResult] = msgspec.field(default_factory=list)
    #: runs far from the others of their side (since 2.2)
    outliers: list[OutlierRun] = msgspec.field(default_factory=list)


def dump_comparison(comparison: Comparison) -> str:
    """The comparison as indented JSON text (ends with a newline)."""
    return msgspec.json.format(msgspec.json.encode(comparison), indent=2).decode() + "\n"
