"""Memory findings in words: headroom, fragmentation, what fills the peak, imbalance."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.reports.wording import Written
from tracekit.results.vocab import MemoryNote, Parallelism

if TYPE_CHECKING:
    from tracekit.results.analysis import MemoryFinding


def gib(value: float | None) -> str:
    return "?" if value is None else f"{value / 2**30:,.2f} GiB"


#: What to do about what fills memory, by category.
FILL_ADVICE: Final = {
    "activation": "activation checkpointing (torch.utils.checkpoint), or a smaller micro-batch with gradient "
    "accumulation",
    "optimizer_state": "shard the optimizer state (ZeRO-1/2, FSDP), or a fused or 8-bit optimizer",
    "parameter": "shard the parameters (FSDP FULL_SHARD, ZeRO-3), or keep them in lower precision",
    "gradient": "shard the gradients (ZeRO-2, FSDP SHARD_GRAD_OP), or accumulate in lower precision",
    "autograd_detail": "fewer saved intermediates (checkpointing, fused kernels)",
    "temporary": "fused kernels or in-place ops for the temporaries of the peak's operator",
    "input": "a smaller batch or inputs kept on the host until needed",
}
#: What fills memory that the run's sharding already shards: advice for how it is data-parallel
#: (:class:`~tracekit.results.vocab.Parallelism`) instead of "shard it" (the run does).
SHARDED_FILL_ADVICE: Final = {
    Parallelism.FSDP: {
        "optimizer_state": "FSDP shards it already: shard over more ranks (a larger shard group than HSDP's), "
        "offload it (FSDP1 CPUOffload, FSDP2 CPUOffloadPolicy), or a fused or 8-bit optimizer",
        "parameter": "reshard after forward (FSDP2 reshard_after_forward=True, FSDP1 FULL_SHARD rather than "
        "SHARD_GRAD_OP), wrap smaller units so fewer are gathered at once, or keep them in lower precision "
        "(MixedPrecision param_dtype)",
        "gradient": "FSDP shards them after the reduce-scatter: wrap smaller units, or reduce in lower precision "
        "(MixedPrecision reduce_dtype)",
    },
    Parallelism.ZERO: {
        "optimizer_state": "ZeRO shards it already: shard over more ranks, offload it (offload_optimizer: "
        "device cpu or nvme), or an 8-bit optimizer",
        "parameter": "ZeRO-3 shards them (stage 3; stage3_max_live_parameters bounds those gathered at once), or "
        "offload them (offload_param)",
        "gradient": "ZeRO-2 and ZeRO-3 shard them: a higher stage, or a smaller reduce_bucket_size",
    },
}
EXPANDABLE: Final = "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (growable segments, less stranded memory)"
#: A fragmentation finding's advice in a run whose allocator already grows its segments.
EXPANDABLE_ON: Final = (
    "expandable segments are already on: what is left is freed memory the allocator keeps mapped for reuse; "
    "steadier tensor sizes keep it smaller (pad or bucket variable lengths and batch shapes), and it costs "
    "only when memory is near full"
)


def _measured(title: str, evidence: tuple[str, ...], advice: tuple[str, ...], *, good: bool = False) -> Written:
    """A memory finding in words: measured, not judged against a share of the time."""
    return Written(
        title=title, share_pct=None, confidence="measured", evidence=evidence, recommendations=advice, good=good
    )


def write_memory(f: MemoryFinding, parallelism: Parallelism | None = None, *, expandable: bool = False) -> Written:
    """One memory finding in words, with what to do about it (in a run that is data-parallel as
    ``parallelism`` says: FSDP and ZeRO already shard what they shard; whose allocator grows its
    segments when ``expandable``: that advice is not given again)."""
    rank = f"rank {f.rank}"
    if f.note is MemoryNote.HEADROOM:
        used = None if f.capacity_bytes is None or f.bytes is None else f.capacity_bytes - f.bytes
        figures = f"{gib(used)} of {gib(f.capacity_bytes)} reserved at the peak on {rank}, the least room of any rank"
        if f.low:
            return _measured(
                f"Memory at the limit: {f.value:.1f}% of the device left on {rank}",
                (figures, "the CUDA context and NCCL's buffers are not in the counters: the room is smaller"),
                (
                    "a larger batch will not fit, and a longer step may not: "
                    "free memory first (see what fills it) or shard more (FSDP, ZeRO)",
                    *(() if expandable else (EXPANDABLE,)),
                ),
            )
        return _measured(f"Memory headroom: {f.value:.1f}% of the device left on {rank}", (figures,), (), good=True)
    if f.note is MemoryNote.FRAGMENTATION:
        return _measured(
            f"Memory fragmentation: {f.value:.1f}% of reserved memory unallocated at the peak on {rank}",
            (f"{gib(f.bytes)} held by the caching allocator and used by no tensor when allocated peaked",),
            (EXPANDABLE_ON if expandable else EXPANDABLE,),
        )
    if f.note is MemoryNote.FILLED_BY:
        return _measured(
            f"Memory is filled by {f.category}: {f.value:.1f}% of the peak on {rank}",
            (f"{gib(f.bytes)} of {f.category} when the categorized timeline peaked",),
            tuple(a for a in (_fill_advice(f.category or "", parallelism),) if a),
        )
    return _measured(
        f"Memory imbalance: {rank} peaks at {f.value:.2f}x the median rank",
        ("peak allocated per rank, on the devices",),
        ("uneven sharding (parameters, embedding tables) or uneven data (lengths, batch composition)",),
    )


def _fill_advice(category: str, parallelism: Parallelism | None) -> str | None:
    """What to do about the category that fills memory, in this run."""
    return SHARDED_FILL_ADVICE.get(parallelism or Parallelism.DDP, {}).get(category) or FILL_ADVICE.get(category)
