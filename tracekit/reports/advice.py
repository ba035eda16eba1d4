"""Advice that depends on the run it is given to and on the cause it is given for.

The same bound asks for different changes in different runs (:mod:`tracekit.reports.sentences`
holds the advice that does not):

=====================  ===========================================================================
advice                 follows
=====================  ===========================================================================
communication          how the run is data-parallel (:class:`~tracekit.results.vocab.Parallelism`,
                       from its ops or its capture): DDP's gradient buckets and comm hooks; FSDP's
                       prefetching, resharding, ``limit_all_gathers`` and sharding strategy; ZeRO's
                       ``overlap_comm``, contiguous gradients, bucket sizes and stage. Unknown: DDP's.
the exchange           which operations the collectives' time is in
                       (:attr:`~tracekit.results.analysis.OpLatency.time_ns`): where half of it or
                       more is all-to-all or point-to-point (embeddings, experts, pipeline stages),
                       overlapping and shrinking that exchange comes before the gradient buckets
the interconnect       where the collectives run: NCCL/RCCL kernels on a GPU get ``NCCL_DEBUG`` and
                       NVLink/InfiniBand; collectives on the host (gloo, MPI, a CPU-only run) get the
                       host's cores and network, never NCCL's settings; a capture whose ranks
                       outnumbered its cores (:attr:`RunTraits.cores_shared`) gets one rank per
                       core first
a straggler            the cause found for it: a data phase gets input-pipeline advice; any other
                       phase (forward, backward, the optimizer) compute advice (that rank's device
                       and host: throttling, a slower device, other processes; its share of the
                       work); a late start advice about what runs before the step. A program that
                       is not PyTorch gets no DataLoader advice
device tools           ``nvidia-smi`` only where there is a GPU
launches               whether CUDA/HIP graphs already replay part of the steps
                       (:attr:`~tracekit.results.analysis.Evidence.graph_replay_pct`): then the gaps
                       are the eager work around the replays, and "capture the step with CUDA
                       graphs" is done; the advice is to capture more of it, in fewer graphs
attention              how the run computes attention (:class:`~tracekit.results.traits.Attention`):
                       fused attention is advised only where attention is written out or SDPA runs
                       its math path; where fused kernels run the advice says so; a run with no
                       attention (an MLP, a CNN) gets none
one-thread kernels     a kernel launched on one thread that takes a material share of the kernel
                       time (:attr:`~tracekit.results.analysis.Evidence.one_thread_kernels`) is the
                       first advice of the primary finding, PyTorch or not
the fetch              whether most of a fetch is outside the DataLoader's own range
                       (:meth:`~tracekit.results.analysis.Evidence.fetch_around`: a capture's
                       fetch phase around ``__next__``): then
                       what the loop does around the loader comes before more workers
copies                 whether the host-to-device copies come from pageable memory
                       (:attr:`RunTraits.pageable_copies`): then each blocks the host until done,
                       and pinning the batches (``pin_memory``, ``non_blocking``) comes first
the allocator          whether the caching allocator already grows its segments
                       (:attr:`RunTraits.expandable_segments`, from the capture's summary): then a
                       fragmentation gap is told what is left, not to turn them on
the profiler           the tool the traces came from (:attr:`RunTraits.nsys`): advice that changes
                       how the run is profiled names torch.profiler's settings for a Kineto trace,
                       and ``nsys profile``'s and NVTX ranges for an Nsight Systems export (without
                       torch for a program that is not PyTorch)
=====================  ===========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tracekit.reports.wording import (
    CAPTURE_GRAPHS,
    CUDA_RECOMMENDATIONS,
    FUSED_ATTENTION,
    NOTE_RECOMMENDATIONS,
    RECOMMENDATIONS,
    ms,
)
from tracekit.results.capture import CaptureSummary, grows_segments
from tracekit.results.traits import Attention, TraceFormat
from tracekit.results.vocab import (
    BoundKind,
    MeasuredOn,
    NoteKind,
    Parallelism,
    StragglerCause,
)

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis, Evidence, KernelShare, Verdict


@dataclass(frozen=True)
class RunTraits:
    """What of the run its advice depends on."""

    #: the run has a GPU (device tools, device advice)
    gpu: bool = True
    #: its collectives run on the GPU (NCCL/RCCL kernels): interconnect advice
    gpu_collectives: bool = True
    parallelism: Parallelism | None = None
    #: how many ranks were analysed, and which set the pace (the run's ledger is their mean)
    ranks: int | None = None
    pace_ranks: tuple[int, ...] = ()
    #: its traces are Nsight Systems exports (every rank's whose format is known): profiling
    #: advice names ``nsys profile`` and NVTX ranges, not torch.profiler
    nsys: bool = False
    #: it is a PyTorch program (the verdict's :attr:`~tracekit.results.analysis.Evidence.pytorch`)
    pytorch: bool = True
    #: a copy from pageable host memory is among the run's top device activities (its
    #: ``Memcpy HtoD (Pageable -> Device)``): each blocks the host until it is done
    pageable_copies: bool = False
    #: its CUDA/HIP caching allocator grows its segments (``expandable_segments:True`` in the
    #: allocator's settings its capture recorded, or in the environment its config set): the
    #: fragmentation advice is already taken
    expandable_segments: bool = False
    #: (ranks, cores) where its capture ran more ranks than its machine had CPU cores (the
    #: ranks-over-cores note): collectives on the host then wait for ranks not scheduled
    cores_shared: tuple[int, int] | None = None

    @classmethod
    def of(cls, analysis: Analysis) -> RunTraits:
        """The traits of an analysed run: its collectives run on the GPU when kernels were
        recognized as collectives, or when none was where some should have been (a backend
        that runs them on the GPU: the no-communication note)."""
        run, verdict = analysis.run, analysis.verdict
        kernels = any(c.category == "collective" for c in analysis.kernels.by_category)
        missed = any(f.note is NoteKind.NO_COMMUNICATION for f in verdict.secondary)
        formats = {r.format for r in run.ranks if r.format is not None}
        return cls(
            gpu=run.has_gpu,
            gpu_collectives=run.has_gpu and (kernels or missed),
            parallelism=run.parallelism,
            ranks=len(run.ranks),
            pace_ranks=tuple(analysis.ledger.pace_ranks) if analysis.ledger is not None else (),
            nsys=formats == {TraceFormat.NSYS},
            pytorch=verdict.evidence.pytorch,
            pageable_copies=any(k.kind == "memcpy" and PAGEABLE in k.name for k in analysis.kernels.top),
            expandable_segments=_expandable(analysis.capture),
            cores_shared=_cores_shared(verdict),
        )

    @classmethod
    def of_verdict(cls, verdict: Verdict) -> RunTraits:
        """What a verdict alone tells (a GPU when it was measured on one)."""
        gpu = verdict.measured_on is MeasuredOn.GPU
        return cls(gpu=gpu, gpu_collectives=gpu, pytorch=verdict.evidence.pytorch, cores_shared=_cores_shared(verdict))


def _cores_shared(verdict: Verdict) -> tuple[int, int] | None:
    """(ranks, cores) of the verdict's ranks-over-cores note, or None."""
    for f in verdict.secondary:
        if f.note is NoteKind.RANKS_OVER_CORES and f.value is not None and f.values:
            return int(f.value), int(f.values[0])
    return None


