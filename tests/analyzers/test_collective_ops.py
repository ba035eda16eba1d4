"""Communication kernels of every family are matched across ranks by their operation."""

from __future__ import annotations

from tests.factories import ev, make_run
from tracekit.analyzers.collectives import match_collectives
from tracekit.analyzers.steps import analyze_steps, gpu_activity
from tracekit.model import classify_run

US = 1000
KERNELS = {
    "dispatch": "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)",
    "combine": "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*)",
    "ar": "void (anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 16, 2>(c10::BFloat16**)",
    "user": "my_a2a_kernel<2>(int*)",
}


def test_new_families_match_across_ranks_by_operation() -> None:
    rows: list[dict[str, object]] = []
    for rank in range(2):
        rows.append(ev("step", "ProfilerStep#1", 0, 1000 * US, rank=rank))
        for i, key in enumerate(("dispatch", "combine", "dispatch", "ar", "user")):
            start = (100 + 150 * i + 20 * rank) * US  # rank 1 starts 20 us later, all end together
            end = (100 + 150 * i + 100) * US
            rows.append(ev("runtime", "cudaLaunchKernel", start - 5, start - 4, rank=rank, correlation=i + 1))
            rows.append(ev("kernel", KERNELS[key], start, end, rank=rank, correlation=i + 1, stream=30))
    run = make_run(rows, world_size=2)
    run = type(run)(events=classify_run(run.events, comm_kernels=["^my_a2a"]), ranks=run.ranks)
    activity = gpu_activity(run)
    result = match_collectives(run, activity, analyze_steps(run, activity=activity))
    inst = result.instances
    assert sorted(zip(inst["op"], inst["k"], strict=True)) == [
        ("deepep_combine", 0),
        ("deepep_dispatch", 0),
        ("deepep_dispatch", 1),
        ("my_a2a_kernel", 0),
        ("symm_mem_one_shot_all_reduce", 0),
    ]
    assert inst["ranks"].to_list() == [2] * 5
    assert set(inst["last_rank"].to_list()) == {1}  # rank 1 arrived last every time


def test_deepseek_style_all_to_all_hidden_behind_gemms_is_communication() -> None:
    """DeepEP's all-to-all takes 88% of the step, 96% of it under GEMMs: comm, not '0%'."""
    from tracekit.analyzers import run_analysis

    rows: list[dict[str, object]] = [ev("step", "ProfilerStep#1", 0, 1000 * US)]
    rows += [
        ev("runtime", "cudaLaunchKernel", 1 * US, 2 * US, correlation=1),
        ev("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32", 10 * US, 865 * US, correlation=1, stream=7),
        ev("runtime", "cudaLaunchKernelExC", 3 * US, 4 * US, correlation=2),
        ev("kernel", KERNELS["dispatch"], 20 * US, 900 * US, correlation=2, stream=30),
    ]
    result = run_analysis(make_run(rows, world_size=8)).frames
    overlap = result.overlap.per_rank.row(0, named=True)
    assert overlap["comm_ns"] == 880 * US
    assert overlap["overlapped_ns"] == 845 * US  # 96% hidden behind the GEMM
    categories = dict(zip(result.kernels.by_category["category"], result.kernels.by_category["total_ns"], strict=True))
    assert categories["collective"] == 880 * US
