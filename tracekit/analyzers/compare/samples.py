"""What a comparison reads from one analysis: per-step values (each step the mean over ranks) and
the figures measured once per run (peaks). NumPy only: ``tracekit compare`` of two saved analyses
never imports polars (a fifth of its time)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tracekit.results.vocab import MeasuredOn, PeakSource, SyncMeasure

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.results.analysis import Analysis


def measured_on(analysis: Analysis) -> MeasuredOn:
    """The timeline the analysis's costs are shares of."""
    return analysis.verdict.measured_on


@dataclass(frozen=True)
class StepRows:
    """The measured steps of one run, a row each: rank, key (the step number, or its ordinal on
    the rank), duration_ns."""

    rank: np.ndarray
    key: np.ndarray
    duration_ns: np.ndarray

    def of_rank(self, rank: int) -> StepRows:
        """The rows of ``rank``."""
        mine = self.rank == rank
        return StepRows(rank=self.rank[mine], key=self.key[mine], duration_ns=self.duration_ns[mine])

    @staticmethod
    def joined(parts: Sequence[StepRows]) -> StepRows:
        """The rows of ``parts``, one after another."""
        if not parts:
            return StepRows(rank=np.empty(0, dtype=np.int64), key=np.empty(0, dtype=np.int64), duration_ns=np.empty(0))
        return StepRows(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("rank", "key", "duration_ns")))


def steps_frame(analysis: Analysis) -> StepRows:
    """The measured steps of ``analysis`` (:class:`StepRows`)."""
    rows = analysis.steps.per_step
    rank = np.array([r.rank for r in rows], dtype=np.int64)
    start = np.array([r.start_ns for r in rows], dtype=np.int64)
    # a step without a number is keyed by its place on its rank, in time order (ties: in row order)
    ordinal = np.empty(len(rows), dtype=np.int64)
    order = np.lexsort((np.arange(len(rows)), start, rank))
    if order.size:
        first = np.r_[True, rank[order][1:] != rank[order][:-1]]
        begins = np.maximum.accumulate(np.where(first, np.arange(order.size), 0))
        ordinal[order] = np.arange(order.size) - begins
    key = np.array(
        [r.step if r.step is not None else o for r, o in zip(rows, ordinal.tolist(), strict=True)], dtype=np.int64
    )
    return StepRows(rank=rank, key=key, duration_ns=np.array([float(r.duration_ns) for r in rows], dtype=float))


