"""Drawing a document's parts with rich: tables and lines, never read as markup.

Every string goes to rich as :class:`~rich.text.Text` (never parsed as markup) through
:func:`~tracekit.reports.text.printable`, so no name from a trace can move the cursor, clear
the screen, set a hyperlink or reorder the text (no control character reaches the terminal).
"""

from __future__ import annotations

import io
from dataclasses import replace
from typing import TYPE_CHECKING, Final, Literal

from rich.cells import cell_len
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


#: The longest word a column keeps whole when its table must shrink (longer ones end in "…").
LONGEST_WORD: Final = 60
#: The most lines a table's row takes: a longer cell is cut there, ends in a note mark ("… [1]"),
#: and is printed whole under the table.
ROW_LINES: Final = 2


def _words(text: str) -> list[str]:
    return printable(text).split() or [""]


def _least(t: DocTable, *, width: int) -> list[int]:
    """Each column's narrowest width that keeps its words whole (a word over :data:`LONGEST_WORD`,
    or half of ``width``, ends in "…")."""
    cap = max(8, min(LONGEST_WORD, (width - _chrome(2)) // 2))
    cells = (t.columns, *t.rows)
    return [min(cap, max(cell_len(w) for row in cells for w in _words(row[i]))) for i in range(len(t.columns))]


def _widths(t: DocTable, *, width: int) -> list[int | None]:
    """Each column's width for rich, so that no word is split across lines: its widest cell
    when the table fits as it is (what rich would measure, given so that it measures no cell
    again: a third of the terminal report's time), else the widest columns narrowed to one
    level (never under their longest word, :func:`_least`), so that short columns keep their
    width and long texts wrap at spaces."""
    natural = [max(cell_len(printable(row[i])) for row in (t.columns, *t.rows)) for i in range(len(t.columns))]
    room = width - _chrome(len(natural))
    if sum(natural) <= room:
        return list(natural)
    least = _least(t, width=width)

    def at(level: int) -> list[int]:
        return [max(m, min(n, level)) for n, m in zip(natural, least, strict=True)]

    level = max(natural)
    while level > 1 and sum(at(level)) > room:
        level -= 1
    return list(at(level))


def _chrome(columns: int) -> int:
    """The characters a rich table adds around ``columns`` columns: a border and two spaces
    each, and one more border."""
    return 3 * columns + 1


def _groups(t: DocTable, *, width: int) -> list[list[int]]:
    """The columns of ``t`` in groups that fit ``width`` with every word whole; each group after
    the first repeats the first column (the row's key: a rank, a name)."""
    least = _least(t, width=width)
    groups: list[list[int]] = [[0]]
    for i in range(1, len(least)):
        group = groups[-1]
        if len(group) > 1 and sum(least[j] for j in (*group, i)) + _chrome(len(group) + 1) > width:
            groups.append([0])
        groups[-1].append(i)
    return groups


def _part(t: DocTable, columns: list[int], *, title: str, caption: str, width: int) -> RenderableType:
    part = replace(
        t,
        title=title,
        caption=caption,
        columns=tuple(t.columns[i] for i in columns),
        rows=tuple(tuple(r[i] for i in columns) for r in t.rows),
        numeric=tuple(t.numeric[i] if i < len(t.numeric) else False for i in columns),
    )
    table = Table(
        title=_cell(part.title),
        title_justify="left",
        caption=_cell(part.caption) if part.caption else None,
        caption_justify="left",
        # as wide as its title's and caption's longest word, which wrap at spaces too
        min_width=min(width, max(cell_len(w) for w in (*_words(part.title), *_words(part.caption)))),
    )
    widths = _widths(part, width=width)
    for i, (col, w) in enumerate(zip(part.columns, widths, strict=True)):
        justify: Literal["left", "right"] = "right" if part.numeric[i] else "left"
        table.add_column(_cell(col), justify=justify, overflow="ellipsis", width=w)
    rows, notes = _fitted(part.rows, widths)
    for row in rows:
        table.add_row(*map(_cell, row))
    if not notes:
        return table
    # the notes, then the caption, under the table
    table.caption = None
    below = Text()
    for n, text in enumerate(notes, 1):
        line(below, f"[{n}] {text}")
    if part.caption:
        line(below, part.caption)
    return Group(table, below)


def _lines(text: str, width: int) -> int:
    """The lines ``text`` takes in a column ``width`` wide (rich's own wrapping)."""
    return len(Text(printable(text)).wrap(_MEASURE, max(1, width), overflow="ellipsis"))


#: A console to measure wrapping with (it prints nothing).
_MEASURE: Final = Console(file=io.StringIO(), width=1000)


def _cut(text: str, width: int, mark: str) -> str:
    """The most words of ``text`` that, followed by "… ``mark``", fit :data:`ROW_LINES` lines of ``width``."""
    words = printable(text).split()
    keep = 0
    while keep < len(words) and _lines(" ".join(words[: keep + 1]) + f"… {mark}", width) <= ROW_LINES:
        keep += 1
    return " ".join(words[:keep]) + f"… {mark}" if keep else mark


def _fitted(rows: tuple[tuple[str, ...], ...], widths: list[int | None]) -> tuple[list[tuple[str, ...]], list[str]]:
    """``rows`` with every cell that would take more than :data:`ROW_LINES` lines cut, ending in
    a note's mark, and the notes (the cells whole) in order: no row wraps into more lines."""
    notes: list[str] = []
    fitted = []
    for row in rows:
        cells = list(row)
        for i, (cell, w) in enumerate(zip(row, widths, strict=True)):
            if w is not None and _lines(cell, w) > ROW_LINES:
                notes.append(cell)
                cells[i] = _cut(cell, w, f"[{len(notes)}]")
        fitted.append(tuple(cells))
    return fitted, notes


def rich_table(t: DocTable, *, width: int = 120) -> RenderableType:
    """A document's table as rich tables that fit ``width`` columns (or its 'nothing to show'
    line): words wrap at spaces and are never split across lines; a table too wide for
    ``width`` is cut into groups of columns, each repeating the first."""
    if not t.rows:
        return Text(printable(f"{t.title}: {t.empty or 'nothing to show.'}") + "\n")
    groups = _groups(t, width=width)
    return Group(
        *(
            _part(
                t,
                group,
                title=t.title if n == 0 else f"{t.title} (continued)",
                caption=t.caption if n == len(groups) - 1 else "",
                width=width,
            )
            for n, group in enumerate(groups)
        )
    )


def printed(parts: Iterable[RenderableType], *, width: int, color: bool = False) -> str:
    """``parts`` printed one after the other, as text (ANSI colored when ``color``)."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, no_color=not color, highlight=False)
    console.print(Group(*parts))
    return buffer.getvalue()
