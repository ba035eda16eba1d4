"""The terminal summary: the verdict, then the same tables as the Markdown and HTML reports.

Rendered with rich from the typed analysis, through the shared :mod:`tracekit.reports.tables`
and :mod:`tracekit.reports.sentences`, so the terminal, Markdown and HTML always agree.
Every string goes to rich as :class:`~rich.text.Text` (never parsed as markup) through
:func:`~tracekit.reports.text.printable`, so no name from a trace can move the cursor, clear
the screen, set a hyperlink or reorder the text (no control character reaches the terminal).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracekit.reports import compare_tables as ctb
from tracekit.reports import compare_text as ct
from tracekit.reports import tables as tb
from tracekit.reports.sentences import write_alone, write_analysis
from tracekit.reports.text import printable
from tracekit.results.compare import Change

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis
    from tracekit.results.compare import Comparison
    from tracekit.results.sweep import SweepMatrix

#: Above this many ranks, per-rank tables show the worst ranks only (the JSON has them all).
MAX_RANK_ROWS = 16
#: Tables the terminal leaves to the other formats (long, or of interest only when shared), and
#: the input problems, which it prints above the tables in yellow.
_SKIPPED = ("collectives", "capture_phases", "capture_ranks", "capture_facts", "problems")


class TerminalRenderer:
    """Renders an :class:`Analysis` as text for a terminal."""

    name = "terminal"

    def __init__(self, *, top: int | None = None, width: int = 120, color: bool = False) -> None:
        #: rows of the top-N tables: kernels of an analysis (10 when None), work of a comparison (15)
        self.top = top
        self.width = width
        self.color = color

    def render(self, analysis: Analysis) -> str:
        """The summary as text (ANSI colored when ``color``)."""
        buffer = io.StringIO()
        console = Console(
            file=buffer, width=self.width, force_terminal=self.color, no_color=not self.color, highlight=False
        )
        console.print(Group(*self.sections(analysis)))
        return buffer.getvalue()

    def render_sweep(self, matrix: SweepMatrix) -> str:
        """The sweep's matrix as text (ANSI colored when ``color``)."""
        from tracekit.reports.sweep_render import terminal  # noqa: PLC0415

        return terminal(matrix, width=self.width, color=self.color)

    def render_comparison(self, comparison: Comparison) -> str:
        """The comparison of two runs as text (ANSI colored when ``color``)."""
        buffer = io.StringIO()
        console = Console(
            file=buffer, width=self.width, force_terminal=self.color, no_color=not self.color, highlight=False
        )
        console.print(Group(*comparison_sections(comparison, top=15 if self.top is None else self.top)))
        return buffer.getvalue()

    def sections(self, analysis: Analysis) -> list[RenderableType]:
        """The verdict, the run's warnings, then every shared table."""
        out: list[RenderableType] = [verdict(analysis), notes(analysis)]
        for table in tb.all_tables(analysis, limit=MAX_RANK_ROWS):
            if table.key not in _SKIPPED:
                out.append(
                    rich_table(
                        tb.kernels(analysis, top=10 if self.top is None else self.top)
                        if table.key == "kernels"
                        else table
                    )
                )
        return out


def _line(text: Text, line: str, style: str | None = None, *, end: str = "\n") -> None:
    """Append one line of words to ``text``: control characters made visible, never read as markup."""
    text.append(printable(line) + end, style=style)


def verdict(analysis: Analysis) -> Text:
    """The verdict with its evidence and what to change."""
    v = write_analysis(analysis)
    p = v.primary
    text = Text()
    text.append("tracekit verdict", style="bold")
    _line(text, f" (measured on {v.measured_on})")
    _line(text, p.title, "bold green" if p.good else "bold red", end="")
    share = "" if p.share_pct is None else f"{p.share_pct:.1f}% of the time, "
    _line(text, f"  [{share}confidence {p.confidence}]")
    for line in p.evidence:
        _line(text, f"  - {line}")
    for rec in p.recommendations[:4]:
        _line(text, f"  > {rec}", "cyan")
    for f in v.secondary:
        share = "" if f.share_pct is None else f" ({f.share_pct:.1f}%)"
        _line(text, f"also: {f.title}{share}, confidence {f.confidence}", "yellow")
        for line in f.evidence[1:] if f.share_pct is not None else f.evidence:
            _line(text, f"  - {line}")
        if f.recommendations:
            _line(text, f"  > {f.recommendations[0]}", "cyan")
    for m in v.memory:
        _line(text, f"memory: {m.title}", "green" if m.good else "yellow")
        for line in m.evidence:
            _line(text, f"  - {line}")
        for rec in m.recommendations[:2]:
            _line(text, f"  > {rec}", "cyan")
    return text


