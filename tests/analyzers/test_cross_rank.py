"""Collectives, stragglers, DataLoader gaps and host syncs on hand-built runs (idle causes: test_idle.py)."""

from __future__ import annotations

import pytest

from tests.factories import ev, make_run
from tracekit.analyzers import run_analysis
from tracekit.results.vocab import StragglerCause

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"
US = 1000  # times below in microseconds: the tolerances are tens of microseconds


def coll(rank: int, start: int, end: int, corr: int) -> list[dict[str, object]]:
    return [
        ev("runtime", "cudaLaunchKernel", start - 5, start - 4, rank=rank, correlation=corr),
        ev("kernel", NCCL, start, end, rank=rank, correlation=corr, stream=20),
    ]


def three_ranks() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for r in range(3):
        rows.append(ev("step", "ProfilerStep#1", 0, 300 * US, rank=r))
    # instance 0 ends together at 110 us: durations 100, 60, 20 -> floor 20, waits 80, 40, 0
    rows += coll(0, 10 * US, 110 * US, 1) + coll(1, 50 * US, 110 * US, 1) + coll(2, 90 * US, 110 * US, 1)
    # instance 1: ranks 0 and 1 tie as last (duration 30 each), rank 2 waits 70
    rows += coll(0, 200 * US, 230 * US, 2) + coll(1, 200 * US, 230 * US, 2) + coll(2, 130 * US, 230 * US, 2)
    return rows


def test_collective_floor_wait_and_last_rank() -> None:
    result = run_analysis(make_run(three_ranks(), world_size=3)).frames.collectives
    first = result.per_rank.filter(k=0).sort("rank")
    assert first["floor_ns"].to_list() == [20 * US] * 3
    assert first["wait_ns"].to_list() == [80 * US, 40 * US, 0]
    assert first["lateness_ns"].to_list() == [0, 40 * US, 80 * US]
    inst = {r["k"]: r for r in result.instances.iter_rows(named=True)}
    assert inst[0]["op"] == "AllReduce" and inst[0]["ranks"] == 3
    assert inst[0]["last_rank"] == 2 and inst[0]["last_ranks"] == [2]
    assert inst[1]["last_ranks"] == [0, 1]  # a tie: both named
    assert inst[1]["floor_ns"] == 30 * US and inst[1]["spread_ns"] == 70 * US
    assert set(result.per_rank["step"].to_list()) == {1}


def test_single_rank_has_no_straggler() -> None:
    rows = [ev("step", "ProfilerStep#1", 0, 300), *coll(0, 10, 110, 1)]
    result = run_analysis(make_run(rows)).frames
    assert result.collectives.instances["ranks"].to_list() == [1]
    assert not result.collectives.per_rank["is_last"].any()
    assert result.stragglers.stragglers == ()
    assert result.verdict.primary.bound != "straggler-bound"


def test_straggler_score_and_cause_from_the_phase_before_the_collective() -> None:
    rows: list[dict[str, object]] = []
    for step in range(4):
        t = step * 1000 * US
        for r in range(3):
            late = r == 2
            rows.append(ev("step", f"ProfilerStep#{step}", t, t + 1000 * US, rank=r))
            rows.append(ev("annotation", "forward", t, t + (600 if late else 200) * US, rank=r))
            rows.append(ev("cpu_op", "aten::linear", t, t + (600 if late else 200) * US, rank=r))
            start = t + (600 if late else 200) * US
            rows += coll(r, start, t + 700 * US, 10 * step + 1)
    result = run_analysis(make_run(rows, world_size=3)).frames
    per = {r["rank"]: r for r in result.stragglers.per_rank.iter_rows(named=True)}
    assert per[2]["times_last"] == 4 and per[0]["times_last"] == 0
    # the others waited 400 us per step for rank 2: 40% of a 1000 us step
    assert per[2]["caused_wait_ns"] == 4 * 400 * US
    assert per[2]["score"] == pytest.approx(0.4)
    (straggler,) = result.stragglers.stragglers
    assert (straggler.rank, straggler.cause, straggler.phase) == (2, StragglerCause.PHASE, "forward")
    assert straggler.cause_excess_ns == 400 * US
    matrix = result.stragglers.matrix.filter(rank=2)
    assert matrix["lateness_ns"].to_list() == [400 * US] * 4
    findings = {f.bound: f for f in (result.verdict.primary, *result.verdict.secondary)}
    assert findings["straggler-bound"].straggler_rank == 2


def test_dataloader_gap_is_device_idle_during_the_fetch() -> None:
    rows = [
        ev("step", "ProfilerStep#1", 0, 100),
        ev("cpu_op", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 30),
        ev("runtime", "cudaLaunchKernel", 1, 2, correlation=1),
        ev("kernel", "gemm", 20, 60, correlation=1),
    ]
    dl = run_analysis(make_run(rows)).frames.dataloader.per_rank.row(0, named=True)
    assert dl["fetch_ns"] == 30 and dl["loader_ns"] == 30  # the fetch is the DataLoader's own
    assert dl["idle_ns"] == 20  # [0, 20): the fetch's last 10 ns overlap the kernel
    assert dl["share_pct"] == pytest.approx(20.0)


def test_the_dataloader_s_own_part_of_a_capture_s_fetch_phase() -> None:
    # tracekit capture's fetch phase [0, 40) holds the DataLoader's __next__ [5, 15): 10 of its
    # 40 ns are the loader's own wait, 30 the loop's around it
    rows = [
        ev("step", "ProfilerStep#1", 0, 100),
        ev("annotation", "tracekit.phase/dataload_wait", 0, 40),
        ev("cpu_op", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 5, 15),
        ev("runtime", "cudaLaunchKernel", 41, 42, correlation=1),
        ev("kernel", "gemm", 50, 90, correlation=1),
    ]
    outcome = run_analysis(make_run(rows))
    dl = outcome.frames.dataloader.per_rank.row(0, named=True)
    assert (dl["fetch_ns"], dl["loader_ns"], dl["idle_ns"]) == (40, 10, 40)
    assert outcome.analysis.verdict.evidence.fetch_around() == (40.0, 10.0, 30.0)


def test_host_syncs_count_and_idle_after_but_not_optimizer_items() -> None:
    rows = [
        ev("step", "ProfilerStep#1", 0, 200),
        ev("runtime", "cudaLaunchKernel", 1, 2, correlation=1),
        ev("kernel", "gemm", 5, 45, correlation=1),
        ev("cpu_op", "aten::item", 38, 52),
        ev("cpu_op", "aten::_local_scalar_dense", 39, 51),  # inside item: not counted again
        ev("runtime", "cudaStreamSynchronize", 40, 50),
        ev("runtime", "cudaLaunchKernel", 60, 61, correlation=2),
        ev("kernel", "gemm", 70, 90, correlation=2),
        ev("annotation", "Optimizer.step#AdamW.step", 100, 150),
        ev("cpu_op", "aten::item", 110, 111),  # AdamW's CPU step counter: no sync
    ]
    result = run_analysis(make_run(rows)).frames
    row = result.syncs.per_rank.row(0, named=True)
    assert (row["sync_calls"], row["sync_ops"]) == (1, 1)
    assert row["idle_after_ns"] == 20  # the sync returns at 50, the next kernel starts at 70
