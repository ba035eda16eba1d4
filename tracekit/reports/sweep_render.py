"""The sweep's matrix in each format; the renderers' ``render_sweep`` call these.

The same tables and sentences (:mod:`tracekit.reports.sweep_tables`) in every format; the
HTML file adds heatmaps of throughput and memory over the grid
(:mod:`tracekit.reports.sweep_figures`) and opens offline, as the other HTML reports.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.text import Text

from tracekit.reports import sweep_figures
from tracekit.reports import sweep_tables as st
from tracekit.reports.text import printable

if TYPE_CHECKING:
    from tracekit.reports.document import Table
    from tracekit.results.sweep import SweepMatrix

__all__ = ["html", "markdown", "terminal"]


def _tables(m: SweepMatrix) -> list[Table]:
    tables = [st.cells_table(m)]
    if any(r.status != "ok" for r in m.rows):
        tables.append(st.failures_table(m))
    if m.probes:
        tables.append(st.probes_table(m))
    return tables


def terminal(m: SweepMatrix, *, width: int = 120, color: bool = False) -> str:
    """The matrix for a terminal (ANSI colored when ``color``)."""
    from tracekit.reports.console import rich_table  # noqa: PLC0415

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, no_color=not color, highlight=False)
    text = Text()
    for line in st.lines(m):
        text.append(printable(line) + "\n", style="bold" if line is st.lines(m)[0] else None)
    console.print(Group(*(rich_table(t) for t in _tables(m)), text))
    return buffer.getvalue()


def markdown(m: SweepMatrix) -> str:
    """The matrix as GitHub Markdown, for a pull request."""
    from tracekit.reports.markdown import escape, table  # noqa: PLC0415

    parts = [f"## tracekit: {escape(st.title(m))}", ""]
    parts += [f"- {escape(line)}" for line in st.lines(m)] + [""]
    parts += [table(t) for t in _tables(m)]
    parts.append(f"<sub>tracekit {escape(m.tracekit_version)} · sweep of {escape(m.source)}</sub>\n")
    return "\n".join(parts)


def html(m: SweepMatrix) -> str:
    """The matrix as one self-contained HTML file with heatmaps (opens offline)."""
    from tracekit.reports.html import _plotly_js, _Section, _template, charts_json, table_html  # noqa: PLC0415

    charts = sweep_figures.all_charts(m)
    sections = [
        _Section("matrix", "The matrix", "Matrix", tables=[table_html(st.cells_table(m))]),
        _Section("heatmaps", "Over the grid", "Heatmaps", charts=charts, note="" if charts else "No cell ran."),
        *(_Section(t.key, t.title, t.title.split(":")[0], tables=[table_html(t)]) for t in _tables(m)[1:]),
    ]
    return _template("sweep.html.j2").render(
        title=st.title(m),
        lines=st.lines(m),
        facts_line=f"{m.source} · tracekit {m.tracekit_version}",
        sections=sections,
        charts_json=charts_json(charts),
        plotly_js=_plotly_js(),
    )
