"""``summary.json``: the phase timings of every rank, summarized (no torch needed).

Per phase: mean/median/p95 over every measured step of every rank and the share of the mean
step time; the phases (with ``device_sync`` and ``other``) tile each step, so shares sum to
100% and no aggregate phase stands beside its parts. The statistics are
:mod:`tracekit.results.stats`, the same definitions the analyzers use.

In a synchronous data-parallel run the collectives equalize step times: every rank waits
for the last one to arrive. So the *slowest rank* is the one that arrives last, the rank
with the most host time before the step's first collective (data wait, copy, forward); it is
a straggler when it arrives later than the median of the others by more than
:data:`~tracekit.results.thresholds.STRAGGLER_MIN_SHARE` of the longest mean step.
Throughput is set by the largest per-rank mean step time.

Memory: per rank, the mean change of memory in each phase over the measured steps (device
memory allocated on CUDA, resident host memory on CPU), with ``other`` the change outside
every phase, so that the phases' deltas add up to the change over the step; the mean and
largest bytes autograd saved in forward; the peaks. Over ranks: the worst rank's peaks and
each phase's delta averaged over ranks. Notes of every rank (what it could not record) are
kept once each.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from tracekit.capture import files
from tracekit.capture.memory import ALLOCATED, RESERVED, RSS
from tracekit.errors import InputError
from tracekit.results.capture import (
    CaptureNote,
    CaptureSummary,
    Memory,
    MemorySummary,
    PhaseMemory,
    PhaseStats,
    RankPhases,
    StepStats,
    Throughput,
    dump_capture_summary,
)
from tracekit.results.stats import mean, median, p95
from tracekit.results.thresholds import STRAGGLER_MIN_SHARE
from tracekit.results.vocab import CaptureNoteKind, SlowestBy, WorstBy

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

#: Phases that run before a step's first collective (DDP's all-reduce starts in backward).
PRE_COLLECTIVE = ("dataload_wait", "h2d", "forward")
#: Host time, and change of memory, outside every phase (as :data:`tracekit.capture.profiler.OTHER`).
OTHER = "other"


class PhaseMemoryRecord(msgspec.Struct, frozen=True):
    """Memory at a phase's first start and last end in one step, and the sum of its changes."""

    start: dict[str, int] = {}
    end: dict[str, int] = {}
    delta: dict[str, int] = {}


class StepRecord(msgspec.Struct, frozen=True):
    """One measured step of one rank: its host time and the time of each phase; memory at the
    step's start and end and around each phase; bytes autograd saved in forward."""

    step: int
    step_ns: int
    phases_ns: dict[str, int]
    #: the CPU time the rank's process used over the step (None in a file that predates it)
    cpu_ns: int | None = None
    memory_start: dict[str, int] = {}
    memory_end: dict[str, int] = {}
    phase_memory: dict[str, PhaseMemoryRecord] = {}
    saved_tensor_bytes: int | None = None


class PhaseRecord(msgspec.Struct, frozen=True):
    """``phases.rank{r}.json`` (see :meth:`tracekit.capture.Profiler.phase_record`)."""

    rank: int
    world_size: int | None = 1
    samples_per_step: int | None = None
    warmup_steps: int = 0
    steps: list[StepRecord] = []
    memory: Memory = msgspec.field(default_factory=Memory)
    notes: list[CaptureNote] = []
    #: where the rank's time went: its process's age (s) at each mark (:attr:`Profiler.timeline`;
    #: {} in files that predate it, or where the age is unknown)
    timeline_s: dict[str, float] = {}


def read_phase_files(out_dir: Path) -> list[PhaseRecord]:
    """Every ``phases.rank{r}.json`` in ``out_dir``, by rank."""
    records = []
    for path in sorted(out_dir.glob("phases.rank*.json")):
        try:
            records.append(msgspec.json.decode(path.read_bytes(), type=PhaseRecord))
        except OSError as exc:
            raise InputError(f"unreadable phase timings ({exc.strerror})", path=path) from None
        except msgspec.DecodeError as exc:  # also a ValidationError: a field of the wrong type
            raise InputError(f"unreadable phase timings ({exc})", path=path) from None
    return sorted(records, key=lambda r: r.rank)


def _phase_names(records: Sequence[PhaseRecord]) -> list[str]:
    """Every phase, in the order first seen."""
    names: dict[str, None] = {}
    for rec in records:
        for step in rec.steps:
            names.update(dict.fromkeys(step.phases_ns))
    return list(names)


def _step_stats(values: Sequence[int]) -> StepStats:
    if not values:
        return StepStats()
    return StepStats(mean_ns=mean(values), median_ns=median(values), p95_ns=p95(values), count=len(values))


