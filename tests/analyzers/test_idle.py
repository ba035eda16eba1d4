"""Idle causes on hand-built runs: each gap explained by the work that ends it.

Times are in microseconds (``US``): the thresholds (50 us pauses, 50 us CPU work) are tens of
microseconds. Every run has one step, a first kernel ``k1`` on stream 7 ending at 10 us, and
then one gap whose ending work and host activity each test chooses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl
import pytest

from tests.conftest import analysis_of
from tests.factories import ev, make_run
from tracekit.analyzers import run_analysis
from tracekit.analyzers.dataloader import fetch_ranges
from tracekit.analyzers.idle import SWITCH_NS, IdleResult, idle_causes
from tracekit.analyzers.steps import gpu_activity
from tracekit.analyzers.syncs import sync_calls
from tracekit.analyzers.timeline import segments
from tracekit.readers import load_run

if TYPE_CHECKING:
    from pathlib import Path

US = 1000
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"
Row = dict[str, Any]


def launch(start: float, correlation: int, *, tid: int = 1, dur: float = 2) -> Row:
    return ev("runtime", "cudaLaunchKernel", int(start * US), int((start + dur) * US), correlation=correlation, tid=tid)


def kernel(name: str, start: float, end: float, correlation: int, *, stream: int = 7) -> Row:
    return ev("kernel", name, int(start * US), int(end * US), correlation=correlation, stream=stream)


def host(kind: str, name: str, start: float, end: float, *, tid: int = 1) -> Row:
    return ev(kind, name, int(start * US), int(end * US), tid=tid)


def first_kernel() -> list[Row]:
    """The step [0, 200) and k1 [0, 10) on stream 7, launched at 0.1 us."""
    return [ev("step", "ProfilerStep#1", 0, 200 * US), launch(0.1, 1, dur=0.2), kernel("k1", 0.5, 10, 1)]


def idle_of(rows: list[Row], *, world_size: int | None = None) -> IdleResult:
    result = run_analysis(make_run(rows, world_size=world_size)).frames.idle
    assert result is not None
    return result


def gap(rows: list[Row], start: float, end: float, *, world_size: int | None = None) -> dict[str, Any]:
    """The idle interval [start, end) (us) of the run of ``rows``."""
    intervals = idle_of(rows, world_size=world_size).intervals
    found = intervals.filter(pl.col("start_ns") == int(start * US), pl.col("end_ns") == int(end * US))
    assert found.height == 1, intervals
    return found.row(0, named=True)


def test_work_queued_on_another_stream_waits_on_a_dependency() -> None:
    # k2 on stream 8 was launched (and its stream told to wait for an event) at 2 us, long
    # before k1 ended; it starts at 50: the GPU waited for the event, not for the host
    rows = [
        *first_kernel(),
        kernel("k0", 0.5, 5, 3, stream=8),
        launch(1, 3, dur=0.5),
        ev("runtime", "cudaStreamWaitEvent", 2 * US, 2 * US + 300),
        ev("sync", "Stream Wait Event", 2 * US + 100, 2 * US + 200, stream=8),
        launch(2.5, 2, dur=0.5),
        kernel("k2", 50, 60, 2, stream=8),
        host("cpu_op", "aten::copy_", 12, 45),  # a busy host changes nothing: k2 was queued
    ]
    row = gap(rows, 10, 50)
    assert (row["cause"], row["ended_by"], row["launch_ns"]) == ("dependency", "k2", 2500)


def test_a_queued_collective_waits_on_peers() -> None:
    rows = [*first_kernel(), launch(3, 2, dur=0.5), kernel(NCCL, 50, 60, 2, stream=20)]
    assert gap(rows, 10, 50)["cause"] == "peer"


def test_work_queued_right_behind_on_its_stream_is_back_to_back() -> None:
    rows = [*first_kernel(), launch(3, 2, dur=0.5), kernel("k2", 11, 20, 2)]
    assert gap(rows, 10, 11)["cause"] == "back_to_back"


def test_queued_work_on_another_stream_started_as_the_first_ended_is_back_to_back() -> None:
    # k2 on stream 8 waited (cudaStreamWaitEvent) for k1 on stream 7: it starts 2 us after k1
    # ends; the event was satisfied as the gap began, so the 2 us are the GPU's switch time
    rows = [
        *first_kernel(),
        ev("runtime", "cudaStreamWaitEvent", 2 * US, 2 * US + 300),
        launch(2.5, 2, dur=0.5),
        kernel("k2", 12, 20, 2, stream=8),
    ]
    assert gap(rows, 10, 12)["cause"] == "back_to_back"


def test_a_switch_lasts_at_most_switch_ns() -> None:
    # queued on its own stream right behind k1: a switch up to SWITCH_NS; beyond it, with no
    # event wait and no other stream, the device's own gap between queued work
    for length, cause in ((SWITCH_NS, "back_to_back"), (SWITCH_NS + 1, "device_gap")):
        rows = [*first_kernel(), launch(3, 2, dur=0.5), kernel("k2", 0, 0, 2)]
        rows[-1] |= {"start_ns": 10 * US + length, "end_ns": 10 * US + length + 5 * US}
        assert gap(rows, 10, 10 + length / US)["cause"] == cause


def queued_on_one_stream(*extra: Row, gaps: int = 4) -> list[Row]:
    """k1, then k2..k(gaps + 1) on stream 7, all launched by 6 us, each 30 us long and 30 us
    after the previous one ends: [10, 40), [70, 100), ...; the step ends as the last one does."""
    rows = [ev("step", "ProfilerStep#1", 0, (10 + 60 * gaps) * US), launch(0.1, 1, dur=0.2), kernel("k1", 0.5, 10, 1)]
    for i in range(gaps):
        start = 40 + 60 * i
        rows += [launch(1 + i, 2 + i, dur=0.5), kernel(f"k{2 + i}", start, start + 30, 2 + i)]
    return [*rows, *extra]


def test_gaps_between_work_queued_on_one_stream_are_the_devices_own() -> None:
    # every launch returned long before the GPU went idle, nothing waits on an event and no
    # other stream runs: the 30 us gaps are the device's own, not a dependency
    intervals = idle_of(queued_on_one_stream()).intervals.filter(pl.col("start_ns") >= 10 * US)
    assert intervals["cause"].to_list() == ["device_gap"] * 4
    assert intervals["length_ns"].to_list() == [30 * US] * 4


def test_a_stream_wait_between_the_two_launches_makes_a_dependency() -> None:
    # cudaStreamWaitEvent issued after k2's launch and before k3's: k3 waited on that event
    rows = queued_on_one_stream(ev("runtime", "cudaStreamWaitEvent", 1 * US + 600, 1 * US + 800))
    assert gap(rows, 70, 100)["cause"] == "dependency"
    others = idle_of(rows).intervals.filter(pl.col("start_ns") >= 10 * US, pl.col("start_ns") != 70 * US)
    assert set(others["cause"]) == {"device_gap"}  # k2 was launched before it, k4 and k5 after k3


def test_a_gpu_stream_wait_event_on_the_stream_makes_a_dependency() -> None:
    # the GPU side of a wait (Kineto's cuda_sync "Stream Wait Event", at its call's time) on
    # stream 7 between k3's launch and k4's, with no host call recorded
    rows = queued_on_one_stream(ev("sync", "Stream Wait Event", 2 * US + 600, 2 * US + 700, stream=7))
    assert gap(rows, 130, 160)["cause"] == "dependency"
    assert gap(rows, 70, 100)["cause"] == "device_gap"


def test_a_stream_wait_for_another_stream_is_no_dependency_of_this_one() -> None:
    # the wait call's GPU record (same correlation) says stream 8 waits, not stream 7
    rows = queued_on_one_stream(
        ev("runtime", "cudaStreamWaitEvent", 1 * US + 600, 1 * US + 800, correlation=50),
        ev("sync", "Stream Wait Event", 1 * US + 650, 1 * US + 750, stream=8, correlation=50),
    )
    assert gap(rows, 70, 100)["cause"] == "device_gap"


def test_work_held_past_its_own_streams_readiness_by_another_stream_is_a_dependency() -> None:
    # k2 on stream 8 was launched at 2 us and its stream had nothing else: it could have run
    # beside kA on stream 7 [0.5, 100), and did not: it waited for kA (an event on stream 7),
    # and starts 30 us after kA ends. On kA's own stream the same k2 is queued behind kA
    for stream, cause in ((8, "dependency"), (7, "device_gap")):
        rows = [
            ev("step", "ProfilerStep#1", 0, 150 * US),
            launch(0.1, 1, dur=0.2),
            kernel("kA", 0.5, 100, 1),
            launch(2, 2, dur=0.5),
            kernel("k2", 130, 150, 2, stream=stream),
        ]
        assert gap(rows, 100, 130)["cause"] == cause


def test_work_behind_its_own_stream_beside_another_stream_is_the_devices_gap() -> None:
    # k2 on stream 8 queued behind k0 on stream 8, which ends as the gap begins (with kA on
    # stream 7): its own stream's order held it, not the other stream
    rows = [
        ev("step", "ProfilerStep#1", 0, 150 * US),
        launch(0.1, 1, dur=0.2),
        kernel("kA", 0.5, 90, 1),
        launch(1, 3, dur=0.5),
        kernel("k0", 1, 100, 3, stream=8),
        launch(2, 2, dur=0.5),
        kernel("k2", 130, 150, 2, stream=8),
    ]
    assert gap(rows, 100, 130)["cause"] == "device_gap"


def graph_replay(*, wait_until: float, second: str = "g2", stream: int = 7) -> list[Row]:
    """k1, then one cudaGraphLaunch at [2, 5) (correlation 2) whose three nodes run on stream
    7: g1 [11, 20), then ``second`` (on ``stream``) and g3 from ``wait_until``; the host
    copies [30, 70) meanwhile."""
    return [
        *first_kernel(),
        ev("runtime", "cudaGraphLaunch", 2 * US, 5 * US, correlation=2),
        kernel("g1", 11, 20, 2),
        kernel(second, wait_until, wait_until + 6, 2, stream=stream),
        kernel("g3", wait_until + 7, wait_until + 9, 2),
        host("cpu_op", "aten::copy_", 30, 70),
    ]


def test_a_long_gap_inside_a_graph_replay_is_a_dependency() -> None:
    # every node correlates to the one graph launch, which returned at 5 us: all three were
    # queued. [10, 11) and [wait + 6, wait + 7) are switches; the 64 us between g1 and g2 is
    # no switch: a node waited (an event, a copy from pageable memory), and the host's copy
    # is what it was doing meanwhile, kept as evidence but not the cause
    rows = graph_replay(wait_until=84)
    assert gap(rows, 10, 11)["cause"] == "back_to_back"
    assert gap(rows, 90, 91)["cause"] == "back_to_back"
    row = gap(rows, 20, 84)
    assert (row["cause"], row["ended_by"], row["launch_ns"]) == ("dependency", "g2", 2 * US)
    assert (row["host_range"], row["launches"]) == ("aten::copy_", 0)


def test_a_long_gap_before_a_replays_first_node_is_the_devices_own() -> None:
    # g1, the replay's first node, queued behind k1 on its stream: the graph's edges do not
    # order it, its stream does; nothing else waited
    rows = graph_replay(wait_until=84)
    rows[4] = kernel("g1", 40, 50, 2)  # g1 starts 30 us after k1 ends
    assert gap(rows, 10, 40)["cause"] == "device_gap"


def test_a_graph_node_that_waits_on_a_collective_stream_waits_on_peers() -> None:
    # the all-reduce captured in the graph runs on its communication stream
    rows = graph_replay(wait_until=84, second=NCCL, stream=20)
    assert gap(rows, 20, 84)["cause"] == "peer"


def test_work_that_waits_long_after_a_late_launch_waited_on_a_dependency() -> None:
    # k2 is launched during the gap, at [20, 22), behind a stream wait; it starts at 150:
    # launch latency is SWITCH_NS at most, so from 42 on the GPU had the work and waited on
    # something else (108 us) while nothing on the host (10 us) or its launch (22 us) is
    # the rest. Before the rule the whole 130 us from its launch were "launch"
    rows = [
        *first_kernel(),
        ev("runtime", "cudaStreamWaitEvent", 19 * US, 20 * US),
        launch(20, 2),
        kernel("k2", 150, 160, 2, stream=8),
    ]
    row = gap(rows, 10, 150)
    assert (row["cause"], row["launch_ns"]) == ("dependency", 20 * US)


def test_a_late_launch_that_starts_within_the_latency_is_the_hosts() -> None:
    # the same launch, started 15 us after it returned: ordinary launch latency, host-late
    rows = [*first_kernel(), host("cpu_op", "aten::add", 12, 22), launch(20, 2), kernel("k2", 37, 45, 2)]
    assert gap(rows, 10, 37)["cause"] == "launch"


def test_queued_work_with_nothing_recorded_before_it_is_unobservable() -> None:
    # the step begins at 0; the first copy, launched at [2, 4), starts at 150: queued from 24
    # on, it waited behind something no event of the trace shows (work launched before the
    # profiler started, on the same stream or behind a stream wait): 126 us the host's view
    # would have called launch latency
    rows = [
        ev("step", "ProfilerStep#1", 0, 200 * US),
        ev("runtime", "cudaMemcpyAsync", 2 * US, 4 * US, correlation=1),
        ev("memcpy", "Memcpy HtoD (Pinned -> Device)", 150 * US, 160 * US, correlation=1),
        launch(5, 2),
        kernel("k2", 160, 170, 2),
    ]
    row = gap(rows, 0, 150)
    assert (row["cause"], row["launch_ns"]) == ("unobservable", 2 * US)


def test_work_launched_before_the_profiler_is_unobservable() -> None:
    # k0 and k1 have no launch in the trace and start before its first runtime call (320 us):
    # they were launched before the profiler started; the host's operator meanwhile is not
    # why the GPU did nothing it recorded. After 320 the host is observed again
    rows = [
        ev("step", "ProfilerStep#1", 0, 500 * US),
        host("cpu_op", "aten::to", 50, 250),
        kernel("k0", 300, 310, 90),
        kernel("k1", 312, 318, 91),
        host("cpu_op", "aten::add", 319, 330),
        launch(320, 2),
        kernel("k2", 325, 330, 2),
    ]
    assert gap(rows, 0, 300)["cause"] == "unobservable"
    assert gap(rows, 310, 312)["cause"] == "unobservable"
    assert gap(rows, 318, 325)["cause"] == "launch"


def test_a_missing_launch_after_the_first_runtime_call_stays_unexplained() -> None:
    # a launch missing later in the trace (a filtered or sampled trace) was not shown to
    # predate the profiler: nothing explains the gap
    rows = [*first_kernel(), kernel("k2", 150, 160, 2)]
    assert gap(rows, 10, 150)["cause"] == "unexplained"


def test_late_work_after_a_dataloader_fetch_is_data() -> None:
    fetch = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    rows = [
        *first_kernel(),
        host("cpu_op", fetch, 12, 90),
        host("cpu_op", "aten::add", 93, 98),
        launch(95, 2),
        kernel("k2", 100, 110, 2),
    ]
    row = gap(rows, 10, 100)
    assert (row["cause"], row["host_range"], row["launch_ns"]) == ("data", fetch, 95 * US)


def test_late_work_after_a_blocking_pageable_copy_is_host_sync() -> None:
    # .cpu() of k1's output: the copy runs [10, 12) and the call returns at 58; the host
    # then launches k2 at 66
    rows = [
        *first_kernel(),
        host("cpu_op", "aten::to", 8, 60),
        ev("runtime", "cudaMemcpyAsync", 9 * US, 58 * US, correlation=3),
        ev("memcpy", "Memcpy DtoH (Device -> Pageable)", 10 * US, 12 * US, correlation=3),
        host("cpu_op", "aten::add", 64, 70),
        launch(66, 2),
        kernel("k2", 70, 80, 2),
    ]
    row = gap(rows, 12, 70)
    assert (row["cause"], row["host_range"]) == ("host_sync", "aten::to")


def test_a_gap_that_began_in_a_sync_is_the_syncs_even_when_dispatch_follows() -> None:
    # the sync returns as k1 ends; the host then dispatches for 30 us: without the sync
    # those launches would have queued behind k1
    rows = [
        *first_kernel(),
        ev("runtime", "cudaStreamSynchronize", 4 * US, 10 * US + 500),
        host("cpu_op", "aten::mul", 12, 25),
        host("cpu_op", "aten::add", 26, 40),
        launch(38, 2),
        kernel("k2", 40, 50, 2),
    ]
    assert gap(rows, 10, 40)["cause"] == "host_sync"


def test_late_work_after_autotuning_is_one_time() -> None:
    rows = [
        *first_kernel(),
        host("annotation", "CachingAutotuner.benchmark_all_configs", 11, 85),
        host("cpu_op", "aten::mm", 86, 90),
        launch(87, 2),
        kernel("k2", 90, 100, 2),
    ]
    assert gap(rows, 10, 90)["cause"] == "one_time"


def test_a_first_call_far_slower_than_the_others_is_one_time() -> None:
    # the first convolution sets cuDNN up for 2 ms before launching; the next takes 15 us
    rows = [
        ev("step", "ProfilerStep#1", 0, 3000 * US),
        *first_kernel()[1:],
        host("cpu_op", "aten::conv2d", 11, 2011),
        launch(2005, 2),
        kernel("k2", 2010, 2020, 2),
        host("cpu_op", "aten::conv2d", 2030, 2045),
        launch(2040, 3),
        kernel("k3", 2046, 2050, 3),
    ]
    assert gap(rows, 10, 2010)["cause"] == "one_time"
    assert gap(rows, 2020, 2046)["cause"] == "launch"


def test_a_burst_of_small_launches_is_launch_bound() -> None:
    # five ops of 10 us, each launching a 2 us kernel: the GPU idles 8 us between kernels
    rows = list(first_kernel())
    for i in range(5):
        t = 10 + 10 * i
        rows += [host("cpu_op", "aten::add", t, t + 10), launch(t + 5, 10 + i), kernel("tiny", t + 8, t + 10, 10 + i)]
    idle = idle_of(rows).intervals.filter(pl.col("start_ns") >= 10 * US, pl.col("end_ns") <= 60 * US)
    assert idle.height == 5
    assert idle["cause"].to_list() == ["launch"] * 5
    assert idle["host_range"].to_list() == ["aten::add"] * 5
    assert idle["launches"].to_list() == [1] * 5


def test_cpu_work_that_launches_nothing_is_host_work() -> None:
    rows = [
        *first_kernel(),
        host("cpu_op", "aten::linear", 11, 85),  # launches k2 at its end
        host("cpu_op", "aten::copy_", 12, 80),  # CPU work inside it: 68 us, no launch
        launch(82, 2),
        kernel("k2", 86, 90, 2),
    ]
    row = gap(rows, 10, 86)
    assert (row["cause"], row["host_range"]) == ("host_work", "aten::linear")


def test_short_ops_that_launch_nothing_are_dispatch() -> None:
    # views and reshapes between launches are dispatch overhead, not CPU work
    rows = [*first_kernel()]
    rows += [host("cpu_op", "aten::view", 11 + 4 * i, 14 + 4 * i) for i in range(8)]
    rows += [host("cpu_op", "aten::add", 44, 48), launch(45, 2), kernel("k2", 48, 50, 2)]
    assert gap(rows, 10, 48)["cause"] == "launch"


def test_an_async_nccl_call_is_a_launch_not_peers() -> None:
    # c10d::allreduce_ on NCCL only enqueues the kernel; the GPU idles under it until the
    # host launches it: launch cost, not waiting for peers
    rows = [
        *first_kernel(),
        host("cpu_op", "c10d::allreduce_", 11, 40),
        host("cpu_op", "record_param_comms", 12, 39),
        launch(36, 2),
        kernel(NCCL, 41, 60, 2, stream=20),
    ]
    row = gap(rows, 10, 41)
    assert (row["cause"], row["host_range"]) == ("launch", "c10d::allreduce_")


def test_a_gloo_collective_blocks_the_host() -> None:
    rows = [*first_kernel(), host("cpu_op", "gloo:all_reduce", 11, 80), launch(82, 2), kernel("k2", 85, 90, 2)]
    assert gap(rows, 10, 85)["cause"] == "blocking_collective"
    assert gap(rows, 10, 85, world_size=2)["cause"] == "blocking_collective"


def test_a_collective_of_a_rank_alone_in_its_world_is_the_hosts_own_work() -> None:
    # the same all-reduce in a world of one waits for no peer: the host ran it, 69 us of an
    # operator that launches nothing
    rows = [*first_kernel(), host("cpu_op", "gloo:all_reduce", 11, 80), launch(82, 2), kernel("k2", 85, 90, 2)]
    assert gap(rows, 10, 85, world_size=1)["cause"] == "host_work"


def test_nothing_recorded_inside_a_step_is_the_hosts_own_work() -> None:
    # the launching thread is in its step, running the loop's own code that records nothing:
    # the host was late (the ending kernel was launched after the gap began), in CPU work
    rows = [*first_kernel(), launch(150, 2), kernel("k2", 152, 160, 2)]
    row = gap(rows, 10, 152)
    assert (row["cause"], row["host_range"], row["launches"]) == ("host_work", None, 1)


def test_nothing_recorded_on_the_host_is_unexplained() -> None:
    rows = [*first_kernel()[1:], launch(150, 2), kernel("k2", 152, 160, 2)]  # no step
    row = gap(rows, 10, 152)
    assert (row["cause"], row["host_range"], row["launches"]) == ("unexplained", None, 1)


def test_per_rank_sums_by_cause() -> None:
    fetch = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    rows = [
        *first_kernel(),
        host("cpu_op", fetch, 12, 90),
        launch(95, 2),
        kernel("k2", 100, 110, 2),
        launch(96, 3, dur=1),
        kernel("k3", 111, 120, 3),
    ]
    per = idle_of(rows).per_rank
    by = {r["cause"]: r for r in per.iter_rows(named=True)}
    assert by["data"]["idle_ns"] == 90 * US and by["back_to_back"]["idle_ns"] == 1 * US
    # [0, 0.5) before k1: the host launching it; [120, 200) at the end: nothing ends it
    assert by["launch"]["idle_ns"] == 500 and by["unexplained"]["idle_ns"] == 80 * US
    assert sum(r["share_pct"] for r in by.values()) == 100


def shares(idle: IdleResult) -> dict[str, float]:
    """Share (%) of all ranks' idle time by cause."""
    per = idle.per_rank.group_by("cause").agg(pl.col("idle_ns").sum())
    total = per["idle_ns"].sum()
    return {r["cause"]: 100 * r["idle_ns"] / total for r in per.iter_rows(named=True)}


