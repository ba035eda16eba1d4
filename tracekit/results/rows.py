"""Row Structs of the tables a report shows: one Struct per table, fields named as the columns.

Times are integer (or mean, float) nanoseconds (``*_ns``), shares are percentages
(``*_pct``); ``None`` where a value does not exist (a share of an empty window).
"""

from __future__ import annotations

import msgspec

from tracekit.results.vocab import (  # noqa: TC001  (msgspec reads them at run time)
    BoundKind,
    IdleCause,
    LedgerEntry,
    LeftOutReason,
    MatchKey,
    StepSource,
    StragglerCause,
    SyncKind,
    WarmupReason,
    WorkKind,
)


class Row(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every row."""


class StepRow(Row, frozen=True, kw_only=True):
    """One step of one rank: its host range, its GPU work and the window it costs."""

    rank: int
    step: int | None
    name: str
    start_ns: int
    end_ns: int
    duration_ns: int
    gpu_start_ns: int | None
    gpu_end_ns: int | None
    gpu_ops: int
    win_start_ns: int | None
    win_end_ns: int | None


class StepsFound(Row, frozen=True, kw_only=True):
    """How one rank's steps were found, and how many were kept."""

    rank: int
    source: StepSource
    #: the range name the steps were inferred from (None for step markers)
    anchor: str | None = None
    found: int
    steady: int
    warmup: int


class WarmupStep(Row, frozen=True, kw_only=True):
    """A step kept out of the steady state, and why."""

    rank: int
    step: int
    start_ns: int
    duration_ns: int
    #: its duration over the median of the others'
    ratio: float | None
    reason: WarmupReason


class LeftOut(Row, frozen=True, kw_only=True):
    """Recorded time outside the measured window, of one rank or (``rank`` None) of the run, and why.

    Only what is material is kept (see :mod:`tracekit.analyzers.left_out`). A run row sums up
    the ranks where the reason is material: ``ranks`` of them, ``ns`` and ``share_pct`` their
    mean, ``start_ns``/``end_ns`` the earliest start and the latest end.
    """

    rank: int | None
    reason: LeftOutReason
    ns: int
    #: the stretch on the trace's clock: from its first start to its last end (warm-up and
    #: unselected steps may be several stretches; ``ns`` is their sum)
    start_ns: int
    end_ns: int
    #: its share of the rank's recorded span (from its first to its last host or device activity)
    share_pct: float
    #: the steps it holds (warm-up, unselected), else 0
    steps: int = 0
    #: the ranks a run row sums up (1 for a rank's row)
    ranks: int = 1


class StepStats(Row, frozen=True, kw_only=True):
    """Step-time statistics of one rank (host duration of its steps)."""

    rank: int
    count: int
    mean_ns: float | None
    median_ns: float | None
    p95_ns: float | None
    min_ns: int | None
    max_ns: int | None


class BreakdownRow(Row, frozen=True, kw_only=True):
    """Time of one rank (and step, in per-step rows) by what the device did."""

    rank: int
    step: int | None = None
    window_ns: int
    compute_ns: int
    comm_ns: int
    memory_ns: int
    idle_ns: int
    #: the part of memory_ns that is host<->device or peer copies (a transfer-bound run's cost)
    transfer_ns: int = 0
    compute_pct: float | None
    comm_pct: float | None
    memory_pct: float | None
    idle_pct: float | None


class OverlapRow(Row, frozen=True, kw_only=True):
    """Collective time of one rank (and step) and how much of it compute hides."""

    rank: int
    step: int | None = None
    comm_ns: int
    overlapped_ns: int
    exposed_ns: int
    overlap_pct: float | None


class KernelRow(Row, frozen=True, kw_only=True):
    """GPU activities of one name over the run."""

    name: str
    kind: str
    category: str
    count: int
    ranks: int
    total_ns: int
    mean_ns: float
    max_ns: int
    share_pct: float | None


class CategoryRow(Row, frozen=True, kw_only=True):
    """GPU activity time of one category over the run."""

    category: str
    count: int
    total_ns: int
    share_pct: float | None


class PhaseRow(Row, frozen=True, kw_only=True):
    """A top-level annotation (phase), over the run (``rank`` None) or on one rank."""

    rank: int | None = None
    name: str
    count: int
    cpu_ns: int
    gpu_ns: int
    ranks: int
    step_mean_ns: float | None
    step_median_ns: float | None
    step_p95_ns: float | None
    step_min_ns: int | None
    step_max_ns: int | None
    cpu_pct: float | None


class PhaseStepRow(Row, frozen=True, kw_only=True):
    """A top-level annotation (phase) in one measured step of one rank."""

    rank: int
    step: int
    name: str
    count: int
    cpu_ns: int
    gpu_ns: int


class WorkRow(Row, frozen=True, kw_only=True):
    """One name of work over the measured steps of every rank (see :mod:`tracekit.analyzers.work`)."""

    kind: WorkKind
    name: str
    #: a kernel's category (compute, collective, memory...)
    category: str | None = None
    #: a sync's kind and the phase it was issued in
    sync_kind: SyncKind | None = None
    phase: str | None = None
    count: int
    total_ns: int
    ranks: int


class CollectiveInstance(Row, frozen=True, kw_only=True):
    """One collective instance matched across the ranks that hold it."""

    pg: str
    op: str
    matched_by: MatchKey
    k: int
    ranks: int
    expected_ranks: int | None
    #: held by two ranks or more (else it has no latency floor and no wait)
    matched: bool
    #: held by every rank of its group
    complete: bool
    first_start_ns: int
    first_arrival_ns: int
    floor_ns: int | None
    #: from the first rank's arrival to the last's
    spread_ns: int | None
    mean_wait_ns: float | None
    #: the mean wait the last rank's lateness explains, and the rest (the collective's own cost)
    explained_wait_ns: float | None
    unexplained_wait_ns: float | None
    last_rank: int | None
    last_ranks: list[int]
    #: since 2.6: the step of its earliest call (null outside the steady steps)
    step: int | None = None
    #: since 2.6: held by every rank of its group present in the run: what the figures count
    common: bool = True
    #: since 2.6: how far two ranks' arrivals may be off through their clocks (the sum of the
    #: two largest clock uncertainties of its ranks); a spread within it names no last rank
    tolerance_ns: int | None = None


class ClockOffset(Row, frozen=True, kw_only=True):
    """One rank's clock offset, estimated from the ends of the collectives it shares (since 2.6)."""

    rank: int
    #: instances held by two ranks or more it was estimated from
    instances: int
    #: the estimate, relative to the lowest rank linked to it
    estimate_ns: int
    #: what was subtracted from the rank's arrivals (the estimate where it is beyond what one
    #: clock allows, else 0)
    offset_ns: int
    #: how far the rank's clock may still be off, after the correction
    uncertainty_ns: int
    corrected: bool
    #: since 2.7: the host its trace records (ranks of one host share one clock), when it records one
    host: str | None = None


class MisalignedStep(Row, frozen=True, kw_only=True):
    """A step (null: outside every step) whose calls of one operation in one group the ranks
    hold in different counts, or (since 2.7, ``offset_ns``) a step of a rank whose windows are off the
    others' by no whole number of steps: not matched, left out of every cross-rank figure (since 2.6)."""

    pg: str
    op: str
    step: int | None
    ranks: list[int]
    counts: list[int]
    #: since 2.7: where the counts agree but the rank's step windows are this far off the
    #: others' and not by a whole number of steps (its step numbering shifted, its clock off, or
    #: both: which cannot be told), the rank's clock estimate; null where the counts differ
    offset_ns: int | None = None


class StragglerRank(Row, frozen=True, kw_only=True):
    """How often one rank arrived last, and the waiting it caused."""

    rank: int
    instances: int
    times_last: int
    times_among_last: int
    mean_lateness_ns: float | None
    caused_wait_ns: float | None
    score: float | None


class LatenessCell(Row, frozen=True, kw_only=True):
    """The longest a rank kept the earliest rank waiting in one step."""

    rank: int
    step: int
    lateness_ns: int | None
    times_last: int


class Straggler(Row, frozen=True, kw_only=True):
    """A rank named as a straggler, with its evidence (numbers only: reports write the
    sentences); the cause is found before the collective."""

    rank: int
    #: the explained wait it causes per step, as a share of the mean step
    score: float
    #: complete instances it arrived last at, of those it held
    times_last: int
    instances: int
    #: the others' wait its lateness explains, over the run: wall time, their mean
    caused_wait_ns: float
    cause: StragglerCause
    #: the phase that takes longer on it, when ``cause`` is PHASE
    phase: str | None = None
    #: by how much, per step, than on the median of the other ranks (the phase, or the start of the step)
    cause_excess_ns: float
    #: steps in which it arrived last at least once, of the steps with complete instances
    steps_last: int = 0
    steps: int = 0


class DataLoaderRow(Row, frozen=True, kw_only=True):
    """Host fetch time and the device idle it causes, per rank (and step)."""

    rank: int
    step: int | None = None
    window_ns: int
    fetch_ns: int
    #: since 2.12: of the fetch, the time inside the DataLoader's own range (its ``__next__``):
    #: the rest is the loop's around it (a capture's fetch phase); None in older files
    loader_ns: int | None = None
    idle_ns: int
    share_pct: float | None


class SyncRow(Row, frozen=True, kw_only=True):
    """Host syncs of one rank (and step)."""

    rank: int
    step: int | None = None
    sync_calls: int
    sync_ops: int
    gpu_sync_events: int
    idle_after_ns: int
    per_step_calls: float | None = None
    per_step_ops: float | None = None


class IdleCauseRow(Row, frozen=True, kw_only=True):
    """GPU idle of one rank with one cause."""

    rank: int
    cause: IdleCause
    idle_ns: int
    count: int
    share_pct: float | None


class IdleInterval(Row, frozen=True, kw_only=True):
    """One GPU idle interval and its cause."""

    rank: int
    step: int | None
    start_ns: int
    end_ns: int
    length_ns: int
    cause: IdleCause


class MemoryRow(Row, frozen=True, kw_only=True):
    """Memory of one rank and device over the trace, from the allocator's counters."""

    rank: int
    device_type: str | None
    device: int | None
    samples: int
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    final_allocated_bytes: int | None
    final_reserved_bytes: int | None
    peak_time_ns: int | None
    #: reserved minus allocated when allocated peaked (memory the caching allocator holds that no
    #: tensor uses: fragmentation), and its share of reserved then
    gap_at_peak_bytes: int | None = None
    gap_at_peak_pct: float | None = None
    #: what was running at the peak: the outermost annotation (phase) and the innermost operator
    peak_phase: str | None = None
    peak_op: str | None = None
    #: since 2.2: the device's capacity as its trace describes it (none for the host), and what
    #: was left of it at the peak: capacity minus peak reserved (the CUDA context and other
    #: processes' memory are not in the counters, so the true headroom is somewhat smaller)
    capacity_bytes: int | None = None
    headroom_bytes: int | None = None
    headroom_pct: float | None = None


class MemorySample(Row, frozen=True, kw_only=True):
    """One point of a rank's memory timeline, downsampled for charts (the largest value of its
    stretch, so no peak is lost)."""

    rank: int
    device_type: str | None
    device: int | None
    time_ns: int
    allocated_bytes: int | None
    reserved_bytes: int | None


class MemoryCategoryRow(Row, frozen=True, kw_only=True):
    """One category of a rank's categorized memory timeline (``export_memory_timeline``)."""

    rank: int
    category: str
    #: bytes the category held when the rank's total peaked, and its share of that total
    at_peak_bytes: int
    at_peak_pct: float | None
    #: the most the category held at any time
    peak_bytes: int


class LedgerRow(Row, frozen=True, kw_only=True):
    """One rank's measured window (or one step of it) by ledger entry: every ns counted once."""

    rank: int
    step: int | None = None
    window_ns: int
    #: ns of each entry that holds any (they sum to window_ns)
    ns: dict[LedgerEntry, int]
    #: each entry's share of window_ns, percent (they sum to 100)
    pct: dict[LedgerEntry, float]


class LedgerShare(Row, frozen=True, kw_only=True):
    """One entry of the run's ledger: its share, the mean over the ranks that set the pace."""

    entry: LedgerEntry
    #: the bound this entry is evidence for (None: device work or time that bounds nothing)
    bound: BoundKind | None
    share_pct: float
    max_rank_share_pct: float
    worst_rank: int | None


class CostRow(Row, frozen=True, kw_only=True):
    """The cost of one candidate bound: its share of the measured time."""

    bound: BoundKind
    share_pct: float
    max_rank_share_pct: float
    worst_rank: int | None
