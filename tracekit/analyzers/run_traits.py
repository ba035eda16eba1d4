"""What of a run its advice depends on besides its bound: graph replays, attention, one-thread launches.

The same bound asks for other changes in other runs (:mod:`tracekit.reports.advice` words them);
each trait is read from the measured steps' kernels (kernel time: the summed durations of the
kernels that start in a measured window) and from the host's operators:

=================  ===============================================================================
trait              what the trace shows
=================  ===============================================================================
graph replays      kernels whose launch (their correlation id) is a graph launch: ``cudaGraphLaunch``,
                   ``hipGraphLaunch``, ``cuGraphLaunch`` (every node of a replay correlates to it, in
                   Kineto and Nsight Systems alike); their share of the kernel time says how much of
                   the step CUDA/HIP graphs already cover
fused attention    kernels named as fused attention runs them (:data:`FUSED_ATTENTION`)
unfused attention  ``aten::softmax`` (or ``aten::_softmax``) with a batched matmul (``aten::bmm``,
                   ``aten::baddbmm``) at most :data:`NEIGHBOURS` host operators before it and one
                   after it on its thread: ``q @ k.T``, scale and mask, softmax, dropout, ``@ v``
                   written out. The loss's ``aten::log_softmax`` is no attention
SDPA's math path   ``aten::_scaled_dot_product_attention_math``: ``scaled_dot_product_attention``
                   fell back to unfused kernels (a dtype, head size, mask or backend setting its
                   fused kernels do not take)
one-thread kernel  a kernel launched on one thread (a grid of 1x1x1 blocks of 1x1x1 threads:
                   ``threads`` 1) whose launches take at least
                   :data:`~tracekit.analyzers.verdict.SECONDARY_SHARE` of the kernel time, the share
                   that makes a finding: its work runs serially on one of the GPU's thousands of cores
=================  ===============================================================================

Host operators are what Kineto records and what ``torch.autograd.profiler.emit_nvtx`` (``nsys
profile --pytorch=autograd-nvtx``) puts in an Nsight Systems export as NVTX ranges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec
import polars as pl

from tracekit.analyzers import intervals as iv
from tracekit.analyzers.parts import Parts, table
from tracekit.analyzers.stats import num
from tracekit.analyzers.verdict import SECONDARY_SHARE
from tracekit.results.analysis import KernelShare
from tracekit.results.traits import Attention

if TYPE_CHECKING:
    from tracekit.analyzers.context import RankContext
    from tracekit.analyzers.mapreduce import Reduced
    from tracekit.results.analysis import Evidence

#: Kernels of fused attention, by name (case-insensitive), as the shared traces and the libraries
#: name them: FlashAttention 2/3/4 and PyTorch's copy of it (``flash_fwd_kernel``,
#: ``pytorch_flash::flash_fwd_kernel``, ``flash::FlashAttnFwdSm90``; the nsys-ai H100 exports run
#: ``flash_fwd_kernel``), PyTorch's memory-efficient kernels and xFormers' (``fmha_cutlassF_...``,
#: ``fmha_cutlassB_...``), Composable Kernel's (``FmhaFwdKernel``), cuDNN's
#: (``cudnn_generated_fort_native_sdpa_...``), AOTriton's on ROCm (``attn_fwd``), vLLM's
#: (``kernel_unified_attention_2d``, seen in the TraceLens vLLM traces, and
#: ``paged_attention_v1_kernel``), FlashInfer's (``BatchPrefillWithPagedKVCacheKernel``) and
#: CUTLASS's attention examples. Inductor's fused pointwise and reduction kernels are named after
#: the operators around them (``triton_poi_fused__scaled_dot_product_efficient_attention_...``):
#: not attention, left out.
FUSED_ATTENTION: Final = (
    r"(?i)flash_?fwd|flash_?bwd|flash::|flashattn|flash_attn|fmha|cudnn_generated_fort_native_sdpa"
    r"|unified_attention|paged_attention|\battn_(?:fwd|bwd)|(?:batch|single)(?:prefill|decode)with"
    r"|cutlass.*attention"
)
_INDUCTOR_FUSED: Final = r"^triton_(?:poi|red|per)_fused"
SOFTMAX: Final = ("aten::softmax", "aten::_softmax")
BATCHED_MATMUL: Final = ("aten::bmm", "aten::baddbmm")
SDPA_MATH: Final = r"^aten::_scaled_dot_product_attention_math"
#: How many host operators of its thread may sit between a softmax and the batched matmul on
#: either side of it. Attention written out with a causal mask and dropout, profiled on torch
#: 2.13, has 20 before (the scale's ``div`` and casts, the mask's ``bitwise_not``, ``masked_fill``'s
#: expand, clone and copy) and 21 after (dropout's ``bernoulli_``, ``div_`` and casts, ``matmul``'s
#: expands, reshapes and views); the softmax of a DLRM in the HTA sampled traces (its ``bmm`` is
#: the feature interaction) has its nearest ``bmm`` 74 to 81 operators before it.
NEIGHBOURS: Final = 32
#: The host kinds that carry operators (Kineto's, and NVTX ranges in an Nsight Systems export).
_HOST: Final = ("cpu_op", "annotation")
#: How many kernels of each kind the evidence names.
_NAMED: Final = 3


class TraitParts(Parts):
    """Per rank: the measured kernel time and what graph replays ran of it (``time``); the
    kernels the advice names (``kernels``, trait ``attention`` or ``one_thread``); the host's
    signs of attention (``signs``: counts)."""

    time: pl.DataFrame = table("rank kernel_ns graph_ns")
    kernels: pl.DataFrame = table("rank name trait total_ns")
    signs: pl.DataFrame = table("rank unfused math")


def traits_map(ctx: RankContext) -> TraitParts:
    """The measured steps' kernel time by what launched it and what the kernels are, and the
    host's signs of attention (nothing on a CPU-only run: the traits are about a GPU's kernels)."""
    if not ctx.has_gpu:
        return TraitParts()
    run = ctx.run
    kernels = run.select(["kernel"], "rank", "name", "start_ns", "end_ns", "correlation", "threads")
    graph_calls = ctx.graph_launches  # (:func:`~tracekit.analyzers.steps.graph_launches`)
    frames = ctx.frames.select("rank", "step", "start_ns", "end_ns")
    measured = (
        iv.locate(kernels, "start_ns", frames, by=["rank"], keep=["step"], in_time_order=False)
        .join(graph_calls.with_columns(graph=pl.lit(value=True)), on=["rank", "correlation"], how="left")
        .select(
            "rank",
            "name",
            "threads",
            graph=pl.col("graph").fill_null(value=False),
            ns=pl.col("end_ns") - pl.col("start_ns"),
        )
    )
    time = measured.group_by("rank").agg(
        kernel_ns=pl.col("ns").sum(), graph_ns=pl.col("ns").filter(pl.col("graph")).sum()
    )
    fused = run.names_matching(FUSED_ATTENTION)  # each distinct name tested once
    fused = fused.filter(~fused.str.contains(_INDUCTOR_FUSED))
    named = pl.concat(
        [
            measured.filter(pl.col("name").is_in(fused.implode())).with_columns(trait=pl.lit("attention")),
            measured.filter(pl.col("threads") == 1).with_columns(trait=pl.lit("one_thread")),
        ]
    )
    by_name = named.group_by("rank", "name", "trait").agg(total_ns=pl.col("ns").sum())
    by_name = by_name.with_columns(pl.col("name").cast(pl.String))
    return TraitParts(time=time.sort("rank"), kernels=by_name.sort("rank", "name", "trait"), signs=_signs(ctx))


def traits_fold(parts: list[TraitParts]) -> TraitParts:
    """The rank's traits from its windows' (:mod:`tracekit.analyzers.windows`): each counts the
    kernels and host operators that start in it, so the kernel time, the signs and the kernels'
    time by name and trait are the sums of the windows'."""
    if not any(p.time.width for p in parts):
        return TraitParts()
    return TraitParts(
        time=_added([p.time for p in parts], ["rank"]),
        kernels=_added([p.kernels for p in parts], ["rank", "name", "trait"]),
        signs=_added([p.signs for p in parts], ["rank"]),
    )