def real_idle(path: Path) -> IdleResult:
    result = analysis_of([path]).frames.idle
    assert result is not None
    return result


@pytest.mark.real
def test_a_starved_dataloader_is_data_and_its_control_is_not(kineto_dir: Path) -> None:
    starved = shares(real_idle(kineto_dir / "tbplugin-resnet50-workers0"))
    control = shares(real_idle(kineto_dir / "tbplugin-resnet50-workers4"))
    assert max(starved, key=starved.__getitem__) == "data" and starved["data"] > 60
    assert control.get("data", 0) < 1


@pytest.mark.real
def test_first_iteration_setup_is_one_time_not_launch(kineto_dir: Path) -> None:
    # AlexNet's first iteration: cudaFree/cudaMalloc, cuDNN set-up in the first convolution,
    # lazy loading in a 3 s cudaLaunchKernel: 12.8 s that the old model called launch-bound
    by_cause = shares(real_idle(kineto_dir / "hta-misc" / "alexnet-a100-cuda-sync.json.gz"))
    assert by_cause["one_time"] > 95 and by_cause.get("launch", 0) < 1


@pytest.mark.real
def test_idle_after_a_blocking_item_copy_is_the_hosts_own_time(kineto_dir: Path) -> None:
    # .item(): a pageable DtoH copy, then a stream sync; the GPU idles 100 us until the host
    # launches the spin kernel, the host recording nothing meanwhile. The copy's gap itself is
    # host_sync; the next one is not: the host sat blocked far less than half of it (a sync
    # costs the overlap it prevented, at most its blocked time), so it is the host's own time:
    # host work (the thread is in its step, running code the trace does not record)
    intervals = real_idle(kineto_dir / "hta-misc" / "cuda-event-sync.json.gz").intervals
    copy = intervals.filter(pl.col("ended_by").cast(pl.String).str.contains("Pageable")).row(0, named=True)
    assert copy["cause"] == "host_sync"
    row = intervals.filter(pl.col("ended_by").cast(pl.String).str.contains("spin_kernel")).row(0, named=True)
    assert row["cause"] == "host_work"


