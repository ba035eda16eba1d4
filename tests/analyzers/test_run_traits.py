"""What of a run its advice depends on, read from small runs worked out by hand."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.factories import ev, make_run, write_kineto, write_nsys
from tracekit.analyzers import analyze, run_analysis
from tracekit.readers import load_run
from tracekit.results.traits import Attention, TraceFormat

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Evidence

MS = 1_000_000


def kernel(
    name: str, start_ms: float, end_ms: float, *, correlation: int | None = None, threads: int | None = None
) -> dict[str, Any]:
    return ev("kernel", name, int(start_ms * MS), int(end_ms * MS), correlation=correlation) | {"threads": threads}


def launch(name: str, at_ms: float, correlation: int) -> dict[str, Any]:
    return ev("runtime", name, int(at_ms * MS), int(at_ms * MS) + 5_000, correlation=correlation)


def evidence(rows: list[dict[str, Any]]) -> Evidence:
    return analyze(make_run(rows)).verdict.evidence


def test_the_share_of_kernel_time_that_graph_replays_ran() -> None:
    """Two kernels of one replay (both correlate to its cudaGraphLaunch) run 6 of the 8 ms of
    kernel time; the eager kernel, launched by cudaLaunchKernel, the other 2."""
    rows = [
        launch("cudaGraphLaunch", 0.0, 1),
        kernel("graph_node_a", 0.1, 3.1, correlation=1),
        kernel("graph_node_b", 3.2, 6.2, correlation=1),
        launch("cudaLaunchKernel", 6.0, 2),
        kernel("eager", 6.3, 8.3, correlation=2),
    ]
    assert evidence(rows).graph_replay_pct == pytest.approx(75.0)
    hip = [{**r, "name": "hipGraphLaunch"} if r["name"] == "cudaGraphLaunch" else r for r in rows]
    assert evidence(hip).graph_replay_pct == pytest.approx(75.0)
    eager = [{**r, "name": "cudaLaunchKernel"} if r["name"] == "cudaGraphLaunch" else r for r in rows]
    assert evidence(eager).graph_replay_pct is None


def test_fused_attention_kernels_are_named_with_their_share() -> None:
    rows = [
        kernel("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>(Flash_fwd_params)", 0, 3),
        kernel("fmha_cutlassB_f16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel)", 3, 4),
        # Inductor's pointwise kernel around attention is named after it: no attention
        kernel("triton_poi_fused__scaled_dot_product_efficient_attention__to_copy_0", 4, 5),
        kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 5, 10),
    ]
    e = evidence(rows)
    assert e.attention is Attention.FUSED
    assert [(k.name[:24], k.share_pct) for k in e.attention_kernels] == [
        ("void pytorch_flash::flas", pytest.approx(30.0)),
        ("fmha_cutlassB_f16_aligne", pytest.approx(10.0)),
    ]


def softmax_between_bmms(at_ms: float, *, softmax: str = "aten::softmax", between: int = 3) -> list[dict[str, Any]]:
    """q @ k.T, ``between`` operators (scale, mask), softmax, ``between`` more, @ v, on one thread."""
    ops = ["aten::bmm", *(["aten::div"] * between), softmax, *(["aten::dropout"] * between), "aten::bmm"]
    return [
        ev("cpu_op", name, int((at_ms + i * 0.01) * MS), int((at_ms + i * 0.01 + 0.005) * MS))
        for i, name in enumerate(ops)
    ]


GEMM = [kernel("volta_sgemm_128x64_nn", 0, 10)]


def test_a_softmax_between_batched_matmuls_is_attention_written_out() -> None:
    e = evidence([*softmax_between_bmms(0.0), *GEMM])
    assert e.attention is Attention.UNFUSED and e.attention_kernels == []


@pytest.mark.parametrize(
    "rows",
    [
        softmax_between_bmms(0.0, softmax="aten::log_softmax"),  # a classifier's loss
        softmax_between_bmms(0.0, between=40),  # a softmax and matmuls far apart (a DLRM's interaction)
        [ev("cpu_op", "aten::softmax", 0, 5_000)],  # a softmax alone (a router)
        [],
    ],
    ids=["log_softmax", "far-apart", "softmax-alone", "mlp"],
)
def test_no_attention_where_the_trace_shows_none(rows: list[dict[str, Any]]) -> None:
    e = evidence([*rows, *GEMM])
    assert e.attention is None and e.attention_kernels == []


def test_sdpa_s_math_path_is_named_before_the_softmax_it_runs() -> None:
    math = [ev("cpu_op", "aten::scaled_dot_product_attention", 0, 90_000)]
    math.append(ev("cpu_op", "aten::_scaled_dot_product_attention_math", 1_000, 80_000))
    assert evidence([*math, *softmax_between_bmms(0.002), *GEMM]).attention is Attention.MATH


def test_kernels_run_on_one_thread_are_named_when_material() -> None:
    """A <<<1, 1>>> kernel taking 80% of the kernel time is named; one taking 1% is not (under the
    5% that makes a finding); a kernel of many threads is not."""
    rows = [
        kernel("serial_sum(float*, int)", 0, 80, threads=1),
        kernel("tiny_flag(int*)", 80, 81, threads=1),
        kernel("saxpy(float, float*, float*)", 81, 100, threads=1024),
    ]
    e = evidence(rows)
    assert [(k.name, k.share_pct) for k in e.one_thread_kernels] == [("serial_sum(float*, int)", pytest.approx(80.0))]
    assert evidence(rows[2:]).one_thread_kernels == []


def test_a_cpu_only_run_has_none_of_these_traits() -> None:
    e = evidence([*softmax_between_bmms(0.0), ev("cpu_op", "aten::mm", 0, 9_000_000)])
    assert (e.graph_replay_pct, e.attention, e.attention_kernels, e.one_thread_kernels) == (None, None, [], [])


def test_each_rank_says_which_profiler_its_trace_came_from(tmp_path: Path) -> None:
    kineto = write_kineto(
        tmp_path / "rank0.json",
        [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": {"stream": 7}}],
    )
    assert [r.format for r in run_analysis(load_run([kineto])).analysis.run.ranks] == [TraceFormat.KINETO]
    kernels = [{"start": 100, "end": 200, "deviceId": 0, "streamId": 7, "correlationId": 1, "globalPid": 100 << 24}]
    nsys = write_nsys(tmp_path / "job.sqlite", {"CUPTI_ACTIVITY_KIND_KERNEL": kernels})
    assert [r.format for r in run_analysis(load_run([nsys])).analysis.run.ranks] == [TraceFormat.NSYS]


def test_aten_s_kernels_say_pytorch_where_no_operator_was_recorded() -> None:
    """An Nsight Systems export of a PyTorch program without NVTX ranges has no operator: its
    ATen kernels say what it is; a CUDA program's own kernels do not."""
    aten = [kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", 0, 5)]
    assert evidence(aten).pytorch
    assert not evidence([kernel("saxpy(int, float, float*, float*)", 0, 5)]).pytorch
