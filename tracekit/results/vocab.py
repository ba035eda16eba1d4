"""The domain vocabulary, defined once: bound kinds, idle causes, straggler causes, windows,
how steps were found, why a step is warm-up. String enums (:class:`StrEnum`), so they encode as
their values in JSON, compare equal to those strings and format as them; ``Literal`` aliases
where a plain string type is enough (polars' ``_typing.py`` is the model).

A value is what a file holds, not what a report says: where a value reads as English (an older
file holds it), the reports still render their own words from the member.
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import Final, Literal

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:

    class StrEnum(str, Enum):
        """:class:`enum.StrEnum` of Python 3.11: a member is its value, also in ``str()`` and f-strings."""

        def __str__(self) -> str:
            return str.__str__(self)

        def __format__(self, format_spec: str) -> str:
            return str.__format__(self, format_spec)


class BoundKind(StrEnum):
    """What bounds a run: the candidates of the verdict."""

    DATA = "data-bound"  # the device waits for the input pipeline (DataLoader, preprocessing)
    COMMS = "comms-bound"  # exposed communication
    STRAGGLER = "straggler-bound"  # ranks wait for a rank that arrives late
    SYNC = "sync-bound"  # host syncs and blocking copies drain the GPU queue
    LAUNCH = "launch-bound"  # the host dispatches many small ops and cannot keep the GPU fed
    HOST = "host-bound"  # the host is late doing CPU work that launches nothing (not data, not launches)
    TRANSFER = "transfer-bound"  # host<->device or peer copies dominate the device's busy time
    DEPENDENCY = "dependency-bound"  # the GPU waits on events / other streams, not on the host
    IDLE = "gpu-idle"  # idle that nothing in the trace explains
    GPU_COMPUTE = "gpu-compute-bound"  # GPU compute is the largest busy share
    COMPUTE = "compute-bound"  # the host computes (CPU-only run)
    MIXED = "mixed"  # no candidate dominates beyond run-to-run variation
    UNDETERMINED = "undetermined"  # nothing was measured


class Confidence(StrEnum):
    """How sure a finding is."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class IdleCause(StrEnum):
    """Why the GPU was idle in one gap, from the work that ends the gap and when it was launched.

    Launched *before* the gap began (the GPU was not waiting for the host): ``back_to_back``
    (within a switch time of other work ending: the GPU's own switch time), ``unobservable``
    (behind work the trace does not hold: nothing of the GPU recorded before it, or launched
    before the profiler started), ``peer`` (a collective, a peer), ``dependency`` (a wait the
    trace shows: an event, another stream, a replay's node), else ``device_gap`` (its own gap).
    Launched *after* the gap began (the host was late), by what the host was doing meanwhile:
    ``data``, ``host_sync``, ``blocking_collective``, ``one_time``, ``launch``, ``host_work``.
    """

    DATA = "data"  # host fetching a batch or preprocessing input
    HOST_SYNC = "host_sync"  # host blocked in a sync or a blocking (pageable) copy
    CAPTURE_SYNC = "capture_sync"  # after tracekit capture's own step-end sync, not the training's (2.8)
    BLOCKING_COLLECTIVE = "blocking_collective"  # host blocked in gloo/MPI, wait(), barrier
    ONE_TIME = "one_time"  # autotune, compile, lazy init, allocator growth
    LAUNCH = "launch"  # host dispatching many small ops: launch-bound
    HOST_WORK = "host_work"  # host busy in CPU work that launches no GPU work
    DEPENDENCY = "dependency"  # work was queued: waited on an event, another stream, a graph's node
    PEER = "peer"  # work was queued: waited on a collective / a peer rank
    BACK_TO_BACK = "back_to_back"  # work was queued and started as other work ended: GPU switch time
    DEVICE_GAP = "device_gap"  # queued on one stream, no wait in the trace: the device's own gap, over a switch
    UNOBSERVABLE = "unobservable"  # the GPU ran or waited on work launched before the trace began
    UNEXPLAINED = "unexplained"  # nothing in the trace explains it


