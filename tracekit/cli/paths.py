"""Output options checked against the inputs, before anything is read: no report overwrites an input.

An output names an input when it is the same file as one: the same path once symbolic links
are resolved, or the same file on disk (a hard link). The inputs are the files given, the trace
files inside the folders given (the files :func:`tracekit.readers.discover` would read), and the
capture's ``summary.json`` read beside them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tracekit.cli.emit import STDOUT
from tracekit.errors import InputError
from tracekit.readers.discover import is_trace_name

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

__all__ = ["check_outputs"]

_Key = tuple[object, ...]


def _keys(path: Path) -> set[_Key]:
    """What identifies ``path``'s file: its resolved path, and its device and inode when it exists."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a loop of symbolic links
        resolved = path.absolute()
    keys: set[_Key] = {("path", os.path.normcase(str(resolved)))}
    try:
        st = path.stat()
    except OSError:
        return keys
    keys.add(("inode", st.st_dev, st.st_ino))
    return keys


def _inputs(paths: Iterable[Path]) -> dict[_Key, str]:
    """Every file the inputs stand for, by key, with what it is (for the message)."""
    found: dict[_Key, str] = {}

    def add(path: Path, what: str) -> None:
        if path.is_file():
            found.update(dict.fromkeys(_keys(path), what))

    for path in paths:
        if path.is_dir():
            for inside in path.rglob("*"):
                if inside.is_file() and is_trace_name(inside):
                    add(inside, "a trace file in an input folder")
            add(path / "summary.json", "the capture summary of an input folder")
        else:
            add(path, "an input file")
            add(path.parent / "summary.json", "the capture summary beside an input file")
    return found


def check_outputs(outputs: Mapping[str, Path | None], inputs: Iterable[Path]) -> None:
    """Refuse (an :class:`InputError` naming the file) an output that names an input, or another output.

    ``outputs`` maps each option (``--json``) to its file, or None where it was not given; ``-``
    (stdout) for one of them at most, never for ``--details`` (Parquet).
    """
    piped = [option for option, path in outputs.items() if path == STDOUT]
    if len(piped) > 1:
        raise InputError(f"{' and '.join(piped)} both write to stdout (-): give all but one of them a file")
    if "--details" in piped:
        raise InputError("--details -: the Parquet tables are written to a file, not to stdout")
    named = [(option, path) for option, path in outputs.items() if path is not None and path != STDOUT]
    seen: dict[_Key, str] = {}
    for option, path in named:
        keys = _keys(path)
        other = next((seen[k] for k in keys if k in seen), None)
        if other is not None:
            raise InputError(f"{other} and {option} name the same file: give each output its own file", path=path)
        seen.update(dict.fromkeys(keys, option))
    if not named:
        return
    protected = _inputs(inputs)
    for option, path in named:
        what = next((protected[k] for k in _keys(path) if k in protected), None)
        if what is not None:
            raise InputError(
                f"{option} names {what}, which this command reads: it would be overwritten; "
                "write the report to another file",
                path=path,
            )
