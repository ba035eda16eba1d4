"""The memory tables of an analysis: peaks per rank and device, what fills the peak, the findings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tracekit.reports.advice import RunTraits
from tracekit.reports.memory_words import write_memory
from tracekit.reports.tables import limited_rows, make_table, pct, phase_label, short

if TYPE_CHECKING:
    from tracekit.reports.document import Table
    from tracekit.results.analysis import Analysis


#: How the run's profiler records memory counters (Nsight Systems: True).
_RECORD_MEMORY: Final = {False: "torch.profiler(profile_memory=True)", True: "nsys profile --cuda-memory-usage=true"}
#: From this largest peak up, a report's memory reads in GiB (else MiB).
GIB_FROM: Final = 10 * 2**30


@dataclass(frozen=True)
class MemoryUnit:
    """The one unit of memory in a report's tables and charts: MiB, or GiB for large peaks."""

    name: str
    bytes: int

    def value(self, amount: float | None) -> float | None:
        """``amount`` bytes in this unit (a chart's number)."""
        return None if amount is None else amount / self.bytes

    def text(self, amount: float | None) -> str:
        """``amount`` bytes in this unit, as a table cell."""
        return "-" if amount is None else f"{amount / self.bytes:,.{2 if self.bytes == 2**30 else 1}f}"


def memory_unit(a: Analysis) -> MemoryUnit:
    """The memory unit of ``a``'s report, chosen once from its largest peak (tables and charts agree)."""
    m = a.memory
    peaks = [0]
    if m is not None:
        peaks += [v or 0 for r in m.per_device for v in (r.peak_allocated_bytes, r.peak_reserved_bytes)]
        peaks += [c.peak_bytes for c in m.categories]
    return MemoryUnit("GiB", 2**30) if max(peaks) >= GIB_FROM else MemoryUnit("MiB", 2**20)


def memory(a: Analysis, limit: int | None) -> Table:
    """Peak and final memory per rank and device, from the allocator's counters."""
    per = a.memory.per_device if a.memory is not None else []
    unit = memory_unit(a)
    _mib = unit.text
    rows, note = limited_rows(per, lambda r: r.peak_allocated_bytes, limit, "peak_allocated_bytes")
    return make_table(
        "memory",
        f"Memory per rank ({unit.name}, from the allocator's [memory] counters)",
        [
            "rank",
            "device",
            "peak allocated",
            "peak reserved",
            "gap at peak",
            "headroom",
            "final allocated",
            "at the peak",
            "samples",
        ],
        (
            [
                str(r.rank),
                f"{r.device_type or '?'}:{'' if r.device is None else r.device}",
                _mib(r.peak_allocated_bytes),
                _mib(r.peak_reserved_bytes),
                "-" if r.gap_at_peak_bytes is None else f"{_mib(r.gap_at_peak_bytes)} ({pct(r.gap_at_peak_pct)})",
                "-" if r.headroom_bytes is None else f"{_mib(r.headroom_bytes)} ({pct(r.headroom_pct)})",
                _mib(r.final_allocated_bytes),
                short(" / ".join(x for x in (r.peak_phase and phase_label(r.peak_phase), r.peak_op) if x) or "-"),
                f"{r.samples:,}",
            ]
            for r in rows
        ),
        "Recorded when the profiler ran with profile_memory=True (Kineto) or nsys --cuda-memory-usage=true. "
        "Gap at peak: reserved minus allocated when allocated peaked (held by the caching allocator, used by no "
        "tensor), and its share of reserved. Headroom: the device's capacity (as the trace records it) minus peak "
        "reserved, and its share of the capacity. At the peak: the phase and the operator running then." + note,
        numeric=[True, False, True, True, True, True, True, False, True],
        empty=f"No memory counters in these traces (record them with {_RECORD_MEMORY[RunTraits.of(a).nsys]}).",
    )


def memory_categories(a: Analysis, limit: int | None) -> Table | None:
    """What fills memory at each rank's peak, from a categorized memory timeline."""
    memory = a.memory
    if memory is None or not memory.categories:
        return None
    peaks = {p.rank: p for p in memory.peaks}
    unit = memory_unit(a)
    _mib = unit.text
    ranks = sorted(peaks)[: limit or None]
    cut = f" {len(ranks)} of {len(peaks)} ranks shown." if len(ranks) < len(peaks) else ""
    return make_table(
        "memory_categories",
        f"What fills memory at the peak ({unit.name}, from export_memory_timeline)",
        ["rank", "category", "at the peak", "share of the peak", "its own peak"],
        (
            [str(c.rank), c.category, _mib(c.at_peak_bytes), pct(c.at_peak_pct), _mib(c.peak_bytes)]
            for c in memory.categories
            if c.rank in ranks
        ),
        "Categories as torch.profiler's memory profiler assigns them; the peak is the largest running total of "
        "the timeline (memory from before profiling included)." + cut,
        numeric=[True, False, True, True, True],
    )


def memory_findings(a: Analysis) -> Table | None:
    """The memory findings and what to do about each (the words of the verdict's memory lines)."""
    memory = a.memory
    if memory is None or not memory.findings:
        return None
    traits = RunTraits.of(a)
    written = [write_memory(f, traits.parallelism, expandable=traits.expandable_segments) for f in memory.findings]
    return make_table(
        "memory_findings",
        "Memory findings",
        ["finding", "figures", "what to try"],
        ([w.title, "; ".join(w.evidence), "; ".join(w.recommendations) or "-"] for w in written),
        "Beside the time verdict: what limits the batch that fits. Thresholds: tracekit/analyzers/memory.py.",
        numeric=[False, False, False],
    )