def _expandable(capture: CaptureSummary | None) -> bool:
    """Whether a capture's ranks ran with growable allocator segments: the settings they recorded
    (``environment.alloc_conf``, capture summary 1.8), else the environment their config set."""
    if capture is None:
        return False
    recorded = (capture.environment or {}).get("alloc_conf")
    if not isinstance(recorded, dict):
        recorded = (capture.config or {}).get("env")
    return isinstance(recorded, dict) and grows_segments(recorded)


#: A data-bound run's first advice where most of its fetch is outside the DataLoader's own range.
FETCH_AROUND: Final = (
    "Look at what the loop does around the DataLoader: {around} of the {fetch} fetch a step is outside the "
    "DataLoader's own __next__ ({own}), which more workers do not shorten: a wrapper's work (a device move, a "
    "prefetch), or the previous batch released (a batch from workers arrives in shared memory; with "
    "pin_memory=True the pin thread takes it over). py-spy record, or torch.profiler with_stack=True, shows it."
)


#: How Kineto and Nsight Systems name a copy from (or to) pageable host memory.
PAGEABLE: Final = "Pageable"
#: A transfer-bound run's first advice where its copies come from pageable memory.
PIN_FIRST: Final = {
    True: "Pin the batches and copy without blocking: DataLoader(pin_memory=True) and .to(device, "
    "non_blocking=True). The copies here are from pageable memory: each blocks the host until it is done.",
    False: "Allocate the host buffers pinned (cudaMallocHost / cudaHostAlloc) and copy with cudaMemcpyAsync: "
    "the copies here are from pageable memory, and each blocks the host until it is done.",
}
NCCL_CHECK: Final = "Check the interconnect: NCCL_DEBUG=INFO shows the transport (NVLink/IB vs. sockets)."
HOST_COLLECTIVES: Final = (
    "Collectives run on the host here (gloo or MPI): give each rank cores of its own (its threads compete "
    "with the collective's), and check the network interface it uses (GLOO_SOCKET_IFNAME)."
)
#: The first communication advice where collectives ran on the host of a capture whose ranks
#: outnumbered its cores: each hop of a collective waits for a rank the scheduler has not run
#: (the healthy sample's 8 gloo ranks on 2 cores: 25 ms of latency an all-reduce), which the
#: wrapper's settings (buckets, hooks) reduce only by sending fewer collectives.
CORES_SHARED: Final = (
    "Run at most one rank per core and measure again: {ranks} ranks shared {cores} CPU cores, so each hop of a "
    "collective on the host (gloo or MPI) waits for a rank the scheduler has not run, and this capture's "
    "communication times are this machine's contention more than the run's."
)
GLOO_INTERFACE: Final = "Check the network interface the collectives use (GLOO_SOCKET_IFNAME)."
#: The first communication advice where most of the collectives' time is exchanges.
EXCHANGE: Final = (
    "Overlap the exchange with compute and send less: {pct:.0f}% of the collectives' time is {ops} (all-to-all or "
    "point-to-point: embeddings, experts, pipeline stages), which gradient buckets and hooks do not tune; start the "
    "next batch's exchange during this one's dense work (TorchRec's TrainPipelineSparseDist, more pipeline "
    "micro-batches) and send fewer or lower-precision values."
)

