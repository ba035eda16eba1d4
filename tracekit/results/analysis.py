"""The typed analysis of one run: every section a report shows, and the verdict.

``Analysis`` round-trips through JSON (:mod:`tracekit.results.io`): what ``tracekit analyze``
saves with ``--json`` loads back into the same object, so reports can be rendered again and
runs compared without the traces. Large per-instance tables (collectives per rank, every idle
interval) are not in it: they go to the optional Parquet details file.

Schema 2.5 (from 2.4): the run's ``warnings`` are :class:`RunWarning` objects (a kind and its
figures) and each rank's ``rank_source`` a :class:`RankFound` where 2.4 held sentences, and the
capture summary inside is of capture schema 1.5
(notes and how ranks were chosen as kinds); a file of 2.0 to 2.4 is read into them when loaded
(:mod:`tracekit.results.upgrade`). Also new in 2.5: what removing each waste is worth
(:class:`Gain`: ``Finding.gain`` and ``Verdict.gains``; empty in older files). New in 2.6: each
rank's clock offset and the steps whose collectives do not align (``CollectivesSection.clocks``
and ``misaligned``), and which instances every rank holds (``CollectiveInstance.common``).
New in 2.7: the host of each clock offset (``ClockOffset.host``: ranks of one host share one
clock) and how far a rank's step windows are off from the others' where their numbering does not
line up (``MisalignedStep.offset_ns``). New in 2.8: the idle cause and ledger entry
``capture_sync``: the GPU idle after tracekit capture's own step-end sync (it times the step),
which bounds nothing of the training; before, it counted as ``host_sync``. New in 2.9: one story
per finding (:mod:`tracekit.results.worth`): a gain's ``up_to_pct`` and ``expected_pct`` are
``share_pct`` and ``gain_pct``, with ``why`` they differ; the verdict's ``first`` (what to do
first), ``joint`` (the first two fixes at once) and ``noise_pct``; the primary's ``passed_over``;
warm-up (``NoteKind.WARMUP``, ``Evidence.warmup``: one-time work is no longer host-bound); the idle
cause ``device_gap`` (a queued gap with no event wait or other stream); the time left out of the
measured window (``StepsSection.left_out``, ``left_out_run``); ``OpLatency.matched``. New in
2.10: the run warnings ``bad_steps`` (step markers left out or cut), ``uneven_ranks`` (a rank
whose steps or collectives number differently from its peers') and ``bad_memory`` (memory rows
left out). New in 2.11: ``SectionData.fields``, the title and unit each field of a registered
section declares. New in 2.12: of each fetch, the time inside the DataLoader's own range
(``DataLoaderRow.loader_ns``, ``Evidence.loader_per_step_ns``): the rest of a capture's fetch
phase is the loop's around the loader, which more workers do not shorten. New in 2.13: the time
each collective operation's calls take a rank (``OpLatency.time_ns``), which the communication
advice follows (an all-to-all or point-to-point exchange is not tuned by gradient buckets). New
in 2.14: the note ``some-device-events-dropped``: a material share of a file's device activities
have times that cannot be right (a file that lost half of them or more is not read), and the
verdict's confidence is one level lower; the note ``device-clock-ahead``: a rank's device
activities start before the host's calls that launched them, its device's clock ahead of its
host's, and the confidence one level lower (two from half of them). New in 2.15: the note
``unobservable``: most of the measured time the GPU waits behind work the trace does not hold
(launched before the profiler started, or recorded on a device clock behind the host's, which
puts every activity long after its launch): nothing to judge, no verdict (before, the rest
decided, down to "compute-bound" at 0.8% of the time); the note ``device-clock-behind``: a
device activity launched before a rank's device synchronize ends after the call returned, its
device's clock behind its host's, and the confidence one level lower (two from half of its syncs).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from tracekit.results.capture import CaptureSummary  # noqa: TC001
from tracekit.results.rows import (  # noqa: TC001  (msgspec reads annotations at run time)
    BreakdownRow,
    CategoryRow,
    ClockOffset,
    CollectiveInstance,
    CostRow,
    DataLoaderRow,
    IdleCauseRow,
    IdleInterval,
    KernelRow,
    LatenessCell,
    LedgerRow,
    LedgerShare,
    LeftOut,
    MemoryCategoryRow,
    MemoryRow,
    MemorySample,
    MisalignedStep,
    OverlapRow,
    PhaseRow,
    PhaseStepRow,
    StepRow,
    StepsFound,
    StepStats,
    Straggler,
    StragglerRank,
    SyncRow,
    WarmupStep,
    WorkRow,
)
from tracekit.results.sections import FieldMeta  # noqa: TC001  (msgspec reads annotations at run time)
from tracekit.results.traits import Attention, TraceFormat  # noqa: TC001  (msgspec reads annotations at run time)
from tracekit.results.vocab import (
    POINT_TO_POINT_OPS,
    BoundKind,
    CollectiveMatch,
    Confidence,
    DataMeasure,
    DropReason,
    MeasuredOn,
    MemoryNote,
    NoteKind,
    Parallelism,
    PhaseLevel,
    RankSource,
    RunWarningKind,
    StragglerCause,
    SyncKind,
    WindowKind,
    WorkKind,
)
from tracekit.results.worth import Fix, Gain, Joint  # noqa: TC001

SCHEMA: Final = "tracekit.analysis"
#: The major version changes when a reader of the previous one would misread a file.
SCHEMA_VERSION: Final = "2.15"


class Struct(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the result Structs."""


