"""Any document for a terminal: its head (a verdict, or a headline), the notes, then each
section's lines and the tables the terminal shows; the same document the Markdown and HTML
draw, so they always agree.

Drawn with rich through :mod:`tracekit.reports.console`: every string goes to rich as
:class:`~rich.text.Text` (never parsed as markup), control characters made visible, so no name
from a trace can move the cursor, clear the screen, set a hyperlink or reorder the text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from rich.text import Text

from tracekit.reports.console import line as _line
from tracekit.reports.console import printed, rich_table
from tracekit.reports.document import Document, Format, Head, Section, Tone
from tracekit.reports.documents import Renderable, as_document

if TYPE_CHECKING:
    from rich.console import RenderableType

    from tracekit.reports.wording import WrittenVerdict


class TerminalRenderer:
    """Renders a document (an analysis, a comparison, a sweep...) as text for a terminal."""

    name = "terminal"
    format = Format.TERMINAL

    def __init__(
        self, *, top: int | None = None, width: int = 120, color: bool = False, full: bool = True, more: str = ""
    ) -> None:
        #: rows of the top-N tables: kernels of an analysis (10 when None), work of a comparison (15)
        self.top = top
        self.width = width
        self.color = color
        #: every section's tables; else the short answer: of a document with a verdict (:func:`short`),
        #: or with a brief (:func:`brief`: a comparison)
        self.full = full
        #: the short answer's last line: where the rest of the report is
        self.more = more or MORE

    def render(self, document: Renderable) -> str:
        """The document as text (ANSI colored when ``color``)."""
        doc = as_document(document, self.format, top=self.top)
        if not self.full and doc.head.verdict is not None:
            return printed([short(doc, more=self.more)], width=self.width, color=self.color)
        if not self.full and doc.brief:
            return printed([brief(doc, more=self.more)], width=self.width, color=self.color)
        return printed(sections(doc, width=self.width), width=self.width, color=self.color)


#: Where the rest of a short answer is, from the Python API (the CLI names its options).
MORE: Final = "the whole report: TerminalRenderer(full=True), MarkdownRenderer, HtmlRenderer"
#: Items of what to do first in the short answer.
SHORT_FIRST: Final = 3
#: Warnings the short answer shows (the rest are counted; skipped files are all named).
SHORT_WARNINGS: Final = 3


def short(doc: Document, *, more: str) -> Text:
    """The short answer: the verdict and its evidence, what to do first (three fixes with their
    gains, else the verdict's advice), one line per other finding, the facts line, what was
    skipped or warned of, and ``more``: where the whole report is."""
    v = doc.head.verdict
    assert v is not None
    text = Text()
    p = v.primary
    _verdict(text, v)
    if v.first:
        _first(text, v, most=SHORT_FIRST)
    else:
        for rec in p.recommendations[:SHORT_FIRST]:
            _line(text, f"  > {rec}", "cyan")
    for f in v.secondary:
        _line(text, f"also: {f.title}" + (f" [{f.badge}]" if f.badge else ""), "yellow")
        if f.reason:  # a gain above the primary's reads as a second story without it
            _line(text, f"  - {f.reason}")
    for m in v.memory:
        _line(text, f"memory: {m.title}", "green" if m.good else "yellow")
    if doc.head.facts:
        _line(text, doc.head.facts, "dim")
    warned = [n for n in doc.notes if n.tone is Tone.WARN]
    skipped = [n for n in warned if n.text.startswith("skipped ")]
    others = [n for n in warned if not n.text.startswith("skipped ")]
    for n in (*skipped, *others[:SHORT_WARNINGS]):
        _line(text, n.text, _TONE[n.tone])
    if len(others) > SHORT_WARNINGS:
        _line(text, f"and {len(others) - SHORT_WARNINGS} more warning(s), in the whole report", "yellow")
    _line(text, more, "bold", end="")
    return text


def brief(doc: Document, *, more: str) -> Text:
    """The short answer of a result without a verdict (a comparison): its heading, title and
    headline with the head's lines but the dim ones (how the intervals were made, which the whole
    report explains), the document's :attr:`~tracekit.reports.document.Document.brief`, the facts
    line, and ``more``: where the whole report is."""
    h = doc.head
    text = Text()
    _line(text, h.heading, "bold")
    if h.title:
        _line(text, h.title, "bold")
    for line in (*([h.headline] if h.headline else []), *(x for x in h.lines if x.tone is not Tone.DIM)):
        _line(text, line.text, _TONE[line.tone])
    for line in doc.brief:
        _line(text, line.text, _TONE[line.tone])
    if h.facts:
        _line(text, h.facts, "dim")
    _line(text, more, "bold", end="")
    return text


def sections(doc: Document, *, width: int = 120) -> list[RenderableType]:
    """The head, the notes, then each section: its lines, and the tables the terminal shows
    (fitting ``width`` columns)."""
    out: list[RenderableType] = [t for t in (head(doc.head), notes(doc)) if t.plain]
    for s in doc.sections:
        if s.lines:
            out.append(section_lines(s))
        out += [rich_table(t, width=width) for t in s.tables if Format.TERMINAL in t.formats]
    return out


def section_lines(s: Section) -> Text:
    """A section's words: its title in bold, then its lines indented (unindented without a title)."""
    text = Text()
    if s.title:
        text.append(s.title + "\n", style="bold")
    for line in s.lines:
        mark = "warning: " if line.tone is Tone.WARN else ""
        _line(text, ("  " if s.title else "") + mark + line.text, _TONE[line.tone])
    return text


