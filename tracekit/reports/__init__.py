"""Renderers: analysis results -> text (terminal, JSON). They never see raw events."""

from __future__ import annotations

from tracekit.reports.json_report import SCHEMA, SCHEMA_VERSION, render_json, to_document
from tracekit.reports.terminal import TerminalRenderer

__all__ = ["SCHEMA", "SCHEMA_VERSION", "TerminalRenderer", "render_json", "to_document"]
