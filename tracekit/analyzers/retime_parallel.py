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
#: Below this many tasks times scenarios (about a quarter of a second of re-timing), the
#: scenarios run here: a fork of a process with polars loaded, and the pages it then copies,
#: cost more than a child saves (a 3.5k-event rank: 36 ms a run forked, 21 ms here).
MIN_WORK: Final = 100_000


def simulate_each(plans: list[RankPlan], scenarios: dict[K, Scenario], *, jobs: int = 1) -> dict[K, dict[int, float]]:
    """:func:`retime.simulate_each` with the scenarios split over ``jobs`` processes."""
    keys = list(scenarios)
    n = min(jobs, len(keys))
    if n < 2 or not FORKS or sum(p.start.size for p in plans) * len(keys) < MIN_WORK:
        return retime.simulate_each(plans, scenarios)
    groups = balanced(keys, {k: _weight(scenarios[k]) for k in keys}, n)

    def some(group: list[K]) -> dict[K, dict[int, float]]:
        return retime.simulate_each(plans, {k: scenarios[k] for k in group})

    out: dict[K, dict[int, float]] = {}
    for part in forked_map(some, groups, patience=PATIENCE, min_wait_s=MIN_WAIT_S):
        out.update(part)
    return {k: out[k] for k in keys}


def _weight(scenario: Scenario) -> float:
    """What re-timing ``scenario`` costs, roughly: every task once, and more on the ranks it takes
    host time from or changes durations of (a rank with nothing removed takes a shortcut)."""
    return 1.0 + len(scenario.removals.keys() | scenario.durations.keys())


def balanced(keys: list[K], weight: dict[K, float], n: int) -> list[list[K]]:
    """``keys`` in ``n`` groups of about equal weight: the heaviest first, each to the lightest
    group so far (ties to the first group), each group in the order of ``keys``."""
    groups: list[list[K]] = [[] for _ in range(n)]
    load = [0.0] * n
    for k in sorted(keys, key=lambda k: -weight[k]):  # stable: equal weights keep their order
        i = load.index(min(load))
        groups[i].append(k)
        load[i] += weight[k]
    order = {k: i for i, k in enumerate(keys)}
    return [sorted(g, key=order.__getitem__) for g in groups]