def _added(tables: list[pl.DataFrame], keys: list[str]) -> pl.DataFrame:
    """The windows' ``tables`` (rows by ``keys``) in one, the other columns summed by ``keys``."""
    found = pl.concat([t for t in tables if t.width], how="vertical")
    summed = found.group_by(keys).agg(pl.exclude(keys).sum())
    return summed.select(found.columns).cast(found.schema).sort(keys)


def _signs(ctx: RankContext) -> pl.DataFrame:
    """Per rank: softmaxes between batched matmuls (unfused attention), and SDPA's math path;
    of a window, those that start in it."""
    run = ctx.run
    math = ctx.own(run.select(_HOST, "rank", "start_ns", name=SDPA_MATH)).group_by("rank").agg(math=pl.len())
    unfused = pl.DataFrame(schema={"rank": pl.Int32, "unfused": pl.UInt32})
    if not run.names_matching(f"^(?:{'|'.join(SOFTMAX)})$").is_empty():
        ops = _host_ops(ctx).with_columns(at=pl.int_range(pl.len(), dtype=pl.Int64).over("rank", "tid"))
        softmax = ops.filter(pl.col("name").is_in(SOFTMAX) & pl.col("mine")).select("rank", "tid", "at")
        matmul = ops.filter(pl.col("name").is_in(BATCHED_MATMUL)).select("rank", "tid", "at", mm=pl.col("at"))
        if matmul.height:
            softmax, matmul = softmax.sort("at"), matmul.sort("at")  # each join keeps the softmaxes' order
            near = [
                softmax.join_asof(matmul, on="at", by=["rank", "tid"], strategy=side, check_sortedness=False)
                .select(((pl.col("mm") - pl.col("at")).abs() <= NEIGHBOURS).fill_null(value=False))
                .to_series()
                for side in ("backward", "forward")
            ]
            unfused = softmax.filter(near[0] & near[1]).group_by("rank").agg(unfused=pl.len())
    return (
        math.join(unfused, on="rank", how="full", coalesce=True)
        .with_columns(pl.col("math", "unfused").fill_null(0))
        .sort("rank")
    )


