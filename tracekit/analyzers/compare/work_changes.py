"""Work matched by name on both sides of a comparison: kernels, host operators, collectives and
syncs per step (per second of trace when a side has no steps), compared as counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.analyzers.compare.noise import COUNT_TOLERANCE, rounded
from tracekit.analyzers.compare.samples import measured_on, sync_measure
from tracekit.results.compare import Measure, SyncComparison, WorkChange
from tracekit.results.vocab import Change, MeasuredOn, SyncKind, WorkKind

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.results.analysis import Analysis

#: Work rows kept per kind, largest change of time per step first (appeared/disappeared first).
WORK_ROWS: Final = 40

_Key = tuple[WorkKind, str, SyncKind | None, str | None]  # kind, name, sync kind, phase


def _units(runs: Sequence[Analysis], per_second: bool) -> float:
    """What counts divide by: measured (rank, step) pairs, or seconds of measured window."""
    if per_second:
        return sum((a.work.window_ns if a.work else 0) for a in runs) / 1e9
    return float(sum((a.work.rank_steps if a.work else 0) for a in runs))


def _totals(runs: Sequence[Analysis]) -> dict[_Key, list[float]]:
    out: dict[_Key, list[float]] = {}
    for a in runs:
        if a.work is None:
            continue
        for row in a.work.rows:
            key = (row.kind, row.name, row.sync_kind, row.phase)
            total = out.setdefault(key, [0.0, 0.0])
            total[0] += row.count
            total[1] += row.total_ns
    return out


def _change(ca: float | None, cb: float | None) -> Change:
    if ca is None:
        return Change.APPEARED
    if cb is None:
        return Change.DISAPPEARED
    if abs(cb - ca) > COUNT_TOLERANCE * max(ca, cb):
        return Change.HIGHER if cb > ca else Change.LOWER
    return Change.SAME


def work(a: Sequence[Analysis], b: Sequence[Analysis], *, per_second: bool) -> list[WorkChange]:
    """Every name of work on either side, its count and time per unit on both, unordered."""
    ua, ub = _units(a, per_second), _units(b, per_second)
    if ua <= 0 or ub <= 0:
        return []
    ta, tb = _totals(a), _totals(b)
    categories = {(r.kind, r.name): r.category for x in (*a, *b) if x.work for r in x.work.rows if r.category}
    out: list[WorkChange] = []
    for key in ta.keys() | tb.keys():
        kind, name, sync_kind, phase = key
        ca = ta[key][0] / ua if key in ta else None
        cb = tb[key][0] / ub if key in tb else None
        na = ta[key][1] / ua if key in ta else None
        nb = tb[key][1] / ub if key in tb else None
        out.append(
            WorkChange(
                kind=WorkKind(kind),
                name=name,
                category=categories.get((kind, name)),
                phase=phase,
                sync_kind=sync_kind,
                a_count=rounded(ca),
                b_count=rounded(cb),
                a_ns=rounded(na),
                b_ns=rounded(nb),
                delta_count=rounded((cb or 0.0) - (ca or 0.0)) or 0.0,
                delta_ns=rounded((nb or 0.0) - (na or 0.0)) or 0.0,
                change=_change(ca, cb),
            )
        )
    return out


def top_work(rows: list[WorkChange]) -> list[WorkChange]:
    """Per kind: what appeared or disappeared or changed count, then the largest time changes."""
    out: list[WorkChange] = []
    for kind in WorkKind:
        if kind is WorkKind.SYNC:
            continue
        mine = [r for r in rows if r.kind is kind]
        ordered = sorted(
            mine,
            key=lambda r: (
                r.change is Change.SAME,
                -abs(r.delta_ns),
                -abs(r.delta_count),
                r.name,
                r.phase or "",
                r.sync_kind or "",
            ),
        )
        out.extend(ordered[:WORK_ROWS])
    return out


def sync_comparison(a: Analysis, syncs: Measure, work: list[WorkChange]) -> SyncComparison:
    """Syncs per step on both sides, and what issued them (by what counts as a sync on A)."""
    relevant = {SyncKind.SYNC, SyncKind.BLOCKING_COPY} if measured_on(a) is MeasuredOn.GPU else {SyncKind.HOST_READ}
    rows = sorted(
        (r for r in work if r.kind is WorkKind.SYNC and r.sync_kind in relevant),
        key=lambda r: (-max(r.a_count or 0.0, r.b_count or 0.0), r.name, r.phase or "", r.sync_kind or ""),
    )
    return SyncComparison(
        measure=sync_measure(a),
        a_per_step=syncs.a,
        b_per_step=syncs.b,
        delta=syncs.delta,
        sources=rows[:WORK_ROWS],
    )
