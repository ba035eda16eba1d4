"""HTML: every string from a trace is text, in the page and in the charts' JSON; none closes a script."""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser
from typing import Any

import pytest

from tests.reports.hostile import PAYLOADS, gpu_run, hostile
from tests.reports.test_terminal_escaping import CONTROLS
from tracekit.reports import renderer
from tracekit.reports.html import _plotly_js
from tracekit.reports.text import printable

#: The elements of the report's own page (plotly draws the charts into the divs later).
ALLOWED = {
    "html", "head", "meta", "title", "style", "script", "body", "header", "h1", "h2", "h3", "div", "nav", "a",
    "main", "section", "span", "ul", "ol", "li", "p", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)


def page_of(payload: str) -> tuple[str, _Page]:
    """The report of an analysis whose every string is ``payload``, and its page without plotly.js."""
    report = renderer("html").render(hostile(gpu_run(), payload))
    head, _, rest = report.partition(_plotly_js())
    assert rest, "plotly.js is inlined once"
    page = _Page()
    page.feed(head + rest)
    return report, page


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    return []


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_hostile_strings_are_text_in_the_page(name: str) -> None:
    payload = PAYLOADS[name]
    _, page = page_of(payload)
    for tag, attrs in page.tags:
        assert tag in ALLOWED, (tag, attrs)
        assert not any(key.startswith("on") for key in attrs), (tag, attrs)
        if tag == "a":
            assert (attrs.get("href") or "").startswith("#"), attrs
    assert [t for t, _ in page.tags].count("script") == 3  # plotly.js, the charts' JSON, the page's own code
    text = "".join(page.text)
    assert printable(payload) in text
    assert not CONTROLS.search(text), repr(CONTROLS.search(text))


@pytest.mark.parametrize("name", ["closing script", "script", "html", "c0 and c1", "bidi", "img tag"])
def test_hostile_strings_in_the_charts_json_cannot_close_the_script(name: str) -> None:
    report, page = page_of(PAYLOADS[name])
    charts = json.loads(page.scripts[1])  # what the page's code reads
    assert {"kernels", "phases"} <= set(charts)
    labels = strings(charts)
    escaped = html.escape(printable(PAYLOADS[name]), quote=False)
    assert any(escaped[:40] in s for s in labels)  # a chart label, escaped: plotly shows it as text
    assert not any("<" in s for s in labels)
    body = report.partition(_plotly_js())[2]
    assert body.count("</script") == 3 and body.lower().count("<script") == 2