def _host_ops(ctx: RankContext) -> pl.DataFrame:
    """The host operators of ``ctx``'s threads in order (rank, tid, name), and whether each is
    the context's to count (``mine``). A window's are those that start in it, with the
    :data:`NEIGHBOURS` operators before them and after them on each thread that has a softmax
    of its own (:meth:`~tracekit.analyzers.context.RankContext.beside`): a softmax near either
    end has the batched matmuls that make it attention in the windows beside."""
    columns = ("rank", "tid", "name")
    if ctx.window is None:
        return ctx.run.select(_HOST, *columns).with_columns(mine=pl.lit(value=True))
    own = ctx.own(ctx.run.select(_HOST, *columns, "start_ns")).drop("start_ns")
    threads = own.filter(pl.col("name").is_in(SOFTMAX)).select("rank", "tid").unique()
    before, after = ctx.beside(_HOST, NEIGHBOURS, threads, *columns)
    return pl.concat(
        [
            before.with_columns(mine=pl.lit(value=False)),
            own.with_columns(mine=pl.lit(value=True)),
            after.with_columns(mine=pl.lit(value=False)),
        ]
    )


def with_traits(evidence: Evidence, red: Reduced) -> Evidence:
    """``evidence`` with the run's traits (:class:`~tracekit.results.analysis.Evidence`'s
    ``graph_replay_pct``, ``attention``, ``attention_kernels`` and ``one_thread_kernels``)."""
    parts = red.gather(TraitParts)
    if parts.time.is_empty():
        return evidence
    kernel_ns = num(parts.time["kernel_ns"].sum())
    graph_ns = num(parts.time["graph_ns"].sum())
    kernels = parts.kernels.group_by("name", "trait").agg(pl.col("total_ns").sum())

    def named(trait: str, *, least: float = 0.0) -> list[KernelShare]:
        if kernel_ns <= 0:
            return []
        rows = (
            kernels.filter(pl.col("trait") == trait, pl.col("total_ns") >= least * kernel_ns)
            .sort(["total_ns", "name"], descending=[True, False])
            .head(_NAMED)
        )
        return [
            KernelShare(name=r["name"], share_pct=100 * r["total_ns"] / kernel_ns) for r in rows.iter_rows(named=True)
        ]

    fused = named("attention")
    signs = parts.signs
    math = num(signs["math"].sum()) if signs.height else 0
    unfused = num(signs["unfused"].sum()) if signs.height else 0
    attention = Attention.MATH if math else Attention.UNFUSED if unfused else Attention.FUSED if fused else None
    return msgspec.structs.replace(
        evidence,
        graph_replay_pct=100 * graph_ns / kernel_ns if graph_ns > 0 and kernel_ns > 0 else None,
        attention=attention,
        attention_kernels=fused,
        one_thread_kernels=named("one_thread", least=SECONDARY_SHARE),
    )
