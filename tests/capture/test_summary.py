"""summary.json from per-rank phase records, worked out by hand."""

from __future__ import annotations

import pytest

from tracekit.capture.summary import p95, summarize
from tracekit.errors import InputError


def record(rank: int, steps: list[dict[str, int]]) -> dict[str, object]:
    return {
        "rank": rank,
        "world_size": 2,
        "samples_per_step": 4,
        "steps": [{"step": i, "step_ns": sum(p.values()), "phases_ns": p} for i, p in enumerate(steps)],
        "memory": {"device": "cpu", "peak_rss_bytes": 1 << 20},
    }


def test_phase_stats_shares_and_throughput_from_the_slowest_rank() -> None:
    fast = record(0, [{"forward": 10, "backward": 20, "other": 0}, {"forward": 10, "backward": 20, "other": 0}])
    slow = record(1, [{"forward": 30, "backward": 20, "other": 10}, {"forward": 50, "backward": 20, "other": 10}])
    s = summarize([fast, slow])
    phases = {p["phase"]: p for p in s["phases"]}
    assert phases["forward"]["mean_ns"] == 25  # (10 + 10 + 30 + 50) / 4
    assert phases["forward"]["median_ns"] == 20
    assert phases["forward"]["p95_ns"] == 50
    assert s["step"]["mean_ns"] == 50  # (30 + 30 + 60 + 80) / 4
    assert sum(p["share_pct"] for p in s["phases"]) == pytest.approx(100)
    assert s["per_rank"][1]["phase_means_ns"]["forward"] == 40
    t = s["throughput"]
    assert t["slowest_rank"] == 1  # 40 ns before the collective against 10
    assert t["slowest_rank_pre_collective_mean_ns"] == 40
    assert t["steps_per_s"] == pytest.approx(1e9 / 70)
    assert t["global_samples_per_s"] == pytest.approx(1e9 / 70 * 4 * 2)


def test_slowest_rank_is_the_last_to_arrive_not_the_longest_step() -> None:
    # rank 1 is late to the collective; rank 0 waits for it inside backward, so rank 0's
    # steps are as long or longer: step length does not find the straggler, arrival does
    waiting = record(0, [{"forward": 10, "backward": 95}])
    late = record(1, [{"forward": 90, "backward": 15}])
    t = summarize([waiting, late])["throughput"]
    assert t["slowest_rank"] == 1 and t["is_straggler"]
    assert t["step_mean_ns"] == 105


def test_balanced_ranks_have_no_straggler() -> None:
    # rank 1 is 5 ns later than rank 0 in a 1000 ns step: 0.5% of a step is not a straggler
    t = summarize([record(0, [{"forward": 100, "backward": 900}]), record(1, [{"forward": 105, "backward": 895}])])[
        "throughput"
    ]
    assert t["slowest_rank"] == 1 and not t["is_straggler"]


def test_p95_nearest_rank() -> None:
    assert p95(list(range(1, 21))) == 19
    assert p95([5]) == 5


def test_nothing_to_summarize() -> None:
    with pytest.raises(InputError):
        summarize([])
