"""The words of a capture summary: its notes, and how it chose its slowest rank and the rank whose
memory peaks highest. The summary holds kinds and figures; the sentences are written here, once,
for every format (:mod:`tracekit.reports.capture_tables` shows them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.results.vocab import CaptureNoteKind, SlowestBy, WorstBy

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.results.capture import CaptureNote, MemorySummary, Throughput

__all__ = ["CAPTURE_NOTES", "SLOWEST_BY", "WORST_BY", "capture_note", "slowest_by", "worst_by"]

_ON_CPU: Final = ", applied by tracekit on CPU (accelerate applies FSDP on accelerators only)"
#: How a run was distributed where DDP did not wrap the model (accelerate's distributed type).
_NOT_DDP: Final = {
    "NO": "one rank without a process group; a backend named for one rank runs DDP",
    "FSDP": "FSDP wraps it",
    "DEEPSPEED": "DeepSpeed wraps it",
}
#: One sentence per kind of note, from its figures.
CAPTURE_NOTES: Final[dict[CaptureNoteKind, Callable[[CaptureNote], str]]] = {
    CaptureNoteKind.MEMORY_TIMELINE_OPTIONS: lambda n: (
        f"memory_timeline turned on {', '.join(n.items)} (export_memory_timeline needs them): "
        "the traced steps carry their host overhead"
    ),
    CaptureNoteKind.CPU_MEMORY: lambda _: (
        "memory on CPU: device memory allocated/reserved, their peaks and the allocator snapshot are CUDA-only "
        "and not recorded; phase memory deltas are of the process's resident host memory (RSS), "
        "peak RSS is of the whole process"
    ),
    CaptureNoteKind.CPU_SNAPSHOT: lambda _: (
        "memory_snapshot: the allocator snapshot is CUDA-only; none was written on CPU"
    ),
    CaptureNoteKind.NO_SNAPSHOT: lambda n: f"rank {n.rank}: no memory snapshot ({n.error})",
    CaptureNoteKind.NO_TIMELINE: lambda n: f"rank {n.rank}: no memory timeline ({n.error})",
    CaptureNoteKind.FSDP_ON_CPU: lambda n: f"FSDP {n.value} (FullyShardedDataParallel){_ON_CPU}",
    CaptureNoteKind.FSDP2_ON_CPU: lambda n: f"FSDP2 (fully_shard, reshard_after_forward={n.value}){_ON_CPU}",
    CaptureNoteKind.DEEPSPEED_OPTIMIZER: lambda _: (
        "DeepSpeed runs the optimizer inside backward hooks: only total step time compares across backends"
    ),
    CaptureNoteKind.DDP_OPTIONS_NO_EFFECT: lambda n: (
        f"{', '.join(n.items)} had no effect: DDP did not wrap the model "
        f"({_NOT_DDP.get(n.value or '', f'distributed type {n.value}')})"
    ),
    CaptureNoteKind.TEXT: lambda n: n.text or "",
}
#: How the slowest rank was chosen (the phases it sums follow in parentheses).
SLOWEST_BY: Final = {SlowestBy.PRE_COLLECTIVE: "host time before the step's first collective"}
#: What the rank whose memory peaks highest peaks in.
WORST_BY: Final = {
    WorstBy.DEVICE_ALLOCATED: "peak device memory allocated in the measured steps",
    WorstBy.RSS: "peak RSS (whole process)",
}


def capture_note(note: CaptureNote) -> str:
    """One note of a capture, in words."""
    return CAPTURE_NOTES[note.kind](note)


def slowest_by(t: Throughput) -> str:
    """What the slowest rank has the most of: 'host time before the step's first collective (dataload_wait, ...)'."""
    words = SLOWEST_BY[t.slowest_rank_by or SlowestBy.PRE_COLLECTIVE]
    return f"{words} ({', '.join(t.pre_collective_phases)})" if t.pre_collective_phases else words


def worst_by(memory: MemorySummary) -> str:
    """What the worst rank peaks highest in ('peak RSS (whole process)'); 'peak' when not said."""
    return "peak" if memory.worst_rank_by is None else WORST_BY[memory.worst_rank_by]