DDP_COMMS: Final = (
    "Tune DDP bucket_cap_mb (default 25): larger buckets mean fewer, better-utilized collectives.",
    "Keep communication overlapped with backward: avoid find_unused_parameters=True unless needed, "
    "use gradient_as_bucket_view=True.",
    "Send less: bf16 gradients (a DDP comm hook such as bf16_compress_hook).",
    "Do more compute per collective: a larger per-rank batch or gradient accumulation with no_sync().",
)
FSDP_COMMS: Final = (
    "Prefetch the next all-gather so it overlaps compute: FSDP1 forward_prefetch=True and "
    "backward_prefetch=BackwardPrefetch.BACKWARD_PRE; FSDP2 set_modules_to_forward_prefetch / "
    "set_modules_to_backward_prefetch.",
    "Reshard less: reshard_after_forward=False (FSDP2) or ShardingStrategy.SHARD_GRAD_OP (FSDP1) keeps "
    "parameters gathered from forward to backward, one all-gather per unit per step fewer, for memory.",
    "FSDP1 limit_all_gathers=True holds all-gathers back to bound memory: with memory to spare, "
    "limit_all_gathers=False lets them run ahead of compute.",
    "Pick the sharding strategy for the network: HYBRID_SHARD (FSDP1) or a 2-D device mesh (FSDP2, HSDP) "
    "shards within a node and replicates across nodes; wrap fewer, larger units so each collective is larger.",
    "Do more compute per collective: a larger per-rank batch, or gradient accumulation that skips the "
    "reduce-scatter of inner micro-batches (FSDP1 no_sync(), FSDP2 set_requires_gradient_sync(False)).",
)
ZERO_COMMS: Final = (
    "Overlap communication with backward: ZeRO overlap_comm=True (ZeRO-3 also prefetches parameters: "
    "stage3_prefetch_bucket_size).",
    "contiguous_gradients=True copies gradients into one buffer as they are produced: fewer, larger reductions.",
    "Tune the buckets: reduce_bucket_size and allgather_bucket_size (ZeRO-1/2); stage3_prefetch_bucket_size, "
    "stage3_max_live_parameters and stage3_param_persistence_threshold (ZeRO-3).",
    "Pick the stage for the memory you have: ZeRO-2 gathers no parameters (ZeRO-3 does, in every forward "
    "and backward); ZeRO++ (zero_hpz_partition_size, zero_quantized_weights/gradients) cuts cross-node traffic.",
    "Do more compute per collective: a larger per-rank batch or more gradient_accumulation_steps.",
)
#: Where nothing in the run names a data-parallel wrapper (collectives called directly, a trace
#: without DDP's, FSDP's or DeepSpeed's ranges): what each of them would tune, said of the calls.
DIRECT_COMMS: Final = (
    "Overlap the collectives with compute and send fewer, larger ones: issue them with async_op=True and wait "
    "on the handle only where the result is needed, and coalesce small tensors into one buffer (DDP does both "
    "for gradients: its buckets, bucket_cap_mb).",
    "Send less: lower-precision values (bf16 instead of fp32; for DDP's gradients, a comm hook such as "
    "bf16_compress_hook).",
    "Do more compute per collective: a larger per-rank batch, or gradient accumulation that reduces once "
    "every N micro-batches.",
)
COMMS: Final = {Parallelism.DDP: DDP_COMMS, Parallelism.FSDP: FSDP_COMMS, Parallelism.ZERO: ZERO_COMMS}

