"""Which files are traces (by the suffixes of :data:`tracekit.readers.formats.FORMATS`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from tracekit.errors import InputError
from tracekit.readers import formats
from tracekit.results.capture import CAPTURE_SCHEMA, as_capture_summary

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tracekit.results.capture import CaptureSummary

#: Files tracekit itself writes next to traces; never read as traces from a folder.
_OWN_OUTPUTS: Final = re.compile(r"^(summary\.json|capture_config\.json|phases\.rank\d+\.json|.*\.tracekit\.json)$")


def is_trace_name(path: Path) -> bool:
    """Whether a file in a folder looks like a trace by its name."""
    name = path.name.lower()
    return name.endswith(formats.trace_suffixes()) and not _OWN_OUTPUTS.match(name)


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """The trace files named by ``paths``: files as given, folders searched recursively.

    Raises :class:`InputError` for a path that does not exist or a folder without traces.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file() and is_trace_name(p))
            if not inside:
                raise InputError(f"no trace files ({formats.suffix_list()}) in this folder", path=path)
            found.extend(_without_exported_reports(inside))
        elif path.exists():
            found.append(path)
        else:
            raise InputError("no such file or folder", path=path)
    unique: dict[Path, None] = dict.fromkeys(p.resolve() for p in found)
    return list(unique)


def _without_exported_reports(files: list[Path]) -> list[Path]:
    """Drop a file whose export sits beside it (``x.nsys-rep`` beside ``x.sqlite``)."""
    present = set(files)
    return [p for p in files if not any(fmt.export_of(p) in present for fmt in formats.FORMATS)]


def capture_summary(paths: Iterable[str | Path]) -> CaptureSummary | None:
    """The ``summary.json`` of ``tracekit capture`` beside the traces, if there is one.

    Looked for in each folder given and beside each file given; a ``summary.json`` that is
    not a tracekit capture summary is ignored (it is context for the report, not input). One
    that says it is, but of a newer major version or malformed, is an :class:`InputError`
    naming it.
    """
    for raw in paths:
        path = Path(raw)
        folder = path if path.is_dir() else path.parent
        candidate = folder / "summary.json"
        try:
            data = msgspec.json.decode(candidate.read_bytes())
        except (OSError, msgspec.DecodeError):
            continue
        if isinstance(data, dict) and data.get("schema") == CAPTURE_SCHEMA:
            return as_capture_summary(data, source=str(candidate))
    return None