def _phase_stats(records: Sequence[PhaseRecord], names: Iterable[str], *, mean_step: float) -> list[PhaseStats]:
    phases = []
    for name in names:
        values = [s.phases_ns.get(name, 0) for rec in records for s in rec.steps]
        avg = mean(values)
        phases.append(
            PhaseStats(
                phase=name,
                mean_ns=avg,
                median_ns=median(values),
                p95_ns=p95(values),
                share_pct=100.0 * avg / mean_step if mean_step else None,
            )
        )
    return phases


def _has(steps: Sequence[StepRecord], key: str) -> bool:
    """Whether every step has ``key`` at its start and end."""
    return bool(steps) and all(key in s.memory_start and key in s.memory_end for s in steps)


def phase_deltas(steps: Sequence[StepRecord], names: Iterable[str], key: str) -> tuple[dict[str, float], float]:
    """Per phase, the mean change of ``key`` over ``steps`` (``other``: the change outside
    every phase), and the mean change over the step; the former add up to the latter."""
    order = [n for n in names if n != OTHER] + [OTHER]
    per_step: list[dict[str, int]] = []
    changes = []
    for s in steps:
        change = s.memory_end[key] - s.memory_start[key]
        deltas = {n: m.delta.get(key, 0) for n, m in s.phase_memory.items() if n != OTHER}
        deltas[OTHER] = change - sum(deltas.values())
        order += [n for n in deltas if n not in order]
        per_step.append(deltas)
        changes.append(change)
    return {n: mean([d.get(n, 0) for d in per_step]) for n in order}, mean(changes)


def _rank_phases(rec: PhaseRecord, names: Sequence[str]) -> RankPhases:
    if not rec.steps:
        return RankPhases(rank=rec.rank, steps=0, memory=rec.memory)
    means = {n: mean([s.phases_ns.get(n, 0) for s in rec.steps]) for n in names}
    key = next((k for k in (ALLOCATED, RSS) if _has(rec.steps, k)), None)
    deltas: dict[str, float] = {}
    reserved: dict[str, float] = {}
    change = None
    if key is not None:
        deltas, change = phase_deltas(rec.steps, names, key)
        if key == ALLOCATED and _has(rec.steps, RESERVED):
            reserved = phase_deltas(rec.steps, names, RESERVED)[0]
    saved = [s.saved_tensor_bytes for s in rec.steps if s.saved_tensor_bytes is not None]
    cpu = [s.cpu_ns for s in rec.steps]
    return RankPhases(
        rank=rec.rank,
        steps=len(rec.steps),
        step_mean_ns=mean([s.step_ns for s in rec.steps]),
        phase_means_ns=means,
        memory=rec.memory,
        pre_collective_mean_ns=sum(means.get(n, 0.0) for n in PRE_COLLECTIVE),
        phase_memory_measure=key,
        phase_memory_deltas=deltas,
        phase_reserved_deltas=reserved,
        step_memory_change_bytes=change,
        saved_tensor_bytes_mean=mean(saved) if saved else None,
        saved_tensor_bytes_max=max(saved) if saved else None,
        step_cpu_ns=[c for c in cpu if c is not None] if all(c is not None for c in cpu) else [],
    )


