"""The sweep's matrix as a document: the best cell first, the matrix, the heatmaps, failures, probes.

The same tables and sentences (:mod:`tracekit.reports.sweep_tables`) in every format; the
HTML file adds heatmaps of throughput and memory over the grid
(:mod:`tracekit.reports.sweep_figures`) and opens offline, as the other HTML reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.reports import sweep_figures
from tracekit.reports import sweep_tables as st
from tracekit.reports.document import Document, Head, Line, Section, Tone

if TYPE_CHECKING:
    from tracekit.results.sweep import SweepMatrix

__all__ = ["sweep_document"]


def sweep_document(m: SweepMatrix) -> Document:
    """The matrix as a document."""
    charts = tuple(sweep_figures.all_charts(m))
    lines = st.lines(m)
    head = Head(
        heading="tracekit sweep",
        title=st.title(m),
        headline=Line(lines[0], Tone.STRONG),
        lines=tuple(Line(text) for text in lines[1:]),
        facts=f"{m.source} · tracekit {m.tracekit_version}",
        tone=Tone.GOOD,
    )
    sections = [
        Section("matrix", "The matrix", "Matrix", tables=(st.cells_table(m),)),
        Section("heatmaps", "Over the grid", "Heatmaps", charts=charts, note="" if charts else "No cell ran."),
    ]
    if any(r.status != "ok" for r in m.rows):
        t = st.failures_table(m)
        sections.append(Section(t.key, t.title, t.title.split(":")[0], tables=(t,)))
    if m.probes:
        t = st.probes_table(m)
        sections.append(Section(t.key, t.title, t.title.split(":")[0], tables=(t,)))
    footer = f"tracekit {m.tracekit_version} · sweep of {m.source}"
    return Document("sweep", head, tuple(sections), source=m, footer=footer)