@pytest.mark.real
def test_a_host_that_records_nothing_leaves_the_gap_unexplained(kineto_dir: Path) -> None:
    # three matmuls on three streams; between the second and the third the host records
    # nothing for 18.4 ms, then launches: the third's wait on another stream's event cost
    # nothing (that stream was done), so the 18.8 ms gap is the host's, and unexplained
    intervals = real_idle(kineto_dir / "hta-misc" / "cuda-event-sync-multistream.json.gz").intervals
    longest = intervals.sort("length_ns", descending=True).row(0, named=True)
    assert longest["length_ns"] > 18_000_000 and longest["cause"] == "unexplained"
    assert longest["launch_ns"] > longest["start_ns"]  # launched late, not queued


@pytest.mark.real
def test_a_sampled_traces_gaps_between_queued_kernels_are_the_devices_own(kineto_dir: Path) -> None:
    # HTA's sampled fixture dropped most kernels (kept correlation ids jump by 20 or more):
    # 719 gaps of 21 us to 57 ms between kernels queued on one stream, where the dropped
    # kernels ran. No stream wait is recorded;
    # only the 9 gaps ended by work whose own stream had been free for 20 us or more while
    # another stream ran until the gap began are waits on that stream
    intervals = real_idle(kineto_dir / "hta-sampled-2rank").intervals
    by_cause = intervals.group_by("cause").agg(pl.len(), pl.col("length_ns").sum())
    counts = {r["cause"]: (r["len"], r["length_ns"]) for r in by_cause.iter_rows(named=True)}
    assert counts["device_gap"] == (719, 528_031_000)
    assert counts["dependency"] == (9, 61_140_000)


