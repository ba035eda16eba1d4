"""One self-contained HTML file: the verdict, the charts and sortable tables, offline.

plotly.js is inlined once, the charts' data is embedded as JSON, and nothing is fetched:
the file opens from ``file://`` with no network. All text goes through Jinja's autoescaping
(and chart labels through HTML escaping), so a kernel named ``<script>…`` shows as text, and
through :func:`~tracekit.reports.text.printable`, so control characters show as escapes. The
charts' JSON has no ``</`` in it: a name cannot close its script element.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

import jinja2
from plotly.offline import get_plotlyjs

from tracekit.reports import compare_figures, figures
from tracekit.reports import compare_tables as ctb
from tracekit.reports import compare_text as ct
from tracekit.reports import tables as tb
from tracekit.reports.sentences import write_alone, write_analysis
from tracekit.reports.text import printable
from tracekit.results.compare import Change

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tracekit.results.analysis import Analysis
    from tracekit.results.compare import Comparison, Side
    from tracekit.results.sweep import SweepMatrix


@dataclass
class _Section:
    key: str
    title: str
    nav: str
    charts: list[figures.Chart] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    note: str = ""
    lines: list[str] = field(default_factory=list)


def _finalize(value: object) -> object:
    """Every string the template shows: control characters made visible (markup we made is kept)."""
    return printable(value) if isinstance(value, str) and not hasattr(value, "__html__") else value


@cache
def _template(name: str = "report.html.j2") -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tracekit.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
    )
    return env.get_template(name)


@cache
def _plotly_js() -> str:
    return str(get_plotlyjs())


def table_html(t: tb.Table) -> str:
    """A sortable HTML table (escaped), or its 'nothing to show' line."""

    def esc(text: str) -> str:
        return html.escape(printable(text))

    if not t.rows:
        return f'<h3>{esc(t.title)}</h3><p class="empty">{esc(t.empty or "Nothing to show.")}</p>'
    numeric = [t.numeric[i] if i < len(t.numeric) else False for i in range(len(t.columns))]
    head = "".join(f'<th class="{"num" if n else ""}">{esc(c)}</th>' for c, n in zip(t.columns, numeric, strict=True))
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"num" if n else ""}">{esc(v)}</td>' for v, n in zip(row, numeric, strict=True))
        + "</tr>"
        for row in t.rows
    )
    caption = f'<div class="caption">{esc(t.caption)}</div>' if t.caption else ""
    return (
        f'<h3>{esc(t.title)}</h3><div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>{caption}"
    )


def _escape_figure(value: figures.JSON) -> figures.JSON:
    """HTML-escape every string plotly would render as markup (names, labels, hover text)."""
    if isinstance(value, str):
        return html.escape(printable(value), quote=False)
    if isinstance(value, list):
        return [_escape_figure(v) for v in value]
    if isinstance(value, dict):
        return {
            k: v
            if k in ("type", "orientation", "barmode", "mode", "colorscale", "template", "autorange")
            else _escape_figure(v)
            for k, v in value.items()
        }
    return value


def charts_json(charts: Iterable[figures.Chart]) -> str:
    """The charts' figures as JSON for a script element: strings HTML-escaped, no ``</`` or ``<!--``."""
    payload = json.dumps({c.key: _escape_figure(c.figure) for c in charts}, separators=(",", ":"))
    return payload.replace("</", "<\\/").replace("<!--", "<\\!--")


def _sections(a: Analysis, charts: dict[str, figures.Chart]) -> list[_Section]:
    limit = None if len(a.run.ranks) <= 64 else 64
    T = {t.key: t for t in tb.all_tables(a, limit=limit)}

    def pick(*keys: str) -> list[str]:
        return [table_html(T[k]) for k in keys if k in T]

    def chart(*keys: str) -> list[figures.Chart]:
        return [charts[k] for k in keys if k in charts]

    gpu = a.run.has_gpu
    sections = [
        _Section("facts", "Run", "Run", tables=pick("problems", "facts")),
        _Section("steps", "Step time per rank", "Steps", chart("steps"), pick("steps", "warmup")),
        _Section("ledger", "Where the time went: the ledger", "Ledger", chart("ledger"), pick("ledger")),
        _Section("phases", "Phase breakdown", "Phases", chart("phases"), pick("phases", "phases_per_rank")),
        _Section(
            "gpu",
            "GPU time breakdown and comm/compute overlap" if gpu else "Host time breakdown (CPU-only run)",
            "GPU time" if gpu else "Host time",
            chart("gpu", "overlap"),
            pick("gpu", "host"),
        ),
        _Section("stragglers", "Stragglers", "Stragglers", chart("lateness"), pick("stragglers", "collectives")),
        _Section(
            "dataloader",
            "DataLoader gaps and host syncs",
            "Data & syncs",
            chart("dataloader"),
            pick("dataloader", "syncs"),
        ),
        _Section("idle", "GPU idle by cause", "Idle", chart("idle"), pick("idle")),
        _Section("kernels", "Top kernels", "Kernels", chart("kernels"), pick("kernels")),
        _Section(
            "memory",
            "Memory",
            "Memory",
            chart("memory_timeline", "memory_categories"),
            pick("memory_findings", "memory", "memory_categories"),
        ),
    ]
    if a.capture is not None:
        sections.append(
            _Section(
                "capture", "Capture summary", "Capture", tables=pick("capture_phases", "capture_ranks", "capture_facts")
            )
        )
    else:
        sections.append(
            _Section(
                "capture",
                "Capture summary",
                "Capture",
                note="No summary.json beside these traces (they were not made by tracekit capture).",
            )
        )
    sections.append(_Section("files", "Trace files", "Files", tables=pick("files")))
    for s in sections:
        if s.key == "lateness" or (s.key == "stragglers" and not s.charts):
            s.note = s.note or "No lateness to chart: no collectives matched across ranks and steps."
    return sections


