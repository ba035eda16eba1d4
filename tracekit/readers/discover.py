"""Which files are traces, and which rank a file name claims."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from tracekit.errors import InputError
from tracekit.results.capture import CAPTURE_SCHEMA, as_capture_summary

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tracekit.results.capture import CaptureSummary

#: Endings of traces: Kineto JSON, Nsight Systems SQLite exports and reports.
TRACE_SUFFIXES: Final = (".json", ".json.gz", ".sqlite", ".nsys-rep")
#: Files tracekit itself writes next to traces; never read as traces from a folder.
_OWN_OUTPUTS: Final = re.compile(r"^(summary\.json|capture_config\.json|phases\.rank\d+\.json|.*\.tracekit\.json)$")
_RANK_IN_NAME: Final = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)


def is_trace_name(path: Path) -> bool:
    """Whether a file in a folder looks like a trace by its name."""
    name = path.name.lower()
    return name.endswith(TRACE_SUFFIXES) and not _OWN_OUTPUTS.match(name)


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
                raise InputError("no trace files (*.json, *.json.gz, *.sqlite, *.nsys-rep) in this folder", path=path)
            found.extend(_without_exported_reports(inside))
        elif path.exists():
            found.append(path)
        else:
            raise InputError("no such file or folder", path=path)
    unique: dict[Path, None] = dict.fromkeys(p.resolve() for p in found)
    return list(unique)


def _without_exported_reports(files: list[Path]) -> list[Path]:
    """Drop ``x.nsys-rep`` where ``x.sqlite`` (its export) sits beside it."""
    exported = {p.with_name(p.name.removesuffix(".sqlite")) for p in files if p.name.endswith(".sqlite")}
    return [
        p
        for p in files
        if not (p.name.endswith(".nsys-rep") and p.with_name(p.name.removesuffix(".nsys-rep")) in exported)
    ]


def rank_from_name(path: str | Path) -> int | None:
    """The rank in a file name (``rank3``, ``rank-3``, ``rank_3``, ``worker3``), if any."""
    matches = _RANK_IN_NAME.findall(Path(path).name)
    return int(matches[-1]) if matches else None


def parse_rank_spec(spec: str) -> set[int]:
    """Ranks from a spec such as ``0-3,7``; raises :class:`InputError` when malformed."""
    ranks: set[int] = set()
    for part in spec.split(","):
        item = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if not match:
            raise InputError(f"--ranks: {item!r} is not a rank or a range like 0-3")
        low, high = int(match[1]), int(match[2] or match[1])
        if high < low:
            raise InputError(f"--ranks: range {item!r} runs backwards")
        ranks.update(range(low, high + 1))
    return ranks


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
