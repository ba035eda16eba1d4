"""The capture summary (``summary.json`` of ``tracekit capture``) as typed Structs.

Built once by :mod:`tracekit.capture.summary` from the per-rank phase timings, written with
msgspec, and read back here by everything that shows it (``tracekit capture`` in the terminal,
the analysis reports), through one table builder (:mod:`tracekit.reports.capture_tables`).

Times are nanoseconds (means are floats), shares percentages. Layout of schema 1.x:

- ``config``, ``environment``: the capture configuration and the versions, devices and
  distributed setup it ran with, as plain JSON objects (absent when a user's own loop
  wrote the summary through :class:`tracekit.capture.Profiler`);
- ``step`` and ``phases``: mean / median / p95 over every measured step of every rank
  (:mod:`tracekit.results.stats`); the phases tile each step, so their shares sum to 100%;
- ``per_rank``: each rank's mean step, mean per phase, host time before the step's first
  collective, memory (peaks, memory at the end), and what each phase adds to memory;
- ``throughput``: the slowest rank (the last to reach the step's first collective), whether
  it is a straggler, and steps and samples per second set by the longest mean step;
- ``memory`` and ``memory_phases``: the worst rank's peaks, and per phase the mean change of
  memory over every measured step, averaged over ranks (absent in files without them).

Memory is in bytes. What the phase deltas measure is ``phase_memory_measure``:
``allocated_bytes`` (the CUDA caching allocator's allocated device memory) or ``rss_bytes``
(the process's resident host memory, on CPU). A phase's delta is its memory at its end minus
at its start (summed when it runs several times in a step); ``other`` is the change outside
every phase, so the deltas add up to the change over the step (``step_memory_change_bytes``).

Version history: 1.0 first; 1.1 adds ``throughput.straggler_min_share`` (the threshold the
straggler decision used); 1.2 adds memory: ``Memory.allocated_bytes``, ``reserved_bytes`` and
``rss_bytes`` (at the end of the capture), the per-phase deltas, saved-tensor bytes and the
step's change per rank, ``memory`` and ``memory_phases``; 1.3 adds ``Memory.total_bytes`` (the
device's capacity, GPU); 1.4 adds ``environment.cpu_count`` (the CPU cores the ranks, all on
one machine, could run on: the affinity of the capturing process); 1.5 holds kinds where 1.4 held
sentences: ``notes`` are :class:`CaptureNote` objects, ``throughput.slowest_rank_by`` is a
:class:`~tracekit.results.vocab.SlowestBy` with the phases it sums in
``throughput.pre_collective_phases``, ``memory.worst_rank_by`` a
:class:`~tracekit.results.vocab.WorstBy` (an older file's sentences are read into them); 1.6
adds the note kind ``ddp_options_no_effect``, ``environment.ddp`` (the options DDP ran with, read
from the wrapped model) and ``environment.optimizer`` (the optimizer's class and its ``foreach``
and ``fused``); 1.7 adds ``RankPhases.step_cpu_ns``, the CPU time each measured step used on the
rank (its process's threads together, DataLoader workers not counted): what a step costs
whatever else the machine runs, where its wall time on a busy CPU is a share of cores; 1.8 adds
``environment.alloc_conf``, the caching allocator's settings the ranks ran with (each of
``PYTORCH_ALLOC_CONF``, ``PYTORCH_CUDA_ALLOC_CONF`` and ``PYTORCH_HIP_ALLOC_CONF`` set, by name).
Any 1.x file loads; a newer major version is refused.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from tracekit.errors import InputError
from tracekit.results import upgrade
from tracekit.results.ranges import check_ranges, explain_non_finite
from tracekit.results.records import older_minor
from tracekit.results.vocab import (  # noqa: TC001  (msgspec reads them at run time)
    CaptureNoteKind,
    MemoryDevice,
    MemoryMeasure,
    MemoryScope,
    SlowestBy,
    WorstBy,
)

__all__ = [
    "ALLOC_CONF_VARS",
    "CAPTURE_SCHEMA",
    "CAPTURE_SCHEMA_VERSION",
    "CaptureNote",
    "CaptureSummary",
    "Memory",
    "MemorySummary",
    "PhaseMemory",
    "PhaseStats",
    "RankPhases",
    "StepStats",
    "Throughput",
    "as_capture_summary",
    "dump_capture_summary",
    "grows_segments",
    "load_capture_summary",
    "upgraded",
]

CAPTURE_SCHEMA: Final = "tracekit.capture_summary"
CAPTURE_SCHEMA_VERSION: Final = "1.8"
#: The variables that configure PyTorch's caching allocators (``PYTORCH_ALLOC_CONF`` since torch
#: 2.9, the CUDA and HIP names before, still read): ``environment.alloc_conf`` holds those set.
ALLOC_CONF_VARS: Final = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
#: The allocator setting (lower case, no spaces) that makes its segments growable.
_GROWABLE: Final = "expandable_segments:true"


def grows_segments(settings: dict[str, Any]) -> bool:
    """Whether allocator ``settings`` (variable -> value, as ``environment.alloc_conf`` or a
    config's ``env`` hold them) turn on growable segments (``expandable_segments:True``)."""
    return any(_GROWABLE in str(v).replace(" ", "").lower() for v in settings.values())


class StepStats(msgspec.Struct, kw_only=True, frozen=True):
    """Step time over every measured step of every rank (``None`` when there were none)."""

    mean_ns: float | None = None
    median_ns: float | None = None
    p95_ns: float | None = None
    count: int = 0


class PhaseStats(msgspec.Struct, kw_only=True, frozen=True):
    """One phase over every measured step of every rank; ``share_pct`` of the mean step."""

    phase: str
    mean_ns: float
    median_ns: float
    p95_ns: float
    share_pct: float | None = None


class Memory(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """Memory of one rank: device memory on a GPU (peaks since the measured steps began),
    the process's resident set (peak over the whole process) on both."""

    device: MemoryDevice | None = None
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    peak_rss_bytes: int | None = None
    scope: MemoryScope | None = None  # of the device peaks
    #: At the end of the capture (since 1.2): device memory allocated and reserved (GPU), RSS.
    allocated_bytes: int | None = None
    reserved_bytes: int | None = None
    rss_bytes: int | None = None
    #: The device's capacity (GPU, since 1.3), what the headroom is measured against.
    total_bytes: int | None = None

    @property
    def headroom_bytes(self) -> int | None:
        """The device's capacity left at the peak: total minus peak reserved (GPU)."""
        held = self.peak_reserved_bytes if self.peak_reserved_bytes is not None else self.peak_allocated_bytes
        return None if self.total_bytes is None or held is None else self.total_bytes - held

    @property
    def peak_bytes(self) -> int | None:
        """The peak to show: allocated device memory when measured, else the peak RSS."""
        return self.peak_allocated_bytes if self.peak_allocated_bytes is not None else self.peak_rss_bytes


class RankPhases(msgspec.Struct, kw_only=True, frozen=True):
    """One rank's measured steps: mean step, mean per phase, arrival, memory."""

    rank: int
    steps: int
    step_mean_ns: float | None = None
    phase_means_ns: dict[str, float] = {}
    memory: Memory = msgspec.field(default_factory=Memory)
    #: Mean host time per step before the step's first collective (data wait, copy, forward).
    pre_collective_mean_ns: float = 0.0
    # since 1.2: memory per step, mean over this rank's measured steps (bytes; {} / None when
    # the file predates it or memory could not be read)
    #: ``allocated_bytes`` (CUDA) or ``rss_bytes`` (CPU): what the deltas below measure.
    phase_memory_measure: MemoryMeasure | None = None
    #: Per phase, mean bytes added (negative: freed); ``other`` is the change outside every
    #: phase, so they add up to ``step_memory_change_bytes``.
    phase_memory_deltas: dict[str, float] = {}
    #: The same for reserved device memory (CUDA only).
    phase_reserved_deltas: dict[str, float] = {}
    step_memory_change_bytes: float | None = None  # mean of (end - start) of the step
    #: Bytes of distinct storages autograd saved in forward (activation proxy, parameters
    #: excluded): mean and largest over measured steps.
    saved_tensor_bytes_mean: float | None = None
    saved_tensor_bytes_max: int | None = None
    #: since 1.7: the CPU time (ns) of each measured step, in step order, used by the rank's
    #: process (every thread; DataLoader worker processes not counted); [] when not measured
    step_cpu_ns: list[int] = []


class Throughput(msgspec.Struct, kw_only=True, frozen=True):
    """The slowest rank, the straggler decision, and the throughput it sets (all ``None``
    when no rank measured a step)."""

    slowest_rank: int | None = None
    slowest_rank_pre_collective_mean_ns: float | None = None
    median_other_pre_collective_mean_ns: float | None = None  # None with one rank
    lateness_ns: float | None = None
    is_straggler: bool = False
    slowest_rank_by: SlowestBy | None = None
    #: the phases whose host time decides the slowest rank (since 1.5)
    pre_collective_phases: list[str] = []
    step_mean_ns: float | None = None  # the longest per-rank mean step
    steps_per_s: float | None = None
    global_samples_per_s: float | None = None
    samples_per_step_per_rank: int | None = None
    straggler_min_share: float | None = None  # since 1.1; None in 1.0 files


class PhaseMemory(msgspec.Struct, kw_only=True, frozen=True):
    """One phase's mean change of memory per step, averaged over the ranks that measured it."""

    phase: str
    delta_bytes_mean: float
    #: Reserved device memory (CUDA only).
    reserved_delta_bytes_mean: float | None = None
    #: The rank whose phase adds the most, and how much (with one rank, that rank).
    max_rank: int | None = None
    delta_bytes_max: float | None = None


class MemorySummary(msgspec.Struct, kw_only=True, frozen=True):
    """Memory over every rank: the worst rank's peaks and the phase deltas' common measure."""

    device: MemoryDevice | None = None  # of the worst rank
    #: The rank with the highest peak: device memory allocated on GPU, RSS on CPU.
    worst_rank: int | None = None
    worst_rank_by: WorstBy | None = None
    #: The largest of every rank's (each may come from another rank).
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    peak_rss_bytes: int | None = None
    phase_memory_measure: MemoryMeasure | None = None
    #: Mean over ranks of each rank's mean change of memory over a step.
    step_memory_change_bytes_mean: float | None = None
    saved_tensor_bytes_mean: float | None = None  # mean over ranks
    saved_tensor_bytes_max: int | None = None  # the largest of any rank's step


class CaptureNote(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """A remark of the capture: its kind and figures (see :class:`~tracekit.results.vocab.CaptureNoteKind`)."""

    kind: CaptureNoteKind
    rank: int | None = None
    items: tuple[str, ...] = ()
    value: str | None = None
    error: str | None = None  # the exception, as "Type: message" in its own words
    text: str | None = None  # a note in someone else's words (kind text)


class CaptureSummary(msgspec.Struct, kw_only=True, frozen=True):
    """``summary.json``: the phase timings of every rank of one capture, summarized."""

    schema: str = CAPTURE_SCHEMA
    schema_version: str = CAPTURE_SCHEMA_VERSION
    config: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None
    notes: list[CaptureNote] = []
    world_size: int
    ranks: list[int]
    measured_steps: int
    step: StepStats
    phases: list[PhaseStats]
    per_rank: list[RankPhases]
    throughput: Throughput
    memory: MemorySummary | None = None  # since 1.2
    memory_phases: list[PhaseMemory] = []  # since 1.2; the step's phases with ``other``, in step order


def _major(version: str) -> str:
    return version.split(".", maxsplit=1)[0]


def upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """Decoded JSON of a capture summary in the current layout: one of an older minor version,
    and before 1.5 with its sentences read as kinds (:func:`tracekit.results.upgrade.capture_1_4`)."""
    version = data.get("schema_version")
    if data.get("schema") != CAPTURE_SCHEMA or not older_minor(version, CAPTURE_SCHEMA_VERSION):
        return data
    if older_minor(version, "1.5"):  # 1.5 holds kinds, which read as sentences would be lost
        data = upgrade.capture_1_4(dict(data))
    return {**data, "schema_version": CAPTURE_SCHEMA_VERSION}


def as_capture_summary(data: object, *, source: str) -> CaptureSummary:
    """Validate decoded JSON (or a :class:`CaptureSummary`) as a capture summary.

    Raises :class:`InputError` naming ``source`` when it is not one, when its major schema
    version is not this tracekit's, when a field has the wrong type, or a number is out of
    range (not finite; a negative size, time or count: :mod:`tracekit.results.ranges`).
    """
    if isinstance(data, CaptureSummary):
        return data
    if not isinstance(data, dict) or data.get("schema") != CAPTURE_SCHEMA:
        raise InputError(f'not a tracekit capture summary (no "schema": "{CAPTURE_SCHEMA}")', path=source)
    version = data.get("schema_version")
    if not isinstance(version, str) or _major(version) != _major(CAPTURE_SCHEMA_VERSION):
        raise InputError(
            f"capture summary schema version {version} is not readable by this tracekit "
            f"(reads {_major(CAPTURE_SCHEMA_VERSION)}.x)",
            path=source,
        )
    try:
        summary = msgspec.convert(upgraded(data), CaptureSummary)
    except msgspec.ValidationError as exc:
        raise InputError(f"not a valid capture summary ({exc})", path=source) from None
    check_ranges(summary, source=source)
    return summary


def load_capture_summary(data: bytes | str, *, source: str) -> CaptureSummary:
    """Parse ``summary.json`` text; anything else is an :class:`InputError` naming ``source``."""
    try:
        decoded = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise InputError(explain_non_finite(data) or f"not valid JSON ({exc})", path=source) from None
    return as_capture_summary(decoded, source=source)


def _str_subclass(value: object) -> str:
    """Version strings such as ``torch.__version__`` are ``str`` subclasses: write them as text."""
    if isinstance(value, str):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} values to summary.json")


_ENCODER: Final = msgspec.json.Encoder(enc_hook=_str_subclass)


def dump_capture_summary(summary: CaptureSummary) -> bytes:
    """``summary.json`` text: indented JSON, keys in the schema's order, a final newline."""
    return msgspec.json.format(_ENCODER.encode(summary), indent=2) + b"\n"
