"""Terminal: no control character from a trace reaches the terminal, and no name is read as rich markup."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from tests.reports.hostile import PAYLOADS, gpu_run, hostile
from tracekit.cli.progress import DelayedProgress
from tracekit.reports import TerminalRenderer
from tracekit.reports.text import one_line, printable

#: The only escape sequences the report may hold: rich's colors and styles (SGR).
SGR = re.compile(r"\x1b\[[0-9;]*m")
#: Control characters (but the newline) and bidirectional controls.
CONTROLS = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def assert_terminal_safe(text: str) -> None:
    bare = SGR.sub("", text)
    assert "\x1b" not in bare
    assert not CONTROLS.search(bare), repr(CONTROLS.search(bare))


@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_hostile_strings_reach_the_terminal_as_visible_text(name: str, color: bool) -> None:
    payload = PAYLOADS[name]
    text = TerminalRenderer(top=5, width=400, color=color).render(hostile(gpu_run(), payload))
    assert_terminal_safe(text)
    plain = SGR.sub("", text)
    assert f"warning: {printable(payload)}" in plain  # shown as written: markup inert, controls visible
    assert f"backend: {printable(payload)}" in plain
    short = TerminalRenderer(width=400, color=color, full=False).render(hostile(gpu_run(), payload))
    assert_terminal_safe(short)  # the short answer: the warnings and the facts line carry the payload
    assert f"warning: {printable(payload)}" in SGR.sub("", short)


def test_controls_are_shown_as_escapes() -> None:
    assert printable("a\x1b]8;;http://evil\x07b") == "a\\x1b]8;;http://evil\\x07b"
    assert printable("\x1b[2J\x9b\u202eevil\u2069") == "\\x1b[2J\\x9b\\u202eevil\\u2069"
    assert printable("tab\tnew\nline\r") == "tab new line "
    assert one_line("a\n\n  b\u2028c") == "a b c"
    assert printable("naïve 名前 ünïcode") == "naïve 名前 ünïcode"


def test_capture_summary_tables_are_safe() -> None:
    summary = hostile(gpu_run(), PAYLOADS["osc 8 hyperlink"]).capture
    assert summary is not None
    assert_terminal_safe(TerminalRenderer(width=100).render(summary))


def test_markup_in_a_kernel_name_is_text() -> None:
    payload = PAYLOADS["rich markup"]
    text = TerminalRenderer(top=5, width=400).render(hostile(gpu_run(), payload))
    assert payload in text and "[/bold red]" in text


def test_progress_shows_a_hostile_file_name_as_text() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200)
    progress = DelayedProgress(delay=0, enabled=True, console=console)
    with progress:
        column = progress._progress.columns[1]
        task = progress._progress.tasks[0]
        progress.file_done("/x/[bold red]rank0\x1b]8;;evil\x07.json", 1, 2)
        named = column.render(task).plain  # type: ignore[union-attr]
        progress.stage("analyzing [red]1[/red] rank(s)")
        staged = column.render(task).plain  # type: ignore[union-attr]
    assert named == "reading traces (last: [bold red]rank0\\x1b]8;;evil\\x07.json)"
    assert staged == "analyzing [red]1[/red] rank(s)"
    assert "\x1b]" not in buffer.getvalue() and "\x07" not in buffer.getvalue()  # rich's own cursor moves only
