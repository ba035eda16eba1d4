"""Any document as Markdown for a GitHub issue or pull-request comment: the head (a verdict or
a headline), then each section's lines and tables.

Per-rank tables keep the worst ranks when a run is large, names are cut, and the whole text
stays under GitHub's 65,536-character comment limit whatever the run size.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from tracekit.reports.document import Format, Head, Line, Tone
from tracekit.reports.documents import Renderable, as_document
from tracekit.reports.text import one_line

if TYPE_CHECKING:
    from tracekit.reports.document import Table
    from tracekit.reports.wording import WrittenVerdict

#: GitHub rejects comments of 65,536 characters or more; stay clearly below.
MAX_CHARS: Final = 65_000


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


def table(t: Table) -> str:
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


def verdict(v: WrittenVerdict) -> str:
    """The verdict section."""
    p = v.primary
    lines = [
        f"## tracekit verdict: {escape(p.title)}",
        "",
        f"**{escape(p.badge)}** (measured on {escape(v.measured_on)})",
        "",
    ]
    lines += [f"- {escape(e)}" for e in p.evidence]
    if p.recommendations:
        lines += ["", "**What to change**", ""] + [f"1. {escape(r)}" for r in p.recommendations]
    if v.first:
        lines += ["", "**What to do first** (by gain per effort)", ""] + [f"1. {escape(x)}" for x in v.first]
        if v.joint:
            lines += ["", escape(v.joint[0].upper() + v.joint[1:]) + "."]
    if v.secondary:
        lines += ["", "**Also found**", ""]
        for f in v.secondary:
            badge = f" ({escape(f.badge)})" if f.badge else ""
            advised = " ".join(f.recommendations)
            reason = f.reason
            why = f" {escape(reason[0].upper() + reason[1:])}." if reason else ""
            lines.append(f"- {escape(f.title)}{badge}.{why} {escape(advised)}")
    if v.memory:
        lines += ["", "**Memory**", ""]
        for m in v.memory:
            said = "; ".join((*m.evidence, *m.recommendations))
            lines.append(f"- {escape(m.title)}. {escape(said)}")
    return "\n".join([*lines, ""])


class MarkdownRenderer:
    """Markdown for a GitHub issue comment: the verdict, what to change, the key tables."""

    name = "md"
    format = Format.MARKDOWN

    def __init__(self, *, top: int = 15) -> None:
        #: rows of a comparison's table of work that changed
        self.top = top

    def render(self, document: Renderable) -> str:
        """The Markdown report (under GitHub's comment limit whatever the run size)."""
        doc = as_document(document, self.format, top=self.top)
        parts = [verdict(doc.head.verdict) if doc.head.verdict is not None else head(doc.head)]
        footer = f"\n<sub>{escape(doc.footer)}</sub>\n" if doc.footer else ""
        budget = MAX_CHARS - len(footer) - len(parts[0])
        blocks = [
            text
            for s in doc.sections
            for text in (
                *([_list(s.title, list(s.lines))] if s.lines else []),
                *(table(t) for t in s.tables if Format.MARKDOWN in t.formats),
            )
        ]
        for text in blocks:
            if len(text) + 200 > budget:
                parts.append("_Further tables left out to stay under GitHub's comment limit: see the JSON report._\n")
                break
            parts.append(text)
            budget -= len(text) + 1
        return "\n".join(parts) + footer


def _list(title: str, items: list[Line]) -> str:
    heading = [f"### {escape(title)}", ""] if title else []
    return "\n".join([*heading, *(f"- {_MARK.get(i.tone, '')}{escape(i.text)}" for i in items), ""])


def head(h: Head) -> str:
    """A head without a verdict: the heading and title, the headline in bold, the lines beside it."""
    lines = [f"## {escape(h.heading)}" + (f": {escape(h.title)}" if h.title else ""), ""]
    if h.headline is not None:
        lines += [f"**{escape(h.headline.text)}**", ""]
    for x in h.lines:
        lines += ["", f"<sub>{escape(x.text)}</sub>", ""] if x.tone is Tone.DIM else [f"- {escape(x.text)}"]
    return "\n".join([*lines, ""])


#: What marks a line of each tone in Markdown (a check passed or failed, a warning).
_MARK = {Tone.GOOD: "✅ ", Tone.BAD: "❌ ", Tone.WARN: "⚠️ "}
