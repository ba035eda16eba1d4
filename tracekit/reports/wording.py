"""The words of each bound and note: titles and the advice that goes with them, and the
:class:`Written` form of a finding that every renderer shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tracekit.results.vocab import BoundKind, NoteKind


def ms(ns: float | None) -> str:
    """ns as '1.23 ms'."""
    return "-" if ns is None else f"{ns / 1e6:.2f} ms"


TITLES: Final = {
    BoundKind.DATA: "Data-bound: the device waits for the DataLoader",
    BoundKind.COMMS: "Comms-bound: collectives are exposed, not hidden behind compute",
    BoundKind.STRAGGLER: "Straggler-bound: ranks wait at collectives for the last rank to arrive",
    BoundKind.SYNC: "Sync-bound: host syncs drain the GPU queue every step",
    BoundKind.LAUNCH: "Launch-bound: the GPU starves while the host dispatches many small ops",
    BoundKind.HOST: "Host-bound: the GPU waits while the host does CPU work",
    BoundKind.TRANSFER: "Transfer-bound: copies between host and device (or peers) take the device's time",
    BoundKind.DEPENDENCY: "Dependency-bound: the GPU waits on events and other streams, not on the host",
    BoundKind.IDLE: "The GPU sits idle, and the trace does not show why",
    BoundKind.GPU_COMPUTE: "GPU-compute-bound: the GPU is busy computing",
    BoundKind.COMPUTE: "Compute-bound: the host is busy computing (CPU-only run)",
    BoundKind.MIXED: "Mixed: no single bound dominates",
    BoundKind.UNDETERMINED: "No verdict: nothing was measured in these traces",
}
#: A bound named inside another title (a mixed verdict's candidates), where its own title does not
#: start with its name ("Data-bound: ...").
NAMES: Final = {BoundKind.IDLE: "GPU idle (unexplained)"}

RECOMMENDATIONS: Final[dict[BoundKind, tuple[str, ...]]] = {
    BoundKind.DATA: (
        "Raise DataLoader num_workers (start at 4-8 per GPU) so batches are prepared ahead of the step.",
        "Set persistent_workers=True so workers survive between epochs.",
        "Set pin_memory=True and copy with .to(device, non_blocking=True) to overlap the copy with compute.",
        "Raise prefetch_factor (default 2) if workers keep up on average but not at every step.",
        "Move decoding/augmentation off the training process (pre-process, or GPU augmentation).",
    ),
    # communication and stragglers: advice.py (it depends on the run and on the straggler's cause)
    BoundKind.SYNC: (
        "Remove per-step .item(), .cpu(), .tolist() and print(loss): keep metrics on the device and read "
        "them every N steps.",
        "Find the syncs: torch.cuda.set_sync_debug_mode('warn') reports every synchronizing call.",
        "Copy to pinned memory (pin_memory=True, .to(non_blocking=True)): copies to pageable memory block the host.",
        "Avoid data-dependent shapes (torch.nonzero, boolean masks) in the step, which force a sync.",
    ),
    BoundKind.LAUNCH: (
        "The GPU starves while Python launches kernels: capture the step with CUDA graphs, or "
        "torch.compile(mode='reduce-overhead').",
        "Fuse small ops (torch.compile, fused optimizers: AdamW(fused=True) / foreach=True).",
        "Raise the per-GPU batch size so each launch does more work.",
    ),
    BoundKind.HOST: (
        "The host does CPU work between launches: find it in the host ranges named in the evidence "
        "(py-spy record, or torch.profiler with_stack=True).",
        "Move CPU preprocessing into DataLoader workers, or onto the GPU.",
    ),
    BoundKind.TRANSFER: (
        "Copy less between host and device: keep tensors on the device across steps.",
        "Use pinned memory and non_blocking copies on a side stream so copies overlap compute.",
        "Check the copies' sizes and directions in the kernel table; batch many small copies into one.",
    ),
    BoundKind.DEPENDENCY: (
        "The GPU waits on events or other streams: look at cross-stream dependencies (record_stream, "
        "wait_stream, events) and whether the work they wait for could start earlier.",
    ),
    BoundKind.IDLE: (
        "The GPU waits while the trace shows no host activity: the time goes to code the profiler does not "
        "record (Python outside operators, checkpointing, logging, evaluation, torch.compile).",
        "Sample the host during the gaps: py-spy record -o profile.svg --pid <training process>.",
        "Record Python frames with torch.profiler(with_stack=True) to see what runs between operators.",
        "Profile steady-state steps only: compilation and warmup belong in the profiler's wait/warmup steps.",
    ),
    BoundKind.GPU_COMPUTE: (
        "The GPU is busy: make each kernel cheaper. Use bf16 autocast, and TF32 for fp32 matmuls "
        "(torch.backends.cuda.matmul.allow_tf32 = True).",
        "Use fused attention (torch.nn.functional.scaled_dot_product_attention / FlashAttention).",
        "torch.compile to fuse elementwise ops; look at the top kernels for the largest targets.",
    ),
    BoundKind.COMPUTE: (
        "The host computes most of the step: on CPU, use more threads per rank (torch.set_num_threads) "
        "or fewer ranks per machine; on GPUs, this run would be compute-bound.",
    ),
}

NOTE_TITLES: Final = {
    NoteKind.NO_COMMUNICATION: "Distributed, yet no communication was recognized: the verdict's confidence is lowered",
    NoteKind.PARTIAL_RANKS: "Not every rank is here: collective latency cannot be separated from waiting",
    NoteKind.GPU_EVENTS_MISSING: "No verdict: this GPU job's device events are not in the trace",
    NoteKind.DEVICE_EVENTS_UNREAD: "No verdict: this trace's device events are of a kind tracekit does not read",
    NoteKind.TOO_LITTLE_WORK: "No verdict: the device did too little work in this trace to judge",
    NoteKind.EVENTS_SAMPLED: "No verdict: this trace is a sample: most of its CUDA calls were dropped",
    NoteKind.ONE_STEP: "One window measured: the verdict cannot be checked against step-to-step variation",
    NoteKind.WARMUP: "This trace shows warm-up: one-time work, not the training's steady state",
    NoteKind.UNOBSERVABLE: "Most of the time the GPU waits on work this trace does not show",
}
#: The title of a verdict that a note leaves without one, where the note's own title (under "also")
#: says what it found: the warm-up that leaves no steady part, the GPU's waits on work the trace
#: does not show.
ALONE_TITLES: Final = {
    NoteKind.WARMUP: "No verdict: this trace shows warm-up, not a training step",
    NoteKind.UNOBSERVABLE: "No verdict: most of the time the GPU waits on work this trace does not show",
}

#: Why the host alone tells no verdict, by the note that says the device's work is not read.
NO_DEVICE_EVIDENCE: Final = {
    NoteKind.GPU_EVENTS_MISSING: (
        "the host ops belong to a GPU job (NCCL, cuDNN, record_stream, CUDA calls, or GPUs listed), "
        "but no kernel, copy or set was recorded: what bounds it cannot be told from the host alone"
    ),
    NoteKind.DEVICE_EVENTS_UNREAD: (
        "the trace holds device events, but of a kind tracekit does not read as device work (the warnings name "
        "the device and its categories): what bounds the run cannot be told from the host alone"
    ),
}

#: Notes that say why there is no verdict.
NO_VERDICT: Final = (
    NoteKind.GPU_EVENTS_MISSING,
    NoteKind.DEVICE_EVENTS_UNREAD,
    NoteKind.TOO_LITTLE_WORK,
    NoteKind.EVENTS_SAMPLED,
    NoteKind.WARMUP,
    NoteKind.UNOBSERVABLE,
)

#: What to do about a trace whose device activities have times that cannot be right.
DAMAGED_DEVICE_TIMES: Final = (
    "Record the trace again: device activities with negative durations, or times far from the rest of the "
    "trace, come from a damaged file (cut, edited, merged from several runs) or a profiler whose device "
    "buffers or clock went wrong (a trace of fewer active steps fills smaller buffers)."
)

#: What to do about a trace whose device clock is ahead of its host's, or behind it.
CLOCK_OFFSET: Final = (
    "Record the trace again in one process, with a current PyTorch: Kineto converts the device's timestamps "
    "to the host's clock when it starts a trace, and a trace merged from several processes or recorded across "
    "a clock change keeps an offset. Until then, read the device's own figures (the GPU breakdown, the "
    "kernels): the offset does not change them."
)

NOTE_RECOMMENDATIONS: Final[dict[NoteKind, tuple[str, ...]]] = {
    NoteKind.PARTIAL_RANKS: (
        "Analyze every rank's trace together (one file per rank in one folder) to measure latency floors "
        "and name stragglers.",
    ),
    NoteKind.GPU_EVENTS_MISSING: (
        "Record the device too: torch.profiler(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) "
        "(ProfilerActivity.MTIA, XPU, HPU or PrivateUse1 on other accelerators), and do not filter GPU events out "
        "of the trace.",
    ),
    NoteKind.DEVICE_EVENTS_UNREAD: (
        "Record the device's own activity too (for MTIA, its on-device mtia_ccp_events, which tracekit reads as "
        "device work), or read this trace's device timeline in Perfetto or the vendor's tools.",
    ),
    NoteKind.EVENTS_SAMPLED: (
        "Analyze the unfiltered trace: idle time in a sampled trace is mostly work that was dropped.",
    ),
    NoteKind.SOME_DEVICE_EVENTS_DROPPED: (DAMAGED_DEVICE_TIMES,),
    NoteKind.DEVICE_CLOCK_AHEAD: (CLOCK_OFFSET,),
    NoteKind.DEVICE_CLOCK_BEHIND: (CLOCK_OFFSET,),
    NoteKind.ONE_STEP: (
        "Profile several steady-state steps (torch.profiler's schedule: wait/warmup/active, or tracekit capture) "
        "to measure how much the verdict's shares move from step to step.",
    ),
    NoteKind.WARMUP: (
        "Profile after warm-up: torch.profiler.schedule(wait=1, warmup=2, active=3) (tracekit capture: "
        "--warmup_steps) records steps only once the first iterations have run, so CUDA context creation, "
        "first allocations, lazy module loading at first launches, torch.compile and CUDA graph recording fall "
        "outside the recorded steps.",
        "Nothing here needs changing in the training: one-time work is paid once per process (cache compiled "
        "kernels across runs with TORCHINDUCTOR_FX_GRAPH_CACHE=1 if start-up time matters).",
    ),
    NoteKind.UNOBSERVABLE: (
        "Record the trace again from a step boundary, several steady-state steps (torch.profiler's schedule: "
        "wait/warmup/active, or tracekit capture), so that the work the device runs in the window was launched "
        "in it.",
        "If every device activity starts long after its launch call, the device's clock is behind the host's: "
        "record in one process with a current PyTorch (Kineto converts the device's timestamps when a trace "
        "starts; a trace merged from several processes keeps an offset).",
    ),
    NoteKind.TOO_LITTLE_WORK: (
        "Profile several steady-state training steps (torch.profiler schedule with wait/warmup/active) "
        "rather than a snippet.",
    ),
    NoteKind.HOST_SYNCS: (
        "Keep per-step metrics on the device (accumulate in a tensor) and read them every N steps.",
        "Find the callers with torch.cuda.set_sync_debug_mode('warn').",
    ),
    NoteKind.NO_COMMUNICATION: (
        "Name the communication kernels of a library tracekit does not know: tracekit analyze "
        "--comm-kernel REGEX (repeatable).",
        "Check that the profiler recorded every stream and thread: collectives launched or run where the "
        "trace does not reach cannot be seen.",
    ),
    NoteKind.RANKS_OVER_CORES: (
        "Run at most one rank per core (fewer ranks, or a machine with more cores), and give each rank threads "
        "of its own (OMP_NUM_THREADS / torch.set_num_threads) so that ranks x threads <= cores.",
        "Until then, read this capture's host, data and gloo figures as contention on this machine, not as "
        "what the target machine will do.",
    ),
    # low overlap: advice.py (it depends on how the run is data-parallel)
}

#: Advice for programs that are not PyTorch (a CUDA or MPI application in Nsight Systems).
CUDA_RECOMMENDATIONS: Final[dict[BoundKind, tuple[str, ...]]] = {
    BoundKind.IDLE: (
        "The GPU waits while the host runs code the trace does not record: profile the host too "
        "(nsys profile --sample=cpu --trace=cuda,nvtx,osrt,mpi) and mark its phases with NVTX ranges.",
        "Overlap host work with the device: queue the next iteration's copies and kernels on a stream "
        "(cudaMemcpyAsync from pinned memory) before the host's own work.",
    ),
    BoundKind.SYNC: (
        "Replace synchronous cudaMemcpy with cudaMemcpyAsync from pinned (cudaMallocHost) memory on a stream, "
        "and synchronize once per iteration (cudaStreamSynchronize / events) only where the host needs results.",
    ),
    BoundKind.TRANSFER: (
        "Keep data on the device between iterations instead of copying it back and forth.",
        "Use pinned host memory and cudaMemcpyAsync on a side stream so copies overlap kernels.",
    ),
    BoundKind.LAUNCH: (
        "Launch fewer, larger kernels: fuse the work of consecutive small kernels into one.",
        "Capture the repeated sequence of launches in a CUDA graph (stream capture) and replay it: one launch for "
        "many kernels.",
    ),
    BoundKind.GPU_COMPUTE: (
        "The GPU is busy: make the top kernels cheaper. Nsight Compute (ncu --set full -k regex:<kernel>) says "
        "whether each is bound by memory bandwidth, arithmetic or latency (occupancy, warp stalls).",
        "Run matrix work on the tensor cores (cuBLAS / cuBLASLt / CUTLASS; FP16, BF16 or TF32 where accuracy allows).",
    ),
    BoundKind.HOST: ("Move the host's computation onto the device, or overlap it with queued device work.",),
    BoundKind.COMMS: (
        "Overlap communication with computation (non-blocking MPI_Isend/MPI_Irecv, or CUDA-aware MPI / NCCL "
        "on device buffers).",
    ),
}

#: The advice that says to capture the step in CUDA graphs (a run that replays graphs already
#: gets :func:`tracekit.reports.advice.graphs_replayed` instead).
CAPTURE_GRAPHS: Final = frozenset((RECOMMENDATIONS[BoundKind.LAUNCH][0], CUDA_RECOMMENDATIONS[BoundKind.LAUNCH][1]))
#: The advice that says to use fused attention (a run gets :func:`tracekit.reports.advice.attention`'s instead).
FUSED_ATTENTION: Final = RECOMMENDATIONS[BoundKind.GPU_COMPUTE][1]

GOOD: Final = (BoundKind.GPU_COMPUTE, BoundKind.COMPUTE)


@dataclass(frozen=True)
class Written:
    """A finding in words: what every renderer shows of it."""

    title: str
    share_pct: float | None
    confidence: str
    evidence: tuple[str, ...]
    recommendations: tuple[str, ...]
    good: bool
    #: its numbers and confidence, for its heading: "share 20.0%, gain 19.9% (1.25x), confidence medium"
    badge: str = ""

    @property
    def reason(self) -> str | None:
        """Why its gain differs from its share, where its evidence says (one sentence), else None."""
        return next((e for e in self.evidence if e.startswith("why the gain")), None)


@dataclass(frozen=True)
class WrittenVerdict:
    """The verdict in words."""

    measured_on: str
    primary: Written
    secondary: tuple[Written, ...]
    #: the memory findings, beside the time verdict (headroom, fragmentation, what fills it, imbalance)
    memory: tuple[Written, ...] = ()
    #: what to do first, by gain per effort: one line per fix
    first: tuple[str, ...] = ()
    #: what the first two fixes are worth together
    joint: str | None = None