class LedgerEntry(StrEnum):
    """Where one nanosecond of a rank's measured window went: each goes to exactly one entry.

    Device work: ``compute``, ``comms`` (communication not hidden by compute, and the device
    idle while its rank waits for peers), ``straggler`` (the part of that waiting a named
    straggler's lateness explains; on the straggler itself, its extra time in the phase that
    makes it late), ``transfer`` (host<->device and peer copies under no kernel), ``memory``
    (copies and sets on the device under no kernel). Device idle by cause (the idle causes of
    :class:`IdleCause`): ``data``, ``host_sync``, ``capture_sync`` (bounds nothing), ``launch``,
    ``host_work``, ``one_time``, ``dependency``, ``switch`` (the device's own switches and gaps),
    ``unobservable`` (what ends the gap was queued before the trace could see it),
    ``unexplained``. On a CPU-only run the host is the device: ``compute`` (operators),
    ``comms``, ``straggler``, ``data`` (fetching batches) and ``other`` (no operator recorded).
    """

    COMPUTE = "compute"
    COMMS = "comms"
    STRAGGLER = "straggler"
    TRANSFER = "transfer"
    MEMORY = "memory"
    DATA = "data"
    HOST_SYNC = "host_sync"
    CAPTURE_SYNC = "capture_sync"
    LAUNCH = "launch"
    HOST_WORK = "host_work"
    ONE_TIME = "one_time"
    DEPENDENCY = "dependency"
    SWITCH = "switch"
    UNOBSERVABLE = "unobservable"
    UNEXPLAINED = "unexplained"
    OTHER = "other"


class StragglerCause(StrEnum):
    """Why a straggler arrives late."""

    PHASE = "phase"  # a phase (other than a data phase) takes longer on it than on the median of the other ranks
    LATE_START = "late_start"  # it starts its steps late
    DATA_PHASE = "data_phase"  # a data phase (a DataLoader fetch) takes longer on it (since analysis 2.3)
    NO_PHASES = "no_phases"  # no phase annotations to compare
    NOT_IN_PHASES = "not_in_phases"  # no annotated phase explains it: host work outside the ranges


class WindowKind(StrEnum):
    """What time a rank's figures are shares of."""

    STEPS = "steps"  # the profiler (or inferred) steps
    GPU_SPAN = "gpu_span"  # first to last GPU activity (HTA's definition)


class DataMeasure(StrEnum):
    """What the DataLoader's cost is measured as (the values are what files have always held;
    reports write their own words)."""

    GPU_IDLE = "gpu idle during fetch"  # device idle that overlaps a host fetch (DESIGN.md)
    HOST_FETCH = "host fetch time (CPU-only run)"  # the host is the device: the fetch time itself


class PhaseLevel(StrEnum):
    """Which annotations the phase breakdown reports (the values are what files have always held;
    reports write their own words)."""

    #: with steps: the outermost ranges on the thread that records the steps, inside them
    TRAINING_THREAD = (
        "outermost user annotations on each rank's training thread (the thread recording "
        "ProfilerStep), inside steps; nested ranges are folded into their outermost parent"
    )
    #: without steps: the outermost ranges of every thread
    EVERY_THREAD = "outermost user annotations on every thread (no profiler steps)"


class StepSource(StrEnum):
    """How the steps of a trace were found."""

    TRACEKIT = "tracekit step#N"
    PROFILER_STEP = "ProfilerStep#N"
    DATALOADER = "DataLoader __next__ starts"
    OPTIMIZER = "Optimizer.step ends"
    ANNOTATION = "repeated outermost annotation"
    NONE = "none (the whole trace is one window)"


class WarmupReason(StrEnum):
    """Why a step was kept out of the steady state."""

    LONG_FIRST = "long first iteration"  # the first step is much longer than the others' median
    ONE_TIME = "one-time work"  # the first step holds autotune, compile or lazy-init work the others lack
    OUTLIER = "outlier"  # a step several times the others' median
    PARTIAL = "partial iteration"  # an inferred edge step much shorter than the others (a cut-off loop)
    PROFILER_STOP = "profiler stop"  # the last step, far shorter, launching no GPU work: the profiler stopping


