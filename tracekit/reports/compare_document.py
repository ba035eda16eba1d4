"""A comparison of two runs as a document: the step time and its change, how the runs differ,
the gate, then the measures, phases, ranks, syncs, work, verdicts and the runs themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.reports import compare_figures
from tracekit.reports import compare_tables as ctb
from tracekit.reports import compare_text as ct
from tracekit.reports.document import Document, Format, Head, Line, Section, Tone, only
from tracekit.reports.sentences import write_alone
from tracekit.reports.tables import short
from tracekit.results.vocab import Change

if TYPE_CHECKING:
    from tracekit.reports.document import Chart
    from tracekit.results.compare import Comparison, Side

__all__ = ["comparison_document"]

#: How each change of the step time reads.
_TONE = {Change.SLOWER: Tone.BAD, Change.FASTER: Tone.GOOD, Change.WITHIN_NOISE: Tone.STRONG}


def _facts(c: Comparison) -> str:
    def side(s: Side) -> str:
        more = f" and {len(s.sources) - 1} more" if len(s.sources) > 1 else ""
        where = short(s.sources[0], 60) if s.sources else "no source recorded"
        return f"{s.label}: {where}{more} ({len(s.ranks)} rank(s))"

    return f"{side(c.a)} · {side(c.b)} · tracekit {c.tracekit_version}"


def _head(c: Comparison) -> Head:
    samples = ct.samples(c)
    lines = (*([Line(f"({samples})")] if samples else []), Line(ct.noise_line(c), Tone.DIM))
    tone = {Change.SLOWER: Tone.BAD, Change.FASTER: Tone.GOOD}.get(c.step.change, Tone.PLAIN)
    return Head(
        heading="tracekit comparison",
        title=ct.step_title(c),
        headline=Line(ct.headline(c), _TONE.get(c.step.change, Tone.STRONG)),
        lines=lines,
        facts=_facts(c),
        tone=tone,
    )


def _verdict_lines(c: Comparison) -> tuple[Line, ...]:
    v = c.verdicts
    lines: list[Line] = []
    for label, finding, on in ((c.a.label, v.a, v.a_measured_on), (c.b.label, v.b, v.b_measured_on)):
        w = write_alone(finding, on)
        share = "" if w.share_pct is None else f"{w.share_pct:.1f}% of the time, "
        lines.append(Line(f"{label}: {w.title} [{share}confidence {w.confidence}, measured on {on.value}]"))
        lines += [Line(f"    - {e}") for e in w.evidence]
    lines.append(Line(ct.cost_line(c)))
    lines += [
        Line(f"What to change ({c.b.label}): {r}", Tone.ADVICE)
        for r in write_alone(v.b, v.b_measured_on).recommendations[:2]
    ]
    return tuple(lines)


#: Run-level measures, and phases, the short answer lists of those that moved beyond noise.
BRIEF_ROWS: Final = 3
#: How the runs differ: the sentences the short answer prints (the rest are counted).
BRIEF_WARNINGS: Final = 3


def _brief(c: Comparison) -> tuple[Line, ...]:
    """The short answer under the head (a terminal's, without ``--full``): how the runs differ,
    the gate, the run-level measures and the phases that moved beyond noise (the phases with the
    largest change first), the syncs where a side has any (and the ops that issued them), each
    side's verdict, whether the bound changed and what to change in B first. What is within
    noise, the ranks, the work and the runs are the whole report's."""
    per = c.noise.unit
    lines: list[Line] = []
    said = ct.warnings(c)
    lines += [Line(w, Tone.WARN) for w in said[:BRIEF_WARNINGS]]
    if len(said) > BRIEF_WARNINGS:
        lines.append(Line(f"and {len(said) - BRIEF_WARNINGS} more difference(s), in the whole report", Tone.WARN))
    if c.gate:
        lines.append(Line(ct.gate_summary(c), Tone.BAD if any(g.failed for g in c.gate) else Tone.GOOD))
        lines += [Line(f"  {x.text}", x.tone) for x in _gate_lines(c)]
    moved = [m for m in c.measures if m.change in ct.MOVED][:BRIEF_ROWS]
    if moved:
        lines.append(Line("Measures that moved beyond noise", Tone.STRONG))
        lines += [Line(f"  {ct.measure_line(m, per=per)}") for m in moved]
    phases = sorted((m for m in c.phases if m.change in ct.MOVED), key=lambda m: -abs(m.delta or 0.0))
    if phases:
        lines.append(Line("Phases that moved beyond noise, per step (largest first)", Tone.STRONG))
        lines += [Line(f"  {ct.measure_line(m, per=per)}") for m in phases[:BRIEF_ROWS]]
    if c.syncs.a_per_step or c.syncs.b_per_step:  # the syncs on either side, and the ops that issued them
        lines.append(Line(ct.sync_line(c)))
    v = c.verdicts
    a, b = write_alone(v.a, v.a_measured_on), write_alone(v.b, v.b_measured_on)
    for label, w in ((c.a.label, a), (c.b.label, b)):
        share = "" if w.share_pct is None else f" [{w.share_pct:.1f}% of the time]"
        lines.append(Line(f"{label}: {w.title}{share}"))
    lines.append(Line(ct.cost_line(c)))
    advice = b.recommendations[:1]
    lines += [Line(f"What to change ({c.b.label}): {r}", Tone.ADVICE) for r in advice]
    return tuple(lines)


def _gate_lines(c: Comparison) -> tuple[Line, ...]:
    """Each ``--fail-if`` condition's line, its tone by whether it failed."""
    return tuple(Line(ct.gate_line(g), Tone.BAD if g.failed else Tone.GOOD) for g in c.gate)


def comparison_document(c: Comparison, *, top: int = 15) -> Document:
    """The comparison as a document; ``top``: rows of the work that changed."""
    charts = {ch.key: ch for ch in compare_figures.all_charts(c, top=top)}

    def chart(*keys: str) -> tuple[Chart, ...]:
        return tuple(charts[k] for k in keys if k in charts)

    per = c.noise.unit
    sections: list[Section] = []
    if c.warnings or c.outliers:
        warned = tuple(Line(w, Tone.WARN) for w in ct.warnings(c))
        sections.append(
            Section("warnings", "How the runs differ (read before the numbers)", "Differences", lines=warned)
        )
    if c.gate:
        sections.append(Section("gate", ct.gate_summary(c), "Gate", lines=_gate_lines(c)))
    phases = ctb.phases(c)
    if c.phases:  # the lines say it in the terminal and Markdown; HTML has the table too
        phases = only(phases, Format.HTML)
    sections += [
        Section("measures", "Step time and run-level measures", "Measures", (ctb.measures(c),), chart("steps")),
        Section(
            "phases",
            "Phases per step",
            "Phases",
            (phases,),
            chart("phases"),
            lines=tuple(Line(ct.measure_line(m, per=per)) for m in c.phases),
        ),
        Section("ranks", "Step time per rank", "Ranks", (ctb.per_rank(c),), chart("rank_steps")),
        Section("syncs", "Syncs", "Syncs", (ctb.syncs(c),) if c.syncs.sources else (), lines=(Line(ct.sync_line(c)),)),
        Section("work", "Work that changed", "Work", (ctb.work(c, top=top),), chart("work")),
        Section(
            "verdicts",
            "Verdicts",
            "Verdicts",
            (only(ctb.verdicts(c), Format.HTML), ctb.costs(c)),
            lines=_verdict_lines(c),
        ),
        Section("sides", "The runs", "Runs", (ctb.sides(c),)),
    ]
    footer = (
        f"tracekit {c.tracekit_version} · comparison schema {c.schema_version} · "
        "every number, for every rank, phase and kernel, is in the JSON report"
    )
    return Document("comparison", _head(c), tuple(sections), source=c, footer=footer, brief=_brief(c))
