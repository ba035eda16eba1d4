"""The two sides of a comparison: what each is, whether its runs are repeats of one run, and how
the sides differ in what they measure (each difference a kind and its figures)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from tracekit.analyzers.compare.samples import measured_on
from tracekit.errors import InputError
from tracekit.results.compare import RunDifference, Side
from tracekit.results.vocab import WarningKind

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.results.analysis import Analysis

#: Step counts differing by more than this factor are worth a warning.
STEP_COUNT_RATIO: Final = 2.0
#: Config keys shown apart from the config difference (they have their own warnings, or none).
CONFIG_KEYS_APART: Final = frozenset({"out_dir", "batch_size", "workload"})


def _config_value(analysis: Analysis, key: str) -> Any:
    config = analysis.capture.config if analysis.capture is not None else None
    return None if config is None else config.get(key)


def side(label: str, sources: Sequence[str], runs: Sequence[Analysis]) -> Side:
    """What one side is, from its first run (steps: over every run)."""
    first = runs[0]
    found = first.steps.found
    batch = _config_value(first, "batch_size")
    workload = _config_value(first, "workload")
    config = first.capture.config if first.capture is not None else None
    return Side(
        label=label,
        sources=list(sources),
        runs=len(runs),
        world_size=first.run.world_size,
        ranks=[r.rank for r in first.run.ranks],
        devices=list(first.run.devices),
        backend=first.run.backend,
        measured_on=measured_on(first),
        steps=sum(len(a.steps.per_step) for a in runs),
        step_source=found[0].source if found else None,
        workload=workload if isinstance(workload, str) else None,
        batch_size=batch if isinstance(batch, int) and not isinstance(batch, bool) else None,
        config=config,
        tracekit_version=first.tracekit_version,
    )


def check_side(label: str, runs: Sequence[Analysis]) -> None:
    """Refuse a side with no run, or with runs that cannot be repeats of one run."""
    if not runs:
        raise InputError(f"{label}: no run to compare")
    worlds = {a.run.world_size for a in runs}
    if len(worlds) > 1:
        raise InputError(f"{label}: its runs differ in world size ({sorted(w or 0 for w in worlds)}): not repeats")
    kinds = {measured_on(a) for a in runs}
    if len(kinds) > 1:
        raise InputError(f"{label}: its runs mix GPU and CPU-only traces: not repeats of one run")
    for a in runs:
        if not a.run.ranks:
            raise InputError(f"{label}: a run with no ranks: nothing to compare")
        rows = a.steps.per_step
        empty = sum(r.duration_ns <= 0 for r in rows)
        if empty:
            raise InputError(
                f"{label}: a run whose steps last 0 ns ({empty} of {len(rows)} steps): no time per step to "
                "compare; analyze its traces again (tracekit now leaves zero-length step markers out)"
            )


def differences(a: Side, b: Side, ra: Analysis, rb: Analysis) -> list[RunDifference]:
    """How the sides differ in what they measure: setup, steps, then capture config."""
    return [*_setup(a, b), *_steps(a, b, ra, rb), *_config(a, b)]


def _setup(a: Side, b: Side) -> list[RunDifference]:
    out: list[RunDifference] = []
    if a.world_size != b.world_size:
        out.append(RunDifference(kind=WarningKind.WORLD_SIZE, a=a.world_size, b=b.world_size))
    if len(a.ranks) != len(b.ranks) or set(a.ranks) != set(b.ranks):
        out.append(RunDifference(kind=WarningKind.RANKS, a_items=list(a.ranks), b_items=list(b.ranks)))
    devices_a, devices_b = sorted(set(a.devices)), sorted(set(b.devices))
    if devices_a != devices_b:
        out.append(RunDifference(kind=WarningKind.DEVICES, a_items=list(devices_a), b_items=list(devices_b)))
    if a.backend != b.backend and a.backend and b.backend:
        out.append(RunDifference(kind=WarningKind.BACKEND, a=a.backend, b=b.backend))
    if a.measured_on != b.measured_on:
        out.append(RunDifference(kind=WarningKind.MEASURED_ON, a=a.measured_on.value, b=b.measured_on.value))
    return out


def _steps(a: Side, b: Side, ra: Analysis, rb: Analysis) -> list[RunDifference]:
    out: list[RunDifference] = []
    if a.steps == 0 or b.steps == 0:
        out.append(RunDifference(kind=WarningKind.NO_STEPS, a=a.steps, b=b.steps))
    else:
        ratio = max(a.steps, b.steps) / max(1, min(a.steps, b.steps))
        if ratio > STEP_COUNT_RATIO:
            out.append(RunDifference(kind=WarningKind.STEP_COUNT, a=a.steps, b=b.steps))
        if a.step_source != b.step_source:
            out.append(RunDifference(kind=WarningKind.STEP_SOURCE, a=a.step_source, b=b.step_source))
    if ra.steps.include_warmup != rb.steps.include_warmup or ra.steps.selection != rb.steps.selection:
        out.append(RunDifference(kind=WarningKind.STEP_SELECTION))
    window_a, window_b = ra.gpu_breakdown.window, rb.gpu_breakdown.window
    if window_a != window_b:
        out.append(RunDifference(kind=WarningKind.WINDOW, a=window_a.value, b=window_b.value))
    return out


def _config(a: Side, b: Side) -> list[RunDifference]:
    out: list[RunDifference] = []
    if a.workload != b.workload and a.workload and b.workload:
        out.append(RunDifference(kind=WarningKind.WORKLOAD, a=a.workload, b=b.workload))
    if a.batch_size != b.batch_size and a.batch_size and b.batch_size:
        out.append(RunDifference(kind=WarningKind.BATCH_SIZE, a=a.batch_size, b=b.batch_size))
    if a.config is not None and b.config is not None:
        keys = sorted(_config_diff(a.config, b.config) - CONFIG_KEYS_APART)
        if keys:
            out.append(RunDifference(kind=WarningKind.CONFIG, keys=keys))
    return out


def _config_diff(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key in set(a) | set(b):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out |= _config_diff(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.add(f"{prefix}{key}")
    return out