LOW_OVERLAP: Final = {
    None: "Overlap gradient all-reduce with backward (DDP buckets, no find_unused_parameters), and "
    "prefetch parameters in FSDP (forward_prefetch / backward_prefetch).",
    Parallelism.DDP: "Overlap gradient all-reduce with backward: DDP starts a bucket's all-reduce when its "
    "gradients are ready; avoid find_unused_parameters=True and tune bucket_cap_mb.",
    Parallelism.FSDP: FSDP_COMMS[0],
    Parallelism.ZERO: ZERO_COMMS[0],
}

DATA_STRAGGLER: Final = (
    "A slow data phase on that rank: give its DataLoader more workers (num_workers, persistent_workers=True, "
    "prefetch_factor), and check its storage and its share of the data (shard sizes, sample lengths)."
)
GPU_STRAGGLER: Final = (
    "A slow compute phase on that rank: check its GPU and host for throttling, a slower or differently "
    "configured device, and other processes on it (nvidia-smi -q -d PERFORMANCE,CLOCK)."
)
HOST_STRAGGLER: Final = (
    "A slow compute phase on that rank: check its host for other processes on its cores, a lower clock or "
    "fewer cores than the other ranks (pin ranks to cores: taskset/numactl, OMP_NUM_THREADS)."
)
UNEVEN_WORK: Final = (
    "Check that rank's work per step: its per-rank batch and input shapes (variable sequence lengths, uneven "
    "sharding); bucket or pack samples so every rank does the same work."
)
LATE_START: Final = (
    "That rank starts its steps late: look at what runs on it before the step: the end of the previous step "
    "(logging, checkpointing, evaluation, metrics read with .item()), work only that rank does (rank 0's "
    "logging or saving), or a batch fetched outside the step's ranges."
)
#: How a run marks ranges, by the profiler and the program (PyTorch or not): its phases and steps.
RANGES: Final = {
    (False, True): "record_function ranges",
    (True, True): "NVTX ranges (torch.cuda.nvtx.range)",
    (True, False): "NVTX ranges (nvtxRangePushA / nvtxRangePop)",
    (False, False): "NVTX ranges (nvtxRangePushA / nvtxRangePop)",
}
NOT_IN_PHASES: Final = (
    "No annotated phase explains the lateness: cover the whole step with {ranges}, or sample that rank's "
    "host (py-spy record --pid) to see the work outside them."
)
NO_PHASES: Final = "Annotate the step's phases ({how}) so the phase that is slower on that rank can be named."
#: What marks the phases, where the advice asks for them.
PHASE_RANGES: Final = {
    (False, True): "torch.profiler.record_function: data, forward, backward, optimizer",
    (True, True): "NVTX ranges, torch.cuda.nvtx.range: data, forward, backward, optimizer",
    (True, False): "NVTX ranges, nvtxRangePushA / nvtxRangePop: input, compute, exchange",
    (False, False): "NVTX ranges, nvtxRangePushA / nvtxRangePop: input, compute, exchange",
}


