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