def _max(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _memory_phases(ranks: Sequence[RankPhases]) -> list[PhaseMemory]:
    """Each phase's delta averaged over ``ranks`` (those that measured the same quantity)."""
    order: dict[str, None] = {}
    for r in ranks:
        order.update(dict.fromkeys(r.phase_memory_deltas))
    phases = []
    for name in order:
        values = [(r.phase_memory_deltas.get(name, 0.0), r.rank) for r in ranks]
        reserved = [r.phase_reserved_deltas.get(name, 0.0) for r in ranks if r.phase_reserved_deltas]
        top, top_rank = max(values, key=lambda v: v[0])
        phases.append(
            PhaseMemory(
                phase=name,
                delta_bytes_mean=mean([v for v, _ in values]),
                reserved_delta_bytes_mean=mean(reserved) if reserved else None,
                max_rank=top_rank,
                delta_bytes_max=top,
            )
        )
    return phases


def _memory_summary(per_rank: Sequence[RankPhases]) -> tuple[MemorySummary | None, list[PhaseMemory]]:
    """The worst rank's peaks and the per-phase deltas over ranks (None without any memory)."""
    measure = next((r.phase_memory_measure for r in per_rank if r.phase_memory_measure is not None), None)
    peaks = [r for r in per_rank if r.memory.peak_bytes is not None]
    if not peaks and measure is None:
        return None, []
    worst = max(peaks, key=lambda r: r.memory.peak_bytes or 0) if peaks else None
    by = None
    if worst is not None:
        device = worst.memory.peak_allocated_bytes is not None
        by = WorstBy.DEVICE_ALLOCATED if device else WorstBy.RSS
    measured = [r for r in per_rank if measure is not None and r.phase_memory_measure == measure]
    changes = [r.step_memory_change_bytes for r in measured if r.step_memory_change_bytes is not None]
    saved = [r.saved_tensor_bytes_mean for r in per_rank if r.saved_tensor_bytes_mean is not None]
    summary = MemorySummary(
        device=worst.memory.device if worst is not None else None,
        worst_rank=worst.rank if worst is not None else None,
        worst_rank_by=by,
        peak_allocated_bytes=_max(r.memory.peak_allocated_bytes for r in per_rank),
        peak_reserved_bytes=_max(r.memory.peak_reserved_bytes for r in per_rank),
        peak_rss_bytes=_max(r.memory.peak_rss_bytes for r in per_rank),
        phase_memory_measure=measure,
        step_memory_change_bytes_mean=mean(changes) if changes else None,
        saved_tensor_bytes_mean=mean(saved) if saved else None,
        saved_tensor_bytes_max=_max(r.saved_tensor_bytes_max for r in per_rank),
    )
    return summary, _memory_phases(measured)


def _throughput(per_rank: Sequence[RankPhases], *, samples: int | None, world: int) -> Throughput:
    """The last rank to arrive, whether it is a straggler, and the throughput the longest step sets."""
    timed = [(r.rank, r.pre_collective_mean_ns, r.step_mean_ns) for r in per_rank if r.step_mean_ns]
    if not timed:
        return Throughput()
    latest = max(timed, key=lambda r: r[1])
    longest_step = max(step for _, _, step in timed)
    others = [pre for rank, pre, _ in timed if rank != latest[0]]
    median_other = median(others) if others else None
    lateness = None if median_other is None else latest[1] - median_other
    steps_per_s = 1e9 / longest_step
    return Throughput(
        slowest_rank=latest[0],
        slowest_rank_pre_collective_mean_ns=latest[1],
        median_other_pre_collective_mean_ns=median_other,
        lateness_ns=lateness,
        is_straggler=lateness is not None and lateness > STRAGGLER_MIN_SHARE * longest_step,
        slowest_rank_by=SlowestBy.PRE_COLLECTIVE,
        pre_collective_phases=list(PRE_COLLECTIVE),
        step_mean_ns=longest_step,
        steps_per_s=steps_per_s,
        global_samples_per_s=steps_per_s * samples * world if samples else None,
        samples_per_step_per_rank=samples,
        straggler_min_share=STRAGGLER_MIN_SHARE,
    )


def summarize(
    records: Sequence[PhaseRecord],
    *,
    config: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    notes: Sequence[CaptureNote | str] = (),
) -> CaptureSummary:
    """The summary of per-rank phase records; ``config``, ``environment`` and ``notes`` are
    stored as given (the capture configuration, versions and devices, remarks to show: a
    string is a note in the caller's words), the records' own notes after them, each once."""
    if not records:
        raise InputError("no phase timings to summarize")
    records = sorted(records, key=lambda r: r.rank)
    names = _phase_names(records)
    step = _step_stats([s.step_ns for rec in records for s in rec.steps])
    per_rank = [_rank_phases(rec, names) for rec in records]
    world = max(rec.world_size or 1 for rec in records)
    memory, memory_phases = _memory_summary(per_rank)
    given = [CaptureNote(kind=CaptureNoteKind.TEXT, text=n) if isinstance(n, str) else n for n in notes]
    every_note = dict.fromkeys([*given, *(n for rec in records for n in rec.notes)])
    return CaptureSummary(
        config=config,
        environment=environment,
        notes=list(every_note),
        world_size=world,
        ranks=[rec.rank for rec in records],
        measured_steps=len(records[0].steps),
        step=step,
        phases=_phase_stats(records, names, mean_step=step.mean_ns or 0.0),
        per_rank=per_rank,
        throughput=_throughput(per_rank, samples=records[0].samples_per_step, world=world),
        memory=memory,
        memory_phases=memory_phases,
    )


def write_summary(
    out_dir: str | Path,
    *,
    config: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    notes: Sequence[CaptureNote | str] = (),
) -> CaptureSummary:
    """Summarize the phase files in ``out_dir`` into ``summary.json``; returns the summary."""
    folder = Path(out_dir)
    summary = summarize(read_phase_files(folder), config=config, environment=environment, notes=notes)
    files.write_bytes_atomic(folder / files.SUMMARY, dump_capture_summary(summary))
    return summary
