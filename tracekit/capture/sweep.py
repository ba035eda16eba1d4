"""``tracekit sweep``: a capture per cell of a grid of config values, an OOM probe, resumable.

``plan_sweep`` reads the grid (``--grid batch_size=8,12,16 --grid accelerate_config=ddp,fsdp``)
and checks every cell's config before anything runs; ``run_sweep`` runs the cells, every
cell of repeat 1, then of repeat 2 ..., each a normal capture
(:func:`tracekit.capture.launcher.capture`) into ``out_dir/cells/<cell>`` (``.../run<r>``
with repeats), with few steps and, with ``--no-trace``, no profiler trace. A cell that fails,
hangs past ``--cell-timeout`` or runs out of memory is recorded as such, with its one-line
reason, and the sweep goes on. Out of memory is a CUDA ``OutOfMemoryError``, or a peak over
``--mem-budget-gb`` (peak reserved device memory on a GPU, peak RSS of the worst rank on
CPU), judged from the cell's summary.

``--probe-oom`` then walks the batch size of each other-cell (every grid value but the batch
size) upward from the largest that fit until the first OOM (:func:`~tracekit.capture.sweep_plan.next_probe`),
each step a capture into ``out_dir/probe/<cell>``.

``out_dir/sweep.json`` (:mod:`tracekit.results.sweep`) is rewritten atomically after every
capture, so an interrupted sweep keeps what it finished; ``resume=True`` runs only the
captures it does not record. Ctrl-C stops the sweep (the capture under way is stopped as a
capture is) with what was finished recorded.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from tracekit.capture import accelerate_configs, files, outdir
from tracekit.capture.config import CaptureConfig, load_config
from tracekit.capture.launcher import CaptureInterrupted, CaptureTimeout, capture
from tracekit.capture.summary import read_phase_files
from tracekit.capture.sweep_plan import (
    BATCH,
    Cell,
    cell_folder,
    grid_cells,
    interleaved,
    next_probe,
    parse_grid,
    pending,
    probe_bracket,
    probe_folder,
)
from tracekit.errors import InputError, TracekitError
from tracekit.locks import folder_lock
from tracekit.results.sweep import (
    SWEEP_SCHEMA,
    CellRun,
    CellStatus,
    GridAxis,
    ProbeRecord,
    Sweep,
    dump_sweep,
    load_sweep,
)
from tracekit.results.vocab import ProbeStop

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.results.capture import CaptureSummary

__all__ = ["SWEEP_FILE", "SWEEP_FOLDER", "SweepPlan", "plan_sweep", "run_sweep"]

SWEEP_FILE: Final = "sweep.json"
_OWN: Final = re.compile(r"^(sweep\.json|cells|probe|\.sweep\.json\.\d+\.tmp)$")
#: A sweep folder: ``sweep.json``, ``cells/``, ``probe/``.
SWEEP_FOLDER: Final = outdir.FolderKind("a tracekit sweep", SWEEP_FILE, SWEEP_SCHEMA, lambda n: bool(_OWN.match(n)))
#: An error that is the device running out of memory.
OOM: Final = re.compile(r"OutOfMemoryError|out of memory", re.IGNORECASE)
GIB: Final = 1 << 30

#: Called before each capture with its cell, repeat (0: a probe) and folder.
Starting = Callable[[Cell, int, Path], None]


@dataclass(frozen=True)
class SweepPlan:
    """A checked sweep: the config and overrides every cell shares, the grid, the settings."""

    out_dir: str
    grid: list[GridAxis]
    cells: list[Cell]
    config_path: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    repeats: int = 1
    trace: bool = True
    probe_oom: bool = False
    probe_step: int | None = None
    mem_budget_bytes: int | None = None
    cell_timeout: float | None = None
    resume: bool = False


def plan_sweep(
    config_path: str | Path | None,
    overrides: dict[str, str],
    grid: Sequence[str],
    *,
    repeats: int = 1,
    trace: bool = True,
    probe_oom: bool = False,
    probe_step: int | None = None,
    mem_budget_gb: float | None = None,
    cell_timeout: float | None = None,
    resume: bool = False,
) -> SweepPlan:
    """Read the grid and check every cell's config; nothing runs yet. ``out_dir`` is the
    config's (``--out_dir``); errors are :class:`InputError` naming the cell."""
    axes = parse_grid(grid)
    if repeats < 1:
        raise InputError(f"--repeats must be at least 1, got {repeats}")
    if probe_step is not None and probe_step < 1:
        raise InputError(f"--probe-step must be at least 1, got {probe_step}")
    if mem_budget_gb is not None and mem_budget_gb <= 0:
        raise InputError(f"--mem-budget-gb must be positive, got {mem_budget_gb:g}")
    if cell_timeout is not None and cell_timeout <= 0:
        raise InputError(f"--cell-timeout must be positive, got {cell_timeout:g}")
    settings = _settings(trace=trace, cell_timeout=cell_timeout)
    for axis in axes:
        if axis.key in settings:  # the flag's value would replace the axis's in every cell
            flag = _FLAG_OF[axis.key]
            raise InputError(
                f"--grid {axis.key}: {flag} sets {axis.key} in every cell; give the axis or {flag}, not both"
            )
    base = load_config(config_path, {**overrides, **settings})
    cells = grid_cells(axes)
    for cell in cells:
        try:
            config = load_config(config_path, {**overrides, **cell.values, **settings})
            accelerate_configs.check(config.accelerate_config)
        except InputError as exc:
            raise InputError(f"--grid cell {cell.name}: {exc.reason}", path=exc.path) from None
    return SweepPlan(
        out_dir=base.out_dir,
        grid=list(axes),
        cells=cells,
        config_path=None if config_path is None else str(config_path),
        overrides=dict(overrides),
        repeats=repeats,
        trace=trace,
        probe_oom=probe_oom,
        probe_step=probe_step,
        mem_budget_bytes=None if mem_budget_gb is None else round(mem_budget_gb * GIB),
        cell_timeout=cell_timeout,
        resume=resume,
    )


