"""The ledger on hand-made timelines: every nanosecond of a window under one entry, worked out by hand."""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.factories import FETCH, ev, make_run, nccl_call
from tracekit.analyzers import run_analysis
from tracekit.analyzers.ledger import in_ledger_order, summed

US = 1000
STEP = 1000 * US
Row = dict[str, Any]


def entries(rows: list[Row], *, world_size: int = 1) -> dict[int, dict[str, int]]:
    """rank -> entry -> ns, over the measured steps."""
    led = run_analysis(make_run(rows, world_size=world_size)).frames.ledger
    out: dict[int, dict[str, int]] = {}
    for rank, entry, ns in led.per_rank.select("rank", "entry", "ns").iter_rows():
        out.setdefault(rank, {})[entry] = ns
    return out


def test_one_gpu_step_by_entry() -> None:
    # the step [0, 1000) us, on the training thread (tid 1):
    #   [0, 1)      idle: k1 launched at 0.1 (the host dispatching it)          launch
    #   [1, 300)    k1                                                         compute
    #   [300, 505)  idle: the host fetches a batch [300, 500), launches k2 at 500  data
    #   [505, 700)  k2                                                         compute
    #   [700, 750)  a host-to-device copy                                      transfer
    #   [750, 900)  an all-reduce kernel                                       comms
    #   [900, 1000) idle, nothing ends it: the host records nothing then       unexplained
    rows = [
        ev("step", "ProfilerStep#1", 0, STEP),
        ev("runtime", "cudaLaunchKernel", 100, 200, correlation=1),
        ev("kernel", "sm90_gemm", 1 * US, 300 * US, correlation=1),
        ev("cpu_op", FETCH, 300 * US, 500 * US),
        ev("runtime", "cudaLaunchKernel", 500 * US, 501 * US, correlation=2),
        ev("kernel", "sm90_gemm", 505 * US, 700 * US, correlation=2),
        ev("runtime", "cudaMemcpyAsync", 690 * US, 695 * US, correlation=3),
        ev("memcpy", "Memcpy HtoD (Pinned -> Device)", 700 * US, 750 * US, correlation=3),
        *nccl_call(0, 750 * US, 900 * US, corr=4),
    ]
    got = entries(rows)[0]
    assert got == {
        "launch": 1 * US,
        "compute": 299 * US + 195 * US,
        "data": 205 * US,
        "transfer": 50 * US,
        "comms": 150 * US,
        "unexplained": 100 * US,
    }
    assert sum(got.values()) == STEP


def late_forward(steps: int = 4) -> list[Row]:
    """2 ranks, steps of 1000 us. Rank 0's forward (host only) takes 200 us, rank 1's 500 us;
    each then enters the all-reduce (its kernel from its arrival to 600 us, so rank 0 waits
    300 us for rank 1), then computes [600, 900) us."""
    rows: list[Row] = []
    for step in range(steps):
        t = step * STEP
        for rank, forward in ((0, 200 * US), (1, 500 * US)):
            corr = 100 * step + 10 * rank
            rows += [
                ev("step", f"ProfilerStep#{step}", t, t + STEP, rank=rank),
                ev("annotation", "forward", t, t + forward, rank=rank),
                *nccl_call(rank, t + forward, t + 600 * US, corr=corr + 1),
                ev("runtime", "cudaLaunchKernel", t + 590 * US, t + 595 * US, rank=rank, correlation=corr + 2),
                ev("kernel", "sm90_gemm", t + 600 * US, t + 900 * US, rank=rank, correlation=corr + 2),
            ]
    return rows


def test_a_stragglers_cost_on_the_rank_that_waits_and_on_the_straggler() -> None:
    # rank 0 per step: forward's idle 200 (host work), the all-reduce 400 of which 300 are its
    # wait for rank 1 (straggler) and 100 the collective itself (comms), compute 300, and the
    # idle tail 100 (host work: the gap runs into the next step's forward)
    # rank 1 per step: forward's idle 500, of which its excess over rank 0's forward (300) is
    # the straggler's own cost; the rest host work 200 + tail 100; the all-reduce 100; compute 300
    # (the last step's tail has no work after it: unexplained)
    got = entries(late_forward(), world_size=2)
    n = 4
    for rank in (0, 1):
        assert got[rank] == {
            "host_work": (n * 200 + (n - 1) * 100) * US,
            "unexplained": 100 * US,
            "straggler": n * 300 * US,
            "comms": n * 100 * US,
            "compute": n * 300 * US,
        }