def _groups(key: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row's group (the keys in ascending order) and the number of groups."""
    _, group = np.unique(key, return_inverse=True)
    return group.reshape(-1), int(group.max()) + 1 if group.size else 0


def _sums(key: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per key, in key order: the number of rows and each of ``values`` summed (exactly: the
    values are whole nanoseconds, far under 2**53)."""
    group, n = _groups(key)
    counts = np.bincount(group, minlength=n).astype(float)
    return counts, [np.bincount(group, weights=np.asarray(v, dtype=float), minlength=n) for v in values]


def per_step(steps: StepRows, how: str = "mean") -> np.ndarray:
    """One duration per step key: the mean (or max) over ranks, in step order."""
    if steps.key.size == 0:
        return np.empty(0)
    if how == "mean":
        counts, (total,) = _sums(steps.key, steps.duration_ns)
        mean: np.ndarray = total / counts
        return mean
    group, n = _groups(steps.key)
    most = np.full(n, -np.inf)
    np.maximum.at(most, group, steps.duration_ns)
    return most


def _keyed(rows: Sequence[Any], *fields: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """The step keys of the rows that have one, and ``fields`` of those rows."""
    kept = [r for r in rows if r.step is not None]
    return np.array([r.step for r in kept], dtype=np.int64), [np.array([getattr(r, f) for r in kept]) for f in fields]


def whole_share(analysis: Analysis, column: str) -> float | None:
    """``column``'s share of the measured windows of every rank (the whole trace when no steps)."""
    section = analysis.gpu_breakdown if analysis.run.has_gpu else analysis.host_breakdown
    if section is None or not section.per_rank:
        return None
    window = sum(r.window_ns for r in section.per_rank)
    return 100.0 * sum(getattr(r, column) for r in section.per_rank) / window if window else None


def _mean_per_step(rows: Sequence[Any], column: str) -> np.ndarray:
    """Per step key, in key order: the mean of ``column`` over the rows (ranks) of that step."""
    key, (value,) = _keyed(rows, column)
    if key.size == 0:
        return np.empty(0)
    counts, (total,) = _sums(key, value)
    mean: np.ndarray = total / counts
    return mean


def share(column: str) -> Callable[[Analysis], np.ndarray]:
    """Per step: ``column``'s share of the step's windows over every rank, percent."""

    def values(analysis: Analysis) -> np.ndarray:
        section = analysis.gpu_breakdown if analysis.run.has_gpu else analysis.host_breakdown
        if section is None or not section.per_step:
            return np.empty(0)
        key, (part, window) = _keyed(section.per_step, column, "window_ns")
        if key.size == 0:
            return np.empty(0)
        _, (part_sum, window_sum) = _sums(key, part, window)
        with np.errstate(divide="ignore", invalid="ignore"):
            pct: np.ndarray = 100.0 * part_sum / window_sum
        measured: np.ndarray = pct[~np.isnan(pct)]
        return measured

    return values


def overlap(column: str) -> Callable[[Analysis], np.ndarray]:
    """Per step: the mean over ranks of an overlap ``column`` (``overlap_pct``: of the step's comm)."""

    def values(analysis: Analysis) -> np.ndarray:
        rows = analysis.overlap.per_step
        if not rows:
            return np.empty(0)
        if column == "overlap_pct":
            key, (comm, overlapped) = _keyed(rows, "comm_ns", "overlapped_ns")
            if key.size == 0:
                return np.empty(0)
            _, (comm_sum, overlapped_sum) = _sums(key, comm, overlapped)
            some = comm_sum > 0
            pct: np.ndarray = 100.0 * overlapped_sum[some] / comm_sum[some]
            return pct
        return _mean_per_step(rows, column)

    return values


def sync_measure(analysis: Analysis) -> SyncMeasure:
    """What counts as a sync of this run: the host's blocking calls on a GPU run, else host reads."""
    return SyncMeasure.SYNC_CALLS if measured_on(analysis) is MeasuredOn.GPU else SyncMeasure.HOST_READS


def syncs(analysis: Analysis) -> np.ndarray:
    """Per step: syncs (by :func:`sync_measure`), the mean over ranks."""
    rows = analysis.host_syncs.per_step
    if not rows:
        return np.empty(0)
    return _mean_per_step(rows, "sync_calls" if measured_on(analysis) is MeasuredOn.GPU else "sync_ops")


def phase_names(runs: Sequence[Analysis]) -> list[str]:
    """The phases (outermost annotations) of ``runs``, most time first."""
    seen: dict[str, float] = {}
    for a in runs:
        for row in a.annotations.summary:
            seen[row.name] = seen.get(row.name, 0.0) + row.cpu_ns
    return sorted(seen, key=lambda n: (-seen[n], n))


def phase_series(analysis: Analysis) -> dict[str, np.ndarray]:
    """Each phase's time per step (the mean over ranks), in step order, from one pass over the rows."""
    rows = analysis.annotations.per_step
    if not rows:
        return {}
    out = {}
    names = np.array([r.name for r in rows], dtype=object)
    keys = np.array([r.step for r in rows], dtype=np.int64)
    cpu = np.array([float(r.cpu_ns) for r in rows], dtype=float)
    for name in sorted(set(names.tolist())):
        mine = names == name
        counts, (total,) = _sums(keys[mine], cpu[mine])
        out[str(name)] = total / counts
    return out


def peak(analysis: Analysis) -> tuple[float | None, PeakSource | None]:
    """The worst rank's peak and where it was read: device memory allocated, else the capture's peak RSS."""
    memory = analysis.memory
    if memory is not None and memory.per_device:
        peaks = [r.peak_allocated_bytes for r in memory.per_device if r.peak_allocated_bytes is not None]
        if peaks:
            return float(max(peaks)), PeakSource.COUNTERS
    if analysis.capture is not None:
        values = [p.memory.peak_bytes for p in analysis.capture.per_rank if p.memory.peak_bytes is not None]
        if values:
            allocated = analysis.capture.per_rank[0].memory.peak_allocated_bytes is not None
            return float(max(values)), PeakSource.CAPTURE_ALLOCATED if allocated else PeakSource.CAPTURE_RSS
    return None, None


def reserved(analysis: Analysis) -> float | None:
    """The worst rank's peak of memory reserved."""
    memory = analysis.memory
    if memory is not None:
        peaks = [r.peak_reserved_bytes for r in memory.per_device if r.peak_reserved_bytes is not None]
        if peaks:
            return float(max(peaks))
    return None


def gap(analysis: Analysis) -> float | None:
    """The largest fragmentation gap at a peak (reserved minus allocated when allocated peaked)."""
    memory = analysis.memory
    gaps = [r.gap_at_peak_bytes for r in memory.per_device if r.gap_at_peak_bytes is not None] if memory else []
    return float(max(gaps)) if gaps else None


def samples_per_step(analysis: Analysis) -> int | None:
    """Samples of one step over every rank, from the capture summary."""
    capture = analysis.capture
    if capture is None or capture.throughput.samples_per_step_per_rank is None:
        return None
    return capture.throughput.samples_per_step_per_rank * max(1, capture.world_size)