class LeftOutReason(StrEnum):
    """Why a stretch of a rank's recorded time lies outside its measured window."""

    BEFORE_FIRST_STEP = "before_first_step"  # recorded before the first step's window began
    BEFORE_FIRST_DEVICE_OP = "before_first_device_op"  # no step windows: before the first GPU operation
    WARMUP = "warmup"  # in the warm-up steps kept out of the steady state
    UNSELECTED = "unselected"  # in the steps a --steps selection leaves out
    AFTER_LAST_STEP = "after_last_step"  # recorded after the last step's window ended (the profiler's stop)
    AFTER_LAST_DEVICE_OP = "after_last_device_op"  # no step windows: after the last GPU operation ended


class SyncKind(StrEnum):
    """What made the host wait for the device at one point."""

    SYNC = "sync"  # a blocking sync call (stream, event or device synchronize)
    BLOCKING_COPY = "blocking_copy"  # a copy to or from pageable memory: it blocks the host like a sync
    #: a host read of a tensor value (``.item()``, ``bool(t)``): a sync on a GPU, and the only
    #: trace of one on a CPU-only run
    HOST_READ = "host_read"


class WorkKind(StrEnum):
    """What a row of the work table counts."""

    KERNEL = "kernel"  # a GPU activity (kernel, copy, set) by name
    HOST_OP = "host_op"  # a CPU operator by name
    COLLECTIVE = "collective"  # a collective operation by name
    SYNC = "sync"  # a blocking sync or host read, by the operator that issued it


class MeasuredOn(StrEnum):
    """Which timeline the costs are shares of."""

    GPU = "gpu"
    HOST = "host"  # a CPU-only run: the host is the device


class NoteKind(StrEnum):
    """Findings that are facts worth acting on but not bounds."""

    HOST_SYNCS = "host-syncs"  # per-step host reads of device values (.item())
    LOW_OVERLAP = "low-overlap"  # compute hides little of the collective time
    PARTIAL_RANKS = "partial-ranks"  # not every rank's trace is here: no latency floor, no straggler
    GPU_EVENTS_MISSING = "gpu-events-missing"  # a GPU job whose device events are not in the trace
    DEVICE_EVENTS_UNREAD = "device-events-unread"  # device events of a kind not read (the warnings name it)
    TOO_LITTLE_WORK = "too-little-work"  # the device did too little work to judge
    EVENTS_SAMPLED = "events-sampled"  # most CUDA calls between the kept ones are missing: a sampled trace
    #: since 2.14: a material share of a file's device activities were dropped for times that
    #: cannot be right (value: the percent of them, values: [its first rank]): confidence lowered
    SOME_DEVICE_EVENTS_DROPPED = "some-device-events-dropped"
    #: since 2.14: a rank's device activities start before their launch calls (value: the percent
    #: of those launched, values: [the rank, how far ahead the earliest is, ns]): its device's
    #: clock is ahead of the host's; the confidence lowered (two levels from half of them)
    DEVICE_CLOCK_AHEAD = "device-clock-ahead"
    #: since 2.15: a device activity launched before a rank's device synchronize ends after the
    #: call returned (value: the percent of its syncs so contradicted, values: [the rank, how much
    #: later the latest ends, ns]): its device's clock is behind the host's; the confidence lowered
    #: (two levels from half of them), said also where there is no verdict
    DEVICE_CLOCK_BEHIND = "device-clock-behind"
    ONE_STEP = "one-step"  # one measured step: no step-to-step variation to weigh the verdict's margin by
    NO_COMMUNICATION = "no-communication"  # a distributed GPU run with no kernel recognized as communication
    RANKS_OVER_CORES = "ranks-over-cores"  # the capture ran more ranks than the machine had CPU cores
    WARMUP = "warm-up"  # one-time work in the measured window (since 2.9): not the steady state
    #: since 2.15: most of the measured time the GPU waits behind work the trace does not hold
    #: (the ledger's unobservable entry; value: its percent): what it waited on cannot be seen, no verdict
    UNOBSERVABLE = "unobservable"


