"""The measures of a comparison: step time, throughput, shares, exposed communication, overlap,
memory, syncs, CPU time per step, each rank's and each phase's time, and the step-time
distributions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from tracekit.analyzers.compare import samples as sm
from tracekit.analyzers.compare.noise import Noise, Samples, measure_of, once, rounded
from tracekit.results.compare import Distribution, Measure
from tracekit.results.vocab import MeasureNote, SideKey, Unit

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.results.analysis import Analysis

#: The most step values kept per distribution (for the chart; statistics use all).
MAX_VALUES: Final = 5000
#: The breakdown columns compared as shares (each the measure ``<column without _ns>_pct``).
SHARES: Final = ("compute_ns", "comm_ns", "memory_ns", "idle_ns")


@dataclass(frozen=True)
class Inputs:
    """What every measure of one comparison reads."""

    a: Sequence[Analysis]
    b: Sequence[Analysis]
    steps_a: list[sm.StepRows]
    steps_b: list[sm.StepRows]
    noise: Noise
    rng: np.random.Generator
    has_steps: bool
    step_mean: float | None

    def test(self, key: str, unit: Unit, fn: Callable[[Analysis], np.ndarray], **kw: Any) -> Measure:
        """``measure_of`` with both sides' samples from ``fn``."""
        a, b = Samples(runs=[fn(x) for x in self.a]), Samples(runs=[fn(x) for x in self.b])
        return measure_of(key, unit, a=a, b=b, noise=self.noise, rng=self.rng, **kw)


def step_samples(frames: Sequence[sm.StepRows], how: str = "mean") -> Samples:
    """Each run's step times, each step the mean (or the max) over ranks."""
    return Samples(runs=[sm.per_step(steps, how) for steps in frames])


def throughput(c: Inputs) -> Measure:
    """Throughput, set by the slowest rank of each step: samples/s where both captures say how
    many samples a step holds (each side with its own count: batch 16 against batch 8 is
    compared per sample, never per step), else steps/s."""
    per_step_a, per_step_b = sm.samples_per_step(c.a[0]), sm.samples_per_step(c.b[0])
    a, b = step_samples(c.steps_a, "max"), step_samples(c.steps_b, "max")
    per_sample = per_step_a is not None and per_step_b is not None
    if per_step_a is not None and per_step_b is not None:  # step time per sample: 1e9 / it is samples/s
        a = Samples(runs=[r / per_step_a for r in a.runs])
        b = Samples(runs=[r / per_step_b for r in b.runs])
    return measure_of(
        "throughput",
        Unit.SAMPLES_PER_S if per_sample else Unit.PER_S,
        a=a,
        b=b,
        noise=c.noise,
        rng=c.rng,
        lower_is_better=False,
        stat=lambda m: 1e9 / m.mean(axis=1),
        medians=False,
    )


def cpu_samples(run: Analysis) -> np.ndarray | None:
    """Each measured step's CPU time, the mean over ranks, from the capture summary beside the
    traces (capture 1.7 and later); None when the run has none. Each rank's steps are in step
    order; the ranks measure the same steps, and a rank with fewer counts to its last."""
    capture = run.capture
    if capture is None or not capture.per_rank or any(not r.step_cpu_ns for r in capture.per_rank):
        return None
    n = min(len(r.step_cpu_ns) for r in capture.per_rank)
    per_rank = np.asarray([r.step_cpu_ns[:n] for r in capture.per_rank], dtype=float)
    return np.asarray(per_rank.mean(axis=0), dtype=float)


def cpu(c: Inputs) -> Measure | None:
    """CPU time per step (every rank's process, the mean over ranks): the work a step does
    rather than its share of the cores. On CPU ranks whose cores are shared (other tenants, more
    ranks than cores) a step's wall time swings from run to run with the load; its CPU time less
    so, though not by as much as one would hope (docs/compare.md has the measured rates). None
    when neither side's capture measured it."""
    a, b = [cpu_samples(x) for x in c.a], [cpu_samples(x) for x in c.b]
    if all(x is None for x in (*a, *b)):
        return None
    return measure_of("cpu", Unit.NS, a=_every(a), b=_every(b), noise=c.noise, rng=c.rng, step_mean=c.step_mean)


def _every(runs: list[np.ndarray | None]) -> Samples:
    """A side's samples when every run has them; none (not measured) when a run lacks them."""
    kept = [r for r in runs if r is not None]
    return Samples(runs=kept if len(kept) == len(runs) else [])


