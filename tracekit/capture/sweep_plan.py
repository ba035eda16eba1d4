"""The pure parts of a sweep: the grid, its cells and their order, where each goes, the OOM
probe's walk, and what is left to run of an interrupted sweep. No torch, no files.

- :func:`parse_grid`: ``--grid batch_size=8,12,16`` -> an axis (``key=v1,v2``; a key may be
  ``section.field``);
- :func:`grid_cells`: every combination, named ``key=value,...`` with keys in sorted order
  (``accelerate_config=ddp,batch_size=8``);
- :func:`interleaved`: all cells of repeat 1, then all of repeat 2, ... so that drift of
  the machine falls on every cell alike;
- :func:`next_probe`: from what is known to fit or not, the next batch size to try:
  doubling from the largest size that fits until one does not, then bisecting between the
  last fit and the first OOM until they are within :data:`PROBE_RESOLUTION` of the last fit
  (or, with a step, walking up by that step);
- :func:`pending`: the captures of a plan that no record covers (what ``--resume`` runs).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Final

from tracekit.errors import InputError
from tracekit.results.sweep import GridAxis, cell_name

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from tracekit.results.sweep import CellRun

__all__ = [
    "BATCH",
    "PROBE_MAX_BATCH",
    "PROBE_RESOLUTION",
    "Cell",
    "cell_folder",
    "grid_cells",
    "interleaved",
    "next_probe",
    "parse_grid",
    "pending",
    "probe_bracket",
    "probe_folder",
]

#: The config key the OOM probe walks.
BATCH: Final = "batch_size"
#: Bisection stops when the first OOM is within this share of the last fit (12.5%).
PROBE_RESOLUTION: Final = 0.125
#: The probe never tries a batch size above this.
PROBE_MAX_BATCH: Final = 1 << 16
_KEY: Final = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_UNSAFE: Final = re.compile(r"[^\w.,=+-]")


@dataclass(frozen=True)
class Cell:
    """One combination of grid values."""

    values: dict[str, str]

    @property
    def name(self) -> str:
        """``key=value,...`` with keys sorted: ``accelerate_config=ddp,batch_size=8``."""
        return cell_name(self.values)

    def without(self, key: str) -> Cell:
        """This cell without ``key`` (the other-cell a probe walks the batch size of)."""
        return Cell({k: v for k, v in self.values.items() if k != key})


def parse_grid(specs: Sequence[str]) -> list[GridAxis]:
    """``["batch_size=8,12", "accelerate_config=ddp,fsdp"]`` -> the axes, in the order given."""
    axes: list[GridAxis] = []
    for spec in specs:
        key, eq, text = spec.partition("=")
        key = key.strip().removeprefix("--").replace("-", "_")
        values = [v.strip() for v in text.split(",")]
        if not eq or not _KEY.match(key) or not all(values):
            raise InputError(f"--grid {spec!r}: write it as key=value1,value2 (e.g. batch_size=8,16)")
        if key in {a.key for a in axes}:
            raise InputError(f"--grid {spec!r}: {key} is already a grid axis")
        if key == "out_dir":
            raise InputError("--grid out_dir: every cell's folder is set by the sweep")
        if len(set(values)) != len(values):
            raise InputError(f"--grid {spec!r}: a value is repeated")
        axes.append(GridAxis(key=key, values=values))
    if not axes:
        raise InputError("give at least one --grid key=value1,value2")
    return axes


def grid_cells(axes: Sequence[GridAxis]) -> list[Cell]:
    """Every combination of the axes' values (the first axis varies slowest).

    Raises :class:`InputError` naming both values when two cells would share a folder (their
    names differ only in characters a folder name cannot hold, or in letter case, which some file
    systems ignore): the second capture would replace the first.
    """
    combos = itertools.product(*(a.values for a in axes))
    cells = [Cell(dict(zip([a.key for a in axes], combo, strict=True))) for combo in combos]
    folders: dict[str, Cell] = {}
    for cell in cells:
        folder = cell_folder(cell, 1, 1)
        other = folders.setdefault(folder.casefold(), cell)
        if other is not cell:
            key = next(k for k in cell.values if cell.values[k] != other.values[k])
            raise InputError(
                f"--grid {key}: the values {other.values[key]!r} and {cell.values[key]!r} would share the cell "
                f"folder {folder!r}; give values that differ in letters, digits or . , = + -"
            )
    return cells


def interleaved(cells: Sequence[Cell], repeats: int) -> list[tuple[int, Cell]]:
    """The order the captures run in: every cell of repeat 1, then of repeat 2, ..."""
    return [(repeat, cell) for repeat in range(1, repeats + 1) for cell in cells]


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name) or "cell"


def cell_folder(cell: Cell, repeat: int, repeats: int) -> str:
    """Where a grid cell's capture goes, relative to the sweep folder: ``cells/<name>``, or
    ``cells/<name>/run<r>`` when repeated."""
    base = PurePosixPath("cells", _safe(cell.name))
    return str(base if repeats == 1 else base / f"run{repeat}")


def probe_folder(cell: Cell) -> str:
    """Where a probe's capture goes: ``probe/<name with its batch size>``."""
    return str(PurePosixPath("probe", _safe(cell.name)))


def next_probe(
    known: Mapping[int, bool],
    *,
    step: int | None = None,
    resolution: float = PROBE_RESOLUTION,
    max_batch: int = PROBE_MAX_BATCH,
) -> int | None:
    """The next batch size to try, or None when the walk is over.

    ``known`` maps batch sizes tried (grid cells and earlier probes) to whether they fit.
    The walk starts from the largest size that fits and ends when the smallest size that did
    not fit above it is close enough (``step``, or ``resolution`` of the last fit, at least
    1), when nothing fits, or when the next size would pass ``max_batch``.
    """
    fits = [b for b, ok in known.items() if ok]
    if not fits:
        return None
    low = max(fits)
    above = [b for b, ok in known.items() if not ok and b > low]
    if not above:
        up = low + step if step else low * 2
        return up if up <= max_batch else None
    high = min(above)
    close = step if step else max(1, int(low * resolution))
    if high - low <= close:
        return None
    return (low + high) // 2


def probe_bracket(known: Mapping[int, bool]) -> tuple[int | None, int | None]:
    """The last size that fits and the first that does not above it."""
    fits = [b for b, ok in known.items() if ok]
    low = max(fits) if fits else None
    above = [b for b, ok in known.items() if not ok and (low is None or b > low)]
    return low, min(above) if above else None


def pending(order: Iterable[tuple[int, Cell]], runs: Sequence[CellRun]) -> list[tuple[int, Cell]]:
    """The grid captures of ``order`` that no run of ``runs`` records (what is left to run)."""
    done = {(r.cell, r.repeat) for r in runs if not r.probe}
    return [(repeat, cell) for repeat, cell in order if (cell.name, repeat) not in done]
