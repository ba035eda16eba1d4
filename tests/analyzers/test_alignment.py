"""Cross-rank matching that cannot silently misalign, on clocks that may disagree.

Every case is a small run whose answer is worked out by hand (times in ms: a step is 100 ms).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.factories import cross_rank, ev, make_run, nccl_call
from tracekit.analyzers import run_analysis
from tracekit.reports.cross_rank_words import alignment_note

MS = 1_000_000
STEP = 100 * MS


def rank_steps(
    rank: int,
    steps: range,
    *,
    enter_ms: float,
    end_ms: float,
    calls: int = 1,
    skew_ms: float = 0,
    pg: str | None = "0",
    seq: bool = False,
) -> list[dict[str, Any]]:
    """``rank``'s steps ``steps`` (ProfilerStep#N over [N * 100, N * 100 + 100) ms), each with
    ``calls`` all-reduces entered at ``enter_ms`` into the step (the next ones 1 ms later each)
    and ending ``end_ms`` into it (+1 ms each); the rank's clock reads ``skew_ms`` ahead."""
    rows: list[dict[str, Any]] = []
    shift = int(skew_ms * MS)
    for step in steps:
        t = step * STEP + shift
        rows.append(ev("step", f"ProfilerStep#{step}", t, t + STEP, rank=rank))
        rows.append(ev("annotation", "forward", t + MS, t + int(enter_ms * MS) - MS, rank=rank))
        for c in range(calls):
            start, end = t + int((enter_ms + c) * MS), t + int((end_ms + c) * MS)
            corr = 100 * step + c + 1
            rows += nccl_call(rank, start, end, corr=corr, pg=pg, seq=calls * step + c if seq else None)
    return rows


def by_rank(frame: Any, column: str) -> dict[int, Any]:
    return dict(zip(frame["rank"].to_list(), frame[column].to_list(), strict=True))


@pytest.mark.parametrize("pg", ["0", None], ids=["group order", "stream order"])
def test_a_rank_missing_the_first_collective_is_5_ms_late_not_105(pg: str | None) -> None:
    # rank 0 holds steps 0-3, rank 1 (which started its profiler later) steps 1-3. Each step both
    # enter the all-reduce at 50 and 55 ms and leave at 56 ms: rank 1 is 5 ms late. By order,
    # rank 1's first call (step 1) would pair with rank 0's first (step 0): 105 ms late.
    rows = rank_steps(0, range(4), enter_ms=50, end_ms=56, pg=pg) + rank_steps(
        1, range(1, 4), enter_ms=55, end_ms=56, pg=pg
    )
    collectives, stragglers = cross_rank(make_run(rows, world_size=2))
    matched = collectives.per_rank.filter(rank=1)
    assert matched["lateness_ns"].to_list() == [5 * MS] * 3
    assert matched["step"].to_list() == [1, 2, 3]
    assert sorted(collectives.instances.filter("common")["ranks"].to_list()) == [2, 2, 2]
    assert by_rank(stragglers.per_rank, "mean_lateness_ns")[1] == 5 * MS
    assert by_rank(stragglers.per_rank, "times_last")[1] == 3
    assert collectives.misaligned.height == 0


def test_windows_shifted_by_one_step_count_only_the_common_steps() -> None:
    # rank 0 steps 0-3, rank 1 steps 1-4, both on time with 14 ms kernels: 3 common all-reduces
    # of 14 ms latency each (42 ms), no lateness; not "x5 (latency 42 ms)" nor x4
    rows = rank_steps(0, range(4), enter_ms=50, end_ms=64) + rank_steps(1, range(1, 5), enter_ms=50, end_ms=64)
    frames = run_analysis(make_run(rows, world_size=2)).frames
    (op,) = frames.verdict.evidence.ops
    assert (op.count, op.floor_ns, op.mean_wait_ns) == (3, 42 * MS, 0)
    common = frames.collectives.instances.filter("common")
    assert common.height == 3 and common["spread_ns"].to_list() == [0, 0, 0]
    assert frames.stragglers.stragglers == ()


def test_windows_shifted_with_sequence_numbers_count_only_the_common_collectives() -> None:
    rows = rank_steps(0, range(4), enter_ms=50, end_ms=64, seq=True)
    rows += rank_steps(1, range(1, 5), enter_ms=50, end_ms=64, seq=True)
    frames = run_analysis(make_run(rows, world_size=2)).frames
    (op,) = frames.verdict.evidence.ops
    assert (op.count, op.floor_ns) == (3, 42 * MS)
    assert frames.collectives.instances.height == 5  # seq 0 and 4 held by one rank each: not common
    assert frames.collectives.instances.filter("common")["k"].to_list() == [1, 2, 3]