def shares(c: Inputs) -> list[Measure]:
    """Compute, communication, memory-op and idle shares of the measured time."""
    out = []
    for column in SHARES:
        key = column.removesuffix("_ns") + "_pct"
        better = True if column == "idle_ns" else None
        if c.has_steps:
            out.append(c.test(key, Unit.PCT, sm.share(column), lower_is_better=better, medians=False))
        else:
            a, b = sm.whole_share(c.a[0], column), sm.whole_share(c.b[0], column)
            out.append(once(key, Unit.PCT, a, b, lower_is_better=better, note=MeasureNote.WHOLE_TRACE))
    return out


def communication(c: Inputs) -> list[Measure]:
    """Exposed communication per step, and the share of communication compute hides."""
    return [
        c.test(
            "exposed_comm",
            Unit.NS,
            sm.overlap("exposed_ns"),
            step_mean=c.step_mean,
            medians=False,
        ),
        c.test(
            "overlap_pct",
            Unit.PCT,
            sm.overlap("overlap_pct"),
            lower_is_better=False,
            medians=False,
        ),
    ]


def memory(c: Inputs) -> list[Measure]:
    """Peaks of the worst rank: allocated, reserved, and the gap between them."""
    peak_a, where = sm.peak(c.a[0])
    peak_b, _ = sm.peak(c.b[0])
    out = [once("peak_memory", Unit.BYTES, peak_a, peak_b, lower_is_better=True, peak_of=where)]
    reserved_a, reserved_b = sm.reserved(c.a[0]), sm.reserved(c.b[0])
    if reserved_a is not None or reserved_b is not None:
        out.append(once("peak_reserved", Unit.BYTES, reserved_a, reserved_b, lower_is_better=True))
    gap_a, gap_b = sm.gap(c.a[0]), sm.gap(c.b[0])
    if gap_a is not None or gap_b is not None:
        out.append(once("peak_gap", Unit.BYTES, gap_a, gap_b, lower_is_better=True))
    return out


def per_rank(c: Inputs, common: Sequence[int]) -> list[Measure]:
    """Each common rank's step time."""
    out = []
    for rank in common if c.has_steps else ():
        ra = step_samples([steps.of_rank(rank) for steps in c.steps_a])
        rb = step_samples([steps.of_rank(rank) for steps in c.steps_b])
        out.append(measure_of(f"rank:{rank}", Unit.NS, a=ra, b=rb, noise=c.noise, rng=c.rng, rank=rank, medians=False))
    return out


def phases(c: Inputs) -> list[Measure]:
    """Each phase's time per step (phases of A first, most time first)."""
    if not c.has_steps:
        return []
    names = sm.phase_names(c.a)
    names += [n for n in sm.phase_names(c.b) if n not in names]
    series_a, series_b = [sm.phase_series(x) for x in c.a], [sm.phase_series(x) for x in c.b]
    empty = np.empty(0)
    return [
        measure_of(
            f"phase:{n}",
            Unit.NS,
            a=Samples(runs=[s.get(n, empty) for s in series_a]),
            b=Samples(runs=[s.get(n, empty) for s in series_b]),
            noise=c.noise,
            rng=c.rng,
            step_mean=c.step_mean,
        )
        for n in names
    ]


def distributions(c: Inputs, sa: Samples, sb: Samples) -> list[Distribution]:
    """Step times per side (each step the mean over ranks), then per side and rank."""
    out = [_distribution("a", sa.pooled, None), _distribution("b", sb.pooled, None)]
    sides: tuple[tuple[SideKey, list[sm.StepRows]], ...] = (("a", c.steps_a), ("b", c.steps_b))
    for side, frames in sides:
        pooled = sm.StepRows.joined(frames)
        for rank in sorted(set(pooled.rank.tolist())):
            out.append(_distribution(side, pooled.of_rank(rank).duration_ns, rank))
    return out


def _distribution(side: SideKey, values: np.ndarray, rank: int | None) -> Distribution:
    if len(values) == 0:
        return Distribution(side=side, rank=rank, count=0)
    kept = values if len(values) <= MAX_VALUES else values[np.linspace(0, len(values) - 1, MAX_VALUES).astype(int)]
    p5, p95 = np.quantile(values, [0.05, 0.95])
    return Distribution(
        side=side,
        rank=rank,
        count=len(values),
        mean_ns=rounded(float(values.mean())),
        median_ns=rounded(float(np.median(values))),
        p5_ns=rounded(float(p5)),
        p95_ns=rounded(float(p95)),
        min_ns=rounded(float(values.min())),
        max_ns=rounded(float(values.max())),
        values_ns=[float(v) for v in kept],
    )