class RunWarningKind(StrEnum):
    """What a warning about the run's input is about. The figures each kind holds in
    :class:`~tracekit.results.analysis.RunWarning` are noted beside it (``path``: the file)."""

    BAD_DISTRIBUTED_INFO = "bad_distributed_info"  # path, key (rank, world_size), value: ignored
    NOT_EVENTS = "not_events"  # path, count: entries of traceEvents that are not events, left out
    BAD_ARGS = "bad_args"  # path, count: events whose args are not an object, read without them
    DROPPED_EVENTS = "dropped_events"  # path, count, reasons, example: events whose times cannot be right
    BAD_SESSION_START = "bad_session_start"  # path, value: an nsys session start that is not a time
    BAD_RANK_ENV = "bad_rank_env"  # path, key (the variable), value: a recorded rank that is not a number
    RANK_OUTSIDE_WORLD = "rank_outside_world"  # path, rank, world_size: a rank its file's world cannot hold
    MISSING_RANKS = "missing_ranks"  # count, world_size, ranges, more: ranks of the world with no trace
    NO_COMM_KERNELS = "no_comm_kernels"  # rank, world_size, count (host collectives): no kernel is communication
    MEMORY_ONLY = "memory_only"  # memory timelines only: no events, no time breakdown or verdict
    CPU_ONLY = "cpu_only"  # no GPU activity: a CPU-only run
    DEVICE_EVENTS_UNREAD = "device_events_unread"  # path, key (mtia), value (mtia_insight), count: events not read
    BAD_STEPS = "bad_steps"  # path, key (number, zero_length, nested, overlapping), count: markers left out or cut
    UNEVEN_RANKS = "uneven_ranks"  # rank, key (steps, collectives), count, value (the median): not its peers' work
    BAD_MEMORY = "bad_memory"  # path, count, key (frees: categories freed below 0): rows no allocator writes
    TEXT = "text"  # text: a warning an analysis older than 2.5 held that this tracekit does not write


class RankSource(StrEnum):
    """How a trace's rank was decided. The figures each kind holds in
    :class:`~tracekit.results.analysis.RankFound` are noted beside it."""

    DISTRIBUTED_INFO = "distributed_info"  # the rank Kineto records in distributedInfo
    ENV = "env"  # key: the rank variable an nsys export recorded (RANK, an MPI launcher's, LOCAL_RANK)
    ARGUMENT = "argument"  # key: the command-line argument an nsys export recorded (--rank, --local_rank)
    PROCESS_ORDER = "process_order"  # processes, pid: the order of one file's processes by their first GPU
    FILE_NAME = "file_name"  # the file's name (rank3, rank-3, worker3)
    OVERRIDE = "override"  # --rank
    ASSUMED_ZERO = "assumed_zero"  # a single file without a rank: 0
    NONE = "none"  # nothing decided it (yet)
    TEXT = "text"  # text: how an analysis older than 2.5 said it, in words this tracekit does not write


class DropReason(StrEnum):
    """Why an event was dropped: its times cannot be right."""

    NO_TIME = "no_time"  # its start is missing or not a number
    NO_EXTENT = "no_extent"  # it needs a duration and has none
    NEGATIVE = "negative"  # it ends before it starts
    FAR = "far"  # it lies far outside the time range of the rest of its rank


class Parallelism(StrEnum):
    """How a run is data-parallel: what its communication advice is about."""

    DDP = "ddp"  # DistributedDataParallel: replicated parameters, gradients all-reduced in buckets
    FSDP = "fsdp"  # FullyShardedDataParallel (FSDP1) or fully_shard (FSDP2): parameters all-gathered
    ZERO = "zero"  # DeepSpeed ZeRO: optimizer state, gradients (and parameters, stage 3) sharded


