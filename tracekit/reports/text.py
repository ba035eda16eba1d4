"""Text from traces made safe to show: no control characters reach a terminal, no line breaks a line.

Names in a trace (kernels, operators, annotations, file paths, devices) are whatever the traced
program or a hostile file says. Before any of them is printed, :func:`printable` replaces every
character that a terminal or a reader would not show as itself (C0 and C1 controls such as the
ESC that starts ANSI CSI and OSC sequences, DEL, bidirectional overrides and other invisible
format characters, lone surrogates) by a visible escape such as ``\\x1b`` or ``\\u202e``, and
line and tab characters by a space. :func:`one_line` also collapses runs of white space.
"""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["one_line", "printable"]

#: Line breaks, tabs and other separators: shown as a space.
_SPACES: Final = frozenset("\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\u2028\u2029")
#: Categories never shown as themselves: controls, format characters (bidi, zero-width), surrogates.
_HIDDEN: Final = frozenset(("Cc", "Cf", "Cs"))


def _visible(ch: str) -> str:
    if ch in _SPACES:
        return " "
    if unicodedata.category(ch) not in _HIDDEN:
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every control, format and separator character made visible or a space."""
    if text.isprintable():
        return text
    return "".join(map(_visible, text))


def one_line(text: str) -> str:
    """:func:`printable` ``text`` on one line, runs of white space collapsed to one space."""
    return " ".join(printable(text).split())
