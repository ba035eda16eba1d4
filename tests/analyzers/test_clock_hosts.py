"""Clock offsets smaller than the collectives' latency floor, with the hosts the traces record.

Every case is worked out by hand (times in ms, a step 100 ms; see ``rank_steps``). Four ranks on
two hosts: a (ranks 0, 1) and b (ranks 2, 3), whose clock reads 0.4 ms ahead of a's. Every
all-reduce ends 1 ms after the last rank entered it (its latency floor is 1 ms: the last rank's
duration). Ranks leave together, so b's ends read 0.4 ms after a's every time: its estimate is
0.4 ms, within the 1 ms floor, where an offset cannot be told from the order ranks leave in.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.analyzers.test_alignment import by_rank, rank_steps
from tests.factories import cross_rank, make_run
from tracekit.analyzers import run_analysis
from tracekit.model.run import Run
from tracekit.reports.cross_rank_words import cross_rank_notes

MS = 1_000_000
HOSTS = {0: "a", 1: "a", 2: "b", 3: "b"}


def on_hosts(run: Run, hosts: dict[int, str | None]) -> Run:
    """``run`` with each rank's trace recording ``hosts[rank]``."""
    return dataclasses.replace(run, ranks=tuple(dataclasses.replace(r, host=hosts[r.rank]) for r in run.ranks))


def four_ranks(late_ms: float, *, skew_ms: float = 0.4) -> list[dict[str, Any]]:
    """Ranks 0-2 enter at 50 ms, rank 3 ``late_ms`` later; all leave 1 ms after rank 3 entered;
    ranks 2 and 3 (host b) read their clock ``skew_ms`` ahead."""
    end = 50 + late_ms + 1
    rows: list[dict[str, Any]] = []
    for rank in range(4):
        enter = 50 + (late_ms if rank == 3 else 0)
        rows += rank_steps(rank, range(6), enter_ms=enter, end_ms=end, skew_ms=skew_ms if rank >= 2 else 0)
    return rows


def test_an_offset_within_the_floor_between_hosts_is_uncertainty_not_lateness() -> None:
    # before: hosts unknown, b's 0.4 ms were taken for one clock (no uncertainty) and ranks 2
    # and 3 were named last at every all-reduce, 0.4 ms late, though nobody was late
    collectives, stragglers = cross_rank(on_hosts(make_run(four_ranks(0), world_size=4), HOSTS))
    clocks = {r["rank"]: r for r in collectives.clocks.iter_rows(named=True)}
    assert [clocks[r]["host"] for r in range(4)] == ["a", "a", "b", "b"]
    assert [clocks[r]["estimate_ns"] for r in range(4)] == pytest.approx([0, 0, 0.4 * MS, 0.4 * MS], abs=1e3)
    assert [clocks[r]["offset_ns"] for r in range(4)] == [0, 0, 0, 0]  # within the floor: not corrected
    assert [clocks[r]["uncertainty_ns"] for r in range(4)] == pytest.approx([0, 0, MS, MS], abs=1e3)
    # ranks of one host are not off from each other: b's 1 ms counts once
    assert collectives.instances["tolerance_ns"].to_list() == pytest.approx([MS] * 6, abs=1e3)
    assert collectives.per_rank["lateness_ns"].null_count() == collectives.per_rank.height
    assert collectives.instances["last_rank"].null_count() == 6
    assert stragglers.stragglers == ()


def test_the_same_run_without_hosts_keeps_todays_reading() -> None:
    # unknown hosts: an estimate within the floor is one shared clock (no uncertainty), so the
    # 0.4 ms read as lateness (documented in clocks.py: the cautious reading would hide the
    # stragglers of one machine's gloo ranks, which is what runs without hosts mostly are)
    collectives, _ = cross_rank(make_run(four_ranks(0), world_size=4))
    assert collectives.clocks["uncertainty_ns"].to_list() == [0, 0, 0, 0]
    assert collectives.clocks["host"].to_list() == [None] * 4
    assert collectives.per_rank.filter(rank=2)["lateness_ns"].to_list() == pytest.approx([0.4 * MS] * 6, abs=1e3)


def test_lateness_inside_the_uncertainty_is_not_named() -> None:
    # rank 3 enters 0.3 ms late: on b's clock 0.7 ms after rank 0, within b's 1 ms uncertainty
    collectives, stragglers = cross_rank(on_hosts(make_run(four_ranks(0.3), world_size=4), HOSTS))
    assert collectives.clocks.filter(rank=3)["uncertainty_ns"].item() == pytest.approx(MS, abs=1e3)
    assert collectives.instances["spread_ns"].to_list() == pytest.approx([0.7 * MS] * 6, abs=1e3)
    assert collectives.per_rank["lateness_ns"].null_count() == collectives.per_rank.height
    assert stragglers.stragglers == ()


