"""The tables of a capture summary, built once and shown everywhere.

``tracekit capture`` prints them (:func:`capture_document`), and the analysis reports
(Markdown, HTML) show them when the traces came with a ``summary.json``
(:mod:`tracekit.reports.layout`), so the two cannot disagree.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final

from tracekit.reports import capture_words as cw
from tracekit.reports.document import Document, Head, Section, Table
from tracekit.reports.tables import ms, pct
from tracekit.results.thresholds import STRAGGLER_MIN_SHARE

if TYPE_CHECKING:
    from tracekit.results.ab import ABCapture
    from tracekit.results.capture import CaptureSummary, Memory, MemorySummary, RankPhases, Throughput

__all__ = ["ab_document", "ab_table", "capture_document", "capture_tables"]

#: What the phase deltas measure, in words.
_MEASURES = {"allocated_bytes": "device memory allocated", "rss_bytes": "host resident memory (RSS)"}


#: Why the capture's phase times differ from the trace's, said where a report shows both.
BESIDE_TRACE: Final = (
    " The Phases table of the trace reads the profiler's ranges over the traced steps only, with the "
    "profiler's overhead in them; this one, the capture's own timers over every measured step: the two "
    "differ by those steps and that overhead."
)


def capture_tables(summary: CaptureSummary, *, limit: int | None = None, beside_trace: bool = False) -> list[Table]:
    """Phases (with the step row), per-rank arrival and memory, throughput and stragglers.

    With more than ``limit`` ranks the per-rank table keeps those that arrive latest. A
    summary with memory per phase (schema 1.2) adds a memory column to the phases and
    memory columns to the ranks; one without shows the tables as before. ``beside_trace``: in
    an analysis's report, beside the trace's own phase table, whose times differ (said why).
    """
    phases = _phases(summary)
    if beside_trace:
        phases = replace(phases, caption=phases.caption + BESIDE_TRACE)
    return [phases, _ranks(summary, limit), _facts(summary)]


def mib(value: float | None, *, signed: bool = False) -> str:
    """Bytes as MiB (signed: a change)."""
    if value is None:
        return "-"
    return f"{value / 2**20:+,.1f} MiB" if signed else f"{value / 2**20:,.1f} MiB"


def _phases(summary: CaptureSummary) -> Table:
    step = summary.step
    rows: list[tuple[str, ...]] = [
        (p.phase, ms(p.mean_ns), ms(p.median_ns), ms(p.p95_ns), pct(p.share_pct)) for p in summary.phases
    ]
    if step.count:
        rows.append(("step", ms(step.mean_ns), ms(step.median_ns), ms(step.p95_ns), pct(100.0)))
    columns: tuple[str, ...] = ("phase", "mean", "median", "p95", "share")
    caption = (
        "From summary.json written by tracekit capture, over every measured step of every rank. "
        "Shares are of the mean step time and sum to 100%."
    )
    memory = summary.memory
    if summary.memory_phases and memory is not None:
        deltas: dict[str, float | None] = {p.phase: p.delta_bytes_mean for p in summary.memory_phases}
        deltas["step"] = memory.step_memory_change_bytes_mean
        rows = [(*row, mib(deltas.get(row[0], 0.0), signed=True)) for row in rows]
        columns += ("memory change",)
        measure = _MEASURES.get(memory.phase_memory_measure or "", memory.phase_memory_measure or "memory")
        caption += (
            f" memory change: the mean change of {measure} per step in the phase, averaged over ranks "
            "(other: outside every phase, so the phases add up to the step's change)."
        )
    return Table(
        "capture_phases",
        f"Phases over {step.count} measured rank-steps (host ms)",
        columns,
        tuple(rows),
        caption,
        (False, *(True,) * (len(columns) - 1)),
        "No measured steps in summary.json.",
    )


def _peak(memory: Memory) -> str:
    peak = memory.peak_bytes
    if peak is None:
        return "-"
    label = "allocated" if memory.peak_allocated_bytes is not None else "RSS"
    return f"{peak / 2**20:,.0f} MiB {label}"


def _ranks(summary: CaptureSummary, limit: int | None) -> Table:
    ranks: list[RankPhases] = list(summary.per_rank)
    note = ""
    if limit is not None and len(ranks) > limit:
        ranks = sorted(ranks, key=lambda r: -r.pre_collective_mean_ns)[:limit]
        ranks.sort(key=lambda r: r.rank)
        note = f" {limit} of {len(summary.per_rank)} ranks shown (the latest to arrive); all are in summary.json."
    columns: tuple[str, ...] = ("rank", "step mean ms", "before 1st collective ms", "peak memory")
    rows = [[str(r.rank), ms(r.step_mean_ns), ms(r.pre_collective_mean_ns), _peak(r.memory)] for r in ranks]
    caption = (
        "before 1st collective: mean host ms per step before the step's first collective; "
        "the rank with the most arrives last."
    )
    if summary.memory is not None and summary.memory_phases:
        reserved = any(r.memory.peak_reserved_bytes is not None for r in ranks)
        capacity = any(r.memory.total_bytes is not None for r in ranks)
        for row, r in zip(rows, ranks, strict=True):
            row.extend([mib(r.memory.peak_reserved_bytes)] if reserved else [])
            row.extend([_headroom(r.memory)] if capacity else [])
            row.extend([mib(r.step_memory_change_bytes, signed=True), mib(r.saved_tensor_bytes_mean)])
            # on CPU the peak memory column is the peak RSS already: the RSS at the end alone
            row.extend([mib(r.memory.rss_bytes), *([mib(r.memory.peak_rss_bytes)] if reserved else [])])
        columns += (
            *(("peak reserved",) if reserved else ()),
            *(("headroom",) if capacity else ()),
            "memory change/step",
            "forward saved",
            "RSS at end",
            *(("RSS peak",) if reserved else ()),
        )
        caption += (
            " peak memory: device memory allocated since the measured steps began (GPU), else the process's "
            "peak RSS."
            + (" headroom: the device's capacity minus peak reserved." if capacity else "")
            + " memory change/step: mean change over a step. forward saved: mean bytes autograd saved for "
            "backward in forward, parameters excluded (the activations). RSS at end"
            + (
                ", RSS peak: the whole process's resident memory at the end, and its peak."
                if reserved
                else ": the process's resident memory at the end."
            )
        )
    return Table(
        "capture_ranks",
        "Capture summary: per rank",
        columns,
        tuple(tuple(row) for row in rows),
        caption + note,
        (True,) * len(columns),
        "No ranks in summary.json.",
    )


def _headroom(memory: Memory) -> str:
    room, total = memory.headroom_bytes, memory.total_bytes
    if room is None or not total:
        return "-"
    amount = f"{room / 2**30:,.1f} GiB" if room >= 10 * 2**30 else mib(room)  # an H200's 143,078 MiB is 139.7 GiB
    return f"{amount} ({100 * room / total:.1f}%)"


def _straggler(t: Throughput) -> str:
    share = t.straggler_min_share if t.straggler_min_share is not None else STRAGGLER_MIN_SHARE
    if t.slowest_rank is None:
        return "-"
    if t.median_other_pre_collective_mean_ns is None:
        return "no: a single rank, no other rank waits for it"
    if not t.is_straggler:
        return f"no: no rank reaches the step's first collective later than {share:.0%} of a step after the others"
    return (
        f"yes: rank {t.slowest_rank} arrives {ms(t.lateness_ns)} ms after the others' median, "
        f"more than {share:.0%} of the {ms(t.step_mean_ns)} ms step"
    )


def _worst(memory: MemorySummary) -> str:
    """The worst rank's peaks, in one line."""
    parts = []
    if memory.peak_allocated_bytes is not None:
        parts.append(f"{mib(memory.peak_allocated_bytes)} allocated")
    if memory.peak_reserved_bytes is not None:
        parts.append(f"{mib(memory.peak_reserved_bytes)} reserved")
    if memory.peak_rss_bytes is not None:
        parts.append(f"{mib(memory.peak_rss_bytes)} RSS")
    largest = "largest over ranks: " + (", ".join(parts) or "-")
    if memory.worst_rank is None:
        return largest
    return f"rank {memory.worst_rank} has the highest {cw.worst_by(memory)}; {largest}"


