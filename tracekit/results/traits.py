"""The vocabulary of what a run is besides its bound, which its advice follows: the profiler its
traces came from and how it computes attention (beside :class:`~tracekit.results.vocab.Parallelism`;
a module of its own, :mod:`tracekit.results.vocab` being at the 500 lines a module may have).
"""

from __future__ import annotations

from tracekit.results.vocab import StrEnum


class TraceFormat(StrEnum):
    """The profiler a rank's trace was read from: the tool a report's advice names."""

    KINETO = "kineto"  # torch.profiler (Kineto) Chrome trace
    NSYS = "nsys"  # Nsight Systems export (SQLite, or a report exported to it)


class Attention(StrEnum):
    """How a run computes attention, as its kernels and operators show (what its advice is about)."""

    FUSED = "fused"  # fused attention kernels run (FlashAttention, memory-efficient, cuDNN, FlashInfer...)
    UNFUSED = "unfused"  # aten::softmax between batched matmuls on one thread: attention written out
    MATH = "sdpa-math"  # scaled_dot_product_attention fell back to its math path (unfused kernels)
