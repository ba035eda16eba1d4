"""The progress display: only on a terminal, only once the work is slow, gone afterwards."""

from __future__ import annotations

import io
import time

from rich.console import Console

from tracekit.cli.progress import DelayedProgress


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=100), out


def test_shown_after_the_delay_on_a_terminal() -> None:
    console, out = terminal()
    with DelayedProgress(delay=0.0, enabled=True, console=console) as progress:
        time.sleep(0.2)
        progress.file_done("/traces/rank3.json.gz", 1, 8)
        progress.stage("analyzing 8 rank(s)")
        time.sleep(0.2)
    assert "reading traces" in out.getvalue() or "analyzing" in out.getvalue()


def test_quick_work_shows_nothing() -> None:
    console, out = terminal()
    with DelayedProgress(delay=5.0, enabled=True, console=console) as progress:
        progress.file_done("rank0.json", 1, 1)
    assert out.getvalue() == ""


def test_nothing_when_not_a_terminal() -> None:
    console, out = terminal()
    with DelayedProgress(delay=0.0, enabled=False, console=console) as progress:
        time.sleep(0.1)
        progress.file_done("rank0.json", 1, 1)
    assert out.getvalue() == ""
    assert DelayedProgress().enabled is False  # pytest's stderr is not a terminal


def test_the_display_starts_from_what_was_recorded_before_it() -> None:
    # the files read before the delay passes are counted when the display appears (shown here
    # by hand, as the delay's timer would, so that no timing decides the outcome)
    console, out = terminal()
    with DelayedProgress(delay=600.0, enabled=True, console=console) as progress:
        progress.file_done("/traces/rank2.json.gz", 3, 8)
        progress._show()
    assert "3/8" in out.getvalue() and "rank2.json.gz" in out.getvalue()
