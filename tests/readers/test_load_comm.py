"""load_run finds communication beyond names, after the cache, and takes the user's patterns."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl
import pytest

from tests.factories import kineto_event, said, write_kineto
from tracekit.errors import InputError
from tracekit.readers import load_run

if TYPE_CHECKING:
    from pathlib import Path

DISPATCH = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)"


def _trace(path: Path) -> Path:
    t = 1_000_000.0
    return write_kineto(
        path,
        [
            kineto_event("user_annotation", "ProfilerStep#1", t, 100),
            kineto_event("python_function", "deep_ep/buffer.py(341): dispatch", t + 1, 20),
            kineto_event("cuda_runtime", "cudaLaunchKernelExC", t + 2, 2, correlation=1),
            kineto_event("kernel", DISPATCH, t + 10, 30, correlation=1, stream=30, device=0),
            kineto_event("cuda_runtime", "cuLaunchKernel", t + 3, 2, correlation=2),
            kineto_event("kernel", "void ep_v2::token_send<8>(int*)", t + 40, 10, correlation=2, stream=30, device=0),
            kineto_event("cuda_runtime", "cudaLaunchKernel", t + 50, 2, correlation=3),
            kineto_event("kernel", "my_a2a_kernel", t + 60, 10, correlation=3, stream=7, device=0),
        ],
    )


def _categories(path: Path, **options: object) -> dict[str, str]:
    run = load_run([path], **options)  # type: ignore[arg-type]
    kernels = run.events.filter(pl.col("kind") == "kernel")
    return {str(n): str(c) for n, c in zip(kernels["name"], kernels["category"], strict=True)}


@pytest.mark.parametrize("use_cache", [False, True])
def test_names_launches_and_user_patterns_after_the_cache(tmp_path: Path, use_cache: bool) -> None:
    path = _trace(tmp_path / "rank0.json")
    cache = tmp_path / "cache"
    for _ in range(2):  # the second read comes from the cache when it is on
        got = _categories(path, cache_dir=cache, use_cache=use_cache)
        assert got[DISPATCH] == "collective"  # by name
        assert got["void ep_v2::token_send<8>(int*)"] == "collective"  # launched inside Buffer.dispatch
        assert got["my_a2a_kernel"] == "compute"
        with_user = _categories(path, cache_dir=cache, use_cache=use_cache, comm_kernels=["^my_a2a"])
        assert with_user["my_a2a_kernel"] == "collective"
    assert not [w for w in said(load_run([path], use_cache=False).warnings) if "communication" in w]


def test_bad_pattern_is_an_input_error_before_reading(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a valid regular expression"):
        load_run([tmp_path / "missing.json"], comm_kernels=["(oops"])


def test_a_vendor_expert_parallel_trace_is_read_as_communication(tmp_path: Path) -> None:
    """DeepSeek's profile-data layout: rank 0 of 32 on NCCL, DeepEP's families in dpsk::ep:: on
    stream 16 with the layout kernel, the model on stream 7. Read with the taxonomy of before,
    the run had no communication kernel and warned."""
    t = 1_000_000.0
    names = [
        ("void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*)", 16, 10),
        ("void dpsk::ep::internode::notify_dispatch<false, 4>(int const*, int*)", 16, 30),
        ("void dpsk::ep::internode::dispatch<false, 4, false, 4>(int4*, float*)", 16, 200),
        ("void dpsk::gemm::fp8_gemm_kernel<7168u, 2048u>(__nv_bfloat16*, float*)", 7, 300),
        ("void dpsk::ep::internode::cached_notify<false>(int, int)", 16, 30),
        ("void dpsk::ep::internode::combine<false, 4, __nv_bfloat16, 4>(int4*, float*)", 16, 300),
    ]
    events = [kineto_event("user_annotation", "ProfilerStep#1", t, 1000)]
    start = t + 10
    for corr, (name, stream, dur) in enumerate(names, start=1):
        events.append(kineto_event("cuda_runtime", "cudaLaunchKernel", start - 5, 2, correlation=corr))
        events.append(kineto_event("kernel", name, start, dur, correlation=corr, stream=stream, device=0))
        start += dur + 5
    path = write_kineto(tmp_path / "rank0.json", events, world_size=32)
    got = _categories(path, use_cache=False)
    assert [got[n] for n, _, _ in names] == [
        "compute",
        "collective",
        "collective",
        "compute",
        "collective",
        "collective",
    ]
    assert not [w for w in said(load_run([path], use_cache=False).warnings) if "communication" in w]