class MemoryNote(StrEnum):
    """Findings about memory, beside the time verdict."""

    FRAGMENTATION = "memory-fragmentation"  # reserved but unallocated memory at the peak is large
    FILLED_BY = "memory-filled-by"  # what fills memory at the peak (the largest category)
    IMBALANCE = "memory-imbalance"  # one rank peaks far above the others
    HEADROOM = "memory-headroom"  # the device memory left at the peak on the rank with the least


class CollectiveMatch(StrEnum):
    """How far collectives could be matched across ranks: what their floors and waits mean."""

    NONE = "none"  # no collective in the traces
    SINGLE_RANK = "single_rank"  # no collective held by two ranks: latency and waiting cannot be separated
    PARTIAL = "partial"  # ranks of a group are missing: floors and waits among the ranks present, no straggler named
    COMPLETE = "complete"  # every rank of each group is present


class MatchKey(StrEnum):
    """What paired a collective on one rank with the same collective on the others."""

    SEQUENCE = "sequence"  # its sequence number in its process group (Kineto "Seq")
    GROUP_ORDER = "group_order"  # the k-th of its operation in its process group
    STREAM_ORDER = "stream_order"  # the k-th of its operation on its collective stream (no group recorded)
    OP_ORDER = "op_order"  # the k-th of its operation on the rank (nothing better recorded)


class Change(StrEnum):
    """What happened to a measure from A to B."""

    FASTER = "faster"  # a time that went down beyond noise (or a throughput that went up)
    SLOWER = "slower"  # a time that went up beyond noise (or a throughput that went down)
    WITHIN_NOISE = "within noise"  # the interval holds zero, or the change is below the noise threshold
    HIGHER = "higher"  # a quantity with no better direction (or measured once) that went up
    LOWER = "lower"
    SAME = "same"  # an exact quantity (a count) that did not change
    APPEARED = "appeared"  # only in B
    DISAPPEARED = "disappeared"  # only in A
    NOT_MEASURED = "not measured"  # missing on one side or both


class Unit(StrEnum):
    """The unit of a measure's values."""

    NS = "ns"
    PCT = "pct"  # percentage points
    BYTES = "bytes"
    PER_S = "per_s"  # steps per second
    SAMPLES_PER_S = "samples_per_s"  # samples per second (since comparison 2.1; 2.0 said per_s)
    COUNT = "count"  # per step


class MeasureNote(StrEnum):
    """Why a measure of a comparison has no interval, or no change: a remark beside its figures."""

    ONE_SIDE = "one_side"  # measured on one side only
    NEITHER_SIDE = "neither_side"  # measured on neither side
    ONCE_PER_RUN = "once_per_run"  # known once per run (a peak): no interval
    WHOLE_TRACE = "whole_trace"  # a share over each rank's whole trace (a side has no steps): no interval


class PeakSource(StrEnum):
    """Where a comparison's peak memory was read (of the worst rank)."""

    COUNTERS = "counters"  # device memory allocated, from the profiler's memory counters
    CAPTURE_ALLOCATED = "capture_allocated"  # device memory allocated, from the capture summary
    CAPTURE_RSS = "capture_rss"  # the process's peak resident set, from the capture summary (CPU)


#: The prefix of tracekit's own phase ranges (``tracekit.phase/forward``); a phase is shown without it.
PHASE_PREFIX: Final = "tracekit.phase/"
#: The range of tracekit capture's wait for the device at a step's end (it times the step): not the training's.
CAPTURE_SYNC_RANGE: Final = "tracekit.capture/device_sync"
#: Which side of an A/B capture or a comparison: ``a`` (the baseline) or ``b``.
SideKey = Literal["a", "b"]
#: What a comparison's counts are per: a step, or a second of trace when a side has no steps.
PerUnit = Literal["step", "second"]
#: How a capture of the sweep ended: it ran (``ok``), ran out of memory (a CUDA OOM, or its
#: peak over ``--mem-budget-gb``), failed otherwise, or hung past ``--cell-timeout``.
CellStatus = Literal["ok", "oom", "failed", "timeout"]