@pytest.mark.real
def test_async_nccl_calls_are_not_peer_waits(kineto_dir: Path) -> None:
    by_cause = shares(real_idle(kineto_dir / "param-dlrm-8rank-v100"))
    assert by_cause.get("peer", 0) < 1
    assert max(by_cause, key=by_cause.__getitem__) == "launch"


@pytest.mark.real
def test_a_graph_replay_hands_over_within_a_switch(kineto_dir: Path) -> None:
    # vLLM on ROCm replaying piecewise HIP graphs: every node correlates to its hipGraphLaunch,
    # returned long before the node ran. The longest gaps (11-14 us) are where a replay hands
    # over to the next eager kernel: switches, as are all the others
    path = kineto_dir / "tracelens-vllm-graph-replay" / "prefilldecode-piecewise.json.gz"
    intervals = real_idle(path).intervals
    assert set(intervals["cause"]) == {"back_to_back"}
    assert 10_000 < intervals["length_ns"].max() <= SWITCH_NS
    nodes = intervals.filter(pl.col("ended_by").cast(pl.String).str.starts_with("triton_"))
    assert nodes.height > 0 and nodes["launch_ns"].null_count() == 0


@pytest.mark.real
def test_work_launched_before_the_trace_recorded_the_host_is_unobservable(kineto_dir: Path) -> None:
    # ResNet-50's ProfilerStep#5: the GPU runs the previous step's backward (cuDNN wgrad
    # kernels) for 46 ms before the trace's first runtime call; none of it has a launch in
    # the trace. The 149 us before its first kernel were "data" (the host in __next__)
    run = load_run([kineto_dir / "tbplugin-resnet50-workers0"])
    result = analysis_of([kineto_dir / "tbplugin-resnet50-workers0"]).frames.idle
    assert result is not None
    intervals = result.intervals
    first = intervals.sort("start_ns").row(0, named=True)
    assert (first["cause"], first["length_ns"]) == ("unobservable", 149_000)
    first_call = run.select(["runtime", "driver"], "start_ns")["start_ns"].min()
    unobservable = intervals.filter(cause="unobservable")
    assert unobservable["end_ns"].max() < first_call


