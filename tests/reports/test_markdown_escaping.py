"""Markdown: every string from a trace renders on GitHub as the text it is, never as a link, image or HTML.

Rendered with cmark-gfm (GitHub's own Markdown engine) with GitHub's extensions: tables,
autolinks (bare URLs, www., e-mail), the tag filter and strikethrough.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from tests.reports.hostile import PAYLOADS, gpu_run, hostile
from tracekit.reports import renderer
from tracekit.reports.markdown import WORD_JOINER, escape
from tracekit.reports.text import one_line

cmarkgfm = pytest.importorskip("cmarkgfm", reason="cmarkgfm (GitHub's Markdown engine) is a dev dependency")

#: Tags the Markdown report may produce; no a, img, script, code, del, h1, ...
ALLOWED = {"h2", "h3", "p", "ul", "ol", "li", "strong", "em", "table", "thead", "tbody", "tr", "th", "td", "sub"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


def github(markdown: str) -> _Tags:
    # raw HTML passed through (GitHub sanitizes it afterwards): an injected tag would show here
    rendered = cmarkgfm.github_flavored_markdown_to_html(markdown, options=cmarkgfm.cmark.Options.CMARK_OPT_UNSAFE)
    parsed = _Tags()
    parsed.feed(rendered)
    return parsed


def shown(parsed: _Tags) -> str:
    """The text a reader sees (word joiners are invisible)."""
    return "".join(parsed.text).replace(WORD_JOINER, "")


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_hostile_strings_render_as_inert_text(name: str) -> None:
    payload = PAYLOADS[name]
    md = renderer("md").render(hostile(gpu_run(), payload))
    parsed = github(md)
    for tag, attrs in parsed.tags:
        assert tag in ALLOWED, (tag, attrs)
        assert all(key == "align" for key, _ in attrs), (tag, attrs)
    assert parsed.comments == []
    assert one_line(payload) in shown(parsed)  # the name is shown as written (controls made visible)
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", md)


def test_pipes_never_split_a_table_row() -> None:
    md = renderer("md").render(hostile(gpu_run(), "a|b||c \\| d"))
    for block in md.split("\n\n"):
        lines = [line for line in block.splitlines() if line.startswith("| ")]
        if lines:
            cells = {len(re.findall(r"(?<!\\)(?:\\\\)*\|", line)) for line in lines}
            assert len(cells) == 1, block


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("[x](http://e.x)", "[x](http://e.x)"),
        ("![a](http://e.x/i.png)", "![a](http://e.x/i.png)"),
        ("<http://e.x>", "<http://e.x>"),
        ("http://e.x/path", "http://e.x/path"),
        ("WWW.e.x", "WWW.e.x"),
        ("me@e.x", "me@e.x"),
        ("@octocat", "@octocat"),
        ("#1234", "#1234"),
        ("void at::native::f<float>(float*, int)", "void at::native::f<float>(float*, int)"),
        ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "DataLoaderIter.__next__"),
        ("- item", "- item"),
        ("1. first", "1. first"),
        ("# heading #", "# heading #"),
        ("`rm -rf`", "`rm -rf`"),
        ("~~gone~~ *em* **strong**", "~~gone~~ *em* **strong**"),
        ("a\\b\\", "a\\b\\"),
        ("&lt;b&gt; &amp;", "&lt;b&gt; &amp;"),
        ("[^1]: http://e.x", "[^1]: http://e.x"),
    ],
)
def test_escape_shows_the_text_as_written(text: str, seen: str) -> None:
    for markdown in (f"- {escape(text)}", f"| a |\n| --- |\n| {escape(text)} |", f"### {escape(text)}"):
        parsed = github(markdown)
        assert {tag for tag, _ in parsed.tags} <= ALLOWED, markdown
        assert seen in shown(parsed), (markdown, shown(parsed))


def test_ordinary_names_stay_readable_in_the_markdown_source() -> None:
    assert escape("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    assert escape("aten::mm") == "aten::mm"
    assert escape("ProfilerStep#3") == "ProfilerStep#3"
    assert escape("12.50 ms") == "12.50 ms"
