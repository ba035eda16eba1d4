"""The sweep's matrix as shared tables and sentences, for every renderer (terminal, Markdown,
HTML): one row per cell, the cells that did not run, the probes, and the lines above them
(the best cell and its margin, the DeepSpeed caveat, notes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.reports import compare_text as ct
from tracekit.reports.document import Table
from tracekit.reports.tables import ms
from tracekit.results.vocab import CapacitySource, MatrixNoteKind, ProbeStop

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.results.sweep import MatrixNote, MatrixRow, ProbeRecord, SweepMatrix

__all__ = ["DEEPSPEED_CAVEAT", "best_line", "cells_table", "failures_table", "lines", "probes_table", "title"]

GIB: Final = float(1 << 30)
#: Why per-phase shares of a DeepSpeed cell do not compare with other backends'.
DEEPSPEED_CAVEAT: Final = (
    "DeepSpeed runs its optimizer work inside backward hooks (ZeRO's gradient partitioning and step fuse into "
    "backward): per-phase shares do not compare across backends, only total step time and samples/s do."
)


#: What the memory headroom is a share of, by :class:`CapacitySource`.
CAPACITIES: Final = {CapacitySource.DEVICE: "device memory", CapacitySource.BUDGET: "memory budget"}
#: Why a probe ended without finding an OOM, from its record.
PROBE_STOPS: Final[dict[ProbeStop, Callable[[ProbeRecord], str]]] = {
    ProbeStop.FAILED: lambda p: f"batch size {p.failed_batch}: {p.failure}",
    ProbeStop.NONE_FIT: lambda _: "no batch size fit",
    ProbeStop.NO_OOM: lambda p: f"no OOM up to batch size {p.last_fit}",
}
#: The remarks beside the matrix, from their figures.
MATRIX_NOTES: Final[dict[MatrixNoteKind, Callable[[MatrixNote], str]]] = {
    MatrixNoteKind.NO_CAPACITY: lambda _: (
        "no memory capacity known (CPU run without --mem-budget-gb): the headroom is not checked"
    ),
    MatrixNoteKind.CPU_RSS: lambda _: (
        "CPU run: peak memory is the worst rank's peak RSS of its whole process (torch included)"
    ),
    MatrixNoteKind.UNFINISHED: lambda n: (
        f"the sweep did not finish: {n.ran} of {n.cells} cells ran (--resume continues it)"
    ),
}


def capacity(m: SweepMatrix) -> str:
    """What the headroom is a share of ('device memory'); '' when no capacity is known."""
    return "" if m.capacity_source is None else CAPACITIES[m.capacity_source]


def probe_stop(p: ProbeRecord) -> str:
    """Why a probe ended without finding an OOM ('no OOM up to batch size 24'); '' when it found one."""
    return "" if p.stopped is None else PROBE_STOPS[p.stopped](p)


def matrix_note(n: MatrixNote) -> str:
    """One remark beside the matrix, in words."""
    return MATRIX_NOTES[n.kind](n)


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value / GIB:,.2f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else ct.num(value)


def _cuda(m: SweepMatrix) -> bool:
    return any(r.memory_device == "cuda" for r in m.rows)


def title(m: SweepMatrix) -> str:
    """'Sweep of 6 cells (accelerate_config x batch_size), 1 repeat'."""
    axes = " x ".join(a.key for a in m.grid)
    repeats = f"{m.repeats} repeat{'s' if m.repeats != 1 else ''}"
    return f"Sweep of {len(m.rows)} cell(s) ({axes}), {repeats}{'' if m.trace else ', no trace'}"


def _verdict(row: MatrixRow) -> str:
    if row.verdict is None:
        return "-"
    return row.verdict if row.verdict_share_pct is None else f"{row.verdict} ({row.verdict_share_pct:.0f}%)"


def _probe(row: MatrixRow) -> str:
    if row.probe_last_fit is None and row.probe_first_oom is None:
        return "-"
    fit = "-" if row.probe_last_fit is None else str(row.probe_last_fit)
    oom = "none" if row.probe_first_oom is None else str(row.probe_first_oom)
    return f"{fit} / {oom}"


def _status(row: MatrixRow, best: str | None) -> str:
    if row.status != "ok":
        return row.status.upper()
    if row.cell == best:
        return "ok, best"
    return "ok" if row.within_headroom is not False else "ok, over headroom"


def cells_table(m: SweepMatrix) -> Table:
    """One row per cell: backend, batch, step time, throughput, memory, verdict, status, probe."""
    cuda = _cuda(m)
    memory = ("peak alloc GiB", "peak reserved GiB", "gap GiB") if cuda else ("peak RSS GiB",)
    share = (f"% of {capacity(m)}",) if m.capacity_source else ()
    probe = ("probe fit / OOM",) if m.probes else ()
    axes = tuple(a.key for a in m.grid if a.key != "batch_size")
    columns = (*axes, "backend", "batch/rank", "global batch", "ms/step", "samples/s", *memory, *share)
    columns += ("verdict", "status", *probe)
    best = m.best.cell if m.best else None
    rows = []
    for r in m.rows:
        mem = (
            (_gib(r.peak_allocated_bytes), _gib(r.peak_reserved_bytes), _gib(r.gap_bytes))
            if cuda
            else (_gib(r.peak_rss_bytes),)
        )
        pct = ("-" if r.peak_pct is None else f"{r.peak_pct:.1f}%",) if share else ()
        rows.append(
            (
                *(r.values.get(k, "-") for k in axes),
                r.backend,
                str(r.batch_size),
                str(r.global_batch),
                ms(r.step_ns),
                _rate(r.samples_per_s),
                *mem,
                *pct,
                _verdict(r),
                _status(r, best),
                *((_probe(r),) if probe else ()),
            )
        )
    numeric = tuple(c not in (*axes, "backend", "verdict", "status", "probe fit / OOM") for c in columns)
    what = "peak reserved device memory" if cuda else "peak RSS"
    caption = (
        f"ms/step: the slowest rank's mean step, over {m.repeats} repeat(s); samples/s: global batch over it. "
        f"Memory: the worst rank's peaks"
        + (f"; % of {capacity(m)}: {what} over {_gib(m.capacity_bytes)} GiB" if m.capacity_source else "")
        + ("; probe: the largest batch per rank that fit / the first that ran out of memory" if probe else "")
        + "."
    )
    return Table("sweep_cells", title(m), columns, tuple(rows), caption, numeric)


def failures_table(m: SweepMatrix) -> Table:
    """The cells that did not run in every repeat, and why."""
    rows = tuple((r.cell, r.status.upper(), r.reason or "-") for r in m.rows if r.status != "ok")
    return Table(
        "sweep_failures",
        "Cells that did not run",
        ("cell", "status", "reason"),
        rows,
        empty="Every cell ran.",
        numeric=(False, False, False),
    )


def probes_table(m: SweepMatrix) -> Table:
    """Each probe: the batch sizes it tried, the last fit, the first OOM and its error."""
    rows = tuple(
        (
            p.base or "(the config)",
            ", ".join(map(str, p.tried)) or "-",
            "-" if p.last_fit is None else str(p.last_fit),
            "-" if p.first_oom is None else str(p.first_oom),
            p.error or probe_stop(p) or "-",
        )
        for p in m.probes
    )
    return Table(
        "sweep_probes",
        "OOM probe: the batch size per rank walked up to the first OOM",
        ("other-cell", "tried", "largest that fit", "first OOM", "error"),
        rows,
        empty="No probe ran (--probe-oom).",
        numeric=(False, False, True, True, False),
    )


def best_line(m: SweepMatrix) -> str:
    """The best cell under the headroom and its margin over the runner-up, with the interval."""
    room = (
        f"leaving {m.headroom_pct:g}% of {capacity(m)} free"
        if m.capacity_source
        else "(no memory capacity known: headroom not checked)"
    )
    if m.best is None:
        return f"No cell ran {room}."
    b = m.best
    row = next(r for r in m.rows if r.cell == b.cell)
    head = (
        f"Best {room}: {b.cell} ({row.backend}, global batch {row.global_batch}), {ct.num(b.samples_per_s)} samples/s"
    )
    if b.runner_up is None or b.margin is None:
        return head + "; no runner-up."
    return f"{head}; against the runner-up {b.runner_up}: {ct.change(b.margin)}."


def lines(m: SweepMatrix) -> list[str]:
    """The sentences above the tables: the best cell, the DeepSpeed caveat, notes."""
    out = [best_line(m)]
    if m.deepspeed:
        out.append(DEEPSPEED_CAVEAT)
    return out + [matrix_note(n) for n in m.notes]