@pytest.mark.real
def test_a_graph_replay_behind_work_before_the_trace_is_unobservable(kineto_dir: Path) -> None:
    # the same trace measured from its first host event: vLLM launched the step's copies at
    # +2.2 ms and its graph pieces by +26 ms, and the GPU starts them at +151.2 ms, with
    # nothing recorded before: it ran or waited on work launched before the profiler started.
    # Not launch latency (what the host's view alone would call those 149 ms)
    run = load_run([kineto_dir / "tracelens-vllm-graph-replay" / "prefilldecode-piecewise.json.gz"])
    activity = gpu_activity(run)
    events = run.events.select("rank", "start_ns", "end_ns")
    trace = events.group_by("rank").agg(pl.col("start_ns").min(), pl.col("end_ns").max())
    frames = trace.with_columns(step=pl.lit(None, dtype=pl.Int64))
    result = idle_causes(run, segments(activity, frames), frames, fetch_ranges(run), sync_calls(run), activity=activity)
    first = result.intervals.sort("start_ns").row(0, named=True)
    assert first["cause"] == "unobservable" and 151.2e6 < first["length_ns"] < 151.3e6
    assert first["launch_ns"] > first["start_ns"]  # launched after the window began, yet not late


def test_kernels_alone_and_no_gaps() -> None:
    # no host events at all: every gap is unexplained, and nothing fails on empty frames
    only = [ev("kernel", "k1", 0, 10 * US), ev("kernel", "k2", 50 * US, 60 * US)]
    assert idle_of(only).intervals["cause"].to_list() == ["unexplained"]
    busy = [ev("runtime", "cudaLaunchKernel", 0, 1, correlation=1), ev("kernel", "k1", 5, 10 * US, correlation=1)]
    assert idle_of(busy).intervals.height == 0


