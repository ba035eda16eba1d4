"""The noise model of a comparison: per-step samples, their bootstrap, and the measure it decides.

Steps of one run are not independent across ranks: in a synchronous job every rank waits for
the slowest at each collective, so the eight durations of one step are one observation, not
eight. The unit of a sample is therefore the *step*: its value is the mean over ranks of the
step's duration (the slowest rank's, for throughput). Consecutive steps are correlated too (a
slow stretch of the machine spans several), so intervals come from a *moving-block bootstrap*
over steps (blocks of about n^(1/3) steps), resampling A and B independently; with several runs
per side (``--repeats``) runs are resampled first, then steps within each, so run-to-run
variation widens the interval as it should. A change is *slower* or *faster* only when the
interval of the difference of means excludes zero **and** the change is at least
``threshold_pct`` of A's value: a single pair of runs cannot measure how far two launches of the
same program drift apart (allocator layout, clocks, neighbours on the machine), and the
threshold is that allowance, written in the result beside the interval. The smallest change the
comparison could have detected is reported too: the larger of the threshold and
(z(1 - alpha/2) + z(0.8)) standard errors of the difference (80% power), so a "within noise"
reads with how much could have hidden in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from tracekit.arguments import number
from tracekit.results.compare import Interval, Measure
from tracekit.results.vocab import Change, MeasureNote, PeakSource, Unit

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: Defaults of the noise model (see the module docstring).
LEVEL: Final = 0.95
THRESHOLD_PCT: Final = 1.0
RESAMPLES: Final = 2000
SEED: Final = 0
POWER: Final = 0.8
#: The confidence levels an interval may have (``--level``).
MIN_LEVEL: Final = 0.5
MAX_LEVEL: Final = 0.999
#: The largest practical threshold, in percent of A (``--noise-threshold``): ten times A.
MAX_THRESHOLD_PCT: Final = 1000.0
#: The bootstrap's resamples: enough for a 95% interval's tails, few enough to stay in memory.
MIN_RESAMPLES: Final = 100
MAX_RESAMPLES: Final = 100_000
#: A count per step that differs by less than this share of the larger is the same count.
COUNT_TOLERANCE: Final = 0.01


@dataclass(frozen=True)
class Samples:
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


def _block_starts(n: int, length: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` x blocks: the first step of each block of ``length`` steps (``length < n``)."""
    return rng.integers(0, n - length + 1, size=(resamples, math.ceil(n / length)))