class RankFound(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How a trace's rank was decided, and its figures (see :class:`RankSource`)."""

    kind: RankSource
    key: str | None = None
    processes: int | None = None
    pid: int | None = None
    text: str | None = None


class RankFacts(Struct, frozen=True, kw_only=True):
    """What is known about one rank."""

    rank: int
    source: str
    #: since 2.5 a kind and figures, where older files held words
    rank_source: RankFound
    world_size: int | None
    backend: str | None
    devices: list[str]
    events: int
    gpu_events: int
    #: the profiler its trace was read from (None: not known, as in files before this field)
    format: TraceFormat | None = None


class SkippedFile(Struct, frozen=True, kw_only=True):
    """A file that was not analyzed, and why."""

    path: str
    reason: str


class DroppedEvent(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A dropped event, as an example: its name (shown: cut, unprintable characters as ``?``; None
    without one), why it was dropped, its start and duration in the file's ``unit``."""

    name: str | None
    reason: DropReason
    unit: str
    start: float | None = None
    duration: float | None = None


class RunWarning(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A warning about the run's input: its kind and figures (see :class:`RunWarningKind`).

    ``value`` is a value a file holds that cannot be right, shown (Python's ``repr``, cut);
    ``key`` the field or variable holding it; ``reasons`` the events dropped for each reason;
    ``ranges`` the first ranges of missing ranks (at most 12) and ``more`` how many follow.
    """

    kind: RunWarningKind
    path: str | None = None
    rank: int | None = None
    world_size: int | None = None
    count: int | None = None
    key: str | None = None
    value: str | None = None
    reasons: dict[DropReason, int] = msgspec.field(default_factory=dict)
    example: DroppedEvent | None = None
    ranges: list[tuple[int, int]] = msgspec.field(default_factory=list)
    more: int = 0
    text: str | None = None


class RunFacts(Struct, frozen=True, kw_only=True):
    """What the run is: ranks, devices, files, what was skipped and why."""

    ranks: list[RankFacts]
    world_size: int | None
    backend: str | None
    devices: list[str]
    has_gpu: bool
    span_ns: int
    skipped: list[SkippedFile]
    #: since 2.5 kinds and figures (:class:`RunWarning`), where older files held sentences
    warnings: list[RunWarning]
    #: since 2.3: how the run is data-parallel, from its ops or its capture's config (None: not known)
    parallelism: Parallelism | None = None


class Finding(Struct, frozen=True, kw_only=True):
    """A bound (or a notable fact) with the numbers behind it; sentences are rendered from it.

    ``bound`` is set for a candidate bound, ``note`` for a fact that is not a bound.
    """

    bound: BoundKind | None = None
    note: NoteKind | None = None
    share_pct: float | None = None
    confidence: Confidence
    worst_rank: int | None = None
    max_rank_share_pct: float | None = None
    #: the threshold the share passed (percent), when a threshold decided it
    threshold_pct: float | None = None
    #: the primary share over the next candidate's (or over its threshold): what decided confidence
    margin: float | None = None
    #: the straggler this finding names, for straggler-bound
    straggler_rank: int | None = None
    #: notes' own figures (per-step .item() calls, overlap per rank, ranks present of the world)
    value: float | None = None
    values: list[float] = msgspec.field(default_factory=list)
    #: the candidates a "mixed" verdict could not tell apart, largest first
    components: list[BoundKind] = msgspec.field(default_factory=list)
    #: since 2.5: what removing it is worth (bound findings, and the notes a what-if models)
    gain: Gain | None = None
    #: since 2.9, the primary: wastes with a larger share whose removal, re-timed, is worth less
    #: than the material speed-up: symptoms of another cause, not the bound (largest first)
    passed_over: list[BoundKind] = msgspec.field(default_factory=list)


class OpLatency(Struct, frozen=True, kw_only=True):
    """Instances of one collective operation: how many, and over the instances matched across
    ranks the sums of their latency floors and of their mean waits (since 2.3 null when none was
    matched: latency and waiting cannot be told apart on one rank)."""

    op: str
    count: int
    floor_ns: int | None
    mean_wait_ns: float | None
    #: since 2.9: how many instances were matched (the sums' terms; None in older files)
    matched: int | None = None
    #: since 2.13: the time its calls take a rank, their durations summed over the ranks that
    #: hold any and divided by how many they are (matched or not; None in older files)
    time_ns: int | None = None


class KernelShare(Struct, frozen=True, kw_only=True):
    """A top compute kernel and its share of GPU time."""

    name: str
    share_pct: float | None


class StragglerEvidence(Struct, frozen=True, kw_only=True):
    """A named straggler, per step."""

    rank: int
    times_last: int
    instances: int
    caused_wait_per_step_ns: float
    score: float
    cause: StragglerCause
    phase: str | None
    cause_excess_ns: float


class SyncSource(Struct, frozen=True, kw_only=True):
    """An operator that issued blocking syncs or copies, and how many per step per rank."""

    op: str
    #: a blocking sync call or a copy to or from pageable memory
    kind: SyncKind
    per_step: float
    #: since 2.5: the phase (outermost annotation) it issued most of them in, when one holds them
    phase: str | None = None


class WarmupWork(Struct, frozen=True, kw_only=True):
    """One-time work the GPU waited on: the host range it ran in (the outermost on the launching
    thread, as the idle causes name it) and the idle time, ns, over the pace ranks' windows."""

    name: str
    ns: int


#: The share of a fetch outside the DataLoader's own range from which the fetch is mostly the
#: loop's around the loader (:meth:`Evidence.fetch_around`): then the DataLoader's knobs, which
#: shorten only its own wait, are not the fix.
FETCH_AROUND_SHARE: Final = 0.5
#: All-to-all and point-to-point operations, by the names the profiler gives them (NCCL runs an
#: all-to-all as grouped sends and receives: its kernel is ``SendRecv``).
EXCHANGE_OPS: Final = re.compile(
    rf"(?i)^(?:sendrecv|all_?to_?all(?:_base|_single|v)?|alltoall(?:_base|_single|v)?|{POINT_TO_POINT_OPS})$"
)
#: The share of the collectives' time in exchanges (:data:`EXCHANGE_OPS`) at which they, not the
#: gradient reduction, are what the communication advice is about.
EXCHANGE_SHARE: Final = 0.5


class Evidence(Struct, frozen=True, kw_only=True):
    """The figures behind each candidate bound, from which the reports write the evidence."""

    steps_per_rank: int
    data_measure: DataMeasure | None = None
    fetch_per_step_ns: float | None = None
    #: since 2.12: of the fetch, the time inside the DataLoader's own range (its ``__next__``),
    #: per step and rank; the rest of a capture's fetch phase is the loop's around it
    loader_per_step_ns: float | None = None
    worst_data_rank: int | None = None
    worst_data_step: int | None = None
    worst_data_share_pct: float | None = None
    ops: list[OpLatency] = msgspec.field(default_factory=list)
    mean_overlap_pct: float | None = None
    stragglers: list[StragglerEvidence] = msgspec.field(default_factory=list)
    has_collectives: bool = False
    sync_calls_per_step: float | None = None
    sync_ops_per_step: float | None = None
    idle_after_sync_per_step_ns: float | None = None
    top_kernels: list[KernelShare] = msgspec.field(default_factory=list)
    sync_sources: list[SyncSource] = msgspec.field(default_factory=list)
    #: whether the traces are of a PyTorch program (advice differs for a plain CUDA/MPI program)
    pytorch: bool = True
    #: since 2.9: the host ranges the GPU waited on longest in one-time work (warm-up), longest first
    warmup: list[WarmupWork] = msgspec.field(default_factory=list)
    #: the share (percent) of the measured steps' kernel time that CUDA/HIP graph replays ran
    #: (``cudaGraphLaunch``, ``hipGraphLaunch``); None: no replay in them
    graph_replay_pct: float | None = None
    #: how the run computes attention (None: no attention seen)
    attention: Attention | None = None
    #: the fused attention kernels that ran most, with their share of the measured kernel time
    attention_kernels: list[KernelShare] = msgspec.field(default_factory=list)
    #: kernels launched on one thread (a grid of 1x1x1 blocks of 1x1x1) that took a material
    #: share of the measured kernel time, largest first, with that share
    one_thread_kernels: list[KernelShare] = msgspec.field(default_factory=list)

    def fetch_around(self) -> tuple[float, float, float] | None:
        """(the fetch, the DataLoader's own part, the rest) per step and rank, in ns, where at
        least :data:`FETCH_AROUND_SHARE` of the fetch is outside the DataLoader's own range (a
        capture's fetch phase around ``__next__``); else None, and where no DataLoader range was
        recorded (a loader of the user's own, not torch's: what is its own is not known)."""
        fetch, own = self.fetch_per_step_ns, self.loader_per_step_ns
        if fetch is None or not own or fetch - own < FETCH_AROUND_SHARE * fetch:
            return None
        return fetch, own, fetch - own

    def exchange(self) -> tuple[str, float] | None:
        """The all-to-all and point-to-point operations (:data:`EXCHANGE_OPS`: embedding tables,
        experts, pipeline stages) among :attr:`ops`, named, and their share of the operations'
        time (:attr:`OpLatency.time_ns`), where it is :data:`EXCHANGE_SHARE` or more: then the
        communication's fix is in how the exchange overlaps and what it sends, not the gradient
        buckets; else None."""
        timed = [o for o in self.ops if o.time_ns]
        total = sum(o.time_ns or 0 for o in timed)
        ops = [o for o in timed if EXCHANGE_OPS.match(o.op)]
        share = sum(o.time_ns or 0 for o in ops) / total if total else 0.0
        if not ops or share < EXCHANGE_SHARE:
            return None
        return " and ".join(o.op for o in ops), share


class Verdict(Struct, frozen=True, kw_only=True):
    """The primary bound, the secondary findings, the cost of every candidate and its evidence."""

    measured_on: MeasuredOn
    primary: Finding
    secondary: list[Finding]
    costs: list[CostRow]
    evidence: Evidence
    #: since 2.5: every waste with a share, and compute (every waste at once), with what removing
    #: it is worth (empty in older files)
    gains: list[Gain] = msgspec.field(default_factory=list)
    #: since 2.9: what to do first, the findings' fixes by gain per effort
    first: list[Fix] = msgspec.field(default_factory=list)
    #: since 2.9: the first two fixes removed together, re-timed (None: fewer than two)
    joint: Joint | None = None
    #: since 2.9: the step's noise, percent: the standard deviation of the measured step over the
    #: steps over its mean (None: fewer than two steps)
    noise_pct: float | None = None


class LedgerSection(Struct, frozen=True, kw_only=True):
    """Every nanosecond of each rank's measured window under one entry (:class:`LedgerEntry`):
    the numbers the verdict, the breakdown and the idle causes are all read from."""

    measured_on: MeasuredOn
    #: the ranks that set the pace (their steps the longest): the run's ledger is their mean
    pace_ranks: list[int]
    #: the run: each entry's share, the mean over the pace ranks (they sum to 100)
    run: list[LedgerShare]
    per_rank: list[LedgerRow]
    per_step: list[LedgerRow]


class StepsSection(Struct, frozen=True, kw_only=True):
    """Steps: per-step rows and per-rank statistics."""

    per_step: list[StepRow]
    per_rank: list[StepStats]
    #: how each rank's steps were found
    found: list[StepsFound]
    #: steps kept out of the steady state (warm-up), with the reason
    warmup: list[WarmupStep]
    selection: str | None = None
    include_warmup: bool = False
    #: recorded time outside each rank's measured window, and why (material stretches only)
    left_out: list[LeftOut] = msgspec.field(default_factory=list)
    #: the same over the run: one row per reason, over the ranks where it is material
    left_out_run: list[LeftOut] = msgspec.field(default_factory=list)


class BreakdownSection(Struct, frozen=True, kw_only=True):
    """Time breakdown (GPU, or host on a CPU-only run)."""

    window: WindowKind
    per_rank: list[BreakdownRow]
    per_step: list[BreakdownRow]


class OverlapSection(Struct, frozen=True, kw_only=True):
    """Comm/compute overlap."""

    per_rank: list[OverlapRow]
    per_step: list[OverlapRow]


class KernelsSection(Struct, frozen=True, kw_only=True):
    """GPU activities by name and category."""

    by_category: list[CategoryRow]
    top: list[KernelRow]


class PhasesSection(Struct, frozen=True, kw_only=True):
    """Top-level annotations."""

    level: PhaseLevel
    summary: list[PhaseRow]
    per_rank: list[PhaseRow]
    #: each phase in each measured step of each rank (since 2.1; what a comparison tests)
    per_step: list[PhaseStepRow] = msgspec.field(default_factory=list)


class CollectivesSection(Struct, frozen=True, kw_only=True):
    """Collective instances matched across ranks (per-rank rows go to the details file)."""

    instances: list[CollectiveInstance]
    count: int = 0
    ranks_present: int = 0
    world_size: int | None = None
    #: how far instances could be matched: what their floors and waits mean
    match: CollectiveMatch = CollectiveMatch.NONE
    #: since 2.6: each rank's clock offset and its uncertainty (empty: none could be estimated)
    clocks: list[ClockOffset] = msgspec.field(default_factory=list)
    #: since 2.6: steps whose collectives do not align across ranks (cross-rank figures skipped)
    misaligned: list[MisalignedStep] = msgspec.field(default_factory=list)


class StragglersSection(Struct, frozen=True, kw_only=True):
    """Who arrives last, by how much, and the stragglers named."""

    stragglers: list[Straggler]
    per_rank: list[StragglerRank]
    lateness_matrix: list[LatenessCell]


class DataLoaderSection(Struct, frozen=True, kw_only=True):
    """DataLoader gaps."""

    measure: DataMeasure
    per_rank: list[DataLoaderRow]
    per_step: list[DataLoaderRow]


class SyncsSection(Struct, frozen=True, kw_only=True):
    """Host syncs."""

    per_rank: list[SyncRow]
    per_step: list[SyncRow]


class IdleSection(Struct, frozen=True, kw_only=True):
    """GPU idle by cause, and the longest idle intervals (all are in the details file)."""

    per_rank: list[IdleCauseRow]
    longest: list[IdleInterval]


class MemoryFinding(Struct, frozen=True, kw_only=True):
    """A finding about memory, with the figures behind it (reports write the sentence and advice)."""

    note: MemoryNote
    rank: int | None = None
    #: fragmentation: the gap's share of reserved; filled-by: the category's share of the peak;
    #: imbalance: the rank's peak over the median rank's; headroom: the share of the device's
    #: capacity not reserved at the peak
    value: float
    bytes: int | None = None
    category: str | None = None
    #: since 2.2, headroom: the device's capacity, and whether the headroom is at the limit
    capacity_bytes: int | None = None
    low: bool = False


class MemoryPeak(Struct, frozen=True, kw_only=True):
    """A rank's peak in its categorized memory timeline."""

    rank: int
    peak_bytes: int
    peak_time_ns: int | None
    rows: int


class MemorySection(Struct, frozen=True, kw_only=True):
    """Peak and final memory per rank and device (empty when the traces carry no counters)."""

    per_device: list[MemoryRow]
    #: the rank with the highest peak allocated
    peak_rank: int | None = None
    #: since 2.1: the categorized timeline's peak per rank, and each category at it
    peaks: list[MemoryPeak] = msgspec.field(default_factory=list)
    categories: list[MemoryCategoryRow] = msgspec.field(default_factory=list)
    #: the worst rank's peak allocated over the median rank's (1.0 when balanced)
    imbalance: float | None = None
    findings: list[MemoryFinding] = msgspec.field(default_factory=list)
    #: each rank's counters downsampled for a chart (at most 256 points per rank and device)
    timeline: list[MemorySample] = msgspec.field(default_factory=list)


class WorkSection(Struct, frozen=True, kw_only=True):
    """The work of the measured steps by name: kernels, host operators, collectives and syncs.

    Counts and times are totals over ``rank_steps`` measured (rank, step) pairs, or, when the
    trace has no steps, over ``window_ns`` of measured time (each rank's whole trace).
    """

    rank_steps: int
    window_ns: int
    rows: list[WorkRow]
    #: rows left out of each kind beyond the largest (by total time)
    left_out: dict[WorkKind, int] = msgspec.field(default_factory=dict)


class SectionData(Struct, frozen=True, kw_only=True):
    """A registered section without a field of its own (since 2.4): its title and its result.

    ``data`` is the section's typed result as JSON-ready builtins (a Struct's fields by name);
    the section's entry reads it back typed (``msgspec.convert(data, type)``), and every report
    shows it from its fields (:mod:`tracekit.reports.layout`).
    """

    title: str
    data: dict[str, Any]
    #: since 2.11: each field's title and unit as the result declares them (``"list.field"`` for
    #: a field of a list's records; :mod:`tracekit.results.sections`); {} when it declares none
    fields: dict[str, FieldMeta] = {}


class Analysis(Struct, frozen=True, kw_only=True):
    """Every analysis of one run, the verdict first among them."""

    schema: str = SCHEMA
    schema_version: str = SCHEMA_VERSION
    tracekit_version: str
    verdict: Verdict
    run: RunFacts
    analysis_seconds: float | None = None
    #: the capture's summary.json, when the traces came with one
    capture: CaptureSummary | None = None
    steps: StepsSection
    gpu_breakdown: BreakdownSection
    overlap: OverlapSection
    kernels: KernelsSection
    annotations: PhasesSection
    collectives: CollectivesSection
    stragglers: StragglersSection
    dataloader: DataLoaderSection
    host_syncs: SyncsSection
    idle_causes: IdleSection | None
    host_breakdown: BreakdownSection | None
    memory: MemorySection | None = None
    #: since 2.1: the work by name, for comparisons (None in files of 2.0)
    work: WorkSection | None = None
    #: since 2.3: the ledger every share of the verdict is read from (None in older files)
    ledger: LedgerSection | None = None
    #: since 2.4: the registered sections that have no field above, by name (see SectionData)
    sections: dict[str, SectionData] = msgspec.field(default_factory=dict)