class HtmlRenderer:
    """One self-contained HTML file (plotly inlined; opens offline)."""

    name = "html"

    def __init__(self, *, top: int = 15) -> None:
        #: rows of a comparison's table and chart of work that changed
        self.top = top

    def render(self, analysis: Analysis) -> str:
        """The HTML report of an analysis."""
        charts = {c.key: c for c in figures.all_charts(analysis)}
        run = analysis.run
        facts_line = (
            f"{len(run.ranks)} rank(s), world size {run.world_size or '?'}, "
            f"backend {run.backend or '?'}, {', '.join(run.devices) or 'no device recorded'}"
            f" · tracekit {analysis.tracekit_version}"
        )
        verdict = write_analysis(analysis)
        return _template().render(
            verdict=verdict,
            good=verdict.primary.good,
            facts_line=facts_line,
            sections=_sections(analysis, charts),
            cost_table=table_html(tb.costs(analysis)),
            charts_json=charts_json(charts.values()),
            plotly_js=_plotly_js(),
        )

    def render_sweep(self, matrix: SweepMatrix) -> str:
        """The sweep's matrix with heatmaps over the grid (one self-contained file, opens offline)."""
        from tracekit.reports.sweep_render import html  # noqa: PLC0415

        return html(matrix)

    def render_comparison(self, comparison: Comparison) -> str:
        """The HTML report of a comparison of two runs (one self-contained file, opens offline)."""
        c = comparison
        charts = {ch.key: ch for ch in compare_figures.all_charts(c, top=self.top)}
        tone = {Change.SLOWER: "", Change.FASTER: "good"}.get(c.step.change, "neutral")
        return _template("compare.html.j2").render(
            step_title=ct.step_title(c),
            headline=ct.headline(c),
            samples=ct.samples(c),
            noise_line=ct.noise_line(c),
            tone=tone,
            warnings=ct.warnings(c),
            gate=[{"failed": g.failed, "line": ct.gate_line(g)} for g in c.gate],
            gate_summary=ct.gate_summary(c),
            facts_line=_comparison_facts(c),
            sections=_comparison_sections(c, charts, top=self.top),
            charts_json=charts_json(charts.values()),
            plotly_js=_plotly_js(),
        )


def _comparison_facts(c: Comparison) -> str:
    def side(s: Side) -> str:
        more = f" and {len(s.sources) - 1} more" if len(s.sources) > 1 else ""
        where = tb.short(s.sources[0], 60) if s.sources else "no source recorded"
        return f"{s.label}: {where}{more} ({len(s.ranks)} rank(s))"

    return f"{side(c.a)} · {side(c.b)} · tracekit {c.tracekit_version}"


def _comparison_sections(c: Comparison, charts: dict[str, figures.Chart], *, top: int) -> list[_Section]:
    def chart(*keys: str) -> list[figures.Chart]:
        return [charts[k] for k in keys if k in charts]

    v = c.verdicts
    verdict_lines = [ct.cost_line(c)]
    for label, finding, on in ((c.a.label, v.a, v.a_measured_on), (c.b.label, v.b, v.b_measured_on)):
        verdict_lines += [f"{label}: {e}" for e in write_alone(finding, on).evidence]
    advice = write_alone(v.b, v.b_measured_on).recommendations[:2]
    verdict_lines += [f"What to change ({c.b.label}): {r}" for r in advice]
    return [
        _Section(
            "measures", "Step time and run-level measures", "Measures", chart("steps"), [table_html(ctb.measures(c))]
        ),
        _Section(
            "phases",
            "Phases per step",
            "Phases",
            chart("phases"),
            [table_html(ctb.phases(c))],
            lines=[ct.measure_line(m, per=c.noise.unit) for m in c.phases],
        ),
        _Section("ranks", "Step time per rank", "Ranks", chart("rank_steps"), [table_html(ctb.per_rank(c))]),
        _Section(
            "syncs",
            "Syncs",
            "Syncs",
            tables=[table_html(ctb.syncs(c))] if c.syncs.sources else [],
            lines=[ct.sync_line(c)],
        ),
        _Section("work", "Work that changed", "Work", chart("work"), [table_html(ctb.work(c, top=top))]),
        _Section(
            "verdicts",
            "Verdicts",
            "Verdicts",
            tables=[table_html(ctb.verdicts(c)), table_html(ctb.costs(c))],
            lines=verdict_lines,
        ),
        _Section("sides", "The runs", "Runs", tables=[table_html(ctb.sides(c))]),
    ]