def head(h: Head) -> Text:
    """The verdict with its evidence and what to change."""
    text = Text()
    v = h.verdict
    if v is None:
        if h.title:
            text.append(h.heading + "\n", style="bold")
            _line(text, h.title, "bold")
        for line in (*([h.headline] if h.headline else []), *h.lines):
            _line(text, line.text, _TONE[line.tone])
        return text
    p = v.primary
    _verdict(text, v)
    for rec in p.recommendations:
        _line(text, f"  > {rec}", "cyan")
    for f in v.secondary:
        _line(text, f"also: {f.title}" + (f" [{f.badge}]" if f.badge else ""), "yellow")
        for words in f.evidence[1:] if f.share_pct is not None else f.evidence:
            _line(text, f"  - {words}")
        for rec in f.recommendations:
            _line(text, f"  > {rec}", "cyan")
    _first(text, v)
    for m in v.memory:
        _line(text, f"memory: {m.title}", "green" if m.good else "yellow")
        for words in m.evidence:
            _line(text, f"  - {words}")
        for rec in m.recommendations:
            _line(text, f"  > {rec}", "cyan")
    return text


def _verdict(text: Text, v: WrittenVerdict) -> None:
    """The verdict's heading, its finding's title and badge, and its evidence."""
    p = v.primary
    text.append("tracekit verdict", style="bold")
    _line(text, f" (measured on {v.measured_on})")
    _line(text, p.title, "bold green" if p.good else "bold red", end="")
    _line(text, f"  [{p.badge}]")
    for words in p.evidence:
        _line(text, f"  - {words}")


def _first(text: Text, v: WrittenVerdict, *, most: int | None = None) -> None:
    """What to do first (the ``most`` first fixes, None: every one), and what the first two are
    worth together."""
    if not v.first:
        return
    text.append("what to do first (by gain per effort):\n", style="bold")
    for i, item in enumerate(v.first[:most], 1):
        _line(text, f"  {i}. {item}", "cyan")
    if v.joint:
        _line(text, f"  {v.joint}")


#: How each tone is drawn.
_TONE: dict[Tone, str | None] = {
    Tone.PLAIN: None,
    Tone.GOOD: "green",
    Tone.BAD: "red",
    Tone.WARN: "yellow",
    Tone.ADVICE: "cyan",
    Tone.DIM: "dim",
    Tone.STRONG: "bold",
}


def notes(doc: Document) -> Text:
    """What the reader should know before the tables: the run, skipped files, warnings."""
    text = Text()
    for n in doc.notes:
        if n.lead:
            text.append("\n" + n.lead, style="bold")
        _line(text, ("  " if n.lead else "") + n.text, _TONE[n.tone])
    return text