def test_a_step_whose_counts_differ_does_not_align_and_is_skipped() -> None:
    # both ranks hold steps 0-3, but in step 2 rank 1 recorded 2 all-reduces and rank 0 one:
    # which pairs with which cannot be told, so step 2 is left out of every cross-rank figure
    rows = rank_steps(0, range(4), enter_ms=50, end_ms=56)
    rows += rank_steps(1, range(2), enter_ms=55, end_ms=56) + rank_steps(1, range(3, 4), enter_ms=55, end_ms=56)
    rows += rank_steps(1, range(2, 3), enter_ms=55, end_ms=57, calls=2)
    collectives, _ = cross_rank(make_run(rows, world_size=2))
    (bad,) = collectives.misaligned.iter_rows(named=True)
    assert (bad["step"], bad["op"], bad["ranks"], bad["counts"]) == (2, "allreduce", [0, 1], [1, 2])
    assert collectives.per_rank.filter(step=2).height == 0
    assert collectives.per_rank.filter(rank=1)["lateness_ns"].to_list() == [5 * MS] * 3


def test_without_steps_different_counts_do_not_align() -> None:
    # no step markers: rank 1 lacks the first of rank 0's three all-reduces, and nothing says
    # which of rank 0's calls its two are: no lateness is named, the note says why
    rows = [*nccl_call(0, 10 * MS, 20 * MS, corr=1, pg="0"), *nccl_call(0, 110 * MS, 120 * MS, corr=2, pg="0")]
    rows += nccl_call(0, 210 * MS, 220 * MS, corr=3, pg="0")
    rows += [*nccl_call(1, 115 * MS, 120 * MS, corr=1, pg="0"), *nccl_call(1, 215 * MS, 220 * MS, corr=2, pg="0")]
    collectives, stragglers = cross_rank(make_run(rows, world_size=2))
    (bad,) = collectives.misaligned.iter_rows(named=True)
    assert (bad["step"], bad["ranks"], bad["counts"]) == (None, [0, 1], [3, 2])
    assert collectives.per_rank.height == 0 and collectives.instances.height == 0
    assert stragglers.stragglers == ()


@pytest.mark.parametrize("skew_ms", [3, 50])
def test_a_clock_ahead_is_estimated_corrected_and_names_no_straggler(skew_ms: int) -> None:
    # 4 ranks, 6 steps of identical work: every all-reduce entered 50 ms into the step and left
    # 0.5 ms later. Rank 2's clock reads skew_ms ahead: by its own clock it arrives skew_ms late
    # at 6 of 6. Its collective ends are skew_ms after the others' every time: its offset.
    rows = [
        r
        for rank in range(4)
        for r in rank_steps(rank, range(6), enter_ms=50, end_ms=50.5, skew_ms=skew_ms if rank == 2 else 0)
    ]
    collectives, stragglers = cross_rank(make_run(rows, world_size=4))
    clocks = {r["rank"]: r for r in collectives.clocks.iter_rows(named=True)}
    assert clocks[2]["offset_ns"] == skew_ms * MS and clocks[2]["corrected"]
    assert [clocks[r]["offset_ns"] for r in (0, 1, 3)] == [0, 0, 0]
    assert clocks[2]["uncertainty_ns"] == pytest.approx(0.5 * MS)  # the floor: ends may differ by that much
    # corrected, the arrivals coincide: no lateness beyond the 0.5 ms the clocks may still be off
    assert (collectives.per_rank["arrival_ns"] % STEP).unique().to_list() == [50 * MS]
    assert collectives.per_rank["lateness_ns"].null_count() == collectives.per_rank.height
    assert by_rank(stragglers.per_rank, "times_last") == {0: 0, 1: 0, 2: 0, 3: 0}
    assert stragglers.stragglers == ()


def test_an_offset_within_the_collectives_duration_is_taken_for_one_clock() -> None:
    # the same with 14 ms all-reduces and rank 1's clock 3 ms ahead (2 ranks): ends 3 ms apart
    # are what a 14 ms collective also gives on one clock (ranks leave in some order), so the
    # estimate (3 ms) is reported but not corrected; the 3 ms read as lateness make no one wait
    # (equal durations: no wait), so no straggler is named
    rows = rank_steps(0, range(6), enter_ms=50, end_ms=64) + rank_steps(1, range(6), enter_ms=50, end_ms=64, skew_ms=3)
    collectives, stragglers = cross_rank(make_run(rows, world_size=2))
    clock = collectives.clocks.filter(rank=1).row(0, named=True)
    assert (clock["estimate_ns"], clock["offset_ns"], clock["corrected"]) == (3 * MS, 0, False)
    assert clock["uncertainty_ns"] == 0
    assert collectives.per_rank["wait_ns"].to_list() == [0] * 12
    assert by_rank(stragglers.per_rank, "caused_wait_ns") == {0: 0, 1: 0}
    assert stragglers.stragglers == ()