class ProbeStop(StrEnum):
    """Why a sweep's OOM probe ended without finding the first batch size that runs out of memory."""

    FAILED = "failed"  # a capture failed otherwise, or hung (``failed_batch``, its reason ``failure``)
    NONE_FIT = "none_fit"  # no batch size fit
    NO_OOM = "no_oom"  # every batch size it could try fit (up to ``last_fit``)


class CapacitySource(StrEnum):
    """What a sweep's memory headroom is a share of."""

    DEVICE = "device"  # the GPU's memory (or what cuda_memory_fraction leaves the cells)
    BUDGET = "budget"  # --mem-budget-gb


class MatrixNoteKind(StrEnum):
    """Remarks beside a sweep's matrix. The figures each kind holds in ``MatrixNote`` are noted beside it."""

    NO_CAPACITY = "no_capacity"  # no memory capacity known (CPU run without --mem-budget-gb): no headroom check
    CPU_RSS = "cpu_rss"  # a CPU run: peak memory is the worst rank's peak RSS of its whole process
    UNFINISHED = "unfinished"  # ran, cells: the sweep did not finish


class SlowestBy(StrEnum):
    """How a capture summary picks its slowest rank."""

    #: the most host time per step before the step's first collective (the phases summed are
    #: the summary's ``pre_collective_phases``): the last rank to arrive
    PRE_COLLECTIVE = "pre_collective"


class WorstBy(StrEnum):
    """How a capture summary picks the rank whose memory peaks highest."""

    DEVICE_ALLOCATED = "device_allocated"  # peak device memory allocated in the measured steps (GPU)
    RSS = "rss"  # peak RSS of the whole process (CPU)


class CaptureNoteKind(StrEnum):
    """Remarks of a capture: what a rank could not record, or recorded differently. The figures
    each kind holds in ``CaptureNote`` are noted beside it."""

    MEMORY_TIMELINE_OPTIONS = "memory_timeline_options"  # items: the profiler options memory_timeline turned on
    CPU_MEMORY = "cpu_memory"  # on CPU device memory is not recorded; phase memory deltas are of RSS
    CPU_SNAPSHOT = "cpu_snapshot"  # memory_snapshot on CPU: the allocator snapshot is CUDA-only, none written
    NO_SNAPSHOT = "no_snapshot"  # rank, error: its allocator snapshot could not be written
    NO_TIMELINE = "no_timeline"  # rank, error: its memory timeline could not be exported
    FSDP_ON_CPU = "fsdp_on_cpu"  # value: the sharding strategy of FSDP1 that tracekit applied on CPU
    FSDP2_ON_CPU = "fsdp2_on_cpu"  # value: reshard_after_forward of the FSDP2 that tracekit applied on CPU
    DEEPSPEED_OPTIMIZER = "deepspeed_optimizer"  # DeepSpeed steps the optimizer inside backward hooks
    #: items: the DDP options the config set (find_unused_parameters, ddp_bucket_cap_mb, ...), which
    #: did nothing: DDP did not wrap the model; value: how the run was distributed instead, in
    #: accelerate's words (FSDP, DEEPSPEED, NO: one rank without a process group)
    DDP_OPTIONS_NO_EFFECT = "ddp_options_no_effect"
    #: text: a note in someone else's words (given to the Profiler in ``summary_extra``, or one
    #: an older summary held that this tracekit does not write)
    TEXT = "text"


class CeilingBy(StrEnum):
    """How ``tracekit dataloader`` sets the loader's samples/s ceiling."""

    SLOWEST_RANK = "slowest_rank"  # the global batch times the batches/s of the slowest rank


class LoaderNoteKind(StrEnum):
    """Remarks of ``tracekit dataloader``. The figures each kind holds in ``LoaderNote`` are noted beside it."""

    NO_THROUGHPUT = "no_throughput"  # capture: the capture compared with measured no throughput (no headroom)
    OTHER_CONFIG = "other_config"  # capture, differences: the capture ran another config than the probe
    TEXT = "text"  # text: a note an older record held that this tracekit does not write


