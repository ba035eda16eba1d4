"""The input formats tracekit reads: one record per format, and how a file's format is decided.

Everything that depends on the set of formats reads :data:`FORMATS`: which files in a folder
are traces (:mod:`tracekit.readers.discover`), which reader a file goes to
(:func:`format_of`), the messages that list the suffixes, and ``tracekit analyze --help``.

A file's format is decided by, in order: its content (the first format whose ``sniff``
recognizes it: an SQLite header is an Nsight Systems export, whatever its name), its name
(the format with the longest matching suffix), else :data:`FALLBACK` (Kineto).

Adding a format: write its reader module, with a function
``read(path, *, cache_root, jobs=1) -> list[RankTrace]`` (one :class:`RankTrace` per rank the file
holds, events in :data:`tracekit.model.schema.SCHEMA`, counters in
:data:`tracekit.model.counters.COUNTER_SCHEMA`), and add one line to :data:`FORMATS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from tracekit.readers import kineto, nsys, nsys_export
from tracekit.readers.step_markers import screen_steps

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.readers.trace import RankTrace


class Reader(Protocol):
    """Read one file into its ranks; errors a user can cause are :class:`~tracekit.errors.TraceReadError`."""

    def __call__(self, path: Path, /, *, cache_root: Path | None, jobs: int = 1) -> list[RankTrace]: ...


@dataclass(frozen=True)
class InputFormat:
    """One input format: how its files are named and recognized, what reads them, its clock."""

    #: A short name, e.g. "kineto".
    name: str
    #: What the files are, for ``--help``.
    description: str
    #: File name endings (lower case, with the dot) that name this format.
    suffixes: tuple[str, ...]
    #: The reader: a file -> its ranks.
    read: Reader
    #: How its times become the run's integer nanoseconds.
    clock: str
    #: Whether a file is of this format by its content, whatever its name (cheap: a header).
    sniff: Callable[[Path], bool] | None = None
    #: A file ``x<suffix>`` of this format is skipped in a folder where ``x<exported_as>``
    #: (its export to another format) sits beside it.
    exported_as: str | None = None

    def export_of(self, path: Path) -> Path | None:
        """Where the export of ``path`` (a file of this format) would sit beside it, if it has one."""
        if self.exported_as is None:
            return None
        for suffix in self.suffixes:
            if path.name.lower().endswith(suffix):
                return path.with_name(path.name[: -len(suffix)] + self.exported_as)
        return None


#: Every format tracekit reads; the first is :data:`FALLBACK`.
FORMATS: Final[tuple[InputFormat, ...]] = (
    InputFormat("kineto", "PyTorch profiler (Kineto) Chrome trace", (".json", ".json.gz"), kineto.read, kineto.CLOCK),
    InputFormat("nsys", "Nsight Systems SQLite export", (".sqlite",), nsys.read, nsys.CLOCK, sniff=nsys.is_sqlite),
    InputFormat(
        "nsys-rep", "Nsight Systems report", (".nsys-rep",), nsys_export.read, nsys.CLOCK, exported_as=".sqlite"
    ),
)
#: The format of a file that no format sniffs and no suffix names.
FALLBACK: Final = FORMATS[0]


def format_of(path: str | Path) -> InputFormat:
    """The format of ``path``: by content (sniff), else by name (longest suffix), else Kineto."""
    path = Path(path)
    for fmt in FORMATS:
        if fmt.sniff is not None and fmt.sniff(path):
            return fmt
    name = path.name.lower()
    named = [(len(s), fmt) for fmt in FORMATS for s in fmt.suffixes if name.endswith(s)]
    return max(named, key=lambda item: item[0])[1] if named else FALLBACK


def read_file(path: str | Path, *, cache_root: Path | None = None, jobs: int = 1) -> list[RankTrace]:
    """Read one trace file of any supported format into its ranks (see :func:`format_of`).

    ``cache_root`` is where a reader keeps what it makes on the way (a ``.nsys-rep``'s SQLite
    export), default the cache folder; ``jobs``: processes a reader may use for one large file.
    """
    path = Path(path)
    return [screen_steps(t) for t in format_of(path).read(path, cache_root=cache_root, jobs=jobs)]


def trace_suffixes() -> tuple[str, ...]:
    """Every suffix of every format, in registry order."""
    return tuple(s for fmt in FORMATS for s in fmt.suffixes)


def suffix_list() -> str:
    """The suffixes as a message lists them: ``*.json, *.json.gz, *.sqlite, *.nsys-rep``."""
    return ", ".join(f"*{s}" for s in trace_suffixes())


def help_rows() -> list[tuple[str, str]]:
    """(suffixes, what and clock) per format, then how a format is decided: for ``--help``."""
    rows = [(", ".join(f"*{s}" for s in fmt.suffixes), f"{fmt.description}; {fmt.clock}") for fmt in FORMATS]
    sniffed = ", ".join(fmt.name for fmt in FORMATS if fmt.sniff is not None)
    rule = f"content decides first ({sniffed}), then the suffix; the rest is read as {FALLBACK.name}"
    return [*rows, ("any file", rule)]
