"""Markdown for a GitHub issue comment: the verdict, key numbers, tables, recommendations.

Per-rank tables keep the worst ranks when a run is large, names are cut, and the whole text
stays under GitHub's 65,536-character comment limit whatever the run size.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from tracekit.reports import compare_tables as ctb
from tracekit.reports import compare_text as ct
from tracekit.reports import tables as tb
from tracekit.reports.sentences import write_alone, write_analysis
from tracekit.reports.text import one_line

if TYPE_CHECKING:
    from tracekit.results.analysis import Analysis
    from tracekit.results.compare import Comparison
    from tracekit.results.sweep import SweepMatrix

#: GitHub rejects comments of 65,536 characters or more; stay clearly below.
MAX_CHARS: Final = 65_000
#: Ranks shown per table in Markdown.
RANK_ROWS: Final = 16


_BACKSLASHED: Final = re.compile(r"[\\`*\[\]|~$]")
#: An underscore that could open or close emphasis: not between two letters or digits.
_UNDERSCORE: Final = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
#: What GitHub turns into a link by itself: URLs (``http://``), ``www.``, e-mail addresses and
#: @mentions (an @ followed by a name), issue references (# followed by digits).
_SCHEME: Final = re.compile(r":(?=//)")
_WWW: Final = re.compile(r"(?i)\bwww\.")
_ISSUE: Final = re.compile(r"(?<!\w)#(?=\d)")
#: What starts a block at the start of a list item's text (a list, a numbered list, a heading),
#: and a heading's closing #s.
_LEADING: Final = re.compile(r"^(?:[-+](?=\s|$)|\d{1,9}(?=[.)](?:\s|$))|#)|(?<=\s)#+$")
#: Placed after @ and # to keep GitHub from linking what follows; a reader does not see it.
WORD_JOINER: Final = "\u2060"


def escape(text: str) -> str:
    """``text`` as inert Markdown: shown as written, never a link, image, HTML, code or emphasis.

    Every string from a trace (and every other string the report shows) goes through here:
    on one line, control characters made visible (:func:`~tracekit.reports.text.one_line`),
    HTML-significant characters as entities, Markdown's punctuation backslash-escaped, and
    GitHub's own links (URLs, ``www.``, e-mail, @mentions, #123) broken by an invisible
    word joiner or an escape. Pipes are escaped, so a cell never splits a table row.
    """
    text = one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _BACKSLASHED.sub(r"\\\g<0>", text)
    text = _UNDERSCORE.sub(r"\\_", text)
    text = _SCHEME.sub(r"\\:", text)
    text = _WWW.sub(lambda m: m[0][:-1] + "\\.", text)
    text = _ISSUE.sub("#" + WORD_JOINER, text).replace("@", "@" + WORD_JOINER)
    return _LEADING.sub(lambda m: m[0] + "\\" if m[0][0].isdigit() else "\\" + m[0], text)


def table(t: tb.Table) -> str:
    """One GitHub-flavored Markdown table (or its 'nothing to show' line)."""
    lines = [f"### {escape(t.title)}", ""]
    if not t.rows:
        return "\n".join([*lines, f"_{escape(t.empty or 'Nothing to show.')}_", ""])
    align = ["---:" if (t.numeric[i] if i < len(t.numeric) else False) else ":---" for i in range(len(t.columns))]
    lines.append("| " + " | ".join(escape(c) for c in t.columns) + " |")
    lines.append("| " + " | ".join(align) + " |")
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in t.rows]
    if t.caption:
        lines += ["", f"<sub>{escape(t.caption)}</sub>"]
    return "\n".join([*lines, ""])


def verdict(analysis: Analysis) -> str:
    """The verdict section."""
    v = write_analysis(analysis)
    p = v.primary
    share = "" if p.share_pct is None else f"{p.share_pct:.1f}% of the time, "
    lines = [
        f"## tracekit verdict: {escape(p.title)}",
        "",
        f"**{share}confidence {escape(p.confidence)}** (measured on {escape(v.measured_on)})",
        "",
    ]
    lines += [f"- {escape(e)}" for e in p.evidence]
    if p.recommendations:
        lines += ["", "**What to change**", ""] + [f"1. {escape(r)}" for r in p.recommendations[:5]]
    if v.secondary:
        lines += ["", "**Also found**", ""]
        for f in v.secondary:
            share = "" if f.share_pct is None else f" ({f.share_pct:.1f}%)"
            first = f.recommendations[0] if f.recommendations else ""
            lines.append(f"- {escape(f.title)}{share}, confidence {escape(f.confidence)}. {escape(first)}")
    if v.memory:
        lines += ["", "**Memory**", ""]
        for m in v.memory:
            said = "; ".join((*m.evidence, *m.recommendations[:1]))
            lines.append(f"- {escape(m.title)}. {escape(said)}")
    return "\n".join([*lines, ""])


class MarkdownRenderer:
    """Markdown for a GitHub issue comment: the verdict, what to change, the key tables."""

    name = "md"

    def __init__(self, *, top: int = 15) -> None:
        #: rows of a comparison's table of work that changed
        self.top = top

    def render(self, analysis: Analysis) -> str:
        """The Markdown report (under GitHub's comment limit whatever the run size)."""
        parts = [verdict(analysis)]
        footer = (
            f"\n<sub>tracekit {escape(analysis.tracekit_version)} · "
            f"analysis schema {escape(analysis.schema_version)} · "
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

    def render_sweep(self, matrix: SweepMatrix) -> str:
        """The sweep's matrix as Markdown (for a pull request)."""
        from tracekit.reports.sweep_render import markdown  # noqa: PLC0415

        return markdown(matrix)

    def render_comparison(self, comparison: Comparison) -> str:
        """The comparison of two runs as Markdown (under GitHub's comment limit)."""
        c = comparison
        parts = [comparison_headline(c)]
        footer = (
            f"\n<sub>tracekit {escape(c.tracekit_version)} · comparison schema {escape(c.schema_version)} · "
            "every number, for every rank, phase and kernel, is in the JSON report</sub>\n"
        )
        budget = MAX_CHARS - len(footer) - len(parts[0])
        for text in _comparison_parts(c, top=self.top):
            if len(text) + 200 > budget:
                parts.append("_Further sections left out to stay under GitHub's comment limit: see the JSON report._\n")
                break
            parts.append(text)
            budget -= len(text) + 1
        return "\n".join(parts) + footer


def comparison_headline(c: Comparison) -> str:
    """The step time and its change, the noise model, how the runs differ, and the gate."""
    lines = [f"## tracekit comparison: {escape(ct.step_title(c))}", "", f"**{escape(ct.headline(c))}**"]
    if samples := ct.samples(c):
        lines[-1] += f" ({escape(samples)})"
    lines += ["", f"<sub>{escape(ct.noise_line(c))}</sub>", ""]
    if c.warnings:
        lines += ["**How the runs differ (read before the numbers)**", ""]
        lines += [f"- ⚠️ {escape(w)}" for w in ct.warnings(c)] + [""]
    if c.gate:
        lines += [f"**{escape(ct.gate_summary(c))}**", ""]
        lines += [f"- {'❌' if g.failed else '✅'} {escape(ct.gate_line(g))}" for g in c.gate] + [""]
    return "\n".join(lines)


def _list(title: str, items: list[str]) -> str:
    return "\n".join([f"### {escape(title)}", "", *(f"- {escape(i)}" for i in items), ""])


def _comparison_parts(c: Comparison, *, top: int) -> list[str]:
    """Each section after the headline, in order."""
    per = c.noise.unit
    phases = (
        _list("Phases per step", [ct.measure_line(m, per=per) for m in c.phases]) if c.phases else table(ctb.phases(c))
    )
    syncs = _list("Syncs", [ct.sync_line(c)])
    if c.syncs.sources:
        syncs += "\n" + table(ctb.syncs(c))
    return [
        table(ctb.measures(c)),
        phases,
        table(ctb.per_rank(c)),
        syncs,
        table(ctb.work(c, top=top)),
        comparison_verdicts(c),
        table(ctb.sides(c)),
    ]


def comparison_verdicts(c: Comparison) -> str:
    """Each run's verdict with its evidence, whether the bound changed, and what moved."""
    v = c.verdicts
    lines = ["### Verdicts", ""]
    for label, finding, on in ((c.a.label, v.a, v.a_measured_on), (c.b.label, v.b, v.b_measured_on)):
        w = write_alone(finding, on)
        share = "" if w.share_pct is None else f"{w.share_pct:.1f}% of the time, "
        lines.append(
            f"- **{escape(label)}**: {escape(w.title)} ({escape(share + 'confidence ' + w.confidence)}, "
            f"measured on {escape(on.value)})"
        )
        lines += [f"  - {escape(e)}" for e in w.evidence]
    lines += ["", f"{escape(ct.cost_line(c))}.", ""]
    recs = write_alone(v.b, v.b_measured_on).recommendations[:2]
    if recs:
        lines += [f"**What to change ({escape(c.b.label)})**", ""] + [f"1. {escape(r)}" for r in recs] + [""]
    return "\n".join(lines) + "\n" + table(ctb.costs(c))