def notes(analysis: Analysis) -> Text:
    """What the analysis wants the reader to know before the tables: the run, skips, warnings."""
    run = analysis.run
    ranks = [r.rank for r in run.ranks]
    text = Text()
    text.append("\ntracekit analysis", style="bold")
    _line(
        text,
        f"  ranks: {len(ranks)} ({_rank_list(ranks)})   world size: {run.world_size or 'not recorded'}"
        f"   backend: {run.backend or 'not recorded'}",
    )
    for skipped in run.skipped:
        _line(text, f"skipped {skipped.path}: {skipped.reason}", "yellow")
    for warning in run.warnings:
        _line(text, f"warning: {warning}", "yellow")
    return text


def _cell(text: str) -> Text:
    """A title, header or cell: one line, control characters made visible, never read as markup."""
    return Text(printable(text))


def rich_table(t: tb.Table) -> RenderableType:
    """A shared table as a rich table (or its 'nothing to show' line)."""
    if not t.rows:
        return Text(printable(f"{t.title}: {t.empty or 'nothing to show.'}") + "\n")
    table = Table(
        title=_cell(t.title),
        title_justify="left",
        caption=_cell(t.caption) if t.caption else None,
        caption_justify="left",
    )
    for i, col in enumerate(t.columns):
        numeric = t.numeric[i] if i < len(t.numeric) else False
        table.add_column(_cell(col), justify="right" if numeric else "left", overflow="fold")
    for row in t.rows:
        table.add_row(*map(_cell, row))
    return table


def _rank_list(ranks: list[int]) -> str:
    if not ranks:
        return "none"
    parts, start, prev = [], ranks[0], ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(parts)


#: How each change of the step time is colored.
_CHANGE_STYLE = {Change.SLOWER: "bold red", Change.FASTER: "bold green", Change.WITHIN_NOISE: "bold"}


def comparison_sections(c: Comparison, *, top: int = 15) -> list[RenderableType]:
    """The headline, how the runs differ, the gate, then each table of the comparison."""
    out: list[RenderableType] = [comparison_headline(c), rich_table(ctb.measures(c))]
    per = c.noise.unit
    if c.phases:
        phases = Text()
        phases.append("Phases per step\n", style="bold")
        for m in c.phases:
            _line(phases, f"  {ct.measure_line(m, per=per)}")
        out.append(phases)
    else:
        out.append(rich_table(ctb.phases(c)))
    syncs = Text()
    syncs.append("Syncs\n", style="bold")
    _line(syncs, f"  {ct.sync_line(c)}")
    out += [rich_table(ctb.per_rank(c)), syncs]
    if c.syncs.sources:
        out.append(rich_table(ctb.syncs(c)))
    out += [rich_table(ctb.work(c, top=top)), comparison_verdicts(c)]
    out += [rich_table(ctb.costs(c)), rich_table(ctb.sides(c))]
    return out


def comparison_headline(c: Comparison) -> Text:
    """The step time and its change, the noise model, the warnings (yellow) and the gate."""
    text = Text()
    text.append("tracekit comparison\n", style="bold")
    _line(text, ct.step_title(c), "bold")
    _line(text, ct.headline(c), _CHANGE_STYLE.get(c.step.change))
    if samples := ct.samples(c):
        _line(text, f"  ({samples})")
    _line(text, ct.noise_line(c), "dim")
    for warning in ct.warnings(c):
        _line(text, f"warning: {warning}", "yellow")
    if c.gate:
        _line(text, ct.gate_summary(c), "bold red" if any(g.failed for g in c.gate) else "bold green")
        for g in c.gate:
            _line(text, f"  {ct.gate_line(g)}", "red" if g.failed else "green")
    return text


def comparison_verdicts(c: Comparison) -> Text:
    """Each run's verdict with its evidence, and whether the bound changed."""
    v = c.verdicts
    text = Text()
    text.append("Verdicts\n", style="bold")
    for label, finding, on in ((c.a.label, v.a, v.a_measured_on), (c.b.label, v.b, v.b_measured_on)):
        w = write_alone(finding, on)
        share = "" if w.share_pct is None else f"{w.share_pct:.1f}% of the time, "
        _line(text, f"  {label}: {w.title} [{share}confidence {w.confidence}, measured on {on.value}]")
        for line in w.evidence:
            _line(text, f"      - {line}")
    _line(text, f"  {ct.cost_line(c)}")
    b = write_alone(v.b, v.b_measured_on)
    for rec in b.recommendations[:2]:
        _line(text, f"  > {rec}", "cyan")
    return text
