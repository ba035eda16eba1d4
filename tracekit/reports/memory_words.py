"""Memory findings in words: headroom, fragmentation, what fills the peak, imbalance."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.reports.wording import Written
from tracekit.results.vocab import MemoryNote

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
EXPANDABLE: Final = "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (growable segments, less stranded memory)"


def _measured(title: str, evidence: tuple[str, ...], advice: tuple[str, ...], *, good: bool = False) -> Written:
    """A memory finding in words: measured, not judged against a share of the time."""
    return Written(
        title=title, share_pct=None, confidence="measured", evidence=evidence, recommendations=advice, good=good
    )


def write_memory(f: MemoryFinding) -> Written:
    """One memory finding in words, with what to do about it."""
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
                    EXPANDABLE,
                ),
            )
        return _measured(f"Memory headroom: {f.value:.1f}% of the device left on {rank}", (figures,), (), good=True)
    if f.note is MemoryNote.FRAGMENTATION:
        return _measured(
            f"Memory fragmentation: {f.value:.1f}% of reserved memory unallocated at the peak on {rank}",
            (f"{gib(f.bytes)} held by the caching allocator and used by no tensor when allocated peaked",),
            (EXPANDABLE,),
        )
    if f.note is MemoryNote.FILLED_BY:
        return _measured(
            f"Memory is filled by {f.category}: {f.value:.1f}% of the peak on {rank}",
            (f"{gib(f.bytes)} of {f.category} when the categorized timeline peaked",),
            tuple(a for a in (FILL_ADVICE.get(f.category or ""),) if a),
        )
    return _measured(
        f"Memory imbalance: {rank} peaks at {f.value:.2f}x the median rank",
        ("peak allocated per rank, on the devices",),
        ("uneven sharding (parameters, embedding tables) or uneven data (lengths, batch composition)",),
    )
