"""Markdown for a GitHub issue comment: the verdict, key numbers, tables, recommendations.

Per-rank tables keep the worst ranks when a run is large, names are cut, and the whole text
stays under GitHub's 65,536-character comment limit whatever the run size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.reports import tables as tb
from tracekit.reports.sentences import write_verdict

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis

#: GitHub rejects comments of 65,536 characters or more; stay clearly below.
MAX_CHARS: Final = 65_000
#: Ranks shown per table in Markdown.
RANK_ROWS: Final = 16


def _escape(cell: str) -> str:
    """A table cell: pipes escaped, HTML-significant characters neutralized, one line."""
    text = " ".join(cell.split())
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def table(t: tb.Table) -> str:
    """One GitHub-flavored Markdown table (or its 'nothing to show' line)."""
    lines = [f"### {t.title}", ""]
    if not t.rows:
        return "\n".join([*lines, f"_{t.empty or 'Nothing to show.'}_", ""])
    align = ["---:" if (t.numeric[i] if i < len(t.numeric) else False) else ":---" for i in range(len(t.columns))]
    lines.append("| " + " | ".join(_escape(c) for c in t.columns) + " |")
    lines.append("| " + " | ".join(align) + " |")
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in t.rows]
    if t.caption:
        lines += ["", f"<sub>{_escape(t.caption)}</sub>"]
    return "\n".join([*lines, ""])


def verdict(analysis: Analysis) -> str:
    """The verdict section."""
    v = write_verdict(analysis.verdict)
    p = v.primary
    share = "" if p.share_pct is None else f"{p.share_pct:.1f}% of the time, "
    lines = [
        f"## tracekit verdict: {_escape(p.title)}",
        "",
        f"**{share}confidence {p.confidence}** (measured on {v.measured_on})",
        "",
    ]
    lines += [f"- {_escape(e)}" for e in p.evidence]
    if p.recommendations:
        lines += ["", "**What to change**", ""] + [f"1. {_escape(r)}" for r in p.recommendations[:5]]
    if v.secondary:
        lines += ["", "**Also found**", ""]
        for f in v.secondary:
            share = "" if f.share_pct is None else f" ({f.share_pct:.1f}%)"
            first = f.recommendations[0] if f.recommendations else ""
            lines.append(f"- {_escape(f.title)}{share}, confidence {f.confidence}. {_escape(first)}")
    return "\n".join([*lines, ""])


class MarkdownRenderer:
    """Markdown for a GitHub issue comment: the verdict, what to change, the key tables."""

    name = "md"

    def render(self, analysis: Analysis) -> str:
        """The Markdown report (under GitHub's comment limit whatever the run size)."""
        parts = [verdict(analysis)]
        footer = (
            f"\n<sub>tracekit {analysis.tracekit_version} · analysis schema {analysis.schema_version} · "
            "every number, for every rank and step, is in the JSON report</sub>\n"
        )
        budget = MAX_CHARS - len(footer) - len(parts[0])
        for t in tb.all_tables(analysis, limit=RANK_ROWS):
            if t.key in ("collectives", "files", "capture_phases"):
                continue
            text = table(t)
            if len(text) + 200 > budget:
                parts.append("_Further tables left out to stay under GitHub's comment limit: see the JSON report._\n")
                break
            parts.append(text)
            budget -= len(text) + 1
        return "\n".join(parts) + footer
