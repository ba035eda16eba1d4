"""The two sides of a comparison: what each is, whether its runs are repeats of one run, and how
the sides differ in what they measure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from tracekit.analyzers.compare.samples import measured_on
from tracekit.errors import InputError
from tracekit.results.compare import Side

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
        step_source=found[0].source.value if found else None,
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


def differences(a: Side, b: Side, ra: Analysis, rb: Analysis) -> list[str]:
    """How the sides differ in what they measure: setup, steps, then capture config."""
    return [*_setup(a, b), *_steps(a, b, ra, rb), *_config(a, b)]


def _setup(a: Side, b: Side) -> list[str]:
    out: list[str] = []
    if a.world_size != b.world_size:
        out.append(f"world size differs: A {a.world_size}, B {b.world_size}")
    if len(a.ranks) != len(b.ranks) or set(a.ranks) != set(b.ranks):
        out.append(
            f"ranks present differ: A {_ranks(a.ranks)}, B {_ranks(b.ranks)}; per-rank rows only for common ranks"
        )
    if sorted(set(a.devices)) != sorted(set(b.devices)):
        da = ", ".join(sorted(set(a.devices))) or "none recorded"
        db = ", ".join(sorted(set(b.devices))) or "none recorded"
        out.append(f"devices differ: A {da}; B {db}: kernel times reflect the hardware as well as the change")
    if a.backend != b.backend and a.backend and b.backend:
        out.append(f"backend differs: A {a.backend}, B {b.backend}")
    if a.measured_on != b.measured_on:
        out.append(
            f"A is measured on the {a.measured_on.value}, B on the {b.measured_on.value}: shares are not comparable"
        )
    return out


def _steps(a: Side, b: Side, ra: Analysis, rb: Analysis) -> list[str]:
    out: list[str] = []
    if (a.steps == 0) != (b.steps == 0):
        who = "A" if a.steps == 0 else "B"
        out.append(f"{who} has no steps: step times cannot be compared; work is compared per second of trace")
    elif a.steps == 0:
        out.append("neither run has steps: step times cannot be compared; work is compared per second of trace")
    else:
        ratio = max(a.steps, b.steps) / max(1, min(a.steps, b.steps))
        if ratio > STEP_COUNT_RATIO:
            out.append(f"steps found differ: A {a.steps}, B {b.steps} measured (rank x step)")
        if a.step_source != b.step_source:
            out.append(f"steps were found differently: A by {a.step_source}, B by {b.step_source}")
    if ra.steps.include_warmup != rb.steps.include_warmup or ra.steps.selection != rb.steps.selection:
        out.append("the steps measured were selected differently (--steps / --include-warmup)")
    if ra.gpu_breakdown.window != rb.gpu_breakdown.window:
        out.append(f"windows differ: A {ra.gpu_breakdown.window.value}, B {rb.gpu_breakdown.window.value}")
    return out


def _config(a: Side, b: Side) -> list[str]:
    out: list[str] = []
    if a.workload != b.workload and a.workload and b.workload:
        out.append(f"workload differs: A {a.workload}, B {b.workload}")
    if a.batch_size != b.batch_size and a.batch_size and b.batch_size:
        out.append(
            f"batch size per rank differs: A {a.batch_size}, B {b.batch_size}: per-step figures measure different work"
        )
    if a.config is not None and b.config is not None:
        keys = sorted(_config_diff(a.config, b.config) - CONFIG_KEYS_APART)
        if keys:
            shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
            out.append(f"capture configs differ in: {shown}")
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


def _ranks(ranks: Sequence[int]) -> str:
    return ",".join(str(r) for r in ranks[:8]) + ("..." if len(ranks) > 8 else "") if ranks else "none"
