"""The one document model every renderer draws.

A result (an analysis, a comparison, a sweep's matrix, a capture summary, an A/B record, a
DataLoader probe, a parameter audit) becomes a :class:`Document`: a head, then titled
:class:`Section` s of :class:`Table` s, :class:`Chart` s and lines of words, all display-ready.
A renderer turns any document into text (:mod:`tracekit.reports.base`), so a new output format
is one class, and a number cannot differ between formats. The result itself rides along as
``source``, for the JSON renderer (which writes the typed result, not its words).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    import msgspec

    from tracekit.reports.wording import WrittenVerdict

#: A plotly.js figure is JSON data.
JSON = Union[str, int, float, bool, None, list["JSON"], dict[str, "JSON"]]  # noqa: UP007  (a recursive alias)
Figure = dict[str, JSON]


class Format(str, enum.Enum):
    """The formats a document is rendered in (the renderers' names)."""

    TERMINAL = "terminal"
    JSON = "json"
    MARKDOWN = "md"
    HTML = "html"


#: Every format: where a table shows unless it says otherwise.
EVERYWHERE: frozenset[Format] = frozenset(Format)


@dataclass(frozen=True)
class Table:
    """A titled table of display strings; ``numeric`` columns sort as numbers in HTML.

    ``formats``: where it shows (long tables, or tables of interest only when shared, stay out
    of the terminal or of Markdown).
    """

    key: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    numeric: tuple[bool, ...] = ()
    empty: str = ""
    formats: frozenset[Format] = EVERYWHERE


@dataclass(frozen=True)
class Chart:
    """One chart: its key, title, and the plotly figure as JSON-ready data (HTML only)."""

    key: str
    title: str
    figure: Figure


class Tone(enum.Enum):
    """How a line or a head reads: good news, bad news, a warning, advice, or plain."""

    PLAIN = "plain"
    GOOD = "good"
    BAD = "bad"
    WARN = "warn"
    ADVICE = "advice"
    DIM = "dim"
    STRONG = "strong"


@dataclass(frozen=True)
class Line:
    """One line of words; ``lead``: a bold lead-in that starts a new block of lines (terminal)."""

    text: str
    tone: Tone = Tone.PLAIN
    lead: str = ""


@dataclass(frozen=True)
class Section:
    """A titled part of a report: words, charts, tables (in that order); ``nav``: its short name."""

    key: str
    title: str
    nav: str = ""
    tables: tuple[Table, ...] = ()
    charts: tuple[Chart, ...] = ()
    lines: tuple[Line, ...] = ()
    #: what to say when the section has nothing else (HTML)
    note: str = ""


@dataclass(frozen=True)
class View:
    """How much a document for one format holds: ranks per per-rank table, rows of top-N tables."""

    format: Format
    #: ranks per per-rank table (None: every rank)
    limit: int | None = None
    #: rows of a top-N table (kernels, work that changed); None: the section's default
    top: int | None = None


def only(table: Table, *formats: Format) -> Table:
    """``table``, shown in ``formats`` only."""
    return replace(table, formats=frozenset(formats))


@dataclass(frozen=True)
class Head:
    """What a report says first.

    ``heading``: what report this is ("tracekit comparison"); ``title``: its result's own title
    (a comparison's step time); ``verdict``: an analysis's verdict in words; ``headline``: any
    other result's one line that says the most (a comparison's change, a tool's conclusion), with
    ``lines`` beside it; ``facts``: one line about the inputs.
    """

    heading: str
    title: str = ""
    verdict: WrittenVerdict | None = None
    headline: Line | None = None
    lines: tuple[Line, ...] = ()
    facts: str = ""
    #: the cost of each candidate bound, shown under an analysis's verdict (HTML)
    costs: Table | None = None
    #: the overall tone (HTML colors the head by it)
    tone: Tone = Tone.PLAIN


@dataclass(frozen=True)
class Document:
    """A whole report: the head, the sections in order, a footer; ``source``: the typed result."""

    kind: str
    head: Head
    sections: tuple[Section, ...]
    source: msgspec.Struct | None = None
    footer: str = ""
    #: what a console prints between the head and the tables (the run, skipped files, warnings;
    #: the other formats show these in the sections)
    notes: tuple[Line, ...] = ()
    #: a result without a verdict (a comparison): what its short answer prints under the head in a
    #: terminal (:func:`tracekit.reports.terminal.brief`); empty: the terminal prints it whole
    brief: tuple[Line, ...] = ()
