"""Compare two runs: a pure function of typed analyses to a typed :class:`Comparison`.

**The noise model.** Steps of one run are not independent across ranks: in a synchronous
job every rank waits for the slowest at each collective, so the eight durations of one step
are one observation, not eight. The unit of a sample is therefore the *step*: its value is
the mean over ranks of the step's duration (the slowest rank's, for throughput). Consecutive
steps are correlated too (a slow stretch of the machine spans several), so intervals come
from a *moving-block bootstrap* over steps (blocks of about n^(1/3) steps), resampling A and B
independently; with several runs per side (``--repeats``) runs are resampled first, then
steps within each, so run-to-run variation widens the interval as it should. A change is
*slower* or *faster* only when the interval of the difference of means excludes zero **and**
the change is at least ``threshold_pct`` of A's value: a single pair of runs cannot measure
how far two launches of the same program drift apart (allocator layout, clocks, neighbours
on the machine), and the threshold is that allowance, written in the result beside the
interval. The smallest change the comparison could have detected is reported too: the
larger of the threshold and (z(1 - alpha/2) + z(0.8)) standard errors of the difference (80%
power), so a "within noise" reads with how much could have hidden in it.

Counts (kernels, host operators, syncs, collectives per step) are matched by name and
compared as counts; the verdicts are put side by side with every candidate's share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Final

import msgspec
import numpy as np
import polars as pl

from tracekit import __version__
from tracekit.analyzers.work import HOST_READ
from tracekit.errors import InputError
from tracekit.results.compare import (
    Change,
    Comparison,
    CostShift,
    Distribution,
    GateResult,
    Interval,
    Measure,
    NoiseModel,
    Side,
    SyncComparison,
    Unit,
    VerdictComparison,
    WorkChange,
    WorkKind,
)
from tracekit.results.vocab import BoundKind, MeasuredOn

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.results.analysis import Analysis

#: Defaults of the noise model (see the module docstring).
LEVEL: Final = 0.95
THRESHOLD_PCT: Final = 1.0
RESAMPLES: Final = 2000
SEED: Final = 0
POWER: Final = 0.8
#: Work rows kept per kind, largest change of time per step first (appeared/disappeared first).
WORK_ROWS: Final = 40
#: A count per step that differs by less than this share of the larger is the same count.
COUNT_TOLERANCE: Final = 0.01
#: The prefix of tracekit's own phase ranges, left out of phase labels.
PHASE_PREFIX: Final = "tracekit.phase/"
#: Step counts differing by more than this factor are worth a warning.
STEP_COUNT_RATIO: Final = 2.0
#: The most step values kept per distribution (for the chart; statistics use all).
MAX_VALUES: Final = 5000


# -- samples ------------------------------------------------------------------------------


def _steps_frame(analysis: Analysis) -> pl.DataFrame:
    """rank, key (the step number, or its ordinal on the rank), duration_ns of the measured steps."""
    rows = analysis.steps.per_step
    if not rows:
        return pl.DataFrame(schema={"rank": pl.Int64, "key": pl.Int64, "duration_ns": pl.Float64})
    df = pl.DataFrame(
        {
            "rank": [r.rank for r in rows],
            "step": [r.step for r in rows],
            "start_ns": [r.start_ns for r in rows],
            "duration_ns": [float(r.duration_ns) for r in rows],
        },
        schema={"rank": pl.Int64, "step": pl.Int64, "start_ns": pl.Int64, "duration_ns": pl.Float64},
    )
    ordinal = pl.col("start_ns").rank("ordinal").over("rank").cast(pl.Int64) - 1
    return df.with_columns(key=pl.coalesce("step", ordinal)).select("rank", "key", "duration_ns")


def _per_step(df: pl.DataFrame, value: str, how: str = "mean") -> np.ndarray:
    """One value per step key: the mean (or max) over ranks, in step order."""
    if df.height == 0:
        return np.empty(0)
    agg = pl.col(value).mean() if how == "mean" else pl.col(value).max()
    out = df.group_by("key").agg(agg.alias("v")).sort("key")["v"].cast(pl.Float64)
    return np.asarray(out.drop_nulls().to_numpy(), dtype=float)


@dataclass(frozen=True)
class _Samples:
    """One side's per-step values, one array per run."""

    runs: list[np.ndarray]

    @property
    def n(self) -> int:
        return int(sum(len(r) for r in self.runs))

    @property
    def pooled(self) -> np.ndarray:
        return np.concatenate(self.runs) if self.runs else np.empty(0)

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(len(r) > 0 for r in self.runs)


