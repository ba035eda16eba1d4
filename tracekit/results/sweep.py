"""``sweep.json`` and the sweep's matrix: typed Structs for ``tracekit sweep``.

:class:`Sweep` is what the sweep folder records as it goes (written by
:mod:`tracekit.capture.sweep` after every cell, atomically): the grid, the settings, every
capture it ran (a grid cell in one repeat, or one step of an OOM probe) with its status and,
when it ran, its slowest-rank step times and worst-rank peak memory, and each probe's
outcome. Folders are relative to the sweep folder (it may be moved).

:class:`SweepMatrix` is what the reports show (built by :mod:`tracekit.analyzers.sweep`): one
row per grid cell over its repeats, the verdict of traced cells, the best cell under the
memory headroom and its margin over the runner-up with the noise interval of
:mod:`tracekit.analyzers.compare`.

Times are nanoseconds, memory bytes, rates per second, shares percentages. Layout of
schema 1.x; any 1.x file loads, a newer major version is refused.

Schema 1.1 (from 1.0): findings are kinds and figures, their words written by the reports.
A probe's ``stopped`` is a :class:`ProbeStop` (with ``failed_batch`` and ``failure`` when a capture
failed); a row's ``probe_note`` is ``probe_error`` (the OOM or failure message) and
``probe_stopped``; ``capacity_source`` is a :class:`CapacitySource`; ``notes`` are
:class:`MatrixNote` objects; the best cell's ``margin`` is a :class:`~tracekit.results.compare.Measure`
of comparison schema 2.1 (no ``label``, its ``note`` a :class:`~tracekit.results.vocab.MeasureNote`,
unit ``samples_per_s``). Where 1.0 held sentences, a 1.0 file is read into these when loaded.
"""

from __future__ import annotations

import itertools
from typing import Final

import msgspec

from tracekit.errors import InputError
from tracekit.results import upgrade
from tracekit.results.compare import Measure  # noqa: TC001  (msgspec reads the annotations at run time)
from tracekit.results.ranges import check_ranges
from tracekit.results.records import dump_record, load_record
from tracekit.results.vocab import (
    BoundKind,
    CapacitySource,
    CellStatus,
    MatrixNoteKind,
    MemoryDevice,
    ProbeStop,
)

__all__ = [
    "MATRIX_SCHEMA",
    "SWEEP_SCHEMA",
    "SWEEP_SCHEMA_VERSION",
    "Best",
    "CellRun",
    "CellStatus",
    "GridAxis",
    "MatrixNote",
    "MatrixRow",
    "ProbeRecord",
    "Sweep",
    "SweepMatrix",
    "cell_name",
    "dump_matrix",
    "dump_sweep",
    "load_matrix",
    "load_sweep",
]

SWEEP_SCHEMA: Final = "tracekit.sweep"
MATRIX_SCHEMA: Final = "tracekit.sweep_matrix"
SWEEP_SCHEMA_VERSION: Final = "1.1"


class GridAxis(msgspec.Struct, kw_only=True, frozen=True):
    """One ``--grid key=v1,v2`` axis: a config key (``section.field`` allowed) and its values."""

    key: str
    values: list[str]


