"""Runs far from the others of their side: named, not dropped.

With repeats (``--repeats``, folders of captures), one run can be far off the others: another
tenant on the machine, a slower spell. Its steps stay in the comparison (dropping them would
hide what the machine does), but it widens its side's interval, so a comparison that reads
"within noise" may owe that to one run: the report names it.

**The rule** (robust, so that the outlier does not hide itself by inflating the spread): a side
of at least :data:`MIN_RUNS` runs; each run's mean step; their median *m* and median absolute
deviation (MAD). A run is an outlier when its mean is more than :data:`SCORE` robust standard
deviations (1.4826 x MAD, the standard deviation of a normal sample) from *m* (Iglewicz and
Hoaglin's modified z-score) **and** more than :data:`MIN_PCT` percent of *m* away from it, so that
runs of nearly equal means (a MAD near zero) do not make a small difference an outlier.
"""

from __future__ import annotations

from statistics import median
from typing import TYPE_CHECKING, Final

from tracekit.results.compare import OutlierRun

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np

    from tracekit.results.vocab import SideKey

#: Runs a side needs for one of them to be called an outlier (two cannot tell which is off).
MIN_RUNS: Final = 3
#: Robust standard deviations from the median beyond which a run is an outlier.
SCORE: Final = 3.5
#: The least difference from the median, percent of it, that makes an outlier.
MIN_PCT: Final = 10.0
#: A MAD in standard deviations of a normal sample.
MAD_SIGMA: Final = 1.4826


def outlier_runs(side: SideKey, runs: Sequence[np.ndarray], sources: Sequence[str | None]) -> list[OutlierRun]:
    """The outliers among ``runs`` (each run's per-step values), with ``sources`` their folders."""
    means = [float(r.mean()) for r in runs if len(r)]
    if len(means) < MIN_RUNS or len(means) != len(runs):
        return []
    m = median(means)
    spread = MAD_SIGMA * median(abs(x - m) for x in means)
    out = []
    for i, x in enumerate(means):
        far = abs(x - m)
        if far <= abs(m) * MIN_PCT / 100.0 or (spread > 0 and far <= SCORE * spread):
            continue
        out.append(
            OutlierRun(
                side=side,
                run=i + 1,
                source=sources[i] if i < len(sources) else None,
                mean_ns=x,
                others_ns=[y for j, y in enumerate(means) if j != i],
                side_median_ns=m,
                score=far / spread if spread > 0 else None,
            )
        )
    return out