def run_sweep(plan: SweepPlan, *, starting: Starting | None = None) -> Sweep:
    """Run the plan's captures (those a resumed sweep has not finished), then the OOM probes;
    returns what ``sweep.json`` records."""
    folder = outdir.check(plan.out_dir, SWEEP_FOLDER)
    with folder_lock(folder):  # a second sweep into the same folder is refused, naming this one
        return _run_sweep_in(plan, folder, starting)


def _run_sweep_in(plan: SweepPlan, folder: Path, starting: Starting | None) -> Sweep:
    """The sweep of ``plan`` in ``folder`` (checked, and locked by this process)."""
    record = _start(plan, folder)
    for repeat, cell in pending(interleaved(plan.cells, plan.repeats), record.runs):
        where = cell_folder(cell, repeat, plan.repeats)
        if starting is not None:
            starting(cell, repeat, folder / where)
        run = _capture(plan, cell, folder, where, repeat=repeat)
        record = _save(folder, msgspec.structs.replace(record, runs=[*record.runs, run]))
    if plan.probe_oom:
        record = _probes(plan, folder, record, starting)
    return _save(folder, msgspec.structs.replace(record, finished=True))


def _start(plan: SweepPlan, folder: Path) -> Sweep:
    """The record to go on from: the earlier one when resuming (checked to be this plan's), else new."""
    fresh = Sweep(
        config_path=plan.config_path,
        overrides=plan.overrides,
        grid=list(plan.grid),
        repeats=plan.repeats,
        trace=plan.trace,
        probe_oom=plan.probe_oom,
        probe_step=plan.probe_step,
        mem_budget_bytes=plan.mem_budget_bytes,
        cell_timeout_s=plan.cell_timeout,
        device_memory_bytes=_device_memory(_fraction(plan, folder)),
        cells=[c.name for c in plan.cells],
    )
    path = folder / SWEEP_FILE
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        return _save(folder, fresh)
    if not plan.resume:
        raise InputError(
            "out_dir holds an earlier sweep: --resume continues it; give another out_dir to start over", path=folder
        )
    earlier = load_sweep(path.read_bytes(), source=str(path))
    same = ("overrides", "grid", "repeats", "trace", "mem_budget_bytes")
    differs = [k for k in same if _spelled(getattr(earlier, k), k) != _spelled(getattr(fresh, k), k)]
    if not _same_file(earlier.config_path, fresh.config_path):
        differs.insert(0, "config_path")
    if differs:
        raise InputError(f"cannot resume: this sweep's {', '.join(differs)} differ from the earlier one's", path=path)
    for stale in [*folder.glob(f"cells/*{outdir.TMP_INFIX}*"), *folder.glob(f"probe/*{outdir.TMP_INFIX}*")]:
        shutil.rmtree(stale, ignore_errors=True)  # a capture cut off by the interruption
    return msgspec.structs.replace(earlier, probe_oom=plan.probe_oom, probe_step=plan.probe_step, finished=False)


