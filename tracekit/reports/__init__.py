"""Renderers: a typed analysis -> text (terminal, JSON, Markdown, HTML). They never see raw events."""

from __future__ import annotations

from tracekit.reports.base import RENDERERS, Renderer, renderer
from tracekit.reports.terminal import TerminalRenderer

__all__ = ["RENDERERS", "Renderer", "TerminalRenderer", "renderer"]
