"""Communication beyond names: launching host op, dedicated streams, user patterns."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import ev, make_run
from tracekit.errors import InputError
from tracekit.model import classify_run
from tracekit.model.by_kind import ByKind
from tracekit.model.classify import classify, classify_held
from tracekit.model.comm_evidence import LAUNCH_KINDS, frame_select, kernels_of, launched_in_comm
from tracekit.model.taxonomy import HOST_KINDS

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"


def launched(
    name: str, start: int, corr: int, *, stream: int = 7, rank: int = 0, tid: int = 1, ext: int | None = None
) -> list[dict[str, Any]]:
    """A runtime launch at ``start`` (on thread ``tid``) and its kernel 100 ns later."""
    call = ev("runtime", "cudaLaunchKernel", start, start + 5, rank=rank, tid=tid, correlation=corr)
    call["external_id"] = ext
    return [call, ev("kernel", name, start + 100, start + 200, rank=rank, stream=stream, correlation=corr)]


def categories(rows: list[dict[str, Any]], **options: Any) -> dict[tuple[int, str], str]:
    """(rank, kernel name) -> category after classify_run (kernel names are unique per rank
    here), which the events held a kind at a time get too (with and without literals)."""
    events = make_run(rows).events
    whole = classify_run(events, **options)
    for literal_rows in (1, 1 << 16):
        held = classify_held(ByKind.of(events, literal_rows=literal_rows), **options)
        assert held.frame().equals(whole)
    kernels = whole.filter(pl.col("kind") == "kernel")
    return {(r, str(n)): str(c) for r, n, c in zip(kernels["rank"], kernels["name"], kernels["category"], strict=True)}


def test_kernel_launched_inside_a_comm_host_op_is_a_collective() -> None:
    rows = [
        ev("cpu_op", "c10d::alltoall_base_", 1000, 2000),
        ev("cpu_op", "record_param_comms", 1100, 1900),  # nested: merged into one span
        *launched("my_a2a_kernel", 1500, 1),
        *launched("my_other_kernel", 2500, 2),  # after the op ended
        *launched("on_another_thread", 1500, 3, tid=9),
    ]
    got = categories(rows)
    assert got[(0, "my_a2a_kernel")] == "collective"
    assert got[(0, "my_other_kernel")] == "compute"
    assert got[(0, "on_another_thread")] == "compute"


def test_kernel_launched_from_deepep_python_entry_point() -> None:
    rows = [
        ev("python", "deep_ep/buffer.py(341): dispatch", 1000, 5000),
        *launched("void deep_ep_v9::send_tokens<8>(int4*)", 1200, 1, stream=30),
        ev("python", "deep_ep/buffer.py(250): get_dispatch_layout", 6000, 7000),
        *launched("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*)", 6100, 2, stream=30),
        *launched(GEMM, 8000, 3, stream=7),
    ]
    got = categories(rows)
    assert got[(0, "void deep_ep_v9::send_tokens<8>(int4*)")] == "collective"
    assert got[(0, "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*)")] == "compute"
    assert got[(0, GEMM)] == "compute"


def test_layout_kernel_stays_compute_even_inside_a_comm_range() -> None:
    layout = "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*)"
    rows = [ev("annotation", "deep_ep.dispatch", 1000, 5000), *launched(layout, 1200, 1)]
    assert categories(rows)[(0, layout)] == "compute"


def test_kernel_linked_by_external_id_to_a_comm_op() -> None:
    op = ev("cpu_op", "c10d::allreduce_", 1000, 2000, tid=1)
    op["external_id"] = 42
    rows = [op, *launched("custom_ar_kernel", 5000, 1, tid=2, ext=42), *launched("plain", 5000, 2, tid=2, ext=43)]
    got = categories(rows)
    assert got[(0, "custom_ar_kernel")] == "collective"
    assert got[(0, "plain")] == "compute"


def test_unlaunched_kernel_on_a_stream_of_collectives() -> None:
    rows = [
        *launched(NCCL, 1000, 1, stream=20),
        ev("kernel", "unknown_comm_helper", 3000, 3100, stream=20, correlation=99),  # no launch recorded
        ev("kernel", "lone_kernel", 3000, 3100, stream=7),  # no launch, compute stream
        *launched(GEMM, 1000, 2, stream=7),
    ]
    got = categories(rows)
    assert got[(0, "unknown_comm_helper")] == "collective"
    assert got[(0, "lone_kernel")] == "compute"


def test_stream_with_a_launched_compute_kernel_is_not_dedicated() -> None:
    rows = [
        *launched(NCCL, 1000, 1, stream=20),
        *launched(GEMM, 2000, 2, stream=20),
        ev("kernel", "unknown", 3000, 3100, stream=20),
    ]
    got = categories(rows)
    assert got[(0, "unknown")] == "compute"
    assert got[(0, GEMM)] == "compute"


def test_streams_and_launches_are_per_rank() -> None:
    rows = [
        ev("cpu_op", "c10d::allreduce_", 1000, 2000, rank=0),
        *launched("k", 1500, 1, rank=0),
        *launched("k", 1500, 1, rank=1),  # same correlation on another rank, no comm op there
    ]
    got = categories(rows)
    assert got[(0, "k")] == "collective"
    assert got[(1, "k")] == "compute"


def test_user_pattern() -> None:
    rows = [*launched("my_fancy_a2a<8>(int*)", 1000, 1), *launched(GEMM, 2000, 2)]
    assert categories(rows)[(0, "my_fancy_a2a<8>(int*)")] == "compute"
    got = categories(rows, comm_kernels=(r"^my_fancy_a2a", r"unused\d+"))
    assert got[(0, "my_fancy_a2a<8>(int*)")] == "collective"
    assert got[(0, GEMM)] == "compute"


def test_user_pattern_overrides_the_layout_exclusion() -> None:
    layout = "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*)"
    assert categories(launched(layout, 1000, 1), comm_kernels=("get_dispatch_layout",))[(0, layout)] == "collective"


@pytest.mark.parametrize("pattern", ["(unclosed", "[z-a]", "*abc", "(?<=lookbehind)x"])
def test_bad_user_pattern_is_one_line(pattern: str) -> None:
    with pytest.raises(InputError) as info:
        classify_run(make_run(launched(GEMM, 1000, 1)).events, comm_kernels=(pattern,))
    assert "\n" not in info.value.message
    assert pattern in info.value.message


def test_nothing_to_do_keeps_the_frame() -> None:
    run = make_run([*launched(NCCL, 1000, 1, stream=20), *launched(GEMM, 1000, 2)])
    out = classify_run(run.events)
    assert out.equals(run.events)
    assert classify_run(run.events.clear()).height == 0


def test_events_out_of_time_order_give_the_same_answer() -> None:
    rows = [
        ev("cpu_op", "c10d::alltoall_base_", 1000, 2000),
        *launched("my_a2a_kernel", 1500, 1),
        *launched("later", 2500, 2),
        *launched("on_rank_1", 1500, 1, rank=1),
    ]
    events = make_run(rows).events
    shuffled = events.sample(fraction=1.0, shuffle=True, seed=3)
    key = ["rank", "kind", "name", "start_ns"]
    ordered = classify_run(events).sort(key)
    assert classify_run(shuffled).sort(key)["category"].to_list() == ordered["category"].to_list()
    assert ordered.filter(pl.col("name") == "my_a2a_kernel")["category"].to_list() == ["collective"]


PPLX = "void dispatchKernel<10u, true, false>(int*, unsigned long, std::byte*)"


def kernel(name: str, start: int, end: int, corr: int, *, stream: int) -> list[dict[str, Any]]:
    """A kernel over [start, end) on ``stream`` and its launch (thread 1) 50 ns before it."""
    call = ev("runtime", "cudaLaunchKernel", start - 50, start - 45, correlation=corr)
    return [call, ev("kernel", name, start, end, stream=stream, correlation=corr)]


def test_an_all_to_all_name_on_a_stream_mostly_of_collectives_is_a_collective() -> None:
    # stream 20: NCCL 1000 ns, the pplx kernel 400 ns, a copy kernel 300 ns: collectives (1000) outweigh
    # the plain kernels (300), so the stream is for communication, and the all-to-all name there is one
    rows = [
        *kernel(NCCL, 1000, 2000, 1, stream=20),
        *kernel(PPLX, 3000, 3400, 2, stream=20),
        *kernel("elementwise_copy", 4000, 4300, 3, stream=20),
    ]
    got = categories(rows)
    assert got[(0, PPLX)] == "collective"
    assert got[(0, "elementwise_copy")] == "compute"  # a plain kernel: the stream alone is not evidence


def test_an_all_to_all_name_on_a_compute_stream_stays_compute() -> None:
    # stream 7 carries NCCL too (custom all-reduce or NCCL on the compute stream): 100 ns of it against
    # 2000 ns of GEMM, so it is a compute stream, and the name alone is not evidence
    rows = [
        *kernel(GEMM, 1000, 3000, 1, stream=7),
        *kernel(NCCL, 4000, 4100, 2, stream=7),
        *kernel(PPLX, 5000, 5400, 3, stream=7),
    ]
    assert categories(rows)[(0, PPLX)] == "compute"


def test_an_all_to_all_name_on_a_stream_without_collectives_stays_compute() -> None:
    rows = [*kernel(PPLX, 1000, 2000, 1, stream=30), *kernel(NCCL, 1000, 2000, 2, stream=20)]
    assert categories(rows)[(0, PPLX)] == "compute"


def test_streams_are_weighed_per_rank() -> None:
    # rank 0's stream 20 is communication; rank 1's stream 20 is mostly a GEMM
    rows = [
        *kernel(NCCL, 1000, 2000, 1, stream=20),
        *kernel(PPLX, 3000, 3400, 2, stream=20),
        *[{**r, "rank": 1} for r in kernel(NCCL, 1000, 1100, 1, stream=20)],
        *[{**r, "rank": 1} for r in kernel(GEMM, 2000, 4000, 2, stream=20)],
        *[{**r, "rank": 1} for r in kernel(PPLX, 5000, 5400, 3, stream=20)],
    ]
    got = categories(rows)
    assert got[(0, PPLX)] == "collective"
    assert got[(1, PPLX)] == "compute"


def test_deepseek_expert_parallel_stream() -> None:
    # as in DeepSeek's profile-data: DeepEP's families in dpsk::ep:: on their own stream with the
    # layout kernel, a CUB scan of the sampler in cdpsk::ep:: on the compute stream
    dispatch = "void dpsk::ep::internode::dispatch<false, 4, false, 4>(int4*, float*)"
    notify = "void dpsk::ep::internode::notify_dispatch<false, 4>(int const*, int*)"
    layout = "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*)"
    scan = "void cdpsk::ep::CUB_200200_900_NS::DeviceScanByKeyKernel<int>(int*)"
    rows = [
        *kernel(layout, 1000, 1100, 1, stream=16),
        *kernel(notify, 1200, 2200, 2, stream=16),
        *kernel(dispatch, 2300, 7000, 3, stream=16),
        *kernel(GEMM, 1000, 9000, 4, stream=7),
        *kernel(scan, 9000, 9100, 5, stream=7),
    ]
    got = categories(rows)
    assert (got[(0, notify)], got[(0, dispatch)]) == ("collective", "collective")
    assert (got[(0, layout)], got[(0, scan)], got[(0, GEMM)]) == ("compute", "compute", "compute")


def test_kernels_launched_inside_pplx_operators_are_collectives() -> None:
    combine = "void combineKernel<10u, true, true>(std::byte*, unsigned long)"
    rows = [
        ev("cpu_op", "pplx_kernels::all_to_all_dispatch", 1000, 2000),
        *launched(PPLX, 1500, 1, stream=7),
        ev("cpu_op", "pplx_kernels::all_to_all_combine", 3000, 4000),
        *launched(combine, 3500, 2, stream=7),
        *launched(GEMM, 5000, 3, stream=7),
    ]
    got = categories(rows)
    assert (got[(0, PPLX)], got[(0, combine)], got[(0, GEMM)]) == ("collective", "collective", "compute")


_KERNEL_NAMES = (GEMM, NCCL, "my_kernel", "deep_ep::dispatch_kernel", "layout_kernel")
_OP_NAMES = ("aten::mm", "c10d::allreduce_", "record_param_comms", "nccl:all_reduce")


@st.composite
def _runs(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random ranks of host ops (some communication), launches on two threads, their kernels on
    three streams (some with no recorded launch), and a user's external ids: every rule's
    evidence, mixed."""
    rows: list[dict[str, Any]] = []
    for corr in range(draw(st.integers(0, 14))):
        rank, tid = draw(st.integers(0, 1)), draw(st.integers(1, 2))
        start = draw(st.integers(0, 400))
        if draw(st.booleans()):
            rows.append(
                ev(
                    "cpu_op",
                    draw(st.sampled_from(_OP_NAMES)),
                    start,
                    start + draw(st.integers(0, 60)),
                    rank=rank,
                    tid=tid,
                )
            )
        name, stream = draw(st.sampled_from(_KERNEL_NAMES)), draw(st.sampled_from([7, 20, 21]))
        if draw(st.integers(0, 4)):  # its launch recorded
            call = ev("runtime", "cudaLaunchKernel", start + 5, start + 9, rank=rank, tid=tid, correlation=corr)
            call["external_id"] = draw(st.one_of(st.none(), st.integers(0, 3)))
            rows.append(call)
        rows.append(ev("kernel", name, start + 50, start + 90, rank=rank, stream=stream, correlation=corr))
    return rows


