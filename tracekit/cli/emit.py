"""What a command prints and writes: its terminal report, and each report file asked for, written
together atomically. A file named ``-`` is stdout: the report in that format is printed there
alone, and the terminal report and the ``wrote ...`` lines go to stderr, so that
``tracekit analyze RUN --json - | jq`` reads JSON only; ``/dev/stdout`` (any name of the file
stdout is) is stdout too."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from tracekit.atomic import OutputFiles
from tracekit.reports.text import one_line

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = ["STDOUT", "emit", "stdout_taken"]

#: The file name that means stdout (``--json -``).
STDOUT: Final = Path("-")


def is_stdout(path: Path | None) -> bool:
    """Whether ``path`` is stdout: ``-``, or a name of the file stdout is (``/dev/stdout``,
    ``/proc/self/fd/1``, the terminal or pipe it is)."""
    if path is None:
        return False
    if path == STDOUT:
        return True
    try:
        return os.path.samestat(path.stat(), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # no stdout, or not a file
        return False


def stdout_taken(outputs: Mapping[str, Path | None] | Iterable[Path | None]) -> bool:
    """Whether one of ``outputs`` (option -> file, or files) is stdout: then the rest goes to stderr."""
    paths = outputs.values() if hasattr(outputs, "values") else outputs
    return any(is_stdout(path) for path in paths)


def emit(
    report: str,
    texts: Mapping[Path, str],
    *,
    files: Sequence[tuple[Path, Callable[[Path], object]]] = (),
    also: Sequence[Path] = (),
) -> None:
    """Print ``report`` (the terminal's), write each of ``texts`` (file -> text) and ``files``
    (file -> writer) atomically, together, then say what was written (``also``: files written
    before, named with them). A text for :data:`STDOUT` is printed on stdout, after the files
    are written, and everything else then goes to stderr."""
    piped = next((path for path in texts if is_stdout(path)), None)
    click.echo(report, nl=False, err=piped is not None)
    with OutputFiles() as out:
        for path, text in texts.items():
            if path != piped:
                out.add_text(path, text)
        for path, write in files:
            out.add(path, write)
    if piped is not None:
        body = texts[piped]
        click.echo(body, nl=not body.endswith("\n"))
    for path in [*texts, *(path for path, _ in files), *also]:
        if path != piped:
            click.echo(f"wrote {one_line(str(path))}", err=piped is not None)