def ranges(traits: RunTraits) -> str:
    """How this run's profiler records a range of the program's own (a phase, a step)."""
    return RANGES[traits.nsys, traits.pytorch]


def compute_straggler(traits: RunTraits) -> str:
    """What to check on a rank that computes slower than the others, with this run's tools."""
    return GPU_STRAGGLER if traits.gpu else HOST_STRAGGLER


def comms(traits: RunTraits, evidence: Evidence | None = None) -> tuple[str, ...]:
    """Communication advice: the run's own knobs, then where its collectives run; an exchange
    that takes most of the collectives' time (:meth:`Evidence.exchange`) first, and before it, for
    collectives on the host of ranks that shared their cores, the cores."""
    knobs = DIRECT_COMMS if traits.parallelism is None else COMMS[traits.parallelism]
    if evidence is not None and (found := evidence.exchange()) is not None:
        ops, share = found
        knobs = (EXCHANGE.format(pct=100 * share, ops=ops), *knobs)
    if traits.gpu_collectives:
        return (*knobs, NCCL_CHECK)
    if traits.cores_shared is not None:
        ranks, cores = traits.cores_shared
        return (CORES_SHARED.format(ranks=ranks, cores=cores), *knobs, GLOO_INTERFACE)
    return (*knobs, HOST_COLLECTIVES)


def straggler(cause: StragglerCause | None, traits: RunTraits) -> tuple[str, ...]:
    """Advice for a straggler with this ``cause`` (None: no straggler named)."""
    if cause is StragglerCause.DATA_PHASE:
        return (DATA_STRAGGLER,)
    if cause is StragglerCause.PHASE:
        return (compute_straggler(traits), UNEVEN_WORK)
    if cause is StragglerCause.LATE_START:
        return (LATE_START,)
    if cause is StragglerCause.NOT_IN_PHASES:
        return (NOT_IN_PHASES.format(ranges=ranges(traits)), compute_straggler(traits))
    if cause is StragglerCause.NO_PHASES:
        return (NO_PHASES.format(how=PHASE_RANGES[traits.nsys, traits.pytorch]), compute_straggler(traits))
    data = (DATA_STRAGGLER,) if traits.pytorch else ()  # a DataLoader is PyTorch's
    return (
        "Look at the straggler's cause below: the phase that takes longer on it than on the other ranks.",
        *data,
        compute_straggler(traits),
        UNEVEN_WORK,
    )