def cpu_step() -> list[Row]:
    # a host-only step [0, 1000) us: a fetch [0, 200), an operator [200, 700), a gloo
    # all-reduce [700, 900), nothing recorded [900, 1000)
    return [
        ev("step", "ProfilerStep#1", 0, STEP),
        ev("cpu_op", FETCH, 0, 200 * US),
        ev("cpu_op", "aten::mm", 200 * US, 700 * US),
        ev("cpu_op", "gloo:all_reduce", 700 * US, 900 * US) | {"category": "collective"},
    ]


def test_a_cpu_only_run_by_entry() -> None:
    got = entries(cpu_step(), world_size=2)[0]
    assert got == {"data": 200 * US, "compute": 500 * US, "comms": 200 * US, "other": 100 * US}


def test_a_rank_alone_in_its_world_has_no_comms_on_the_host() -> None:
    # the same step in a world of one: the all-reduce has no peer, it is the rank's own work
    got = entries(cpu_step(), world_size=1)[0]
    assert got == {"data": 200 * US, "compute": 700 * US, "other": 100 * US}


def test_a_backward_threads_collective_is_no_wait_of_a_rank_alone() -> None:
    # the training thread (tid 1) runs operators [0, 100) and [900, 1000) and records nothing
    # between (it sits in a device sync the trace does not keep as an operator); a backward
    # thread (tid 2) has DDP's all-reduce in flight [150, 550): with a peer, the training
    # thread waits on it from 150 to its next operator, 900; alone, it waits on no peer: the
    # all-reduce is the rank's own work and the stretch without an operator is other
    rows = [
        ev("step", "ProfilerStep#1", 0, STEP),
        ev("cpu_op", "aten::mm", 0, 100 * US),
        ev("cpu_op", "c10d::allreduce_", 150 * US, 550 * US, tid=2),
        ev("cpu_op", "aten::add_", 900 * US, STEP),
    ]
    assert entries(rows, world_size=2)[0] == {"compute": 200 * US, "comms": 750 * US, "other": 50 * US}
    assert entries(rows, world_size=1)[0] == {"compute": 600 * US, "other": 400 * US}


def test_the_run_is_the_mean_over_the_ranks_that_set_the_pace() -> None:
    led = run_analysis(make_run(late_forward(), world_size=2)).frames.ledger
    assert led.pace_ranks == [0, 1]
    shares = dict(led.run.select("entry", "share_pct").iter_rows())
    assert shares == {"host_work": 27.5, "unexplained": 2.5, "straggler": 30.0, "compute": 30.0, "comms": 10.0}
    per_step = led.run_steps.group_by("step").agg(pl.col("share_pct").sum())
    assert per_step["share_pct"].to_list() == [100.0] * 4


def queued_steps(*, wait: bool = False, steps: int = 3) -> list[Row]:
    """Steps of 100 us: the host launches k1, k2, k3 on stream 7 in the step's first 3 us
    (and, when ``wait``, calls cudaStreamWaitEvent between the launches of k2 and k3); the
    GPU runs them [10, 20), [50, 60), [90, 100): 30 us between them, the last ends with the step."""
    rows: list[Row] = []
    for step in range(steps):
        t, corr = step * 100 * US, 10 * step
        rows.append(ev("step", f"ProfilerStep#{step}", t, t + 100 * US))
        for i, start in enumerate((10, 50, 90)):
            rows.append(ev("runtime", "cudaLaunchKernel", t + i * US, t + i * US + 500, correlation=corr + i))
            rows.append(ev("kernel", "sm90_gemm", t + start * US, t + (start + 10) * US, correlation=corr + i))
        if wait:
            rows.append(ev("runtime", "cudaStreamWaitEvent", t + 1600, t + 1800))
    return rows


def test_gaps_between_queued_work_on_one_stream_bound_nothing() -> None:
    # each step: [0, 10) the host launching k1 and its launch latency (launch); [20, 50) and
    # [60, 90) between work queued on one stream, with no event wait and no other stream: the
    # device's own gaps, under switch (they bound nothing), not dependency
    assert entries(queued_steps())[0] == {"launch": 3 * 10 * US, "compute": 3 * 30 * US, "switch": 3 * 60 * US}
    verdict = run_analysis(make_run(queued_steps())).analysis.verdict
    bounds = {f.bound for f in (verdict.primary, *verdict.secondary)} | set(verdict.primary.components)
    assert "dependency-bound" not in bounds


def test_a_stream_wait_between_the_launches_is_a_dependency() -> None:
    # the same steps with cudaStreamWaitEvent between k2's and k3's launches: k3's 30 us gap
    # in each step waited on that event, k2's is still the device's own
    got = entries(queued_steps(wait=True))[0]
    assert (got["dependency"], got["switch"]) == (3 * 30 * US, 3 * 30 * US)


