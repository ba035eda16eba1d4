"""summary.json from per-rank phase records, worked out by hand."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tracekit.capture.summary import PhaseRecord, StepRecord, read_phase_files, summarize, write_summary
from tracekit.errors import InputError
from tracekit.results.capture import CAPTURE_SCHEMA_VERSION, load_capture_summary
from tracekit.results.thresholds import STRAGGLER_MIN_SHARE

if TYPE_CHECKING:
    from pathlib import Path


def record(rank: int, steps: list[dict[str, int]]) -> PhaseRecord:
    return PhaseRecord(
        rank=rank,
        world_size=2,
        samples_per_step=4,
        steps=[StepRecord(step=i, step_ns=sum(p.values()), phases_ns=p) for i, p in enumerate(steps)],
    )


def test_phase_stats_shares_and_throughput_from_the_slowest_rank() -> None:
    fast = record(0, [{"forward": 10, "backward": 20, "other": 0}, {"forward": 10, "backward": 20, "other": 0}])
    slow = record(1, [{"forward": 30, "backward": 20, "other": 10}, {"forward": 50, "backward": 20, "other": 10}])
    s = summarize([slow, fast])  # any order: ranks come out sorted
    assert s.ranks == [0, 1] and s.world_size == 2 and s.measured_steps == 2
    phases = {p.phase: p for p in s.phases}
    assert [p.phase for p in s.phases] == ["forward", "backward", "other"]
    assert phases["forward"].mean_ns == 25  # (10 + 10 + 30 + 50) / 4
    assert phases["forward"].median_ns == 20
    assert phases["forward"].p95_ns == 50
    assert (s.step.mean_ns, s.step.median_ns, s.step.p95_ns, s.step.count) == (50, 45, 80, 4)  # 30 30 60 80
    assert sum(p.share_pct or 0 for p in s.phases) == pytest.approx(100)
    assert s.per_rank[1].phase_means_ns["forward"] == 40
    assert s.per_rank[1].pre_collective_mean_ns == 40  # forward only: no dataload_wait or h2d here
    t = s.throughput
    assert t.slowest_rank == 1  # 40 ns before the collective against 10
    assert t.slowest_rank_pre_collective_mean_ns == 40
    assert t.median_other_pre_collective_mean_ns == 10 and t.lateness_ns == 30
    assert t.steps_per_s == pytest.approx(1e9 / 70)
    assert t.global_samples_per_s == pytest.approx(1e9 / 70 * 4 * 2)
    assert t.straggler_min_share == STRAGGLER_MIN_SHARE


def test_slowest_rank_is_the_last_to_arrive_not_the_longest_step() -> None:
    # rank 1 is late to the collective; rank 0 waits for it inside backward, so rank 0's
    # steps are as long or longer: step length does not find the straggler, arrival does
    waiting = record(0, [{"forward": 10, "backward": 95}])
    late = record(1, [{"forward": 90, "backward": 15}])
    t = summarize([waiting, late]).throughput
    assert t.slowest_rank == 1 and t.is_straggler
    assert t.step_mean_ns == 105


def test_balanced_ranks_have_no_straggler() -> None:
    # rank 1 is 5 ns later than rank 0 in a 1000 ns step: 0.5% of a step is not a straggler
    t = summarize([record(0, [{"forward": 100, "backward": 900}]), record(1, [{"forward": 105, "backward": 895}])])
    assert t.throughput.slowest_rank == 1 and not t.throughput.is_straggler


def test_a_rank_without_steps_has_no_timings_and_no_throughput() -> None:
    s = summarize([record(0, [])])
    assert s.step.count == 0 and s.step.mean_ns is None and s.phases == []
    assert s.per_rank[0].step_mean_ns is None and s.throughput.slowest_rank is None


def test_nothing_to_summarize() -> None:
    with pytest.raises(InputError):
        summarize([])


def test_write_summary_reads_phase_files_and_writes_a_loadable_summary(tmp_path: Path) -> None:
    for rank, forward in ((0, 10), (1, 30)):
        phases = {
            "rank": rank,
            "world_size": 2,
            "steps": [{"step": 1, "step_ns": forward + 5, "phases_ns": {"forward": forward, "other": 5}}],
        }
        (tmp_path / f"phases.rank{rank}.json").write_text(json.dumps(phases))
    written = write_summary(tmp_path, config={"workload": "mlp"}, notes=["a note"])
    path = tmp_path / "summary.json"
    loaded = load_capture_summary(path.read_bytes(), source=str(path))
    assert loaded == written
    assert loaded.schema_version == CAPTURE_SCHEMA_VERSION and loaded.config == {"workload": "mlp"}
    assert loaded.notes == ["a note"] and loaded.environment is None
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_malformed_phase_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "phases.rank0.json").write_text('{"rank": "zero"}')
    with pytest.raises(InputError, match=r"phases\.rank0\.json: unreadable phase timings"):
        read_phase_files(tmp_path)
