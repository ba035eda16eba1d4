"""The statistics of ``tracekit dataloader``: fetch times per rank, their two modes, the ceiling.

Plain Python (the capture layer does not import polars); the mean, median and p95 are
:mod:`tracekit.results.stats`, the definitions every report uses.

**Two modes.** A DataLoader with workers hands out a batch in one of two ways: a worker
already made it (a prefetch hit: the fetch costs the hand-over, tens of microseconds) or the
loop waits for a worker still decoding it (milliseconds). Their mix is the loader's story, and
a mean hides it. The fetch times are split where two groups fit them best: the split of the
sorted log times that maximizes the variance between the two groups (a 1-D 2-means on log
times, solved exactly, Otsu's method). Log times, because the modes differ by a factor, not
by an amount. Any sample splits somewhere, so the split is reported as two modes only when it
*explains* the spread: the between-group variance is at least :data:`BIMODAL_EXPLAINED` of
the total. One normal mode split at its mean explains 2/pi = 64% of it, a uniform spread 75%;
two modes explain more the further apart they are (a hit at 50 us and a decode at 20 ms with
log spreads of 0.3 explain over 95%). Each mode needs :data:`MIN_MODE_BATCHES` batches, and
the slow mode's median must be at least :data:`MODE_RATIO_MIN` times the fast one's: on a few
batches, jitter of one mode (67.6 ms against 69.5 ms) can explain most of a small spread, but a
prefetch hit and a wait for a decode differ by a factor, not by a few percent.

**Headroom.** The loader's samples/s over training's. Training is called input-bound below
:data:`INPUT_BOUND_BELOW` = 1.5x: the probe runs the loader alone, with the machine's CPU to
itself; in training its workers share the CPU with the training process (forward, backward,
the optimizer, the collectives' threads), and fetch times vary (their p95). A loader that
alone makes less than 1.5x what training consumes has too little slack to absorb both, so
steps wait for batches; at 1.5x and above the workers keep ahead.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

from tracekit.results.loader_probe import FetchModes, Headroom, RankFetches
from tracekit.results.stats import mean, median, p95

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "BIMODAL_EXPLAINED",
    "INPUT_BOUND_BELOW",
    "MIN_MODE_BATCHES",
    "MODE_RATIO_MIN",
    "fetch_modes",
    "headroom",
    "rank_fetches",
]

#: Share of the variance of log fetch times the two-mode split must explain.
BIMODAL_EXPLAINED: Final = 0.8
#: The slow mode's median over the fast mode's, from which two groups are two modes.
MODE_RATIO_MIN: Final = 2.0
#: Batches each mode needs (and twice that in all).
MIN_MODE_BATCHES: Final = 3
#: Loader samples/s over training's under which training is input-bound.
INPUT_BOUND_BELOW: Final = 1.5


def _best_split(logs: Sequence[float]) -> tuple[int, float]:
    """The index ``k`` splitting sorted, centred ``logs`` into ``[:k]`` and ``[k:]`` with the
    largest between-group variance, and that variance. Only splits between two different values
    with at least :data:`MIN_MODE_BATCHES` on each side count; ``(0, 0.0)`` when there is none."""
    n = len(logs)
    total = math.fsum(logs)
    best_k, best = 0, 0.0
    left = 0.0
    for k in range(1, n):
        left += logs[k - 1]
        if k < MIN_MODE_BATCHES or n - k < MIN_MODE_BATCHES or logs[k - 1] == logs[k]:
            continue
        w0, w1 = k / n, (n - k) / n
        between = w0 * w1 * (left / k - (total - left) / (n - k)) ** 2
        if between > best:
            best_k, best = k, between
    return best_k, best


def fetch_modes(fetch_ns: Sequence[float]) -> FetchModes | None:
    """The fast and slow modes of ``fetch_ns``, or None when the times have one mode (see the
    module docstring for the split and the test)."""
    if len(fetch_ns) < 2 * MIN_MODE_BATCHES:
        return None
    ordered = sorted(max(float(v), 1.0) for v in fetch_ns)
    raw = [math.log(v) for v in ordered]
    centre = math.fsum(raw) / len(raw)
    logs = [x - centre for x in raw]  # centred: the prefix sums stay small
    total_var = math.fsum(x * x for x in logs) / len(logs)
    k, between = _best_split(logs)
    if k == 0 or between < BIMODAL_EXPLAINED * total_var:
        return None
    fast, slow = ordered[:k], ordered[k:]
    if median(slow) < MODE_RATIO_MIN * median(fast):
        return None
    return FetchModes(
        fast_share=len(fast) / len(ordered),
        fast_median_ns=median(fast),
        slow_share=len(slow) / len(ordered),
        slow_median_ns=median(slow),
        split_ns=math.sqrt(fast[-1] * slow[0]),  # midway between the groups, on the log scale
        explained=min(1.0, between / total_var),
    )


def rank_fetches(rank: int, fetch_ns: Sequence[int], wall_ns: int) -> RankFetches:
    """One rank's measured batches: ``fetch_ns`` each, taking ``wall_ns`` from the first
    fetch's start to the last one's end."""
    return RankFetches(
        rank=rank,
        batches=len(fetch_ns),
        fetch_ns=list(fetch_ns),
        mean_ns=mean(fetch_ns),
        median_ns=median(fetch_ns),
        p95_ns=p95(fetch_ns),
        modes=fetch_modes(fetch_ns),
        wall_ns=wall_ns,
        batches_per_s=len(fetch_ns) / (max(wall_ns, 1) / 1e9),
    )


def headroom(loader_samples_per_s: float, training_samples_per_s: float, *, capture: str) -> Headroom:
    """The loader's samples/s over training's, and whether that makes training input-bound."""
    ratio = loader_samples_per_s / training_samples_per_s
    return Headroom(
        capture=capture,
        training_samples_per_s=training_samples_per_s,
        ratio=ratio,
        threshold=INPUT_BOUND_BELOW,
        input_bound=ratio < INPUT_BOUND_BELOW,
    )