class CellRun(msgspec.Struct, kw_only=True, frozen=True):
    """One capture of the sweep: a grid cell in one repeat, or a probe's batch size."""

    cell: str  # "accelerate_config=ddp,batch_size=8"
    values: dict[str, str]
    repeat: int  # 1-based; 0 for a probe's capture
    probe: bool = False
    folder: str
    status: CellStatus
    reason: str | None = None  # one line, when not ok
    started: str  # ISO 8601, UTC
    seconds: float
    backend: str  # "DDP", "FSDP FULL_SHARD", "FSDP2", "ZeRO-2" ...
    batch_size: int  # per rank, per micro-batch
    world_size: int
    gradient_accumulation_steps: int = 1
    traced: bool = False
    #: Per measured step, the slowest rank's step time (the step every rank waits for).
    step_ns: list[int] = []
    step_mean_ns: float | None = None  # the longest per-rank mean step (sets throughput)
    samples_per_s: float | None = None  # global
    memory_device: MemoryDevice | None = None
    peak_allocated_bytes: int | None = None  # worst rank
    peak_reserved_bytes: int | None = None  # worst rank
    peak_rss_bytes: int | None = None  # worst rank (whole process)
    gap_bytes: int | None = None  # reserved minus allocated at the peaks, largest over ranks
    worst_rank: int | None = None

    @property
    def peak_bytes(self) -> int | None:
        """What the memory budget and the headroom are checked against: peak reserved device
        memory on a GPU (what the allocator holds), peak RSS on CPU."""
        return self.peak_reserved_bytes if self.memory_device == "cuda" else self.peak_rss_bytes

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step over every rank."""
        return self.batch_size * self.world_size * self.gradient_accumulation_steps


class ProbeRecord(msgspec.Struct, kw_only=True, frozen=True):
    """The OOM probe of one other-cell (every grid value but the batch size)."""

    base: str  # "accelerate_config=ddp" ("" when the batch size is the only axis)
    values: dict[str, str]
    tried: list[int] = []  # batch sizes the probe captured, in order
    last_fit: int | None = None  # the largest batch size that ran within memory
    first_oom: int | None = None  # the smallest batch size above it that did not
    error: str | None = None  # first_oom's error (the OOM message or the budget line)
    stopped: ProbeStop | None = None  # why the walk ended without finding an OOM, if so
    failed_batch: int | None = None  # stopped FAILED: the batch size whose capture failed or hung
    failure: str | None = None  # and its reason (the capture's own message)
    done: bool = False


class Sweep(msgspec.Struct, kw_only=True, frozen=True):
    """``sweep.json``: what ``tracekit sweep`` ran so far, and how."""

    schema: str = SWEEP_SCHEMA
    schema_version: str = SWEEP_SCHEMA_VERSION
    config_path: str | None = None
    overrides: dict[str, str] = {}
    grid: list[GridAxis]
    repeats: int = 1
    trace: bool = True
    probe_oom: bool = False
    probe_step: int | None = None
    mem_budget_bytes: int | None = None
    cell_timeout_s: float | None = None
    #: Memory of the GPU the cells ran on: its total, or what cuda_memory_fraction leaves them (None on CPU).
    device_memory_bytes: int | None = None
    cells: list[str]  # grid cells in grid order
    runs: list[CellRun] = []  # in the order they ran
    probes: list[ProbeRecord] = []
    finished: bool = False


class MatrixRow(msgspec.Struct, kw_only=True, frozen=True):
    """One grid cell over its repeats."""

    cell: str
    values: dict[str, str]
    backend: str
    batch_size: int
    global_batch: int
    world_size: int
    status: CellStatus  # the worst of its runs ("ok" only when every run was)
    reason: str | None = None
    runs: int = 0  # captures that ran (ok)
    step_ns: float | None = None  # slowest rank's mean step, over the repeats
    samples_per_s: float | None = None
    memory_device: MemoryDevice | None = None
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    peak_rss_bytes: int | None = None
    gap_bytes: int | None = None
    peak_pct: float | None = None  # the peak checked against memory, as a share of capacity
    within_headroom: bool | None = None  # None: no capacity known
    verdict: BoundKind | None = None  # of a traced cell's analysis
    verdict_share_pct: float | None = None
    probe_last_fit: int | None = None
    probe_first_oom: int | None = None
    probe_error: str | None = None  # the probe's first OOM error, or the failure that stopped it
    probe_stopped: ProbeStop | None = None  # why the probe ended without finding an OOM, if so


class MatrixNote(msgspec.Struct, kw_only=True, frozen=True):
    """A remark beside the matrix: its kind and figures (see :class:`MatrixNoteKind`)."""

    kind: MatrixNoteKind
    ran: int | None = None  # cells that ran
    cells: int | None = None  # cells of the grid


class Best(msgspec.Struct, kw_only=True, frozen=True):
    """The fastest cell under the headroom, and how far ahead of the runner-up it is."""

    cell: str
    samples_per_s: float
    runner_up: str | None = None
    #: Throughput of the best (B) against the runner-up (A): delta, interval, change word.
    margin: Measure | None = None


class SweepMatrix(msgspec.Struct, kw_only=True, frozen=True):
    """The sweep's matrix: what the reports show."""

    schema: str = MATRIX_SCHEMA
    schema_version: str = SWEEP_SCHEMA_VERSION
    tracekit_version: str
    source: str  # the sweep folder
    grid: list[GridAxis]
    repeats: int
    trace: bool
    finished: bool
    rows: list[MatrixRow]
    probes: list[ProbeRecord] = []
    headroom_pct: float
    #: What the headroom is a share of: the GPU's memory, or ``--mem-budget-gb``.
    capacity_bytes: int | None = None
    capacity_source: CapacitySource | None = None
    best: Best | None = None
    deepspeed: bool = False  # a DeepSpeed cell is present: only total step time compares
    notes: list[MatrixNote] = []