@settings(max_examples=150, deadline=None)
@given(_runs(), st.sampled_from([(), ("my_.*",)]))
def test_held_by_kind_classifies_as_one_frame(rows: list[dict[str, Any]], patterns: tuple[str, ...]) -> None:
    # a property: the events held a kind at a time (literals or not) are classified as one frame
    events = make_run(rows).events
    whole = classify_run(events, comm_kernels=patterns)
    for literal_rows in (1, 1 << 16):
        assert classify_held(ByKind.of(events, literal_rows=literal_rows), comm_kernels=patterns).frame().equals(whole)


def _launched_plainly(events: pl.DataFrame) -> list[int]:
    """The rows of the compute kernels whose launch (same rank and correlation) starts inside a
    communication host event of its thread (from its start to before its end), or shares a
    communication operator's external id: every pair tried."""
    kernels = kernels_of(events).filter(pl.col("category") == "compute")
    host = pl.col("kind").is_in(list(HOST_KINDS)) & (pl.col("category") == "collective")
    comm = events.filter(host).select("rank", "pid", "tid", s="start_ns", e="end_ns", x="external_id")
    calls = events.filter(pl.col("kind").is_in(LAUNCH_KINDS), pl.col("correlation").is_not_null())
    inside = calls.join(comm, on=["rank", "pid", "tid"]).filter(
        pl.col("s") <= pl.col("start_ns"), pl.col("start_ns") < pl.col("e")
    )
    linked = calls.join(comm.drop_nulls("x"), left_on=["rank", "external_id"], right_on=["rank", "x"])
    launches = pl.concat([inside.select("rank", "correlation"), linked.select("rank", "correlation")])
    return sorted(kernels.join(launches, on=["rank", "correlation"], how="semi").get_column("_row").to_list())


@settings(max_examples=150, deadline=None)
@given(_runs())
def test_the_launches_read_are_those_any_pair_would_find(rows: list[dict[str, Any]]) -> None:
    # a property: reading only the launches that could start in a span, or link to an operator,
    # finds what trying every launch against every communication event finds
    events = classify(make_run(rows).events)
    kernels = kernels_of(events).filter(pl.col("category") == "compute")
    expected = _launched_plainly(events)
    assert sorted(launched_in_comm(frame_select(events), kernels).to_list()) == expected
    held = ByKind.of(events, literal_rows=1)
    assert sorted(launched_in_comm(held.select, kernels).to_list()) == expected
