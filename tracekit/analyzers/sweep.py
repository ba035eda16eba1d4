"""The sweep's matrix: a pure function of ``sweep.json`` (and traced cells' verdicts).

One row per grid cell over its repeats: the slowest rank's mean step, global samples/s
(global batch over that step), the worst rank's peaks, the fragmentation gap (reserved
minus allocated device memory), the peak as a share of the memory capacity (the GPU's
memory, or ``--mem-budget-gb``) and whether it leaves the headroom free, the verdict of a
traced cell, and its probe's outcome. The best cell is the fastest (samples/s) of those
that ran in every repeat within the headroom; its margin over the runner-up is compared with
:func:`tracekit.analyzers.compare.compare_values` on per-step throughput (each step's
samples over its slowest rank's time), the repeats as runs, so the interval carries
step-to-step and, with ``--repeats``, run-to-run variation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np

from tracekit import __version__
from tracekit.analyzers.compare import compare_values
from tracekit.results.sweep import Best, CellRun, CellStatus, MatrixNote, MatrixRow, SweepMatrix
from tracekit.results.vocab import CapacitySource, MatrixNoteKind, Unit

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from tracekit.results.analysis import Finding
    from tracekit.results.sweep import ProbeRecord, Sweep

__all__ = ["HEADROOM_PCT", "build_matrix"]

#: The share of memory capacity a cell must leave free to be chosen.
HEADROOM_PCT: Final = 10.0
#: How a row's status is picked from its runs: the first of these any run has.
_WORST: Final[tuple[CellStatus, ...]] = ("failed", "timeout", "oom", "ok")
_BATCH: Final = "batch_size"


def _max(values: Sequence[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _probe_of(row_values: Mapping[str, str], probes: Sequence[ProbeRecord]) -> ProbeRecord | None:
    base = {k: v for k, v in row_values.items() if k != _BATCH}
    return next((p for p in probes if p.values == base), None)


def _row(
    name: str,
    runs: Sequence[CellRun],
    *,
    capacity: int | None,
    headroom_pct: float,
    verdict: Finding | None,
    probes: Sequence[ProbeRecord],
) -> MatrixRow:
    first = runs[0]
    status = next(s for s in _WORST if s == "ok" or any(r.status == s for r in runs))
    bad = next((r for r in runs if r.status == status), None) if status != "ok" else None
    ok = [r for r in runs if r.status == "ok"]
    means = [r.step_mean_ns for r in ok if r.step_mean_ns is not None]
    step = float(np.mean(means)) if means else None
    #: A step timed as 0 ns (under the clock's resolution) has no samples/s: the cell's throughput is undefined.
    timed = step is not None and step > 0 and all(s > 0 for r in ok for s in r.step_ns)
    peak = _max([r.peak_bytes for r in runs])
    pct = 100.0 * peak / capacity if peak is not None and capacity else None
    probe = _probe_of(first.values, probes)
    return MatrixRow(
        cell=name,
        values=first.values,
        backend=first.backend,
        batch_size=first.batch_size,
        global_batch=first.global_batch,
        world_size=first.world_size,
        status=status,
        reason=bad.reason if bad is not None else None,
        runs=len(ok),
        step_ns=step,
        samples_per_s=first.global_batch * 1e9 / step if timed and step else None,
        memory_device=next((r.memory_device for r in runs if r.memory_device), None),
        peak_allocated_bytes=_max([r.peak_allocated_bytes for r in runs]),
        peak_reserved_bytes=_max([r.peak_reserved_bytes for r in runs]),
        peak_rss_bytes=_max([r.peak_rss_bytes for r in runs]),
        gap_bytes=_max([r.gap_bytes for r in runs]),
        peak_pct=round(pct, 2) if pct is not None else None,
        within_headroom=None if pct is None else pct <= 100.0 - headroom_pct,
        verdict=verdict.bound if verdict is not None else None,
        verdict_share_pct=verdict.share_pct if verdict is not None else None,
        probe_last_fit=probe.last_fit if probe else None,
        probe_first_oom=probe.first_oom if probe else None,
        probe_error=(probe.error or probe.failure) if probe else None,
        probe_stopped=probe.stopped if probe else None,
    )


def _per_sample(runs: Sequence[CellRun]) -> list[list[float]]:
    """Each ok run's per-step time per sample (ns): 1e9 over it is that step's samples/s."""
    return [[s / r.global_batch for s in r.step_ns] for r in runs if r.status == "ok" and r.step_ns]


def _samples_per_s(m: np.ndarray) -> np.ndarray:
    return np.asarray(1e9 / m.mean(axis=1), dtype=float)


def _best(rows: Sequence[MatrixRow], runs: Mapping[str, Sequence[CellRun]]) -> Best | None:
    eligible = [r for r in rows if r.status == "ok" and r.samples_per_s is not None and r.within_headroom is not False]
    ranked = sorted(eligible, key=lambda r: -(r.samples_per_s or 0.0))
    if not ranked:
        return None
    best = ranked[0]
    if len(ranked) == 1:
        return Best(cell=best.cell, samples_per_s=best.samples_per_s or 0.0)
    second = ranked[1]
    margin = compare_values(
        "throughput",
        Unit.SAMPLES_PER_S,
        _per_sample(runs[second.cell]),
        _per_sample(runs[best.cell]),
        lower_is_better=False,
        stat=_samples_per_s,
    )
    return Best(cell=best.cell, samples_per_s=best.samples_per_s or 0.0, runner_up=second.cell, margin=margin)


def build_matrix(
    sweep: Sweep,
    *,
    source: str,
    headroom_pct: float = HEADROOM_PCT,
    verdicts: Mapping[str, Finding] | None = None,
) -> SweepMatrix:
    """The matrix of ``sweep`` (``source``: its folder); ``verdicts``: the primary finding of
    each traced cell that was analyzed, by cell name."""
    verdicts = verdicts or {}
    what: CapacitySource | None
    if sweep.mem_budget_bytes is not None:
        capacity, what = sweep.mem_budget_bytes, CapacitySource.BUDGET
    elif sweep.device_memory_bytes is not None:
        capacity, what = sweep.device_memory_bytes, CapacitySource.DEVICE
    else:
        capacity, what = None, None
    by_cell: dict[str, list[CellRun]] = {}
    for run in sweep.runs:
        if not run.probe:
            by_cell.setdefault(run.cell, []).append(run)
    rows = [
        _row(
            name,
            by_cell[name],
            capacity=capacity,
            headroom_pct=headroom_pct,
            verdict=verdicts.get(name),
            probes=sweep.probes,
        )
        for name in sweep.cells
        if name in by_cell
    ]
    notes = []
    if capacity is None:
        notes.append(MatrixNote(kind=MatrixNoteKind.NO_CAPACITY))
    if any(r.memory_device == "cpu" for r in rows):
        notes.append(MatrixNote(kind=MatrixNoteKind.CPU_RSS))
    if not sweep.finished:
        notes.append(MatrixNote(kind=MatrixNoteKind.UNFINISHED, ran=len(rows), cells=len(sweep.cells)))
    return SweepMatrix(
        tracekit_version=__version__,
        source=source,
        grid=sweep.grid,
        repeats=sweep.repeats,
        trace=sweep.trace,
        finished=sweep.finished,
        rows=rows,
        probes=sweep.probes,
        headroom_pct=headroom_pct,
        capacity_bytes=capacity,
        capacity_source=what,
        best=_best(rows, by_cell),
        deepspeed=any(r.backend.startswith(("ZeRO", "DeepSpeed")) for r in rows),
        notes=notes,
    )