def _spelled(value: object, key: str) -> object:
    """``value`` of the record's ``key`` as compared on resume: the overrides without ``out_dir``
    (the folder resumed is the same one however its path was spelled)."""
    if key == "overrides" and isinstance(value, dict):
        return {k: v for k, v in value.items() if k.removeprefix("--").replace("-", "_") != "out_dir"}
    return value


def _same_file(a: str | None, b: str | None) -> bool:
    """Whether two config paths name the same file (``c.json``, ``./c.json``, its absolute path, a link)."""
    if a is None or b is None:
        return a == b
    try:
        return a == b or Path(a).expanduser().resolve() == Path(b).expanduser().resolve() or Path(a).samefile(b)
    except OSError:
        return False


def _save(folder: Path, record: Sweep) -> Sweep:
    files.write_bytes_atomic(folder / SWEEP_FILE, dump_sweep(record))
    return record


def _device_memory(fraction: float | None = None) -> int | None:
    """Memory of GPU 0 that a rank may use (its ``cuda_memory_fraction`` when capped), when
    torch sees a GPU."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    total = int(torch.cuda.get_device_properties(0).total_memory)
    return total if fraction is None else int(total * fraction)


def _fraction(plan: SweepPlan, folder: Path) -> float | None:
    """The memory cap of the cells (the first cell's: a grid over the cap itself has no one
    device memory)."""
    return _config(plan, plan.cells[0], folder).cuda_memory_fraction if plan.cells else None


#: The flag of ``tracekit sweep`` that sets each config key of :func:`_settings` in every cell.
_FLAG_OF: Final = {"trace": "--no-trace", "timeout": "--cell-timeout"}


def _settings(*, trace: bool, cell_timeout: float | None) -> dict[str, str]:
    """The overrides the sweep's own options put on every cell's config."""
    settings = {} if trace else {"trace": "false"}
    return settings | ({} if cell_timeout is None else {"timeout": str(cell_timeout)})


def _config(plan: SweepPlan, cell: Cell, out: Path) -> CaptureConfig:
    settings = _settings(trace=plan.trace, cell_timeout=plan.cell_timeout)
    return load_config(plan.config_path, {**plan.overrides, **cell.values, **settings, "out_dir": str(out)})


def _capture(plan: SweepPlan, cell: Cell, folder: Path, where: str, *, repeat: int) -> CellRun:
    """One capture of the sweep, recorded whatever its outcome (an interruption stops the sweep)."""
    config = _config(plan, cell, folder / where)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    clock = time.perf_counter()
    head = {
        "cell": cell.name,
        "values": cell.values,
        "repeat": repeat,
        "probe": repeat == 0,
        "folder": where,
        "started": started,
        "batch_size": config.batch_size,
        "world_size": config.nproc,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
    }
    try:
        head["backend"] = accelerate_configs.backend(config.accelerate_config, nproc=config.nproc)
        summary = capture(config)
    except CaptureInterrupted:
        raise
    except TracekitError as exc:
        status: CellStatus = (
            "timeout" if isinstance(exc, CaptureTimeout) else "oom" if OOM.search(exc.message) else "failed"
        )
        head.setdefault("backend", "?")
        return CellRun(status=status, reason=exc.message, seconds=_since(clock), **head)  # type: ignore[arg-type]
    run = _measured(summary, Path(config.out_dir), traced=config.trace, seconds=_since(clock), **head)
    return _judge(run, plan.mem_budget_bytes)


def _since(clock: float) -> float:
    return round(time.perf_counter() - clock, 3)


def _measured(summary: CaptureSummary, captured: Path, *, traced: bool, seconds: float, **head: object) -> CellRun:
    """A capture that ran: its slowest-rank step times and its worst rank's peaks."""
    records = read_phase_files(captured)
    steps = max((len(r.steps) for r in records), default=0)
    slowest = [max(r.steps[i].step_ns for r in records if i < len(r.steps)) for i in range(steps)]
    memory = summary.memory
    gaps = [
        r.memory.peak_reserved_bytes - r.memory.peak_allocated_bytes
        for r in summary.per_rank
        if r.memory.peak_reserved_bytes is not None and r.memory.peak_allocated_bytes is not None
    ]
    return CellRun(
        status="ok",
        seconds=seconds,
        traced=traced,
        step_ns=slowest,
        step_mean_ns=summary.throughput.step_mean_ns,
        samples_per_s=summary.throughput.global_samples_per_s,
        memory_device=memory.device if memory else None,
        peak_allocated_bytes=memory.peak_allocated_bytes if memory else None,
        peak_reserved_bytes=memory.peak_reserved_bytes if memory else None,
        peak_rss_bytes=memory.peak_rss_bytes if memory else None,
        gap_bytes=max(gaps) if gaps else None,
        worst_rank=memory.worst_rank if memory else None,
        **head,  # type: ignore[arg-type]
    )


