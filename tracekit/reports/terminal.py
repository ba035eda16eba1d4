"""The terminal summary: the verdict, then the same tables as the Markdown and HTML reports.

Rendered with rich from the typed analysis, through the shared :mod:`tracekit.reports.tables`
and :mod:`tracekit.reports.sentences`, so the terminal, Markdown and HTML always agree.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracekit.reports import tables as tb
from tracekit.reports.sentences import write_verdict

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis

#: Above this many ranks, per-rank tables show the worst ranks only (the JSON has them all).
MAX_RANK_ROWS = 16
#: Tables the terminal leaves to the other formats (long, or of interest only when shared), and
#: the input problems, which it prints above the tables in yellow.
_SKIPPED = ("collectives", "capture_phases", "capture_ranks", "capture_facts", "problems")


class TerminalRenderer:
    """Renders an :class:`Analysis` as text for a terminal."""

    name = "terminal"

    def __init__(self, *, top: int = 10, width: int = 120, color: bool = False) -> None:
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

    def sections(self, analysis: Analysis) -> list[RenderableType]:
        """The verdict, the run's warnings, then every shared table."""
        out: list[RenderableType] = [verdict(analysis), notes(analysis)]
        for table in tb.all_tables(analysis, limit=MAX_RANK_ROWS):
            if table.key not in _SKIPPED:
                out.append(rich_table(tb.kernels(analysis, top=self.top) if table.key == "kernels" else table))
        return out


def verdict(analysis: Analysis) -> Text:
    """The verdict with its evidence and what to change."""
    v = write_verdict(analysis.verdict)
    p = v.primary
    text = Text()
    text.append("tracekit verdict", style="bold")
    text.append(f" (measured on {v.measured_on})\n")
    text.append(p.title, style="bold green" if p.good else "bold red")
    share = "" if p.share_pct is None else f"{p.share_pct:.1f}% of the time, "
    text.append(f"  [{share}confidence {p.confidence}]\n")
    for line in p.evidence:
        text.append(f"  - {line}\n")
    for rec in p.recommendations[:4]:
        text.append(f"  > {rec}\n", style="cyan")
    for f in v.secondary:
        share = "" if f.share_pct is None else f" ({f.share_pct:.1f}%)"
        text.append(f"also: {f.title}{share}, confidence {f.confidence}\n", style="yellow")
        for line in f.evidence[1:] if f.share_pct is not None else f.evidence:
            text.append(f"  - {line}\n")
        if f.recommendations:
            text.append(f"  > {f.recommendations[0]}\n", style="cyan")
    return text


def notes(analysis: Analysis) -> Text:
    """What the analysis wants the reader to know before the tables: the run, skips, warnings."""
    run = analysis.run
    ranks = [r.rank for r in run.ranks]
    text = Text()
    text.append("\ntracekit analysis", style="bold")
    text.append(
        f"  ranks: {len(ranks)} ({_rank_list(ranks)})   world size: {run.world_size or 'not recorded'}"
        f"   backend: {run.backend or 'not recorded'}\n"
    )
    for skipped in run.skipped:
        text.append(f"skipped {skipped.path}: {skipped.reason}\n", style="yellow")
    for warning in run.warnings:
        text.append(f"warning: {warning}\n", style="yellow")
    return text


def rich_table(t: tb.Table) -> RenderableType:
    """A shared table as a rich table (or its 'nothing to show' line)."""
    if not t.rows:
        return Text(f"{t.title}: {t.empty or 'nothing to show.'}\n")
    table = Table(title=t.title, title_justify="left", caption=t.caption or None, caption_justify="left")
    for i, col in enumerate(t.columns):
        numeric = t.numeric[i] if i < len(t.numeric) else False
        table.add_column(col, justify="right" if numeric else "left", overflow="fold")
    for row in t.rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: names are never read as markup
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
