"""Drawing a document's parts with rich: tables and lines, never read as markup.

Every string goes to rich as :class:`~rich.text.Text` (never parsed as markup) through
:func:`~tracekit.reports.text.printable`, so no name from a trace can move the cursor, clear
the screen, set a hyperlink or reorder the text (no control character reaches the terminal).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracekit.reports.text import printable

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tracekit.reports.document import Table as DocTable


def line(text: Text, words: str, style: str | None = None, *, end: str = "\n") -> None:
    """Append one line of words to ``text``: control characters made visible, never read as markup."""
    text.append(printable(words) + end, style=style)


def _cell(text: str) -> Text:
    """A title, header or cell: one line, control characters made visible, never read as markup."""
    return Text(printable(text))


def rich_table(t: DocTable) -> RenderableType:
    """A document's table as a rich table (or its 'nothing to show' line)."""
    if not t.rows:
        return Text(printable(f"{t.title}: {t.empty or 'nothing to show.'}") + "\n")
    table = Table(
        title=_cell(t.title),
        title_justify="left",
        caption=_cell(t.caption) if t.caption else None,
        caption_justify="left",
    )
    for i, col in enumerate(t.columns):
        numeric = t.numeric[i] if i < len(t.numeric) else False
        table.add_column(_cell(col), justify="right" if numeric else "left", overflow="fold")
    for row in t.rows:
        table.add_row(*map(_cell, row))
    return table


def printed(parts: Iterable[RenderableType], *, width: int, color: bool = False) -> str:
    """``parts`` printed one after the other, as text (ANSI colored when ``color``)."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, no_color=not color, highlight=False)
    console.print(Group(*parts))
    return buffer.getvalue()