def _judge(run: CellRun, budget: int | None) -> CellRun:
    """``run`` as an OOM when its peak is over the memory budget."""
    peak = run.peak_bytes
    if budget is None or peak is None or peak <= budget:
        return run
    what = "peak reserved device memory" if run.memory_device == "cuda" else "peak RSS"
    reason = f"{what} {peak / GIB:.2f} GiB is over the memory budget of {budget / GIB:.2f} GiB (--mem-budget-gb)"
    return msgspec.structs.replace(run, status="oom", reason=reason)


def _known(runs: Sequence[CellRun], base: Cell) -> dict[int, bool]:
    """Batch size -> whether it fit, from the grid cells and probes of other-cell ``base``."""
    known: dict[int, bool] = {}
    for run in runs:
        if Cell(run.values).without(BATCH) == base and run.status in ("ok", "oom"):
            known[run.batch_size] = known.get(run.batch_size, True) and run.status == "ok"
    return known


def _probes(plan: SweepPlan, folder: Path, record: Sweep, starting: Starting | None) -> Sweep:
    """Walk each other-cell's batch size up to its first OOM, recording each capture."""
    bases = list({c.without(BATCH).name: c.without(BATCH) for c in plan.cells}.values())
    probes: list[ProbeRecord] = []
    for base in bases:
        tried: list[int] = [r.batch_size for r in record.runs if r.probe and Cell(r.values).without(BATCH) == base]
        failed: CellRun | None = None
        while True:
            failures = [
                r
                for r in record.runs
                if r.probe and Cell(r.values).without(BATCH) == base and r.status in ("failed", "timeout")
            ]
            if failures:
                failed = failures[-1]
                break
            size = next_probe(_known(record.runs, base), step=plan.probe_step)
            if size is None:
                break
            cell = Cell({**base.values, BATCH: str(size)})
            where = probe_folder(cell)
            if starting is not None:
                starting(cell, 0, folder / where)
            run = _capture(plan, cell, folder, where, repeat=0)
            tried.append(size)
            record = _save(folder, msgspec.structs.replace(record, runs=[*record.runs, run]))
        probes.append(_probe_record(base, tried, record.runs, failed))
        record = _save(folder, msgspec.structs.replace(record, probes=[*probes]))
    return record


def _probe_record(base: Cell, tried: list[int], runs: Sequence[CellRun], failed: CellRun | None) -> ProbeRecord:
    known = _known(runs, base)
    last_fit, first_oom = probe_bracket(known)
    error = next(
        (
            r.reason
            for r in runs
            if Cell(r.values).without(BATCH) == base and r.batch_size == first_oom and r.status == "oom"
        ),
        None,
    )
    stopped = None
    if failed is not None:
        stopped = ProbeStop.FAILED
    elif first_oom is None:
        stopped = ProbeStop.NONE_FIT if last_fit is None else ProbeStop.NO_OOM
    return ProbeRecord(
        base=base.name,
        values=base.values,
        tried=tried,
        last_fit=last_fit,
        first_oom=first_oom,
        error=error,
        stopped=stopped,
        failed_batch=failed.batch_size if failed is not None else None,
        failure=failed.reason if failed is not None else None,
        done=True,
    )
