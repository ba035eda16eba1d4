"""Step markers that cannot be a loop's steps (zero length, a step marked twice, steps running past
the next one, durations or times in another unit): left out, cut, or the file refused, and said."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl
import pytest

from tests.factories import kineto_event, said, write_kineto
from tracekit.errors import InputError
from tracekit.readers import load_run

if TYPE_CHECKING:
    from pathlib import Path

T0 = 1_000_000.0  # us


def loop(steps: list[tuple[float, float]], *, name: str = "ProfilerStep#{}") -> list[dict[str, Any]]:
    """A loop of steps (start, duration in us, from T0), each with a 10 us kernel launched in it."""
    events = []
    for i, (start, dur) in enumerate(steps):
        t = T0 + start
        events += [
            kineto_event("user_annotation", name.format(i + 1), t, dur),
            kineto_event("cuda_runtime", "cudaLaunchKernel", t + 1, 2, correlation=i + 1),
            kineto_event("kernel", "sm90_gemm", t + 5, 10, correlation=i + 1, stream=7, device=0),
        ]
    return events


def steps_of(path: Path) -> pl.DataFrame:
    run = load_run([path], use_cache=False)
    return run.select(["step"], "name", "start_ns", "end_ns").sort("start_ns")


def test_well_formed_steps_are_left_as_they_are(tmp_path: Path) -> None:
    path = write_kineto(tmp_path / "r0.json", loop([(0, 100), (100, 100), (200, 100), (300, 100)]))
    run = load_run([path], use_cache=False)
    assert not [w for w in run.warnings if w.kind == "bad_steps"]
    assert run.select(["step"], "start_ns").height == 4


def test_zero_length_steps_are_left_out_and_said(tmp_path: Path) -> None:
    path = write_kineto(tmp_path / "r0.json", loop([(0, 100), (100, 0), (200, 100), (300, 0), (400, 100)]))
    steps = steps_of(path)
    assert steps["name"].to_list() == ["ProfilerStep#1", "ProfilerStep#3", "ProfilerStep#5"]
    run = load_run([path], use_cache=False)
    assert said(w for w in run.warnings if w.kind == "bad_steps") == [
        f"{path}: 2 step marker(s) of zero length; they were left out (the steps come from the rest, or are inferred)"
    ]


def test_a_step_marked_twice_is_left_out_and_overlaps_are_cut(tmp_path: Path) -> None:
    events = loop([(0, 150), (100, 150), (200, 150), (300, 100)])  # each runs 50 us into the next
    events.append(kineto_event("user_annotation", "ProfilerStep#9", T0 + 110, 20))  # inside step 2
    path = write_kineto(tmp_path / "r0.json", events)
    steps = steps_of(path)
    assert steps["name"].to_list() == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    # cut where the next begins: 100 us each (by hand: starts 0, 100, 200, 300; the last keeps its end)
    assert (steps["end_ns"] - steps["start_ns"]).to_list() == [100_000, 100_000, 100_000, 100_000]
    run = load_run([path], use_cache=False)
    assert sorted(w.key for w in run.warnings if w.kind == "bad_steps") == ["nested", "overlapping"]
    words = said(w for w in run.warnings if w.kind == "bad_steps")
    assert f"{path}: 1 step marker(s) inside another step marker (a step marked twice); they were left out" in words
    assert (
        f"{path}: 3 step marker(s) running past the next step's start; each was cut where the next step begins" in words
    )


def test_tracekit_s_markers_and_the_profiler_s_are_two_families(tmp_path: Path) -> None:
    """A capture marks each step twice, ``step#N`` around ``ProfilerStep#N``: not a nesting."""
    events = loop([(0, 100), (100, 100), (200, 100)]) + loop([(0, 100), (100, 100), (200, 100)], name="step#{}")
    path = write_kineto(tmp_path / "r0.json", events)
    assert not [w for w in load_run([path], use_cache=False).warnings if w.kind == "bad_steps"]


def test_durations_in_another_unit_refuse_the_file_and_the_other_ranks_go_on(tmp_path: Path) -> None:
    good = write_kineto(tmp_path / "rank0.json", loop([(0, 100), (100, 100), (200, 100), (300, 100)]), rank=0)
    ns = [(float(100 * i), 100_000.0) for i in range(4)]  # durations written in ns: 1000x their period
    bad = write_kineto(tmp_path / "rank1.json", loop(ns), rank=1)
    run = load_run([good, bad], use_cache=False)
    assert [r.rank for r in run.ranks] == [0]
    (skip,) = run.skipped
    assert skip.path == str(bad)
    assert "markers last 0.1 s on median but start every 0.0001 s" in skip.reason
    assert "another unit (nanoseconds where microseconds are expected?)" in skip.reason
    with pytest.raises(InputError, match="another unit"):
        load_run([bad], use_cache=False)


