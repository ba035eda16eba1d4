"""summary.json from per-rank phase records, worked out by hand."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tracekit.capture.summary import (
    PhaseMemoryRecord,
    PhaseRecord,
    StepRecord,
    read_phase_files,
    summarize,
    write_summary,
)
from tracekit.errors import InputError
from tracekit.results.capture import CAPTURE_SCHEMA_VERSION, CaptureNote, Memory, load_capture_summary
from tracekit.results.thresholds import STRAGGLER_MIN_SHARE
from tracekit.results.vocab import CaptureNoteKind, WorstBy

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
    assert loaded.notes == [CaptureNote(kind=CaptureNoteKind.TEXT, text="a note")] and loaded.environment is None
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_malformed_phase_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "phases.rank0.json").write_text('{"rank": "zero"}')
    with pytest.raises(InputError, match=r"phases\.rank0\.json: unreadable phase timings"):
        read_phase_files(tmp_path)


def memory_step(step: int, start: int, phases: dict[str, tuple[int, int]], end: int, **extra: int) -> StepRecord:
    """A step whose memory is ``start`` at its beginning and ``end`` at its end; each phase
    runs from its first value to its second (rss_bytes, as on CPU)."""
    return StepRecord(
        step=step,
        step_ns=10 * len(phases),
        phases_ns=dict.fromkeys([*phases, "other"], 10),
        memory_start={"rss_bytes": start},
        memory_end={"rss_bytes": end},
        phase_memory={
            n: PhaseMemoryRecord(start={"rss_bytes": a}, end={"rss_bytes": b}, delta={"rss_bytes": b - a})
            for n, (a, b) in phases.items()
        },
        **extra,
    )


CPU = CaptureNote(kind=CaptureNoteKind.CPU_MEMORY)
NO_TIMELINE = CaptureNote(kind=CaptureNoteKind.NO_TIMELINE, rank=1, error="ValueError: no CUDA")


def test_phase_memory_deltas_add_up_to_the_step_change_with_other_as_the_rest() -> None:
    # step 1: forward adds 100, backward frees 60, 5 more appear between phases: 1000 -> 1045
    # step 2: forward adds 120, backward frees 100, 0 between phases: 1045 -> 1065
    rank0 = PhaseRecord(
        rank=0,
        steps=[
            memory_step(1, 1000, {"forward": (1000, 1100), "backward": (1102, 1042)}, 1045, saved_tensor_bytes=90),
            memory_step(2, 1045, {"forward": (1045, 1165), "backward": (1165, 1065)}, 1065, saved_tensor_bytes=110),
        ],
        memory=Memory(device="cpu", peak_rss_bytes=2000, rss_bytes=1065),
        notes=[CPU],
    )
    rank1 = PhaseRecord(
        rank=1,
        steps=[memory_step(1, 0, {"forward": (0, 300), "backward": (300, 0)}, 0)],
        memory=Memory(device="cpu", peak_rss_bytes=3000),
        notes=[CPU, NO_TIMELINE],
    )
    s = summarize([rank0, rank1], notes=["given"])
    r0, r1 = s.per_rank
    assert r0.phase_memory_measure == "rss_bytes"
    assert r0.phase_memory_deltas == {"forward": 110, "backward": -80, "other": 2.5}
    assert r0.step_memory_change_bytes == 32.5
    assert sum(r0.phase_memory_deltas.values()) == pytest.approx(r0.step_memory_change_bytes)
    assert (r0.saved_tensor_bytes_mean, r0.saved_tensor_bytes_max) == (100, 110)
    assert r0.phase_reserved_deltas == {} and r0.memory.rss_bytes == 1065
    assert r1.phase_memory_deltas == {"forward": 300, "backward": -300, "other": 0}
    assert r1.saved_tensor_bytes_mean is None
    phases = {p.phase: p for p in s.memory_phases}
    assert [p.phase for p in s.memory_phases] == ["forward", "backward", "other"]
    assert phases["forward"].delta_bytes_mean == 205 and (
        phases["forward"].max_rank,
        phases["forward"].delta_bytes_max,
    ) == (1, 300)
    assert phases["backward"].delta_bytes_mean == -190 and phases["other"].delta_bytes_mean == 1.25
    memory = s.memory
    assert memory is not None
    assert sum(p.delta_bytes_mean for p in s.memory_phases) == pytest.approx(memory.step_memory_change_bytes_mean)
    assert (memory.worst_rank, memory.peak_rss_bytes, memory.peak_allocated_bytes) == (1, 3000, None)
    assert memory.worst_rank_by is WorstBy.RSS and memory.device == "cpu"
    assert (memory.saved_tensor_bytes_mean, memory.saved_tensor_bytes_max) == (100, 110)
    # every rank's notes once, after the given ones
    assert s.notes == [CaptureNote(kind=CaptureNoteKind.TEXT, text="given"), CPU, NO_TIMELINE]


def test_device_memory_deltas_and_reserved_on_cuda() -> None:
    def sample(allocated: int, reserved: int) -> dict[str, int]:
        return {"allocated_bytes": allocated, "reserved_bytes": reserved}

    step = StepRecord(
        step=3,
        step_ns=30,
        phases_ns={"forward": 10, "backward": 10, "device_sync": 5, "other": 5},
        memory_start=sample(100, 200),
        memory_end=sample(110, 400),
        phase_memory={
            # forward twice (gradient accumulation): first start, last end, changes summed
            "forward": PhaseMemoryRecord(start=sample(100, 200), end=sample(190, 400), delta=sample(140, 200)),
            "backward": PhaseMemoryRecord(start=sample(150, 300), end=sample(110, 400), delta=sample(-130, 0)),
            "device_sync": PhaseMemoryRecord(start=sample(110, 400), end=sample(110, 400), delta=sample(0, 0)),
        },
    )
    memory = Memory(device="cuda", peak_allocated_bytes=500, peak_reserved_bytes=800, scope="measured steps")
    s = summarize([PhaseRecord(rank=0, steps=[step], memory=memory)])
    r = s.per_rank[0]
    assert r.phase_memory_measure == "allocated_bytes"
    assert r.phase_memory_deltas == {"forward": 140, "backward": -130, "device_sync": 0, "other": 0}
    assert r.phase_reserved_deltas == {"forward": 200, "backward": 0, "device_sync": 0, "other": 0}
    assert r.step_memory_change_bytes == 10
    assert s.memory_phases[0].reserved_delta_bytes_mean == 200
    assert s.memory is not None and s.memory.peak_reserved_bytes == 800
    assert s.memory.worst_rank_by is WorstBy.DEVICE_ALLOCATED


def test_phase_files_without_memory_summarize_as_before() -> None:
    s = summarize([record(0, [{"forward": 10, "other": 0}])])
    assert s.memory is None and s.memory_phases == []
    assert s.per_rank[0].phase_memory_deltas == {} and s.per_rank[0].step_memory_change_bytes is None