def for_bound(
    bound: BoundKind, traits: RunTraits, evidence: Evidence, cause: StragglerCause | None = None
) -> tuple[str, ...]:
    """The advice for ``bound`` in this run: its own where it depends on the run (the table
    above), else the bound's (a program that is not PyTorch gets its own where there is one)."""
    if bound is BoundKind.COMMS and traits.pytorch:
        return comms(traits, evidence)
    if bound is BoundKind.STRAGGLER:
        return straggler(cause, traits)
    if not traits.pytorch and bound in CUDA_RECOMMENDATIONS:
        base = CUDA_RECOMMENDATIONS[bound]
    else:
        base = RECOMMENDATIONS.get(bound, ())
    if bound is BoundKind.TRANSFER and traits.pageable_copies:
        base = (PIN_FIRST[traits.pytorch], *base)
    if bound is BoundKind.DATA and traits.pytorch and (around := evidence.fetch_around()) is not None:
        fetch, own, rest = around
        base = (FETCH_AROUND.format(around=ms(rest), fetch=ms(fetch), own=ms(own)), *base)
    if evidence.graph_replay_pct is not None:
        replayed = graphs_replayed(evidence.graph_replay_pct, traits)
        base = tuple(replayed if line in CAPTURE_GRAPHS else line for line in base)
    if FUSED_ATTENTION in base:
        base = tuple(r for line in base for r in (attention(evidence) if line == FUSED_ATTENTION else (line,)))
    if traits.nsys:
        base = tuple(PROFILING.get(bound, {}).get(line, line) for line in base)
    return base


def for_note(note: NoteKind, traits: RunTraits) -> tuple[str, ...]:
    """The advice for ``note`` in this run (a note's own, in the words of the run's profiler)."""
    if note is NoteKind.LOW_OVERLAP:
        if not traits.pytorch:  # MPI's or NCCL's own calls, not a framework's
            return CUDA_RECOMMENDATIONS[BoundKind.COMMS]
        return (LOW_OVERLAP.get(traits.parallelism, LOW_OVERLAP[None]),)
    if traits.nsys and note in NSYS_NOTES:
        return NSYS_NOTES[note][traits.pytorch]
    return NOTE_RECOMMENDATIONS.get(note, ())


# ------------------------------------------------------------------ launches, attention, one thread


def graphs_replayed(pct: float, traits: RunTraits) -> str:
    """The launch advice of a run whose steps already replay CUDA/HIP graphs."""
    if not traits.pytorch:
        return (
            f"CUDA graphs already replay {pct:.0f}% of the kernel time: the gaps are the kernels launched one by one "
            "around the replays; capture those into the graph too (cudaStreamBeginCapture / cudaStreamEndCapture), "
            "and launch fewer, larger graphs."
        )
    return (
        f"CUDA graphs already replay {pct:.0f}% of the steps' kernel time: the launch gaps are the eager work around "
        'the replays. Capture more of the step into the graph (torch.compile(mode="reduce-overhead") over the eager '
        "part, or torch.cuda.make_graphed_callables), in fewer graphs: each graph boundary is a launch gap."
    )


def kernel_name(name: str) -> str:
    """A kernel's name as advice says it: without its return type, template and parameters
    (``void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<...>>(Flash_fwd_params)`` is
    ``flash::flash_fwd_kernel``); the evidence and the kernel table keep the whole name."""
    plain = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    short = plain.split("<", 1)[0].split("(", 1)[0].strip() or name
    return short if len(short) <= 80 else short[:79] + "…"


def _share(kernel: KernelShare) -> str:
    return f"{kernel_name(kernel.name)} ({kernel.share_pct or 0:.1f}% of the kernel time)"


def attention(evidence: Evidence) -> tuple[str, ...]:
    """The attention advice of a PyTorch run: as its kernels and operators show it, none without attention."""
    fused = evidence.attention_kernels
    elsewhere = f" (fused attention kernels run elsewhere: {_share(fused[0])})" if fused else ""
    if evidence.attention is Attention.MATH:
        return (
            "scaled_dot_product_attention runs its math path (aten::_scaled_dot_product_attention_math: unfused "
            "kernels that write out the score matrix): give it fp16/bf16 inputs, a head dimension its fused kernels "
            "take, and is_causal=True rather than an explicit mask; torch.nn.attention.sdpa_kernel("
            "SDPBackend.FLASH_ATTENTION) warns why a fused kernel is not taken" + elsewhere + ".",
        )
    if evidence.attention is Attention.UNFUSED:
        return (
            "Attention is written out (aten::softmax between batched matmuls): "
            "torch.nn.functional.scaled_dot_product_attention runs it in fused kernels (FlashAttention, "
            "memory-efficient) that never write the score matrix out" + elsewhere + ".",
        )
    if evidence.attention is Attention.FUSED and fused:
        return (f"Attention already runs in fused kernels: {', '.join(map(_share, fused))}.",)
    return ()