def _block_indices(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` x ``n`` indices of a moving-block bootstrap of ``n`` consecutive steps."""
    length = max(1, round(n ** (1 / 3)))
    if length >= n:
        return rng.integers(0, n, size=(resamples, n))
    blocks = math.ceil(n / length)
    starts = rng.integers(0, n - length + 1, size=(resamples, blocks))
    idx = (starts[:, :, None] + np.arange(length)[None, None, :]).reshape(resamples, blocks * length)
    return idx[:, :n]


def _replicates(
    samples: _Samples, stat: Callable[[np.ndarray], np.ndarray], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """``stat`` (rows of a matrix -> one value per row) of ``resamples`` bootstrap samples."""
    runs = samples.runs
    if len(runs) == 1:
        x = runs[0]
        return stat(x[_block_indices(len(x), resamples, rng)])
    out = np.empty(resamples)
    picks = rng.integers(0, len(runs), size=(resamples, len(runs)))
    for b in range(resamples):
        parts = [runs[j][_block_indices(len(runs[j]), 1, rng)[0]] for j in picks[b]]
        out[b] = stat(np.concatenate(parts)[None, :])[0]
    return out


def _mean(m: np.ndarray) -> np.ndarray:
    return np.asarray(m.mean(axis=1), dtype=float)


def _median(m: np.ndarray) -> np.ndarray:
    return np.asarray(np.median(m, axis=1), dtype=float)


@dataclass(frozen=True)
class Noise:
    """The noise model's settings."""

    level: float = LEVEL
    threshold_pct: float = THRESHOLD_PCT
    resamples: int = RESAMPLES
    seed: int = SEED

    def interval(self, diffs: np.ndarray) -> Interval:
        alpha = 1 - self.level
        low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
        return Interval(low=round(float(low), 4), high=round(float(high), 4), level=self.level)

    def detectable(self, diffs: np.ndarray) -> float:
        z = NormalDist().inv_cdf(1 - (1 - self.level) / 2) + NormalDist().inv_cdf(POWER)
        return float(z * np.std(diffs, ddof=1)) if len(diffs) > 1 else math.inf


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


def _rel(delta: float | None, base: float | None) -> float | None:
    if delta is None or base is None or base == 0:
        return None
    return _r(100.0 * delta / abs(base))


def _decide(
    delta: float, ci: Interval, base: float, noise: Noise, *, lower_is_better: bool | None, unit: Unit
) -> tuple[Change, float]:
    """The change word of a tested difference, and the practical threshold in the unit.

    Times and rates are *slower* or *faster*; shares and counts, *higher* or *lower*."""
    allowance = abs(base) * noise.threshold_pct / 100.0
    beyond = (ci.low > 0 or ci.high < 0) and abs(delta) >= allowance
    if not beyond:
        return Change.WITHIN_NOISE, allowance
    up = delta > 0
    if lower_is_better is None or unit not in (Unit.NS, Unit.PER_S):
        return (Change.HIGHER if up else Change.LOWER), allowance
    worse = up if lower_is_better else not up
    return (Change.SLOWER if worse else Change.FASTER), allowance


def _welch(
    a: _Samples, b: _Samples, stat: Callable[[np.ndarray], np.ndarray], delta: float, noise: Noise
) -> tuple[Interval, float]:
    """Welch's t interval of ``delta`` from the runs' own values (each run one observation), and
    the change it could detect: with a few runs per side the t quantile (2 runs: 12.7, 3: 4.3)
    is what keeps a run-to-run offset from reading as a change."""
    from scipy import stats  # noqa: PLC0415  (imported when repeats are compared)

    ra = np.array([float(stat(r[None, :])[0]) for r in a.runs])
    rb = np.array([float(stat(r[None, :])[0]) for r in b.runs])
    va, vb = ra.var(ddof=1) / len(ra), rb.var(ddof=1) / len(rb)
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(low=round(delta, 4), high=round(delta, 4), level=noise.level), 0.0
    df = (va + vb) ** 2 / ((va**2 / (len(ra) - 1) if va else 0.0) + (vb**2 / (len(rb) - 1) if vb else 0.0))
    t = float(stats.t.ppf(1 - (1 - noise.level) / 2, df))
    power = float(stats.t.ppf(POWER, df))
    half = t * se
    return Interval(low=round(delta - half, 4), high=round(delta + half, 4), level=noise.level), (t + power) * se


def _widest(ci: Interval, detectable: float, other: Interval, other_detectable: float) -> tuple[Interval, float]:
    """The wider of two intervals of one difference (each method's blind spot covered by the other)."""
    if other.high - other.low > ci.high - ci.low:
        return other, max(detectable, other_detectable)
    return ci, max(detectable, other_detectable)


def _unmeasured(
    key: str,
    label: str,
    unit: Unit,
    a: float | None,
    b: float | None,
    *,
    lower_is_better: bool | None,
    note: str | None = None,
    **counts: Any,
) -> Measure:
    """A measure missing on one side or both: what there is, and which side lacks it."""
    lacking = "measured on one side only" if (a, b) != (None, None) else "measured on neither side"
    return Measure(
        key=key,
        label=label,
        unit=unit,
        lower_is_better=lower_is_better,
        a=_r(a),
        b=_r(b),
        change=Change.NOT_MEASURED,
        note=note or lacking,
        **counts,
    )


def measure_of(
    key: str,
    label: str,
    unit: Unit,
    *,
    a: _Samples,
    b: _Samples,
    noise: Noise,
    rng: np.random.Generator,
    lower_is_better: bool | None = True,
    step_mean: float | None = None,
    rank: int | None = None,
    stat: Callable[[np.ndarray], np.ndarray] = _mean,
    medians: bool = True,
) -> Measure:
    """A measure with samples on both sides: its difference, interval and verdict."""
    if not a.ok or not b.ok:
        va = float(stat(a.pooled[None, :])[0]) if a.n else None
        vb = float(stat(b.pooled[None, :])[0]) if b.n else None
        return _unmeasured(key, label, unit, va, vb, lower_is_better=lower_is_better, n_a=a.n, n_b=b.n, rank=rank)
    va, vb = float(stat(a.pooled[None, :])[0]), float(stat(b.pooled[None, :])[0])
    ra, rb = _replicates(a, stat, noise.resamples, rng), _replicates(b, stat, noise.resamples, rng)
    diffs = rb - ra
    delta = vb - va
    ci = noise.interval(diffs)
    detectable = noise.detectable(diffs)
    if len(a.runs) > 1 and len(b.runs) > 1:  # repeats: run-to-run variation, measured
        ci, detectable = _widest(ci, detectable, *_welch(a, b, stat, delta, noise))
    change, allowance = _decide(delta, ci, va, noise, lower_is_better=lower_is_better, unit=unit)
    detectable = max(detectable, allowance)
    median_fields: dict[str, Any] = {}
    if medians:
        ma, mb = float(np.median(a.pooled)), float(np.median(b.pooled))
        mdiffs = _replicates(b, _median, noise.resamples, rng) - _replicates(a, _median, noise.resamples, rng)
        median_fields = {
            "a_median": _r(ma),
            "b_median": _r(mb),
            "delta_median": _r(mb - ma),
            "ci_median": noise.interval(mdiffs),
        }
    return Measure(
        key=key,
        label=label,
        unit=unit,
        lower_is_better=lower_is_better,
        a=_r(va),
        b=_r(vb),
        delta=_r(delta),
        delta_pct=_rel(delta, va),
        step_pct=_rel(delta, step_mean) if unit is Unit.NS and step_mean else None,
        ci=ci,
        detectable=_r(detectable),
        n_a=a.n,
        n_b=b.n,
        change=change,
        rank=rank,
        **median_fields,
    )


def once(
    key: str,
    label: str,
    unit: Unit,
    a: float | None,
    b: float | None,
    *,
    lower_is_better: bool | None = None,
    note: str | None = None,
    exact: bool = False,
) -> Measure:
    """A measure known once per run (a peak): its difference, no interval."""
    if a is None or b is None:
        return _unmeasured(key, label, unit, a, b, lower_is_better=lower_is_better, note=note)
    delta = b - a
    same = delta == 0 if exact else abs(delta) <= COUNT_TOLERANCE * max(abs(a), abs(b))
    change = Change.SAME if same else (Change.HIGHER if delta > 0 else Change.LOWER)
    return Measure(
        key=key,
        label=label,
        unit=unit,
        lower_is_better=lower_is_better,
        a=_r(a),
        b=_r(b),
        delta=_r(delta),
        delta_pct=_rel(delta, a),
        change=change,
        note=note or "measured once per run: no interval",
    )


# -- the sides ------------------------------------------------------------------------------


def _measured_on(analysis: Analysis) -> MeasuredOn:
    return analysis.verdict.measured_on


def _config_value(analysis: Analysis, key: str) -> Any:
    config = analysis.capture.config if analysis.capture is not None else None
    return None if config is None else config.get(key)


def _side(label: str, sources: Sequence[str], runs: Sequence[Analysis]) -> Side:
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
        measured_on=_measured_on(first),
        steps=sum(len(a.steps.per_step) for a in runs),
        step_source=found[0].source.value if found else None,
        workload=workload if isinstance(workload, str) else None,
        batch_size=batch if isinstance(batch, int) and not isinstance(batch, bool) else None,
        config=config,
        tracekit_version=first.tracekit_version,
    )


def _check_side(label: str, runs: Sequence[Analysis]) -> None:
    if not runs:
        raise InputError(f"{label}: no run to compare")
    worlds = {a.run.world_size for a in runs}
    if len(worlds) > 1:
        raise InputError(f"{label}: its runs differ in world size ({sorted(w or 0 for w in worlds)}): not repeats")
    kinds = {_measured_on(a) for a in runs}
    if len(kinds) > 1:
        raise InputError(f"{label}: its runs mix GPU and CPU-only traces: not repeats of one run")
    for a in runs:
        if not a.run.ranks:
            raise InputError(f"{label}: a run with no ranks: nothing to compare")


def _warnings(a: Side, b: Side, ra: Analysis, rb: Analysis) -> list[str]:
    return [*_setup_warnings(a, b), *_step_warnings(a, b, ra, rb), *_config_warnings(a, b)]


def _setup_warnings(a: Side, b: Side) -> list[str]:
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


def _step_warnings(a: Side, b: Side, ra: Analysis, rb: Analysis) -> list[str]:
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


def _config_warnings(a: Side, b: Side) -> list[str]:
    out: list[str] = []
    if a.workload != b.workload and a.workload and b.workload:
        out.append(f"workload differs: A {a.workload}, B {b.workload}")
    if a.batch_size != b.batch_size and a.batch_size and b.batch_size:
        out.append(
            f"batch size per rank differs: A {a.batch_size}, B {b.batch_size}: per-step figures measure different work"
        )
    if a.config is not None and b.config is not None:
        keys = sorted(_config_diff(a.config, b.config) - {"out_dir", "batch_size", "workload"})
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


# -- measures -------------------------------------------------------------------------------


def _samples(runs: Sequence[Analysis], fn: Callable[[Analysis], np.ndarray]) -> _Samples:
    return _Samples(runs=[fn(a) for a in runs])


def _frame(rows: Sequence[Any], fields: Sequence[str]) -> pl.DataFrame:
    return pl.DataFrame([{f: getattr(r, f) for f in fields} for r in rows], infer_schema_length=None)


def _with_key(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(key=pl.col("step").cast(pl.Int64)).filter(pl.col("key").is_not_null())


def _breakdown(analysis: Analysis) -> pl.DataFrame:
    section = analysis.gpu_breakdown if analysis.run.has_gpu else analysis.host_breakdown
    if section is None or not section.per_step:
        return pl.DataFrame()
    fields = ("rank", "step", "window_ns", "compute_ns", "comm_ns", "memory_ns", "idle_ns")
    return _with_key(_frame(section.per_step, fields))


def _whole_share(analysis: Analysis, column: str) -> float | None:
    """``column``'s share of the measured windows of every rank (the whole trace when no steps)."""
    section = analysis.gpu_breakdown if analysis.run.has_gpu else analysis.host_breakdown
    if section is None or not section.per_rank:
        return None
    window = sum(r.window_ns for r in section.per_rank)
    return 100.0 * sum(getattr(r, column) for r in section.per_rank) / window if window else None


def _share(column: str) -> Callable[[Analysis], np.ndarray]:
    def values(analysis: Analysis) -> np.ndarray:
        df = _breakdown(analysis)
        if df.height == 0:
            return np.empty(0)
        per = df.group_by("key").agg(v=100.0 * pl.col(column).sum() / pl.col("window_ns").sum()).sort("key")
        return np.asarray(per["v"].drop_nulls().drop_nans().to_numpy(), dtype=float)

    return values


def _overlap(column: str) -> Callable[[Analysis], np.ndarray]:
    def values(analysis: Analysis) -> np.ndarray:
        rows = analysis.overlap.per_step
        if not rows:
            return np.empty(0)
        df = _with_key(_frame(rows, ("rank", "step", "comm_ns", "overlapped_ns", "exposed_ns")))
        expr: pl.Expr = pl.col(column).mean()
        if column == "overlap_pct":
            expr = pl.when(pl.col("comm_ns").sum() > 0).then(
                100.0 * pl.col("overlapped_ns").sum() / pl.col("comm_ns").sum()
            )
        per = df.group_by("key").agg(v=expr).sort("key")
        return np.asarray(per["v"].drop_nulls().to_numpy(), dtype=float)

    return values


def sync_measure(analysis: Analysis) -> str:
    """What counts as a sync of this run: the host's blocking calls on a GPU run, else host reads."""
    if _measured_on(analysis) is MeasuredOn.GPU:
        return "blocking sync calls and copies (points where the host waited for the GPU)"
    return "host reads of tensor values (.item(), bool(t): each a device-to-host sync on a GPU)"


def _syncs(analysis: Analysis) -> np.ndarray:
    rows = analysis.host_syncs.per_step
    if not rows:
        return np.empty(0)
    column = "sync_calls" if _measured_on(analysis) is MeasuredOn.GPU else "sync_ops"
    df = _with_key(_frame(rows, ("rank", "step", column)))
    return _per_step(df.rename({column: "v"}), "v")


def _phase_names(runs: Sequence[Analysis]) -> list[str]:
    seen: dict[str, float] = {}
    for a in runs:
        for row in a.annotations.summary:
            seen[row.name] = seen.get(row.name, 0.0) + row.cpu_ns
    return sorted(seen, key=lambda n: (-seen[n], n))


def _phase_series(analysis: Analysis) -> dict[str, np.ndarray]:
    """Each phase's time per step (the mean over ranks), in step order, from one pass over the rows."""
    rows = analysis.annotations.per_step
    if not rows:
        return {}
    df = pl.DataFrame(
        {"name": [r.name for r in rows], "key": [r.step for r in rows], "v": [float(r.cpu_ns) for r in rows]}
    )
    per = df.group_by("name", "key").agg(pl.col("v").mean()).sort("name", "key")
    return {str(part["name"][0]): part["v"].to_numpy().astype(float) for part in per.partition_by("name")}


def _label(name: str) -> str:
    return name.removeprefix(PHASE_PREFIX)


def _peak(analysis: Analysis) -> tuple[float | None, str]:
    """The worst rank's peak: device memory allocated, else the capture's peak RSS."""
    memory = analysis.memory
    if memory is not None and memory.per_device:
        peaks = [r.peak_allocated_bytes for r in memory.per_device if r.peak_allocated_bytes is not None]
        if peaks:
            return float(max(peaks)), "peak memory allocated (worst rank, profiler counters)"
    if analysis.capture is not None:
        values = [p.memory.peak_bytes for p in analysis.capture.per_rank if p.memory.peak_bytes is not None]
        if values:
            what = "allocated" if analysis.capture.per_rank[0].memory.peak_allocated_bytes is not None else "RSS"
            return float(max(values)), f"peak memory {what} (worst rank, capture)"
    return None, "peak memory"


def _reserved(analysis: Analysis) -> float | None:
    memory = analysis.memory
    if memory is not None:
        peaks = [r.peak_reserved_bytes for r in memory.per_device if r.peak_reserved_bytes is not None]
        if peaks:
            return float(max(peaks))
    return None


def _samples_per_step(analysis: Analysis) -> int | None:
    capture = analysis.capture
    if capture is None or capture.throughput.samples_per_step_per_rank is None:
        return None
    return capture.throughput.samples_per_step_per_rank * max(1, capture.world_size)


def _distribution(side: str, values: np.ndarray, rank: int | None) -> Distribution:
    if len(values) == 0:
        return Distribution(side=side, rank=rank, count=0)
    kept = values if len(values) <= MAX_VALUES else values[np.linspace(0, len(values) - 1, MAX_VALUES).astype(int)]
    p5, p95 = np.quantile(values, [0.05, 0.95])
    return Distribution(
        side=side,
        rank=rank,
        count=len(values),
        mean_ns=_r(float(values.mean())),
        median_ns=_r(float(np.median(values))),
        p5_ns=_r(float(p5)),
        p95_ns=_r(float(p95)),
        min_ns=_r(float(values.min())),
        max_ns=_r(float(values.max())),
        values_ns=[float(v) for v in kept],
    )


# -- work -----------------------------------------------------------------------------------


def _units(runs: Sequence[Analysis], per_second: bool) -> float:
    """What counts divide by: measured (rank, step) pairs, or seconds of measured window."""
    if per_second:
        return sum((a.work.window_ns if a.work else 0) for a in runs) / 1e9
    return float(sum((a.work.rank_steps if a.work else 0) for a in runs))


def _work_totals(runs: Sequence[Analysis]) -> dict[tuple[str, str, str | None, str | None], list[float]]:
    out: dict[tuple[str, str, str | None, str | None], list[float]] = {}
    for a in runs:
        if a.work is None:
            continue
        for row in a.work.rows:
            key = (row.kind, row.name, row.sync_kind, row.phase)
            total = out.setdefault(key, [0.0, 0.0])
            total[0] += row.count
            total[1] += row.total_ns
    return out


def _work(a: Sequence[Analysis], b: Sequence[Analysis], per_second: bool) -> list[WorkChange]:
    ua, ub = _units(a, per_second), _units(b, per_second)
    if ua <= 0 or ub <= 0:
        return []
    ta, tb = _work_totals(a), _work_totals(b)
    categories = {(r.kind, r.name): r.category for x in (*a, *b) if x.work for r in x.work.rows if r.category}
    out: list[WorkChange] = []
    for key in ta.keys() | tb.keys():
        kind, name, sync_kind, phase = key
        ca = ta[key][0] / ua if key in ta else None
        cb = tb[key][0] / ub if key in tb else None
        na = ta[key][1] / ua if key in ta else None
        nb = tb[key][1] / ub if key in tb else None
        if ca is None:
            change = Change.APPEARED
        elif cb is None:
            change = Change.DISAPPEARED
        elif abs(cb - ca) > COUNT_TOLERANCE * max(ca, cb):
            change = Change.HIGHER if cb > ca else Change.LOWER
        else:
            change = Change.SAME
        out.append(
            WorkChange(
                kind=WorkKind(kind),
                name=name,
                category=categories.get((kind, name)),
                phase=phase,
                sync_kind=sync_kind,
                a_count=_r(ca),
                b_count=_r(cb),
                a_ns=_r(na),
                b_ns=_r(nb),
                delta_count=_r((cb or 0.0) - (ca or 0.0)) or 0.0,
                delta_ns=_r((nb or 0.0) - (na or 0.0)) or 0.0,
                change=change,
            )
        )
    return out


def _top_work(rows: list[WorkChange]) -> list[WorkChange]:
    """Per kind: what appeared or disappeared or changed count, then the largest time changes."""
    out: list[WorkChange] = []
    for kind in WorkKind:
        if kind is WorkKind.SYNC:
            continue
        mine = [r for r in rows if r.kind is kind]
        ordered = sorted(
            mine,
            key=lambda r: (
                r.change is Change.SAME,
                -abs(r.delta_ns),
                -abs(r.delta_count),
                r.name,
                r.phase or "",
                r.sync_kind or "",
            ),
        )
        out.extend(ordered[:WORK_ROWS])
    return out


# -- the comparison -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Inputs:
    """What every measure of one comparison reads."""

    a: Sequence[Analysis]
    b: Sequence[Analysis]
    steps_a: list[pl.DataFrame]
    steps_b: list[pl.DataFrame]
    noise: Noise
    rng: np.random.Generator
    has_steps: bool
    step_mean: float | None

    def test(self, key: str, label: str, unit: Unit, fn: Callable[[Analysis], np.ndarray], **kw: Any) -> Measure:
        """``measure_of`` with both sides' samples from ``fn``."""
        a, b = _samples(self.a, fn), _samples(self.b, fn)
        return measure_of(key, label, unit, a=a, b=b, noise=self.noise, rng=self.rng, **kw)


def _throughput(c: _Inputs) -> Measure:
    """Throughput, set by the slowest rank of each step."""
    slow_a = _Samples(runs=[_per_step(df, "duration_ns", "max") for df in c.steps_a])
    slow_b = _Samples(runs=[_per_step(df, "duration_ns", "max") for df in c.steps_b])
    per_step_a, per_step_b = _samples_per_step(c.a[0]), _samples_per_step(c.b[0])
    scale = float(per_step_a) if per_step_a is not None and per_step_a == per_step_b else 1.0
    what = "samples/s" if scale != 1.0 else "steps/s"
    return measure_of(
        "throughput",
        f"throughput ({what}, slowest rank per step)",
        Unit.PER_S,
        a=slow_a,
        b=slow_b,
        noise=c.noise,
        rng=c.rng,
        lower_is_better=False,
        stat=lambda m: scale * 1e9 / m.mean(axis=1),
        medians=False,
    )


def _shares(c: _Inputs) -> list[Measure]:
    out = []
    for column, label in (
        ("compute_ns", "compute share"),
        ("comm_ns", "communication share"),
        ("memory_ns", "memory-op share"),
        ("idle_ns", "idle share"),
    ):
        key = column.removesuffix("_ns") + "_pct"
        better = True if column == "idle_ns" else None
        if c.has_steps:
            out.append(c.test(key, label, Unit.PCT, _share(column), lower_is_better=better, medians=False))
        else:
            a, b = _whole_share(c.a[0], column), _whole_share(c.b[0], column)
            note = "over each rank's whole trace (no steps): no interval"
            out.append(once(key, label, Unit.PCT, a, b, lower_is_better=better, note=note))
    return out


def _memory(c: _Inputs) -> list[Measure]:
    peak_a, what = _peak(c.a[0])
    peak_b, _ = _peak(c.b[0])
    out = [once("peak_memory", what, Unit.BYTES, peak_a, peak_b, lower_is_better=True)]
    reserved_a, reserved_b = _reserved(c.a[0]), _reserved(c.b[0])
    if reserved_a is not None or reserved_b is not None:
        label = "peak memory reserved (worst rank)"
        out.append(once("peak_reserved", label, Unit.BYTES, reserved_a, reserved_b, lower_is_better=True))
    gap_a, gap_b = _gap(c.a[0]), _gap(c.b[0])
    if gap_a is not None or gap_b is not None:
        label = "reserved but unallocated at the peak (worst rank)"
        out.append(once("peak_gap", label, Unit.BYTES, gap_a, gap_b, lower_is_better=True))
    return out


def _gap(analysis: Analysis) -> float | None:
    """The largest fragmentation gap at a peak (reserved minus allocated when allocated peaked)."""
    memory = analysis.memory
    gaps = [r.gap_at_peak_bytes for r in memory.per_device if r.gap_at_peak_bytes is not None] if memory else []
    return float(max(gaps)) if gaps else None


def _per_rank(c: _Inputs, common: Sequence[int]) -> list[Measure]:
    out = []
    for rank in common if c.has_steps else ():
        ra = _Samples(runs=[_per_step(df.filter(pl.col("rank") == rank), "duration_ns") for df in c.steps_a])
        rb = _Samples(runs=[_per_step(df.filter(pl.col("rank") == rank), "duration_ns") for df in c.steps_b])
        label = f"rank {rank}"
        out.append(
            measure_of(f"rank:{rank}", label, Unit.NS, a=ra, b=rb, noise=c.noise, rng=c.rng, rank=rank, medians=False)
        )
    return out


def _phases(c: _Inputs) -> list[Measure]:
    if not c.has_steps:
        return []
    names = _phase_names(c.a)
    names += [n for n in _phase_names(c.b) if n not in names]
    series_a, series_b = [_phase_series(x) for x in c.a], [_phase_series(x) for x in c.b]
    empty = np.empty(0)
    return [
        measure_of(
            f"phase:{n}",
            _label(n),
            Unit.NS,
            a=_Samples(runs=[s.get(n, empty) for s in series_a]),
            b=_Samples(runs=[s.get(n, empty) for s in series_b]),
            noise=c.noise,
            rng=c.rng,
            step_mean=c.step_mean,
        )
        for n in names
    ]


def _distributions(c: _Inputs, sa: _Samples, sb: _Samples) -> list[Distribution]:
    out = [_distribution("a", sa.pooled, None), _distribution("b", sb.pooled, None)]
    for side, frames in (("a", c.steps_a), ("b", c.steps_b)):
        pooled = pl.concat(frames) if frames else pl.DataFrame()
        for rank in sorted(set(pooled["rank"].to_list())) if pooled.height else ():
            values = pooled.filter(pl.col("rank") == rank)["duration_ns"].to_numpy()
            out.append(_distribution(side, np.asarray(values, dtype=float), rank))
    return out


def _sync_comparison(c: _Inputs, syncs: Measure, work: list[WorkChange]) -> SyncComparison:
    relevant = {"sync", "blocking_copy"} if _measured_on(c.a[0]) is MeasuredOn.GPU else {HOST_READ}
    rows = sorted(
        (r for r in work if r.kind is WorkKind.SYNC and r.sync_kind in relevant),
        key=lambda r: (-max(r.a_count or 0.0, r.b_count or 0.0), r.name, r.phase or "", r.sync_kind or ""),
    )
    return SyncComparison(
        measure=sync_measure(c.a[0]),
        a_per_step=syncs.a,
        b_per_step=syncs.b,
        delta=syncs.delta,
        sources=rows[:WORK_ROWS],
    )


def compare(
    a: Sequence[Analysis],
    b: Sequence[Analysis],
    *,
    sources: tuple[Sequence[str], Sequence[str]] = ((), ()),
    labels: tuple[str, str] = ("A", "B"),
    noise: Noise | None = None,
) -> Comparison:
    """Compare run(s) ``b`` against the baseline run(s) ``a`` (several runs per side: repeats)."""
    noise = noise or Noise()
    _check_side(labels[0], a)
    _check_side(labels[1], b)
    rng = np.random.default_rng(noise.seed)
    side_a, side_b = _side(labels[0], sources[0], a), _side(labels[1], sources[1], b)
    has_steps = side_a.steps > 0 and side_b.steps > 0
    steps_a, steps_b = [_steps_frame(x) for x in a], [_steps_frame(x) for x in b]
    sa = _Samples(runs=[_per_step(df, "duration_ns") for df in steps_a])
    sb = _Samples(runs=[_per_step(df, "duration_ns") for df in steps_b])
    step = measure_of("step", "step time", Unit.NS, a=sa, b=sb, noise=noise, rng=rng)
    c = _Inputs(a, b, steps_a, steps_b, noise, rng, has_steps, step.a)
    syncs = c.test("syncs", "syncs per step", Unit.COUNT, _syncs, medians=False)
    measures = [
        _throughput(c),
        *_shares(c),
        c.test(
            "exposed_comm",
            "exposed communication per step",
            Unit.NS,
            _overlap("exposed_ns"),
            step_mean=step.a,
            medians=False,
        ),
        c.test(
            "overlap_pct",
            "comm/compute overlap",
            Unit.PCT,
            _overlap("overlap_pct"),
            lower_is_better=False,
            medians=False,
        ),
        *_memory(c),
        syncs,
    ]
    work = _work(a, b, per_second=not has_steps)
    if len(a) > 1 and len(b) > 1:
        repeats = (
            "; with repeats, runs resampled first, then steps within each, and the interval no narrower than "
            "Welch's t over the runs' means (run-to-run variation measured)"
        )
    else:
        repeats = (
            "; one run on a side: the interval holds step-to-step variation only, not how far two launches "
            "of one program differ (capture --ab with --repeats 3 measures that)"
        )
    return Comparison(
        tracekit_version=__version__,
        a=side_a,
        b=side_b,
        noise=NoiseModel(
            method="moving-block bootstrap over steps, each step the mean over ranks" + repeats,
            level=noise.level,
            resamples=noise.resamples,
            threshold_pct=noise.threshold_pct,
            unit="step" if has_steps else "second",
            seed=noise.seed,
        ),
        step=step,
        measures=measures,
        per_rank=_per_rank(c, sorted(set(side_a.ranks) & set(side_b.ranks))),
        phases=_phases(c),
        distributions=_distributions(c, sa, sb),
        work=_top_work(work),
        syncs=_sync_comparison(c, syncs, work),
        verdicts=_verdicts(a[0], b[0]),
        warnings=_warnings(side_a, side_b, a[0], b[0]),
    )


def _verdicts(a: Analysis, b: Analysis) -> VerdictComparison:
    costs_a = {c.bound.value: c.share_pct for c in a.verdict.costs}
    costs_b = {c.bound.value: c.share_pct for c in b.verdict.costs}
    order = {kind.value: i for i, kind in enumerate(BoundKind)}  # ties (share 0) in the vocabulary's order
    bounds = sorted(
        costs_a.keys() | costs_b.keys(),
        key=lambda k: (-max(costs_a.get(k, 0.0), costs_b.get(k, 0.0)), order.get(k, len(order)), k),
    )
    shifts = [
        CostShift(
            bound=k,
            a_pct=_r(costs_a.get(k)),
            b_pct=_r(costs_b.get(k)),
            delta_pct=_r(costs_b[k] - costs_a[k]) if k in costs_a and k in costs_b else None,
        )
        for k in bounds
    ]
    pa, pb = a.verdict.primary, b.verdict.primary
    return VerdictComparison(
        a=pa,
        b=pb,
        a_measured_on=a.verdict.measured_on,
        b_measured_on=b.verdict.measured_on,
        same_bound=(pa.bound, pa.note) == (pb.bound, pb.note),
        costs=shifts,
    )


# -- the CI gate ----------------------------------------------------------------------------

#: ``--fail-if`` metrics: the measure each reads, and whether it is a time whose regression must
#: be beyond noise (else a count or a peak, compared as it is).
GATE_METRICS: Final = {
    "slower": "step",
    "step": "step",
    "throughput": "throughput",
    "memory": "peak_memory",
    "reserved": "peak_reserved",
    "gap": "peak_gap",
    "syncs": "syncs",
    "exposed_comm": "exposed_comm",
}
_TIME_UNITS: Final = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_BYTE_UNITS: Final = {"b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30}
GATE_HELP: Final = (
    "METRIC:LIMIT, METRIC one of slower (step time), throughput, memory (peak), reserved, gap (fragmentation), "
    "syncs (per step), "
    "exposed_comm, phase:NAME; LIMIT a share of A (1%) or an amount (+0, 0.5ms, 512MiB)"
)


@dataclass(frozen=True)
class GateSpec:
    """One parsed ``--fail-if``: the measure key, and the limit as a share or an amount."""

    text: str
    metric: str
    key: str
    pct: float | None
    amount: float | None


def parse_gate(text: str) -> GateSpec:
    """``slower:1%``, ``syncs:+0``, ``memory:+512MiB``, ``phase:forward:0.5ms`` -> a :class:`GateSpec`."""
    metric, sep, limit = text.strip().rpartition(":")
    metric = metric.strip()
    limit = limit.strip().lstrip("+")
    if not sep or not metric or not limit:
        raise InputError(f"--fail-if {text!r}: expected {GATE_HELP}")
    if metric.startswith("phase:"):
        name = metric.removeprefix("phase:").strip()
        if not name:
            raise InputError(f"--fail-if {text!r}: name the phase, e.g. phase:forward:1%")
        key = f"phase:{name}"
    elif metric in GATE_METRICS:
        key = GATE_METRICS[metric]
    else:
        raise InputError(f"--fail-if {text!r}: unknown metric {metric!r}; expected {GATE_HELP}")
    try:
        if limit.endswith("%"):
            pct = float(limit[:-1])
            if not math.isfinite(pct) or pct < 0:
                raise ValueError(limit)
            return GateSpec(text=text, metric=metric, key=key, pct=pct, amount=None)
        return GateSpec(text=text, metric=metric, key=key, pct=None, amount=_amount(limit, key))
    except ValueError:
        raise InputError(f"--fail-if {text!r}: cannot read the limit {limit!r}; expected {GATE_HELP}") from None


def _amount(limit: str, key: str) -> float:
    lowered = limit.lower()
    units = _BYTE_UNITS if key in ("peak_memory", "peak_reserved", "peak_gap") else _TIME_UNITS
    if key in ("syncs", "throughput"):
        units = {}
    for suffix in sorted(units, key=len, reverse=True):
        if lowered.endswith(suffix):
            value = float(lowered[: -len(suffix)]) * units[suffix]
            break
    else:
        value = float(lowered) * (1e6 if units is _TIME_UNITS else 1.0)  # a bare time is in ms
    if not math.isfinite(value) or value < 0:
        raise ValueError(limit)
    return value


def _fmt(value: float | None, unit: Unit) -> str:
    if value is None:
        return "n/a"
    sign = "+" if value > 0 else ("-" if value < 0 else "")
    v = abs(value)
    if unit is Unit.NS:
        text = f"{v / 1e6:.3g} ms" if v >= 1e5 else f"{v / 1e3:.3g} us"
    elif unit is Unit.BYTES:
        text = f"{v / 2**30:.3g} GiB" if v >= 2**30 else f"{v / 2**20:.3g} MiB"
    elif unit is Unit.PCT:
        text = f"{v:.3g} points"
    else:
        text = f"{v:.4g}"
    return sign + text


def _find(comparison: Comparison, key: str) -> Measure | None:
    for m in (comparison.step, *comparison.measures, *comparison.phases):
        if m.key == key:
            return m
    if key.startswith("phase:"):  # tracekit's own phases by their short name
        for m in comparison.phases:
            if m.label == key.removeprefix("phase:"):
                return m
    return None


def evaluate_gate(comparison: Comparison, specs: Sequence[str]) -> Comparison:
    """``comparison`` with the result of each ``--fail-if`` condition (B against the baseline A).

    A time (step, phase, exposed comm, throughput) fails only when its change is beyond noise
    (*slower*) and larger than the limit; a count or a peak fails when B exceeds A by more than
    the limit. A condition on something not measured on both sides is bad input.
    """
    results = []
    for text in specs:
        spec = parse_gate(text)
        m = _find(comparison, spec.key)
        if m is None or m.a is None or m.b is None or m.delta is None:
            what = spec.key.removeprefix("phase:") if spec.key.startswith("phase:") else spec.metric
            phases = ", ".join(p.label for p in comparison.phases) or "none"
            extra = f" (phases: {phases})" if spec.key.startswith("phase:") else ""
            raise InputError(f"--fail-if {text!r}: {what} is not measured on both runs{extra}")
        worse = -m.delta if m.lower_is_better is False else m.delta
        limit = spec.amount if spec.pct is None else abs(m.a) * spec.pct / 100.0
        assert limit is not None
        noisy = m.ci is not None and m.unit is not Unit.COUNT  # counts are compared as they are
        beyond = m.change is Change.SLOWER if noisy else worse > 0
        failed = beyond and worse > limit
        shown_unit = Unit.NS if m.unit is Unit.NS else m.unit
        limit_text = f"{spec.pct:g}%" if spec.pct is not None else _fmt(limit, shown_unit).lstrip("+")
        observed = f"{_fmt(m.delta, shown_unit)}" + (f" ({m.delta_pct:+.2f}%)" if m.delta_pct is not None else "")
        interval = (
            f", {round(100 * m.ci.level)}% CI {_fmt(m.ci.low, shown_unit)}..{_fmt(m.ci.high, shown_unit)}"
            if m.ci is not None
            else ""
        )
        if failed:
            message = f"regressed: {m.label} {observed}{interval}, beyond the limit {limit_text}"
        elif beyond:
            message = f"within the limit: {m.label} {observed}{interval}, limit {limit_text}"
        elif noisy and m.change is Change.WITHIN_NOISE:
            message = f"within noise: {m.label} {observed}{interval}"
        else:
            message = f"no regression: {m.label} {observed}{interval}"
        results.append(
            GateResult(
                spec=text,
                key=spec.key,
                label=m.label,
                limit=limit_text,
                observed=observed,
                failed=failed,
                message=message,
            )
        )
    return msgspec.structs.replace(comparison, gate=results)


def compare_values(
    key: str,
    label: str,
    unit: Unit,
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    *,
    noise: Noise | None = None,
    lower_is_better: bool | None = True,
    stat: Callable[[np.ndarray], np.ndarray] = _mean,
) -> Measure:
    """A measure of two sides given as plain values, one sequence per run (per-step values of
    each repeat): the difference of ``stat`` and its interval, by the noise model of
    :func:`compare` (for runs that were not analyzed, such as the cells of a sweep)."""
    noise = noise or Noise()
    return measure_of(
        key,
        label,
        unit,
        a=_Samples(runs=[np.asarray(r, dtype=float) for r in a]),
        b=_Samples(runs=[np.asarray(r, dtype=float) for r in b]),
        noise=noise,
        rng=np.random.default_rng(noise.seed),
        lower_is_better=lower_is_better,
        stat=stat,
        medians=False,
    )
