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
the interconnect       where the collectives run: NCCL/RCCL kernels on a GPU get ``NCCL_DEBUG`` and
                       NVLink/InfiniBand; collectives on the host (gloo, MPI, a CPU-only run) get the
                       host's cores and network, never NCCL's settings
a straggler            the cause found for it: a data phase gets input-pipeline advice; any other
                       phase (forward, backward, the optimizer) compute advice (that rank's device
                       and host: throttling, a slower device, other processes; its share of the
                       work); a late start advice about what runs before the step
device tools           ``nvidia-smi`` only where there is a GPU
=====================  ===========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tracekit.results.vocab import BoundKind, MeasuredOn, NoteKind, Parallelism, StragglerCause

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis, Verdict


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

    @classmethod
    def of(cls, analysis: Analysis) -> RunTraits:
        """The traits of an analysed run: its collectives run on the GPU when kernels were
        recognized as collectives, or when none was where some should have been (a backend
        that runs them on the GPU: the no-communication note)."""
        run, verdict = analysis.run, analysis.verdict
        kernels = any(c.category == "collective" for c in analysis.kernels.by_category)
        missed = any(f.note is NoteKind.NO_COMMUNICATION for f in verdict.secondary)
        return cls(
            gpu=run.has_gpu,
            gpu_collectives=run.has_gpu and (kernels or missed),
            parallelism=run.parallelism,
            ranks=len(run.ranks),
            pace_ranks=tuple(analysis.ledger.pace_ranks) if analysis.ledger is not None else (),
        )

    @classmethod
    def of_verdict(cls, verdict: Verdict) -> RunTraits:
        """What a verdict alone tells (a GPU when it was measured on one)."""
        gpu = verdict.measured_on is MeasuredOn.GPU
        return cls(gpu=gpu, gpu_collectives=gpu)


NCCL_CHECK: Final = "Check the interconnect: NCCL_DEBUG=INFO shows the transport (NVLink/IB vs. sockets)."
HOST_COLLECTIVES: Final = (
    "Collectives run on the host here (gloo or MPI): give each rank cores of its own (its threads compete "
    "with the collective's), and check the network interface it uses (GLOO_SOCKET_IFNAME)."
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
NOT_IN_PHASES: Final = (
    "No annotated phase explains the lateness: cover the whole step with record_function ranges, or sample "
    "that rank's host (py-spy record --pid) to see the work outside them."
)
NO_PHASES: Final = (
    "Annotate the step's phases (torch.profiler.record_function: data, forward, backward, optimizer) so the "
    "phase that is slower on that rank can be named."
)


def compute_straggler(traits: RunTraits) -> str:
    """What to check on a rank that computes slower than the others, with this run's tools."""
    return GPU_STRAGGLER if traits.gpu else HOST_STRAGGLER


def comms(traits: RunTraits) -> tuple[str, ...]:
    """Communication advice: the run's own knobs, then where its collectives run."""
    knobs = COMMS.get(traits.parallelism or Parallelism.DDP, DDP_COMMS)
    return (*knobs, NCCL_CHECK if traits.gpu_collectives else HOST_COLLECTIVES)


def straggler(cause: StragglerCause | None, traits: RunTraits) -> tuple[str, ...]:
    """Advice for a straggler with this ``cause`` (None: no straggler named)."""
    if cause is StragglerCause.DATA_PHASE:
        return (DATA_STRAGGLER,)
    if cause is StragglerCause.PHASE:
        return (compute_straggler(traits), UNEVEN_WORK)
    if cause is StragglerCause.LATE_START:
        return (LATE_START,)
    if cause is StragglerCause.NOT_IN_PHASES:
        return (NOT_IN_PHASES, compute_straggler(traits))
    if cause is StragglerCause.NO_PHASES:
        return (NO_PHASES, compute_straggler(traits))
    return (
        "Look at the straggler's cause below: the phase that takes longer on it than on the other ranks.",
        DATA_STRAGGLER,
        compute_straggler(traits),
        UNEVEN_WORK,
    )


def for_bound(bound: BoundKind, traits: RunTraits, cause: StragglerCause | None = None) -> tuple[str, ...] | None:
    """The advice for ``bound`` that depends on the run (None: the bound's advice is the same for every run)."""
    if bound is BoundKind.COMMS:
        return comms(traits)
    if bound is BoundKind.STRAGGLER:
        return straggler(cause, traits)
    return None


def for_note(note: NoteKind, traits: RunTraits) -> tuple[str, ...] | None:
    """The advice for ``note`` that depends on the run (None: the same for every run)."""
    if note is NoteKind.LOW_OVERLAP:
        return (LOW_OVERLAP.get(traits.parallelism, LOW_OVERLAP[None]),)
    return None
