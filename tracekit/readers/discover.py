"""Which files are traces (by the suffixes of :data:`tracekit.readers.formats.FORMATS`).

Files tracekit writes itself are left out of a folder: the capture's companions by name
(``summary.json``, ``phases.rank0.json``, ...: read beside the traces or not at all), its
outputs by their first bytes (:mod:`tracekit.readers.own_outputs`: an annotated trace, an
analysis or another JSON record), which are named among the files skipped, with why.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tracekit.errors import InputError
from tracekit.model.run import SkippedFile
from tracekit.readers import formats
from tracekit.readers.memory_timeline import is_memory_timeline
from tracekit.readers.own_outputs import own_output

if TYPE_CHECKING:
    from collections.abc import Iterable

#: Files tracekit itself writes next to traces; never read as traces from a folder.
_OWN_OUTPUTS: Final = re.compile(
    r"^(summary\.json|capture_config\.json|phases\.rank\d+\.json|.*\.tracekit\.json|ab\.json|.*\.raw(\.json)?(\.gz)?)$"
)


def is_trace_name(path: Path) -> bool:
    """Whether a file in a folder looks like a trace by its name."""
    name = path.name.lower()
    return name.endswith(formats.trace_suffixes()) and not _OWN_OUTPUTS.match(name)


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """The trace files named by ``paths``: files as given, folders searched recursively.

    Raises :class:`InputError` for a path that does not exist or a folder without traces;
    paths that are not regular files are left out (:func:`discover_files` names them).
    """
    return discover_files(paths)[0]


def discover_files(paths: Iterable[str | Path]) -> tuple[list[Path], list[SkippedFile]]:
    """The trace files named by ``paths``, and the paths left out: not regular files, or tracekit's own outputs.

    Only regular files are read: a FIFO or a pipe (what ``<(...)`` gives) would block or be
    consumed, a device such as ``/dev/zero`` never ends. They are named, as is a trace name
    in a folder that cannot be opened (a symlink loop, a dangling link). So is an output of
    tracekit's (:func:`~tracekit.readers.own_outputs.own_output`) in a folder, and one named
    itself unless it is the annotated trace of one rank (which reads back as that rank).
    Raises :class:`InputError` for a path that does not exist or a folder without traces.
    """
    found: list[Path] = []
    skipped: list[SkippedFile] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if is_trace_name(p) and not p.is_dir())
            why_not = {p: _not_regular(p) for p in inside}  # one stat per file
            skipped += [SkippedFile(str(p), why) for p, why in why_not.items() if why is not None]
            outputs = {p: own_output(p) for p, why in why_not.items() if why is None}
            skipped += [SkippedFile(str(p), o.reason) for p, o in outputs.items() if o is not None]
            if not inside and not memory_timelines([path]):
                raise InputError(f"no trace files ({formats.suffix_list()}) in this folder", path=path)
            found.extend(_without_exported_reports([p for p, o in outputs.items() if o is None]))
        elif is_memory_timeline(path):
            continue  # read beside the traces (memory_timelines), not as one
        elif (why := _not_regular(path)) is None:
            if (own := own_output(path)) is not None and not own.one_rank:
                skipped.append(SkippedFile(str(path), own.reason))
            else:
                found.append(path)
        elif path.exists() or path.is_symlink():
            skipped.append(SkippedFile(str(path), why))
        else:
            raise InputError("no such file or folder", path=path)
    unique: dict[Path, Path] = {}
    for p in found:  # one file named twice is read once, under the first name given (not its target)
        unique.setdefault(p.resolve(), p.absolute())
    return list(unique.values()), skipped


def memory_timelines(paths: Iterable[str | Path]) -> list[Path]:
    """The raw memory timelines (``export_memory_timeline``) named by ``paths``: files as
    given, folders searched recursively; only regular files."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out += sorted(p for p in path.rglob("*") if is_memory_timeline(p) and _not_regular(p) is None)
        elif is_memory_timeline(path) and _not_regular(path) is None:
            out.append(path)
    return list(dict.fromkeys(out))


def is_regular(path: Path) -> bool:
    """Whether ``path`` is a file that can be read without blocking: a regular file that can be opened."""
    return path.is_file() and _not_regular(path) is None


def _not_regular(path: Path) -> str | None:
    """Why ``path`` is not read (it is not a regular file), or None when it is one."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"cannot be opened ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        what = "a pipe or FIFO (process substitution <(...) gives one); save it to a file first"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        what = "a device"
    elif stat.S_ISSOCK(mode):
        what = "a socket"
    elif stat.S_ISDIR(mode):
        return None
    else:
        what = "a special file"
    return f"not a regular file ({what}); only regular files are read"


def _without_exported_reports(files: list[Path]) -> list[Path]:
    """Drop a file whose export sits beside it (``x.nsys-rep`` beside ``x.sqlite``)."""
    present = set(files)
    return [p for p in files if not any(fmt.export_of(p) in present for fmt in formats.FORMATS)]