def _facts(summary: CaptureSummary) -> Table:
    t = summary.throughput
    samples = "-"
    if t.global_samples_per_s:
        per_rank = f", {t.samples_per_step_per_rank} per step per rank" if t.samples_per_step_per_rank else ""
        samples = f"{t.global_samples_per_s:,.0f} over {summary.world_size} ranks{per_rank}"
    slowest = "-"
    if t.slowest_rank is not None:
        median = t.median_other_pre_collective_mean_ns
        slowest = (
            f"rank {t.slowest_rank}, the last to arrive: {ms(t.slowest_rank_pre_collective_mean_ns)} ms per step of "
            f"{cw.slowest_by(t)}"
            + (f", against a median of {ms(median)} ms on the others" if median is not None else "")
        )
    rows = [
        ("steps/s", f"{t.steps_per_s:.2f}" if t.steps_per_s else "-"),
        ("global samples/s", samples),
        ("slowest rank", slowest),
        ("straggler", _straggler(t)),
    ]
    memory = summary.memory
    if memory is not None and summary.memory_phases:
        rows.append(("peak memory", _worst(memory)))
        if memory.saved_tensor_bytes_max is not None:
            rows.append(
                (
                    "forward saves",
                    f"{mib(memory.saved_tensor_bytes_mean)} per step, mean over ranks; "
                    f"at most {mib(memory.saved_tensor_bytes_max)}",
                )
            )
    rows += [("note", cw.capture_note(note)) for note in summary.notes]
    return Table(
        "capture_facts",
        "Capture summary: throughput and stragglers",
        ("measure", "value"),
        tuple(rows),
        "Throughput is set by the longest per-rank mean step.",
        (False, False),
    )


def capture_document(summary: CaptureSummary) -> Document:
    """The capture summary as a document (its tables, as ``tracekit capture`` prints them)."""
    section = Section("capture", "Capture summary", "Capture", tables=tuple(capture_tables(summary)))
    return Document("capture", Head(heading="tracekit capture"), (section,), source=summary)


def ab_table(record: ABCapture) -> Table:
    """The captures of an A/B run in the order they ran, with each one's mean step."""
    texts = {"a": record.a.text or "(config as is)", "b": record.b.text or "(config as is)"}
    rows = tuple(
        (str(i), run.side.upper(), texts[run.side], run.folder, ms(run.step_mean_ns), f"{run.seconds:.1f}")
        for i, run in enumerate(record.order, start=1)
    )
    return Table(
        "ab_runs",
        f"A/B capture: {record.repeats} of each side, interleaved",
        ("#", "side", "overrides", "folder", "mean step (ms)", "took (s)"),
        rows,
        "Mean host step time over every measured step of every rank (summary.json of each capture).",
        (True, False, False, False, True, True),
    )


def ab_document(record: ABCapture) -> Document:
    """The A/B run's captures as a document (as ``tracekit capture --ab`` prints them)."""
    section = Section("ab", "A/B capture", "A/B", tables=(ab_table(record),))
    return Document("ab", Head(heading="tracekit capture --ab"), (section,), source=record)