def test_a_late_rank_on_a_shared_clock_keeps_its_lateness() -> None:
    # 3 ranks, rank 2 enters 5 ms late every step, all leave together at 56 ms: the ends agree,
    # offsets are 0 with no uncertainty, and the lateness is named as measured
    rows = [r for rank in range(3) for r in rank_steps(rank, range(4), enter_ms=55 if rank == 2 else 50, end_ms=56)]
    collectives, _ = cross_rank(make_run(rows, world_size=3))
    assert collectives.clocks["offset_ns"].to_list() == [0, 0, 0]
    assert collectives.clocks["uncertainty_ns"].to_list() == [0, 0, 0]
    assert collectives.instances["last_rank"].to_list() == [2] * 4
    assert collectives.per_rank.filter(rank=2)["lateness_ns"].to_list() == [5 * MS] * 4


def renumbered(rows: list[dict[str, Any]], by: int) -> list[dict[str, Any]]:
    """``rows`` with every ProfilerStep#N named #N+by (the rank called ``prof.step()`` ``by`` more times)."""

    def name(row: dict[str, Any]) -> str:
        text: str = row["name"]
        return f"ProfilerStep#{int(text.split('#')[1]) + by}" if text.startswith("ProfilerStep#") else text

    return [{**row, "name": name(row)} for row in rows]


@pytest.mark.parametrize("host", [None, "node"], ids=["hosts unknown", "one host"])
def test_a_rank_whose_step_numbers_are_shifted_is_renumbered(host: str | None) -> None:
    # both ranks run steps 0-5 at the same times; rank 1 enters 5 ms late every step, both leave
    # at 56 ms. Rank 1 numbers them 1-6: by number, its #N (the others' #N-1) paired with rank 0's
    # #N, 100 ms later. Hosts unknown, that read as a clock offset of -100 ms (corrected, 5 of 6
    # instances common); on one host (one clock) as rank 0 arriving 95 ms late. The pairs' ends
    # are a whole step apart: rank 1 is renumbered by -1, its 5 ms named at 6 of 6, its clock 0.
    rows = rank_steps(0, range(6), enter_ms=50, end_ms=56)
    rows += renumbered(rank_steps(1, range(6), enter_ms=55, end_ms=56), 1)
    run = make_run(rows, world_size=2)
    run = dataclasses.replace(run, ranks=tuple(dataclasses.replace(r, host=host) for r in run.ranks))
    collectives, stragglers = cross_rank(run)
    assert collectives.misaligned.height == 0
    assert collectives.clocks["estimate_ns"].to_list() == [0, 0]
    assert collectives.clocks["corrected"].to_list() == [False, False]
    late = collectives.per_rank.filter(rank=1)
    assert late["step"].to_list() == [0, 1, 2, 3, 4, 5]
    assert late["lateness_ns"].to_list() == [5 * MS] * 6
    assert collectives.per_rank.filter(rank=0)["lateness_ns"].to_list() == [0] * 6
    assert collectives.instances.filter("common").height == 6
    assert by_rank(stragglers.per_rank, "times_last") == {0: 0, 1: 6}


def test_windows_off_by_no_whole_number_of_steps_do_not_align() -> None:
    # rank 1 numbers its steps 1-6 and its clock reads 40 ms ahead: its ends read 60 ms before
    # rank 0's of the same number. A shift by one step with 40 ms of clock, or 60 ms of clock and
    # no shift: which cannot be told (nor is it within a quarter step of a whole step), so its
    # steps are listed as not aligning and no lateness is named (never 95 or 55 ms)
    rows = rank_steps(0, range(6), enter_ms=50, end_ms=56)
    rows += renumbered(rank_steps(1, range(6), enter_ms=55, end_ms=56, skew_ms=40), 1)
    frames = run_analysis(make_run(rows, world_size=2)).frames
    bad = frames.collectives.misaligned
    assert bad["step"].to_list() == [1, 2, 3, 4, 5, 6]
    assert bad["ranks"].to_list() == [[1]] * 6 and bad["counts"].to_list() == [[1]] * 6
    assert bad["offset_ns"].to_list() == [-60 * MS] * 6
    assert frames.collectives.per_rank["lateness_ns"].null_count() == frames.collectives.per_rank.height
    assert frames.stragglers.stragglers == ()


def test_the_report_says_which_steps_do_not_align_and_how_far_off() -> None:
    rows = rank_steps(0, range(6), enter_ms=50, end_ms=56)
    rows += renumbered(rank_steps(1, range(6), enter_ms=55, end_ms=56, skew_ms=40), 1)
    note = alignment_note(run_analysis(make_run(rows, world_size=2)).analysis.collectives)
    assert note == (
        "Ranks' windows do not align: cross-rank figures skipped for steps 1-6 of rank 1 (allreduce in group 0: "
        "its step windows are -60.00 ms off the others', not a whole number of steps)."
    )
