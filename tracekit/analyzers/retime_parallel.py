"""The what-ifs of one run side by side: :func:`~tracekit.analyzers.retime.simulate_each` on
more than one core (where the re-timing is Python's), or each rank on the workers that mapped the run.

Each scenario is re-timed on its own; scenarios share nothing but the plans. So children of
their own (:func:`tracekit.pools.apart_map`: fresh interpreters, sent the plans and their
scenarios) re-time some of them while this process re-times the rest, each sending its gains
back (a few floats a rank and scenario). The re-timing is numpy and Python only: a child imports
no polars. A child that fails or stalls is killed and its scenarios run here: the gains never
depend on one.

Where the run was mapped by more workers than this machine's cores can match (a Dask
cluster: :class:`Spread`), the ranks are re-timed there instead, each on its own, the ranks
meeting at their collectives' last arrivals (:mod:`tracekit.analyzers.retime_ranks`): this
process then works on collective instances only, a few rounds of ranks x instances. The ranks
are placed on the workers once for every what-if of a run (``placement``: the verdict's
gains, then their explanation). A scenario the ranks cannot settle apart (a cycle), or a round
the workers could not run, is re-timed here whole: the gains are the same either way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from tracekit.analyzers import retime
from tracekit.analyzers.retime_ranks import Met, RankAlone, recorded, round_of_group, settle_each
from tracekit.pools import apart_map

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.analyzers.retime_plan import RankPlan, Scenario

K = TypeVar("K")
T = TypeVar("T")
R = TypeVar("R")
#: A child may take this many times what this process's own scenarios took ...
PATIENCE: Final = 4.0
#: ... and this long at least.
MIN_WAIT_S: Final = 10.0
#: Below this many tasks times scenarios (about a quarter of a second of re-timing), the
#: scenarios run here: a child's start and the plans sent to it cost more than it saves.
MIN_WORK: Final = 100_000


#: The rounds re-timing apart takes, about (every rank re-timed each round; the 8 x 125 MB
#: benchmark's four scenarios settle in three): it pays where it is spread over more than this
#: many times the processes here.
ROUNDS: Final = 3


class Spread(Protocol):
    """Where the run was mapped, to run more there: the executor's workers."""

    @property
    def workers(self) -> int:
        """How many items run at once."""
        ...

    def hold(self, items: list[T]) -> list[Any] | None:
        """Each item placed there once: a handle per item that the items of calls may hold in
        its place, the same object there from one call to the next (None: they could not be)."""
        ...

    def keep(self, fn: Callable[[T], R], items: list[T]) -> list[Any] | None:
        """``fn`` over ``items`` there, each result kept there: a handle per item, as
        :meth:`hold` gives, that items may hold (a failure shows where a handle is used)."""
        ...

    def places(self, handles: list[Any]) -> list[str | None]:
        """Where each handle (of :meth:`hold` or :meth:`keep`) is kept: one name for the handles
        one worker holds (an item holding them all runs there), None where not known."""
        ...

    def fetch(self, kept: list[Any]) -> list[Any]:
        """What each handle of ``kept`` (the map's, :meth:`Reduced.kept`) stands for, sent
        here; made again here where the workers lost it."""
        ...

    def __call__(self, fn: Callable[[T], R], items: list[T]) -> list[R] | None:
        """``fn`` over ``items`` there, the results in order (None: an item could not be run)."""
        ...


