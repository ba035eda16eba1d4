"""A progress display for long analyses: rich, on stderr, only on a terminal, only when slow.

Nothing is drawn for the first ``delay`` seconds, so a quick analysis prints its report
and nothing else; nothing is drawn at all when stderr is not a terminal (a pipe, a file,
CI logs). The display is transient: it is erased before the report is printed.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from rich.markup import escape

from tracekit.reports.text import one_line

if TYPE_CHECKING:
    from types import TracebackType

    from rich.console import Console
    from rich.progress import Progress

#: Seconds of silence before the display appears.
DELAY_S: Final = 2.0


class DelayedProgress:
    """Files read, then the stage of the analysis; shown after ``delay`` seconds on a terminal.

    rich's progress display is made (and ``rich.progress`` imported, 10 ms) only when it is
    shown: until then the files done and the stage are only recorded, which is all a quick
    command (``tracekit compare`` of saved analyses) ever does."""

    def __init__(self, *, delay: float = DELAY_S, enabled: bool | None = None, console: Console | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._console = console
        self._progress: Progress | None = None
        self._state: dict[str, Any] = {"description": "reading traces", "completed": 0, "total": None}
        self._lock = threading.Lock()
        self._delay = delay
        self._timer = threading.Timer(delay, self._show)
        self._timer.daemon = True
        self._closed = False

    def __enter__(self) -> DelayedProgress:
        if self.enabled and self._delay <= 0:  # at once: not when a timer thread gets to it
            self._show()
        elif self.enabled:
            self._timer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._progress is not None:
                self._progress.stop()

    def _show(self) -> None:
        with self._lock:
            if self._closed:
                return
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self._console or Console(stderr=True),
                transient=True,
            )
            self._task = self._progress.add_task(**self._state)
            self._progress.start()

    def _update(self, **state: Any) -> None:
        with self._lock:
            self._state.update(state)
            if self._progress is not None:
                self._progress.update(self._task, **state)

    def file_done(self, path: str, done: int, total: int) -> None:
        """A file was read (the ``progress`` callback of :func:`tracekit.readers.load_run`)."""
        last = escape(one_line(Path(path).name))  # the description is rich markup: a name is text
        self._update(completed=done, total=total, description=f"reading traces (last: {last})")

    def steps(self, done: int, total: int, where: str) -> None:
        """A capture's ranks went on: the slowest has begun ``done`` of ``total`` steps, and is
        ``where`` (the ``progress`` callback of :func:`tracekit.capture.launcher.capture`)."""
        self._update(completed=done, total=total, description=escape(one_line(f"capturing: slowest rank {where}")))

    def stage(self, description: str) -> None:
        """The analysis moved on to ``description`` (analyzing, rendering)."""
        self._update(description=escape(one_line(description)))