def dump_sweep(sweep: Sweep) -> bytes:
    """``sweep.json`` text: indented JSON and a final newline."""
    return dump_record(sweep)


def cell_name(values: dict[str, str]) -> str:
    """A grid cell's name: ``key=value,...`` with keys sorted (``accelerate_config=ddp,batch_size=8``)."""
    return ",".join(f"{k}={values[k]}" for k in sorted(values))


#: Per capture, the counts that are at least 1 in any capture that ran.
_AT_LEAST_ONE: Final = ("batch_size", "world_size", "gradient_accumulation_steps")


def _check_grid(sweep: Sweep, source: str) -> None:
    if not sweep.grid:
        raise InputError("field grid is empty: a sweep has at least one grid axis", path=source)
    keys = [a.key for a in sweep.grid]
    for i, axis in enumerate(sweep.grid):
        if not axis.values or len(set(axis.values)) != len(axis.values):
            raise InputError(f"field grid[{i}].values ({axis.key}) is empty or repeats a value", path=source)
        if keys.count(axis.key) > 1:
            raise InputError(f"field grid[{i}].key: {axis.key} is more than one axis", path=source)
    combos = [cell_name(dict(zip(keys, c, strict=True))) for c in itertools.product(*(a.values for a in sweep.grid))]
    stray = [c for c in sweep.cells if c not in combos]
    missing = [c for c in combos if c not in sweep.cells]
    if stray or missing or len(sweep.cells) != len(combos):
        what = f"holds {stray[0]!r}, not" if stray else f"lacks {missing[0]!r}, or repeats a cell," if missing else ""
        raise InputError(f"field cells {what or 'repeats'} a cell of the grid ({', '.join(keys)})", path=source)


def check_sweep(sweep: Sweep, *, source: str) -> None:
    """Raise an :class:`InputError` naming ``source`` and the field of a ``sweep.json`` no sweep
    writes: a number out of range, an empty grid, cells that are not the grid's combinations, a
    capture whose values do not name its cell, a batch size, world size or accumulation of 0."""
    check_ranges(sweep, source=source)
    _check_grid(sweep, source)
    for i, run in enumerate(sweep.runs):
        for name in _AT_LEAST_ONE:
            if getattr(run, name) < 1:
                raise InputError(f"field runs[{i}].{name} is {getattr(run, name)}: it is at least 1", path=source)
        if not run.probe and (run.cell not in sweep.cells or cell_name(run.values) != run.cell):
            raise InputError(
                f"field runs[{i}].values {run.values} does not name a grid cell (its cell: {run.cell!r})", path=source
            )


def load_sweep(data: bytes | str, *, source: str) -> Sweep:
    """Parse ``sweep.json`` and check it (:func:`check_sweep`); anything else is an
    :class:`InputError` naming ``source``."""
    sweep = load_record(data, Sweep, what="tracekit sweep record", source=source, upgrade=upgrade.sweep_1_0)
    check_sweep(sweep, source=source)
    return sweep


def dump_matrix(matrix: SweepMatrix) -> str:
    """The matrix as indented JSON text (the JSON report)."""
    return dump_record(matrix).decode()


def load_matrix(data: bytes | str, *, source: str) -> SweepMatrix:
    """Parse a saved matrix (the JSON report)."""
    return load_record(data, SweepMatrix, what="tracekit sweep matrix", source=source, upgrade=upgrade.matrix_1_0)
