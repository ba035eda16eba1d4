"""The one renderer protocol, and the registry the CLI picks formats from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from tracekit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.reports.documents import Renderable


class Renderer(Protocol):
    """Documents in, text out; options go to the constructor."""

    name: str

    def render(self, document: Renderable) -> str:
        """A document (:mod:`tracekit.reports.document`) as text; a result (an analysis, a sweep's
        matrix, a capture summary...) is drawn as its document (:mod:`tracekit.reports.documents`)."""
        ...


def _terminal() -> Renderer:
    from tracekit.reports.terminal import TerminalRenderer  # noqa: PLC0415  (imported when used)

    return TerminalRenderer()


def _json() -> Renderer:
    from tracekit.reports.json_report import JsonRenderer  # noqa: PLC0415  (imported when used)

    return JsonRenderer()


def _markdown() -> Renderer:
    from tracekit.reports.markdown import MarkdownRenderer  # noqa: PLC0415  (imported when used)

    return MarkdownRenderer()


def _html() -> Renderer:
    from tracekit.reports.html import HtmlRenderer  # noqa: PLC0415  (imported when used)

    return HtmlRenderer()


#: Format name -> a renderer with default options (imported only when used).
RENDERERS: dict[str, Callable[[], Renderer]] = {
    "terminal": _terminal,
    "json": _json,
    "md": _markdown,
    "html": _html,
}


def renderer(name: str) -> Renderer:
    """The renderer registered under ``name``."""
    if name not in RENDERERS:
        raise InputError(f"renderer: no format {name!r} (the formats: {', '.join(RENDERERS)})")
    return RENDERERS[name]()