def test_lateness_beyond_the_uncertainty_is_named() -> None:
    # rank 3 enters 2 ms late: 2.4 ms after rank 0 on b's clock (the 0.4 ms not corrected, within
    # the 1 ms uncertainty), beyond it: rank 3 is last at 6 of 6
    collectives, stragglers = cross_rank(on_hosts(make_run(four_ranks(2), world_size=4), HOSTS))
    late = collectives.per_rank.filter(rank=3)["lateness_ns"].to_list()
    assert late == pytest.approx([2.4 * MS] * 6, abs=1e3)
    assert collectives.instances["last_ranks"].to_list() == [[3]] * 6
    assert by_rank(stragglers.per_rank, "times_last")[3] == 6


def test_an_offset_beyond_the_floor_between_hosts_is_corrected() -> None:
    # b's clock 5 ms ahead: beyond the 1 ms floor, corrected, with the floor as uncertainty
    collectives, stragglers = cross_rank(on_hosts(make_run(four_ranks(0, skew_ms=5), world_size=4), HOSTS))
    b = collectives.clocks.filter(rank=2).row(0, named=True)
    assert (b["offset_ns"], b["corrected"], b["host"]) == (pytest.approx(5 * MS, abs=1e3), True, "b")
    assert b["uncertainty_ns"] == pytest.approx(MS, abs=1e3)
    assert collectives.per_rank["lateness_ns"].null_count() == collectives.per_rank.height
    assert stragglers.stragglers == ()


def test_ranks_of_one_host_share_one_clock() -> None:
    # all four on host a, rank 3 0.3 ms late, no skew: one clock, nothing corrected, no
    # uncertainty, the 0.3 ms named
    run = on_hosts(make_run(four_ranks(0.3, skew_ms=0), world_size=4), dict.fromkeys(range(4), "a"))
    collectives, _ = cross_rank(run)
    assert collectives.clocks["estimate_ns"].to_list() == [0, 0, 0, 0]
    assert collectives.clocks["uncertainty_ns"].to_list() == [0, 0, 0, 0]
    assert collectives.per_rank.filter(rank=3)["lateness_ns"].to_list() == pytest.approx([0.3 * MS] * 6, abs=1e3)
    assert collectives.instances["last_ranks"].to_list() == [[3]] * 6


def test_a_rank_without_a_host_in_a_run_of_two_hosts_is_taken_as_apart() -> None:
    # rank 3 records no host while a and b differ: its 0.4 ms are uncertainty too
    hosts: dict[int, str | None] = {**HOSTS, 3: None}
    collectives, _ = cross_rank(on_hosts(make_run(four_ranks(0), world_size=4), hosts))
    assert collectives.clocks.filter(rank=3)["uncertainty_ns"].item() == pytest.approx(MS, abs=1e3)
    assert collectives.per_rank["lateness_ns"].null_count() == collectives.per_rank.height


def test_the_report_names_the_hosts_and_the_lateness_not_measurable() -> None:
    analysis = run_analysis(on_hosts(make_run(four_ranks(0), world_size=4), HOSTS)).analysis
    assert [(k.rank, k.host) for k in analysis.collectives.clocks] == [(0, "a"), (1, "a"), (2, "b"), (3, "b")]
    assert cross_rank_notes(analysis.collectives) == (
        " Ranks on 2 hosts, one clock each (a: ranks 0, 1; b: ranks 2, 3)."
        " Ranks' clocks may differ by up to 1.00 ms (from where their collectives end):"
        " lateness below that is not measurable and is not named."
    )


def test_a_wait_for_a_straggler_is_carved_on_the_waiting_ranks_own_clock() -> None:
    # rank 3 enters 20 ms late at every all-reduce (6 steps): ranks 0-2 wait 20 ms a step for it,
    # which the ledger moves from their communication time to the straggler's entry. b's clock
    # reads 5 ms ahead, beyond the 1 ms floor: corrected, so rank 2's arrivals move 5 ms onto
    # a's clock. Its communication time stays on its own clock, and so must its waits: before,
    # they were placed 5 ms early on its timeline, and 5 ms of each (30 ms) stayed under comms
    def straggler_ns(skew_ms: float) -> dict[int, int]:
        run = on_hosts(make_run(four_ranks(20, skew_ms=skew_ms), world_size=4), HOSTS)
        ledger = run_analysis(run).frames.ledger.per_rank
        return by_rank(ledger.filter(entry="straggler"), "ns")

    assert straggler_ns(5) == straggler_ns(0) == dict.fromkeys(range(4), 6 * 20 * MS)