def simulate_each(
    plans: list[RankPlan],
    scenarios: dict[K, Scenario],
    *,
    jobs: int = 1,
    spread: Spread | None = None,
    placement: Callable[[], Placed | None] | None = None,
    shapes: retime.Shapes | None = None,
) -> dict[K, dict[int, float]]:
    """:func:`retime.simulate_each` with the scenarios split over ``jobs`` processes, or the
    ranks over ``spread``'s workers where they are more than :data:`ROUNDS` times as many.
    ``placement``: :func:`place` of ``plans`` and ``spread``, asked for when the ranks go to the
    workers and kept by the caller for every call of one run (else placed for this call);
    ``shapes``: the ranks' shapes kept in this process for every call of one run."""
    keys = list(scenarios)
    n = min(jobs, len(keys))
    work = sum(p.start.size for p in plans) * len(keys)
    if spread is not None and work >= MIN_WORK and len(plans) > 1 and spread.workers > ROUNDS * max(n, 1):
        placed = placement() if placement is not None else place(plans, spread)
        apart = simulate_apart(scenarios, spread, placed) if placed is not None else dict.fromkeys(scenarios)
        settled = {k: g for k, g in apart.items() if g is not None}
        rest = {k: s for k, s in scenarios.items() if k not in settled}
        whole = simulate_each(plans, rest, jobs=jobs, shapes=shapes) if rest else {}
        return {k: settled[k] if k in settled else whole[k] for k in keys}
    if n < 2 or work < MIN_WORK or retime.NATIVE:
        # in C (retime.NATIVE), re-timing a scenario costs a fraction of working the ranks'
        # shapes out (about 0.07 us a task against 0.4 to 3 us), which each child does again:
        # children would cost more than they save (1,024 x 3 MB: the reduce 2.5 s of wall here,
        # 3.6 to 4.2 s with a child; benchmarks/README.md, stop 67)
        return retime.simulate_each(plans, scenarios, shapes=shapes)
    groups = balanced(keys, {k: _weight(scenarios[k]) for k in keys}, n)
    items = [(plans, {k: scenarios[k] for k in group}) for group in groups]
    out: dict[K, dict[int, float]] = {}
    for part in apart_map(_Group(shapes), items, patience=PATIENCE, min_wait_s=MIN_WAIT_S):
        out.update(part)
    return {k: out[k] for k in keys}


class _Group:
    """:func:`retime.simulate_each` of ``(plans, scenarios)``: a group's work, here (with the
    run's kept ``shapes``) or in a child (sent them empty: :class:`retime.Shapes`)."""

    def __init__(self, shapes: retime.Shapes | None) -> None:
        self.shapes = shapes

    def __call__(self, item: tuple[list[RankPlan], dict[K, Scenario]]) -> dict[K, dict[int, float]]:
        return retime.simulate_each(*item, shapes=self.shapes)


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


@dataclass(frozen=True)
class Placed:
    """A run's ranks held on a spread's workers, in groups of about equal work: what each
    round of each what-if of the run sends them (a few numbers), the ranks' events sent once."""

    #: each instance's last arrival as recorded
    last_old: dict[int, float]
    #: a handle per group, and the ranks and instances each group holds
    held: list[Any]
    ranks: list[set[int]]
    instances: list[set[int]]


def place(plans: list[RankPlan], spread: Spread) -> Placed | None:
    """The ranks of ``plans`` held on ``spread``'s workers (None: they could not be)."""
    last_old, first_end = recorded(plans)
    by_rank = {p.rank: p for p in plans}
    groups = balanced(
        list(by_rank), {r: float(p.start.size) for r, p in by_rank.items()}, min(spread.workers, len(plans))
    )
    alone = [[RankAlone(by_rank[r], last_old, first_end) for r in g] for g in groups if g]
    ranks = [{r.plan.rank for r in g} for g in alone]
    instances = [{i for r in g for i in r.members} for g in alone]
    held = spread.hold(alone)
    return None if held is None else Placed(last_old, held, ranks, instances)


def simulate_apart(scenarios: dict[K, Scenario], spread: Spread, placed: Placed) -> dict[K, dict[int, float] | None]:
    """Each scenario's gains, the ranks re-timed apart on ``spread``'s workers, where ``placed``
    holds them (:func:`place`; None: a scenario the ranks could not settle apart)."""
    held, ranks, instances = placed.held, placed.ranks, placed.instances
    # what each group needs of the scenarios (removals and durations: as large as its tasks),
    # sent once for every round, not with each (1,024 x 3 MB: 11 MiB a round)
    mine = [{k: _only(s, group) for k, s in scenarios.items()} for group in ranks]
    theirs = spread.hold(mine) or mine

    def rounds_of(lasts: dict[K, dict[int, float]]) -> dict[K, list[Met]] | None:
        items = [
            (g, scenarios_there, {k: {i: last[i] for i in own} for k, last in lasts.items()})
            for g, scenarios_there, own in zip(held, theirs, instances, strict=True)
        ]
        done = spread(round_of_group, items)
        if done is None:
            return None
        return {k: [r for part in done for r in part[k]] for k in lasts}

    return settle_each(rounds_of, placed.last_old, scenarios)


def _only(scenario: Scenario, ranks: set[int]) -> Scenario:
    """``scenario`` on ``ranks`` only: what a group of them needs of it."""
    return dataclasses.replace(
        scenario,
        removals={r: v for r, v in scenario.removals.items() if r in ranks},
        durations={r: v for r, v in scenario.durations.items() if r in ranks},
    )
