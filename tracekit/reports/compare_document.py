"""A comparison of two runs as a document: the step time and its change, how the runs differ,
the gate, then the measures, phases, ranks, syncs, work, verdicts and the runs themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
        checks = tuple(Line(ct.gate_line(g), Tone.BAD if g.failed else Tone.GOOD) for g in c.gate)
        sections.append(Section("gate", ct.gate_summary(c), "Gate", lines=checks))
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
    return Document("comparison", _head(c), tuple(sections), source=c, footer=footer)