def block_indices(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` x ``n`` indices of a moving-block bootstrap of ``n`` consecutive steps."""
    length = max(1, round(n ** (1 / 3)))
    if length >= n:
        return rng.integers(0, n, size=(resamples, n))
    starts = _block_starts(n, length, resamples, rng)
    blocks = starts.shape[1]
    idx = (starts[:, :, None] + np.arange(length)[None, None, :]).reshape(resamples, blocks * length)
    return idx[:, :n]


def block_means(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The means of ``resamples`` moving-block bootstrap samples of ``x``: the samples of
    :func:`block_indices` (the same draws of ``rng``), each summed from its blocks' sums
    (differences of ``x``'s running sum) instead of gathered element by element, which is
    about 4x faster at 27 steps; equal to the gathered means up to rounding."""
    n = len(x)
    length = max(1, round(n ** (1 / 3)))
    if length >= n:
        return row_means(x[block_indices(n, resamples, rng)])
    starts = _block_starts(n, length, resamples, rng)
    running = np.concatenate(([0.0], np.cumsum(x, dtype=float)))
    head, last = starts[:, :-1], starts[:, -1]
    tail = n - (starts.shape[1] - 1) * length  # the last block, cut at n
    sums = (running[head + length] - running[head]).sum(axis=1) + (running[last + tail] - running[last])
    return np.asarray(sums / n, dtype=float)


def _replicates(
    samples: Samples, stat: Callable[[np.ndarray], np.ndarray], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """``stat`` (rows of a matrix -> one value per row) of ``resamples`` bootstrap samples."""
    runs = samples.runs
    if len(runs) == 1:
        x = runs[0]
        if stat is row_means:
            return block_means(x, resamples, rng)
        return stat(x[block_indices(len(x), resamples, rng)])
    picks = rng.integers(0, len(runs), size=(resamples, len(runs)))
    n = len(runs[0])
    if all(len(r) == n for r in runs):
        # runs of one length (repeats of one config): every resample at once, (resamples, runs, n)
        stacked = np.stack(runs)
        idx = block_indices(n, resamples * len(runs), rng).reshape(resamples, len(runs), n)
        return np.asarray(stat(stacked[picks[:, :, None], idx].reshape(resamples, len(runs) * n)), dtype=float)
    out = np.empty(resamples)
    for b in range(resamples):
        parts = [runs[j][block_indices(len(runs[j]), 1, rng)[0]] for j in picks[b]]
        out[b] = stat(np.concatenate(parts)[None, :])[0]
    return out


def row_means(m: np.ndarray) -> np.ndarray:
    """The mean of each row of ``m``."""
    return np.asarray(m.mean(axis=1), dtype=float)


def row_medians(m: np.ndarray) -> np.ndarray:
    """The median of each row of ``m``, as ``np.median(m, axis=1)`` computes it (the middle
    value, or the mean of the middle two), from one partition: ``np.median``'s own checks cost
    6x the partition on the bootstrap's 2000 x 27 samples."""
    half = m.shape[1] // 2
    if m.shape[1] % 2:
        return np.asarray(np.partition(m, half, axis=1)[:, half], dtype=float)
    part = np.partition(m, (half - 1, half), axis=1)
    return np.asarray((part[:, half - 1] + part[:, half]) / 2, dtype=float)


@dataclass(frozen=True)
class Noise:
    """The noise model's settings."""

    level: float = LEVEL
    threshold_pct: float = THRESHOLD_PCT
    resamples: int = RESAMPLES
    seed: int = SEED

    def __post_init__(self) -> None:
        """The ranges the CLI holds ``--level`` and ``--noise-threshold`` to (a NaN threshold would
        let every change through a gate)."""
        number(self.level, name="Noise: level", low=MIN_LEVEL, high=MAX_LEVEL)
        number(self.threshold_pct, name="Noise: threshold_pct", low=0, high=MAX_THRESHOLD_PCT)
        number(self.resamples, name="Noise: resamples", low=MIN_RESAMPLES, high=MAX_RESAMPLES, integer=True)
        number(self.seed, name="Noise: seed", low=0, high=2**63 - 1, integer=True)

    def interval(self, diffs: np.ndarray) -> Interval:
        alpha = 1 - self.level
        low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
        return Interval(low=round(float(low), 4), high=round(float(high), 4), level=self.level)

    def detectable(self, diffs: np.ndarray) -> float:
        z = NormalDist().inv_cdf(1 - (1 - self.level) / 2) + NormalDist().inv_cdf(POWER)
        return float(z * np.std(diffs, ddof=1)) if len(diffs) > 1 else math.inf


def rounded(x: float | None, digits: int = 4) -> float | None:
    """``x`` rounded to ``digits`` decimals; None when missing or not finite."""
    return None if x is None or not math.isfinite(x) else round(x, digits)


def _rel(delta: float | None, base: float | None) -> float | None:
    if delta is None or base is None or base == 0:
        return None
    return rounded(100.0 * delta / abs(base))


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
    if lower_is_better is None or unit not in (Unit.NS, Unit.PER_S, Unit.SAMPLES_PER_S):
        return (Change.HIGHER if up else Change.LOWER), allowance
    worse = up if lower_is_better else not up
    return (Change.SLOWER if worse else Change.FASTER), allowance


def _welch(
    a: Samples, b: Samples, stat: Callable[[np.ndarray], np.ndarray], delta: float, noise: Noise
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
    unit: Unit,
    a: float | None,
    b: float | None,
    *,
    lower_is_better: bool | None,
    note: MeasureNote | None = None,
    **fields: Any,
) -> Measure:
    """A measure missing on one side or both: what there is, and which side lacks it."""
    lacking = MeasureNote.ONE_SIDE if (a, b) != (None, None) else MeasureNote.NEITHER_SIDE
    return Measure(
        key=key,
        unit=unit,
        lower_is_better=lower_is_better,
        a=rounded(a),
        b=rounded(b),
        change=Change.NOT_MEASURED,
        note=note or lacking,
        **fields,
    )


def measure_of(
    key: str,
    unit: Unit,
    *,
    a: Samples,
    b: Samples,
    noise: Noise,
    rng: np.random.Generator,
    lower_is_better: bool | None = True,
    step_mean: float | None = None,
    rank: int | None = None,
    stat: Callable[[np.ndarray], np.ndarray] = row_means,
    medians: bool = True,
) -> Measure:
    """A measure with samples on both sides: its difference, interval and verdict."""
    if not a.ok or not b.ok:
        va = float(stat(a.pooled[None, :])[0]) if a.n else None
        vb = float(stat(b.pooled[None, :])[0]) if b.n else None
        return _unmeasured(key, unit, va, vb, lower_is_better=lower_is_better, n_a=a.n, n_b=b.n, rank=rank)
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
        mdiffs = _replicates(b, row_medians, noise.resamples, rng) - _replicates(a, row_medians, noise.resamples, rng)
        median_fields = {
            "a_median": rounded(ma),
            "b_median": rounded(mb),
            "delta_median": rounded(mb - ma),
            "ci_median": noise.interval(mdiffs),
        }
    return Measure(
        key=key,
        unit=unit,
        lower_is_better=lower_is_better,
        a=rounded(va),
        b=rounded(vb),
        delta=rounded(delta),
        delta_pct=_rel(delta, va),
        step_pct=_rel(delta, step_mean) if unit is Unit.NS and step_mean else None,
        ci=ci,
        detectable=rounded(detectable),
        n_a=a.n,
        n_b=b.n,
        change=change,
        rank=rank,
        **median_fields,
    )


def once(
    key: str,
    unit: Unit,
    a: float | None,
    b: float | None,
    *,
    lower_is_better: bool | None = None,
    note: MeasureNote | None = None,
    exact: bool = False,
    peak_of: PeakSource | None = None,
) -> Measure:
    """A measure known once per run (a peak): its difference, no interval."""
    if a is None or b is None:
        return _unmeasured(key, unit, a, b, lower_is_better=lower_is_better, note=note, peak_of=peak_of)
    delta = b - a
    same = delta == 0 if exact else abs(delta) <= COUNT_TOLERANCE * max(abs(a), abs(b))
    change = Change.SAME if same else (Change.HIGHER if delta > 0 else Change.LOWER)
    return Measure(
        key=key,
        unit=unit,
        peak_of=peak_of,
        lower_is_better=lower_is_better,
        a=rounded(a),
        b=rounded(b),
        delta=rounded(delta),
        delta_pct=_rel(delta, a),
        change=change,
        note=note or MeasureNote.ONCE_PER_RUN,
    )


def compare_values(
    key: str,
    unit: Unit,
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    *,
    noise: Noise | None = None,
    lower_is_better: bool | None = True,
    stat: Callable[[np.ndarray], np.ndarray] = row_means,
) -> Measure:
    """A measure of two sides given as plain values, one sequence per run (per-step values of
    each repeat): the difference of ``stat`` and its interval, by the noise model of
    :func:`~tracekit.analyzers.compare.compare` (for runs that were not analyzed, such as the
    cells of a sweep)."""
    noise = noise or Noise()
    return measure_of(
        key,
        unit,
        a=Samples(runs=[np.asarray(r, dtype=float) for r in a]),
        b=Samples(runs=[np.asarray(r, dtype=float) for r in b]),
        noise=noise,
        rng=np.random.default_rng(noise.seed),
        lower_is_better=lower_is_better,
        stat=stat,
        medians=False,
    )