def freeing_steps(frees: list[int]) -> list[Row]:
    """3 steps of 200 us: k1 [0, 10), then on the host a cudaFree [20, 120) in the steps
    listed in ``frees``, then k2 launched at 150 runs [152, 190)."""
    rows: list[Row] = []
    for step in range(3):
        t = step * 200
        rows += [
            ev("step", f"ProfilerStep#{step}", t * US, (t + 200) * US),
            launch(t + 0.1, 10 * step + 1, dur=0.2),
            kernel("k1", t + 0.5, t + 10, 10 * step + 1),
            launch(t + 150, 10 * step + 2),
            kernel("k2", t + 152, t + 190, 10 * step + 2),
        ]
        if step in frees:
            rows.append(host("runtime", "cudaFree", t + 20, t + 120))
    return rows


def test_a_free_in_one_step_is_one_time_work() -> None:
    # the caching allocator returning memory once (in the second step: a first step holding it
    # would be warm-up, out of every figure): set-up, not the steady state
    assert gap(freeing_steps([1]), 210, 352)["cause"] == "one_time"


def test_a_free_in_every_step_is_a_sync() -> None:
    # an allocator that frees in every step (caching off, empty_cache() in the loop): cudaFree
    # synchronizes the device, every step: the steady state's cost, a sync, never one-time
    rows = freeing_steps([0, 1, 2])
    assert [gap(rows, t + 10, t + 152)["cause"] for t in (0, 200, 400)] == ["host_sync"] * 3
    # and only where it recurs in the measured steps: a steady state that does not free is host work
    assert gap(freeing_steps([]), 210, 352)["cause"] == "host_work"