_KEYED = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.none() | st.integers(-3, 3) | st.sampled_from([10**9]),
        st.none() | st.sampled_from(["gpu_compute", "comms", "data_wait", "Z", "a", ""]),
    ),
    max_size=40,
    unique=True,
)


@settings(max_examples=300, deadline=None)
@given(rows=_KEYED)
def test_in_ledger_order_is_the_sort_on_the_three_columns(rows: list[tuple[int, int | None, str | None]]) -> None:
    """The packed key orders (rank, step, entry) rows as polars' sort of the three does, nulls
    last (steps far apart, entries of any text)."""
    schema = {"rank": pl.Int32, "step": pl.Int64, "entry": pl.String}
    df = pl.DataFrame(rows, schema=schema, orient="row").with_row_index("i")
    assert in_ledger_order(df).equals(df.sort("rank", "step", "entry", nulls_last=True))


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 5),
            st.none() | st.integers(-3, 3) | st.sampled_from([10**9, 2**61]),
            st.none() | st.sampled_from(["gpu_compute", "comms", "data_wait", "Z", "a", ""]),
            st.integers(-(10**12), 10**12),
        ),
        max_size=60,
    )
)
def test_summed_is_the_grouped_sum_in_ledger_order(rows: list[tuple[int, int | None, str | None, int]]) -> None:
    """The sums by (rank, step, entry) from one sort on the packed key are polars' grouping of
    the three, sorted (repeated keys, null steps and entries, steps too far apart to pack)."""
    schema = {"rank": pl.Int32, "step": pl.Int64, "entry": pl.String, "ns": pl.Int64}
    df = pl.DataFrame(rows, schema=schema, orient="row")
    expected = df.group_by("rank", "step", "entry").agg(pl.col("ns").sum())
    expected = expected.sort("rank", "step", "entry", nulls_last=True)
    assert summed(df).equals(expected)


@settings(max_examples=200, deadline=None)
@example(cuts=[(0, 0), (0, 2), (0, 3)], tops=[(0, 0, 1, "F"), (0, 1, 2, "F")], far=False)  # one name, two ranges
@given(
    cuts=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 300)), max_size=30, unique=True),
    tops=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 300), st.integers(0, 80), st.sampled_from("FBO")), max_size=8
    ),
    far=st.booleans(),
)
def test_the_time_by_phase_is_each_segments_outermost_phase(
    cuts: list[tuple[int, int]], tops: list[tuple[int, int, int, str]], far: bool
) -> None:
    """The segments' time by (rank, step, phase, entry): each segment under the outermost phase
    of its rank holding its start (a brute force over :func:`intervals.outermost`'s phases),
    the time outside every phase under none; nested and overlapping phases, and (``far``) ranks
    too far apart to lay end to end."""
    import tracekit.analyzers.intervals as iv
    from tracekit.analyzers import ledger

    scale = 2**53 if far else 1
    by_rank: dict[int, list[int]] = {}
    for rank, t in sorted(cuts):
        by_rank.setdefault(rank, []).append(t * scale if rank == 2 else t)
    segs = [
        (rank, a // 100 if rank != 2 else 0, ["comms", "gpu_compute"][a % 2], a, b, b - a)
        for rank, ts in by_rank.items()
        for a, b in itertools.pairwise(ts)
    ]
    schema = {"rank": pl.Int32, "step": pl.Int64, "entry": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64}
    seg_frame = pl.DataFrame(segs, schema={**schema, "length_ns": pl.Int64}, orient="row")
    top = pl.DataFrame(
        [(r, s * scale if r == 2 else s, (s + d) * scale if r == 2 else s + d, n) for r, s, d, n in tops],
        schema={"rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64, "name": pl.String},
        orient="row",
    )
    got = ledger._by_phase(seg_frame, top)
    outer = iv.outermost(top.select("rank", "start_ns", "end_ns", "name"), ["rank"]).rows()
    expected: dict[tuple[int, int, str | None, str], int] = {}
    for rank, step, entry, a, _, length in segs:
        phase = next((n for r, s, e, n in outer if r == rank and s <= a < e), None) if tops else None
        expected[(rank, step, phase, entry)] = expected.get((rank, step, phase, entry), 0) + length
    if tops and segs:  # no time outside every phase is listed where there is none
        expected = {k: v for k, v in expected.items() if k[2] is not None or v > 0}
    assert {(r, st_, p, e): ns for r, st_, p, e, ns in got.rows()} == expected
    assert got.height == len(expected)
