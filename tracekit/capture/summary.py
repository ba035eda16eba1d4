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
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from tracekit.capture import files
from tracekit.errors import InputError
from tracekit.results.capture import (
    CaptureSummary,
    Memory,
    PhaseStats,
    RankPhases,
    StepStats,
    Throughput,
    dump_capture_summary,
)
from tracekit.results.stats import mean, median, p95
from tracekit.results.thresholds import STRAGGLER_MIN_SHARE

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

#: Phases that run before a step's first collective (DDP's all-reduce starts in backward).
PRE_COLLECTIVE = ("dataload_wait", "h2d", "forward")


class StepRecord(msgspec.Struct, frozen=True):
    """One measured step of one rank: its host time and the time of each phase."""

    step: int
    step_ns: int
    phases_ns: dict[str, int]


class PhaseRecord(msgspec.Struct, frozen=True):
    """``phases.rank{r}.json`` (see :meth:`tracekit.capture.Profiler.phase_record`)."""

    rank: int
    world_size: int | None = 1
    samples_per_step: int | None = None
    warmup_steps: int = 0
    steps: list[StepRecord] = []
    memory: Memory = msgspec.field(default_factory=Memory)


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


def _rank_phases(rec: PhaseRecord, names: Iterable[str]) -> RankPhases:
    if not rec.steps:
        return RankPhases(rank=rec.rank, steps=0, memory=rec.memory)
    means = {n: mean([s.phases_ns.get(n, 0) for s in rec.steps]) for n in names}
    return RankPhases(
        rank=rec.rank,
        steps=len(rec.steps),
        step_mean_ns=mean([s.step_ns for s in rec.steps]),
        phase_means_ns=means,
        memory=rec.memory,
        pre_collective_mean_ns=sum(means.get(n, 0.0) for n in PRE_COLLECTIVE),
    )


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
        slowest_rank_by="host time before the step's first collective (" + ", ".join(PRE_COLLECTIVE) + ")",
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
    notes: Sequence[str] = (),
) -> CaptureSummary:
    """The summary of per-rank phase records; ``config``, ``environment`` and ``notes`` are
    stored as given (the capture configuration, versions and devices, remarks to show)."""
    if not records:
        raise InputError("no phase timings to summarize")
    records = sorted(records, key=lambda r: r.rank)
    names = _phase_names(records)
    step = _step_stats([s.step_ns for rec in records for s in rec.steps])
    per_rank = [_rank_phases(rec, names) for rec in records]
    world = max(rec.world_size or 1 for rec in records)
    return CaptureSummary(
        config=config,
        environment=environment,
        notes=list(notes),
        world_size=world,
        ranks=[rec.rank for rec in records],
        measured_steps=len(records[0].steps),
        step=step,
        phases=_phase_stats(records, names, mean_step=step.mean_ns or 0.0),
        per_rank=per_rank,
        throughput=_throughput(per_rank, samples=records[0].samples_per_step, world=world),
    )


def write_summary(
    out_dir: str | Path,
    *,
    config: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    notes: Sequence[str] = (),
) -> CaptureSummary:
    """Summarize the phase files in ``out_dir`` into ``summary.json``; returns the summary."""
    folder = Path(out_dir)
    summary = summarize(read_phase_files(folder), config=config, environment=environment, notes=notes)
    files.write_bytes_atomic(folder / files.SUMMARY, dump_capture_summary(summary))
    return summary