def test_times_in_seconds_refuse_the_file(tmp_path: Path) -> None:
    seconds = [(0.2 * i, 0.2) for i in range(4)]  # a 200 ms step written in seconds: 0.2 "us"
    path = write_kineto(tmp_path / "r0.json", loop(seconds))
    with pytest.raises(InputError, match=r"markers last 200 ns on median.*seconds where microseconds"):
        load_run([path], use_cache=False)


def test_a_rank_of_another_run_is_left_out_and_named(tmp_path: Path) -> None:
    """Rank 2's file was recorded a minute before the others, with no time in common."""
    for rank in (0, 1, 3):
        write_kineto(tmp_path / f"rank{rank}.json", loop([(0, 100), (100, 100), (200, 100)]), rank=rank, world_size=4)
    early = loop([(-60e6, 100), (-60e6 + 100, 100), (-60e6 + 200, 100)])
    write_kineto(tmp_path / "rank2.json", early, rank=2, world_size=4)
    run = load_run([tmp_path], use_cache=False)
    assert run.rank_ids == [0, 1, 3]
    (skip,) = run.skipped
    assert skip.path == str(tmp_path / "rank2.json")
    assert skip.reason.startswith("recorded 60.0 s before the other 3 ranks, with no time in common")


def test_two_files_recorded_apart_cannot_say_which_run_is_meant(tmp_path: Path) -> None:
    write_kineto(tmp_path / "rank0.json", loop([(0, 100), (100, 100), (200, 100)]), rank=0)
    write_kineto(tmp_path / "rank1.json", loop([(90e6, 100), (90e6 + 100, 100), (90e6 + 200, 100)]), rank=1)
    with pytest.raises(InputError, match=r"files of different runs: .*rank0\.json and .*rank1\.json were recorded "):
        load_run([tmp_path], use_cache=False)


def test_ranks_recorded_a_little_apart_are_one_run(tmp_path: Path) -> None:
    """Clocks of two hosts differ by far less than a second: a gap within it is one run."""
    write_kineto(tmp_path / "rank0.json", loop([(0, 100), (100, 100), (200, 100)]), rank=0)
    write_kineto(tmp_path / "rank1.json", loop([(0.5e6, 100), (0.5e6 + 100, 100), (0.5e6 + 200, 100)]), rank=1)
    assert load_run([tmp_path], use_cache=False).rank_ids == [0, 1]


def with_allreduce(steps: int, *, per_step: int = 1) -> list[dict[str, Any]]:
    """``steps`` steps of 100 us, each with ``per_step`` NCCL all-reduce kernels."""
    events = loop([(100.0 * i, 100.0) for i in range(steps)])
    for i in range(steps):
        for j in range(per_step):
            c = 1000 + i * 10 + j
            t = T0 + 100 * i + 20 + 10 * j
            events += [
                kineto_event("cuda_runtime", "cudaLaunchKernel", t, 1, correlation=c),
                kineto_event("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 2, 5, correlation=c, stream=20),
            ]
    return events


def test_a_rank_cut_short_or_doing_other_work_is_named(tmp_path: Path) -> None:
    for rank in (0, 1):
        write_kineto(tmp_path / f"rank{rank}.json", with_allreduce(6), rank=rank, world_size=4)
    write_kineto(tmp_path / "rank2.json", with_allreduce(2), rank=2, world_size=4)  # cut short
    write_kineto(tmp_path / "rank3.json", with_allreduce(6, per_step=2), rank=3, world_size=4)  # twice the collectives
    run = load_run([tmp_path], use_cache=False)
    words = said(w for w in run.warnings if w.kind == "uneven_ranks")
    rest = (
        "where the ranks recorded 6 (their median): its trace was cut short, or it ran other work; collectives "
        "are matched across ranks only where every rank recorded them, so waits and stragglers cover that part"
    )
    assert words == [
        f"{tmp_path / 'rank2.json'}: rank 2 recorded 2 steps {rest}",
        f"{tmp_path / 'rank3.json'}: rank 3 recorded 12 collectives {rest}",
    ]


def test_a_rank_whose_times_are_in_another_unit_is_left_out(tmp_path: Path) -> None:
    """No step markers to judge by: rank 2's kernels last 1000x the others' (durations in ns)."""

    def kernels(scale: float) -> list[dict[str, Any]]:
        return [
            kineto_event("kernel", "sm90_gemm", T0 + 100 * i, 10 * scale, correlation=i, stream=7, device=0)
            for i in range(5)
        ]

    for rank in (0, 1, 3):
        write_kineto(tmp_path / f"rank{rank}.json", kernels(1), rank=rank, world_size=4)
    write_kineto(tmp_path / "rank2.json", kernels(1000), rank=2, world_size=4)
    run = load_run([tmp_path], use_cache=False)
    assert run.rank_ids == [0, 1, 3]
    (skip,) = run.skipped
    assert skip.path == str(tmp_path / "rank2.json")
    assert skip.reason == (
        "its events last 1,000x as long as the other ranks' on median (10 ms against 0.01 ms): "
        "its times are probably in another unit; left out"
    )
