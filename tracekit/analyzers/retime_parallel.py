"""The what-ifs of one run side by side: :func:`~tracekit.analyzers.retime.simulate_each` on
more than one core.

Each scenario is re-timed on its own; scenarios share nothing but the plans. So forked
children (:func:`tracekit.pools.forked_map`) re-time some of them while this process re-times
the rest, each sending its gains back (a few floats a rank and scenario). The re-timing is
numpy and Python only, as a forked child needs. A child that fails or stalls is killed and its
scenarios run here: the gains never depend on one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeVar

from tracekit.analyzers import retime
from tracekit.pools import FORKS, forked_map

if TYPE_CHECKING:
    from tracekit.analyzers.retime_plan import RankPlan, Scenario

K = TypeVar("K")
#: A child may take this many times what this process's own scenarios took ...
PATIENCE: Final = 4.0
#: ... and this long at least.
MIN_WAIT_S: Final = 10.0


def simulate_each(plans: list[RankPlan], scenarios: dict[K, Scenario], *, jobs: int = 1) -> dict[K, dict[int, float]]:
    """:func:`retime.simulate_each` with the scenarios split over ``jobs`` processes."""
    keys = list(scenarios)
    n = min(jobs, len(keys))
    if n < 2 or not FORKS:
        return retime.simulate_each(plans, scenarios)
    groups = [keys[i::n] for i in range(n)]

    def some(group: list[K]) -> dict[K, dict[int, float]]:
        return retime.simulate_each(plans, {k: scenarios[k] for k in group})

    out: dict[K, dict[int, float]] = {}
    for part in forked_map(some, groups, patience=PATIENCE, min_wait_s=MIN_WAIT_S):
        out.update(part)
    return {k: out[k] for k in keys}