class AuditNote(StrEnum):
    """Remarks of ``tracekit audit-params``."""

    ONE_BATCH = "one_batch"  # one batch decides: a parameter used on some inputs only shows as unused


#: Whose memory a capture measured: the device's (``cuda``) or, on a CPU-only run, the process's.
MemoryDevice = Literal["cuda", "cpu"]
#: What a capture's per-phase memory deltas measure: CUDA allocated device memory, or the resident set.
MemoryMeasure = Literal["allocated_bytes", "rss_bytes"]
#: Over what a capture's memory peaks were taken: the measured steps (GPU) or the whole process (CPU, RSS).
MemoryScope = Literal["measured steps", "whole process"]


class SyncMeasure(StrEnum):
    """What counts as a host sync of a comparison (decided by A's device)."""

    #: a GPU run: the host's blocking sync calls and copies (points where it waited for the GPU)
    SYNC_CALLS = "sync_calls"
    #: a CPU-only run: host reads of tensor values (``.item()``, ``bool(t)``: each a sync on a GPU)
    HOST_READS = "host_reads"


class NoiseMethod(StrEnum):
    """How the intervals of a comparison were made: a moving-block bootstrap over steps, each
    step the mean over ranks, and with repeats on both sides more."""

    #: one run on a side: the interval holds step-to-step variation only, not how far two
    #: launches of one program differ
    STEPS = "block_bootstrap_steps"
    #: repeats on both sides: runs resampled first, then steps within each, and the interval no
    #: narrower than Welch's t over the runs' means (run-to-run variation measured)
    RUNS_THEN_STEPS = "block_bootstrap_runs_then_steps"


class GateOutcome(StrEnum):
    """What one ``--fail-if`` condition found (B against the baseline A)."""

    #: worse beyond noise (a count or a peak: worse at all) and by more than the limit: fails
    REGRESSED = "regressed"
    #: worse beyond noise, by no more than the limit
    WITHIN_LIMIT = "within_limit"
    #: a time whose change is within noise
    WITHIN_NOISE = "within_noise"
    #: not worse
    NO_REGRESSION = "no_regression"


class WarningKind(StrEnum):
    """How the two runs differ in what they measure: a reason to read their changes with care.

    The figures each kind holds in :class:`RunDifference` are noted beside it."""

    WORLD_SIZE = "world_size"  # a, b: the world sizes
    RANKS = "ranks"  # a_items, b_items: the ranks present (per-rank rows only for common ranks)
    DEVICES = "devices"  # a_items, b_items: the devices, each once, sorted
    BACKEND = "backend"  # a, b: the process-group backends
    MEASURED_ON = "measured_on"  # a, b: the timeline each side's shares are of (a MeasuredOn)
    NO_STEPS = "no_steps"  # a, b: measured steps, 0 on one side or both (work compared per second)
    STEP_COUNT = "step_count"  # a, b: measured steps (rank x step), more than a factor apart
    STEP_SOURCE = "step_source"  # a, b: how each side's steps were found (a StepSource, or None)
    STEP_SELECTION = "step_selection"  # the steps measured were selected differently (--steps, --include-warmup)
    WINDOW = "window"  # a, b: the windows each side's figures are shares of (a WindowKind)
    WORKLOAD = "workload"  # a, b: the captured workloads
    BATCH_SIZE = "batch_size"  # a, b: the batch size per rank (per-step figures measure different work)
    CONFIG = "config"  # keys: the capture config keys that differ, dotted, sorted


#: Point-to-point operations, by the names the profiler gives them (a regex alternation): they
#: involve two ranks of their group by design (:data:`tracekit.analyzers.alignment.POINT_TO_POINT`,
#: :data:`tracekit.results.analysis.EXCHANGE_OPS`).
POINT_TO_POINT_OPS: Final = "send|recv|isend|irecv|p2p|batch_isend_irecv"
