"""Any document as one self-contained HTML file: the head, the charts and sortable tables of each section, offline.

plotly.js is inlined once (tracekit's partial bundle, ``assets/plotly.min.js``: only the trace
types its charts draw, a quarter of plotly's full bundle), the charts' data is embedded as JSON, and nothing is fetched:
the file opens from ``file://`` with no network. All text goes through Jinja's autoescaping
(and chart labels through HTML escaping), so a kernel named ``<script>…`` shows as text, and
through :func:`~tracekit.reports.text.printable`, so control characters show as escapes. The
charts' JSON has no ``</`` in it: a name cannot close its script element.
"""

from __future__ import annotations

import html
import importlib.resources
import json
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Final

import jinja2

from tracekit.reports.document import JSON, Chart, Document, Format, Table, Tone
from tracekit.reports.documents import Renderable, as_document
from tracekit.reports.text import printable

if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass
class _Section:
    key: str
    title: str
    nav: str
    charts: list[Chart] = field(default_factory=list)
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


#: The trace types of the vendored plotly.js bundle (``assets/plotly-bundle.js``); a chart of
#: another type would not draw (a test checks every chart's types against the bundle).
BUNDLED_TRACES: Final = frozenset({"scatter", "bar", "box", "heatmap"})


@cache
def _plotly_js() -> str:
    """tracekit's partial plotly.js bundle (built by ``assets/build_plotly.sh``), for a script element."""
    return importlib.resources.files("tracekit.reports").joinpath("assets/plotly.min.js").read_text(encoding="utf-8")


def table_html(t: Table, *, section: str = "") -> str:
    """A sortable HTML table (escaped), or its 'nothing to show' line; titled unless its title is
    its ``section``'s (said once)."""

    def esc(text: str) -> str:
        return html.escape(printable(text))

    title = "" if t.title == section else f"<h3>{esc(t.title)}</h3>"
    if not t.rows:
        return f'{title}<p class="empty">{esc(t.empty or "Nothing to show.")}</p>'
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
        f'{title}<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>{caption}"
    )


def _escape_figure(value: JSON) -> JSON:
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


def charts_json(charts: Iterable[Chart]) -> str:
    """The charts' figures as JSON for a script element: strings HTML-escaped, no ``</`` or ``<!--``."""
    payload = json.dumps({c.key: _escape_figure(c.figure) for c in charts}, separators=(",", ":"))
    return payload.replace("</", "<\\/").replace("<!--", "<\\!--")


def _sections(doc: Document) -> list[_Section]:
    return [
        _Section(
            s.key,
            s.title,
            s.nav,
            list(s.charts),
            [table_html(t, section=s.title) for t in s.tables if Format.HTML in t.formats],
            note=s.note,
            lines=[line.text for line in s.lines],
        )
        for s in doc.sections
    ]


class HtmlRenderer:
    """One self-contained HTML file (plotly inlined; opens offline)."""

    name = "html"
    format = Format.HTML

    def __init__(self, *, top: int = 15) -> None:
        #: rows of a comparison's table and chart of work that changed
        self.top = top

    def render(self, document: Renderable) -> str:
        """The HTML report of a document (an analysis's when given one)."""
        doc = as_document(document, self.format, top=self.top)
        charts = [c for sec in doc.sections for c in sec.charts]
        verdict = doc.head.verdict
        if verdict is None:
            h = doc.head
            return _template("document.html.j2").render(
                heading=h.heading,
                title=h.title or h.heading,
                tone=h.tone.value,
                headline=h.headline.text if h.headline else "",
                lines=[line.text for line in h.lines],
                facts_line=doc.head.facts,
                sections=_sections(doc),
                charts_json=charts_json(charts),
                plotly_js=_plotly_js() if charts else "",  # no chart: no 1.2 MB of plotly.js
            )
        return _template().render(
            title=doc.head.title,
            verdict=verdict,
            good=doc.head.tone is Tone.GOOD,
            facts_line=doc.head.facts,
            sections=_sections(doc),
            cost_table=table_html(doc.head.costs) if doc.head.costs is not None else "",
            charts_json=charts_json(charts),
            plotly_js=_plotly_js() if charts else "",  # no chart: no 1.2 MB of plotly.js
        )