def one_thread(evidence: Evidence) -> tuple[str, ...]:
    """The advice for kernels launched on one thread (first, whatever the bound)."""
    kernels = evidence.one_thread_kernels
    if not kernels:
        return ()
    each = " each" if len(kernels) > 1 else ""
    verb = "run" if len(kernels) > 1 else "runs"
    return (
        f"{'; '.join(map(_share, kernels))} {verb} on one GPU thread{each} (a grid of 1x1x1 blocks of 1x1x1 "
        "threads): launch it over the data, one thread per element (<<<(n + 255) / 256, 256>>> with a "
        "grid-stride loop), so that the GPU's cores share its work.",
    )


# ------------------------------------------------------------------ the profiler's words

#: Advice about profiling that names torch.profiler, in Nsight Systems' words (bound -> line -> line).
PROFILING: Final[dict[BoundKind, dict[str, str]]] = {
    BoundKind.IDLE: {
        RECOMMENDATIONS[BoundKind.IDLE][2]: "Sample the host's Python stacks with the device: nsys profile "
        "--sample=cpu --python-sampling=true (and --pytorch=autograd-nvtx for the operators) shows what runs "
        "between operators.",
        RECOMMENDATIONS[BoundKind.IDLE][3]: "Profile steady-state steps only: start the capture after warm-up and "
        "compilation (nsys profile --capture-range=cudaProfilerApi, with torch.cuda.profiler.start() and stop() "
        "around the steps).",
    },
    BoundKind.HOST: {
        RECOMMENDATIONS[BoundKind.HOST][0]: "The host does CPU work between launches: find it in the host ranges "
        "named in the evidence (py-spy record, or nsys profile --sample=cpu --python-sampling=true).",
    },
}

#: The notes' advice in Nsight Systems' words, for a PyTorch program (True) and another (False).
NSYS_NOTES: Final[dict[NoteKind, dict[bool, tuple[str, ...]]]] = {
    NoteKind.GPU_EVENTS_MISSING: dict.fromkeys(
        (True, False),
        (
            "Record the device too: nsys profile --trace=cuda,nvtx,osrt puts the kernels, copies and sets in the "
            "report; export it whole (nsys export --type sqlite).",
        ),
    ),
    NoteKind.ONE_STEP: {
        True: (
            "Profile several steady-state steps, each in an NVTX range named ProfilerStep#N (torch.cuda.nvtx.range), "
            "captured after warm-up (nsys profile --capture-range=cudaProfilerApi, torch.cuda.profiler.start() / "
            "stop()), or with tracekit capture, to measure how much the verdict's shares move from step to step.",
        ),
        False: (
            "Profile several iterations of the steady state, each in an NVTX range named ProfilerStep#N "
            "(nvtxRangePushA / nvtxRangePop), captured after warm-up (nsys profile --capture-range=cudaProfilerApi, "
            "cudaProfilerStart / cudaProfilerStop), to measure how much the verdict's shares move from one to the "
            "next.",
        ),
    },
    NoteKind.TOO_LITTLE_WORK: {
        True: (
            "Profile several steady-state training steps rather than a snippet: nsys profile "
            "--capture-range=cudaProfilerApi with torch.cuda.profiler.start() / stop() around them, each step in an "
            "NVTX range named ProfilerStep#N.",
        ),
        False: (
            "Profile several iterations of the steady state rather than a snippet: nsys profile "
            "--capture-range=cudaProfilerApi with cudaProfilerStart / cudaProfilerStop around them, each in an NVTX "
            "range named ProfilerStep#N.",
        ),
    },
}
