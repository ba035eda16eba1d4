"""The what-ifs built where the ranks are re-timed: on the workers of a cluster elsewhere.

Re-timing the ranks apart (:mod:`tracekit.analyzers.retime_ranks`) needs, of the whole run,
only the collectives' instances (:class:`~tracekit.analyzers.gains_plan.Crossing`: ranks x
instances numbers) and which wastes the run models. So the client sends each group of ranks
its gains' tables once (:class:`Group`, held by a worker), and the worker builds there the
ranks' plans (:func:`~tracekit.analyzers.gains_plan.group_plans`) and the scenarios of every
waste on those ranks (:func:`~tracekit.analyzers.gains_scenarios.built`), and keeps them for
every round of every what-if of the run. What comes back is ranks x instances numbers: each
group's wastes, its instances' recorded arrivals, digests of its ranks' plans and scenarios
(the memo's keys), then each round's arrivals. The client builds no plan and no scenario: what
it sends is the tables, and each round names the wastes removed at once.

The plans and scenarios built on a group's ranks are the whole run's on those ranks, so the
gains are those of the whole run re-timed here (the tests compare them on the corpus). A
what-if the ranks cannot settle apart (a cycle), or workers that fail, are re-timed here, the
plans then built here from the same tables: the gains never depend on the workers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

import numpy as np
import polars as pl

from tracekit.analyzers import retime_parallel
from tracekit.analyzers.gains_memo import decode, encode, feed, hex_of, new_digest
from tracekit.analyzers.gains_plan import ByRank, Crossing, group_plans
from tracekit.analyzers.gains_scenarios import (
    COMPUTE,
    WASTES,
    built,
    everything,
    modeled_kinds,
    present,
    straggler_scenario,
)
from tracekit.analyzers.retime_parallel import balanced
from tracekit.analyzers.retime_ranks import Met, RankAlone, met, read_lasts, recorded, settle_each
from tracekit.results.vocab import BoundKind

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.analyzers.gains_memo import Memo
    from tracekit.analyzers.gains_plan import GainRun
    from tracekit.analyzers.gains_scenarios import StragglerCut
    from tracekit.analyzers.parts import Parts
    from tracekit.analyzers.retime_parallel import Spread
    from tracekit.analyzers.retime_plan import Scenario

__all__ = [
    "KEPT_TABLES",
    "Group",
    "Held",
    "RunFacts",
    "hold",
    "make_group",
    "on_one_worker",
    "worth_holding",
]

K = TypeVar("K")
P = TypeVar("P")
Kinds = tuple[BoundKind, ...]

#: The gains' tables of events that a cluster's workers keep where they mapped them (the client
#: gets the rest: :meth:`~tracekit.analyzers.mapreduce.Reduced.kept`): what only the what-ifs'
#: plans and scenarios read, built there (the host's blocks and phases too: 4,333 and 2,147 rows
#: of an A100 rank of a GB, where the client gets 8,828 of all its other tables).
KEPT_TABLES: Final = ("tasks", "blocks", "fetch", "launches", "host_free", "phases")
#: What the memo's keys of held what-ifs begin with: they digest each rank's plan and
#: scenarios, not the run's (:func:`tracekit.analyzers.gains_memo.scenario_key`).
_KEY: Final = b"held what-ifs 1"


@dataclass(frozen=True)
class RunFacts:
    """What the gains' limits read of the run's plans."""

    has_gpu: bool
    #: whether any collective instance is held by more than one rank
    matched: bool
    #: the ranks with a plan (a measured window)
    ranks: int

    @classmethod
    def of(cls, run: GainRun) -> RunFacts:
        return cls(has_gpu=run.has_gpu, matched=run.matched, ranks=len(run.plans))


@dataclass(frozen=True)
class Summary:
    """What a group sends back once: ranks x instances numbers."""

    #: the ranks with a plan
    ranks: list[int]
    #: the wastes its ranks give a what-if (:func:`present`)
    found: set[BoundKind]
    #: per instance its ranks hold: the latest recorded arrival and the earliest end
    last: dict[int, float]
    first: dict[int, float]
    #: per rank, a digest of its plan and of its part of every waste's scenario
    digests: dict[int, str]


@dataclass
class _Built:
    """What a group builds of its tables, where it is held."""

    run: GainRun | None
    scenarios: dict[BoundKind, Scenario]
    found: set[BoundKind]
    alone: list[RankAlone] | None = None
    #: the scenario of each set of wastes removed at once, as asked for
    sets: dict[tuple[frozenset[BoundKind], Kinds], Scenario] = field(default_factory=dict)


class Group:
    """A group of ranks' gains tables and what they need of the run, sent once to a worker and
    kept there; their plans and scenarios are built there when first asked for, and kept."""

    def __init__(self, parts: Parts, cross: Crossing, cut: StragglerCut | None) -> None:
        self.parts = parts
        self.cross = cross
        self.cut = cut
        self._built: _Built | None = None

    def __getstate__(self) -> dict[str, object]:
        """What travels: the tables, not what was built of them."""
        return {**self.__dict__, "_built": None}

    def built(self) -> _Built:
        if self._built is None:
            run = group_plans(self.cross, self.parts)  # type: ignore[arg-type]
            if run is None:
                self._built = _Built(run=None, scenarios={}, found=set())
            else:
                straggler = straggler_scenario(self.cut, run, self.parts)  # type: ignore[arg-type]
                found = present(run, self.parts, straggler)  # type: ignore[arg-type]
                scenarios = built(frozenset(WASTES), run, self.parts, straggler)  # type: ignore[arg-type]
                self._built = _Built(run=run, scenarios=scenarios, found=found)
        return self._built

    def summary(self) -> Summary:
        b = self.built()
        plans = b.run.plans if b.run is not None else []
        last, first = recorded(plans)
        digests = {}
        for plan in plans:
            digest = new_digest()
            feed(digest, plan)
            for kind in WASTES:
                s = b.scenarios[kind]
                feed(digest, kind.value)
                feed(digest, s.removals.get(plan.rank))
                feed(digest, s.durations.get(plan.rank))
                feed(digest, (s.no_wait_blocks, s.hide_collectives))
            digests[plan.rank] = hex_of(digest)
        return Summary(
            ranks=[p.rank for p in plans],
            found=b.found,
            last=last,
            first=first,
            digests=digests,
        )

    def scenario(self, kinds: frozenset[BoundKind], wastes: Kinds) -> Scenario:
        """The scenario of ``wastes`` removed at once on these ranks, the run modelling ``kinds``
        (compute's: every other of them at once)."""
        b = self.built()
        key = (kinds, wastes)
        if key not in b.sets:

            def one(kind: BoundKind) -> Scenario:
                if kind in COMPUTE:
                    return everything([b.scenarios[k] for k in WASTES if k in kinds])
                return b.scenarios[kind]

            b.sets[key] = one(wastes[0]) if len(wastes) == 1 else everything([one(k) for k in wastes])
        return b.sets[key]

    def round(
        self,
        kinds: frozenset[BoundKind],
        sets: dict[K, Kinds],
        lasts: dict[K, dict[int, float]],
        recorded_old: tuple[dict[int, float], dict[int, float]],
    ) -> dict[K, list[Met]]:
        """One round of these ranks under each set of wastes still settling, each with its
        instances' last arrivals, merged (:func:`~tracekit.analyzers.retime_ranks.met`: the
        client's work grows with groups, not ranks); ``recorded_old``: their instances'
        recorded last arrivals and first ends."""
        b = self.built()
        if b.run is None:
            return {k: [] for k in lasts}
        if b.alone is None:
            b.alone = [RankAlone(p, *recorded_old) for p in b.run.plans]
        alone = b.alone
        return {
            k: [met(r.round(self.scenario(kinds, sets[k]), read) for r in alone)]
            for k, read in read_lasts(lasts).items()
        }


def group_summary(group: Group) -> Summary:
    """:meth:`Group.summary`, where the group is held."""
    return group.summary()


def group_round(
    item: tuple[Group, frozenset[BoundKind], dict[K, Kinds], dict[K, dict[int, float]], tuple[Any, Any]],
) -> dict[K, list[Met]]:
    """:meth:`Group.round`, where the group is held."""
    group, kinds, sets, lasts, old = item
    return group.round(kinds, sets, lasts, old)


@dataclass
class Held:
    """A run's what-ifs held on a spread's workers, in groups of ranks."""

    spread: Spread
    handles: list[Any]
    #: the instances each group holds
    instances: list[set[int]]
    last_old: dict[int, float]
    first_end: dict[int, float]
    kinds: frozenset[BoundKind]
    facts: RunFacts
    digests: dict[int, str]
    #: the sets of wastes the workers could not settle, re-timed here
    here: Callable[[dict[Any, Kinds]], dict[Any, dict[int, float]]]

    @functools.cached_property
    def _digest(self) -> str:
        """One digest of every rank's (its plan and scenarios) and the wastes the run models."""
        digest = new_digest(_KEY)
        feed(digest, ",".join(sorted(k.value for k in self.kinds)))
        for rank in sorted(self.digests):
            feed(digest, rank)
            feed(digest, self.digests[rank])
        return hex_of(digest)

    def key(self, wastes: Kinds) -> str:
        """The memo's key of ``wastes`` removed at once on this run."""
        digest = new_digest(self._digest.encode())
        feed(digest, ",".join(k.value for k in wastes))
        return hex_of(digest)

    def gains(self, sets: dict[K, Kinds], memo: Memo | None) -> dict[K, dict[int, float]]:
        """Each set's gains per rank: kept by ``memo``, else re-timed on the workers (or here,
        where they cannot settle it), and kept."""
        keys = {k: self.key(v) for k, v in sets.items()} if memo is not None else {}
        out: dict[K, dict[int, float]] = {}
        for k, key in keys.items():
            data = memo.get(key) if memo is not None else None
            kept = None if data is None else decode(data)
            if kept is not None:
                out[k] = kept
        todo = {k: v for k, v in sets.items() if k not in out}
        if todo:
            settled = settle_each(functools.partial(self._rounds, todo), self.last_old, list(todo))
            fresh = {k: g for k, g in settled.items() if g is not None}
            rest = {k: todo[k] for k in todo if k not in fresh}
            if rest:
                fresh.update(self.here(rest))
            if memo is not None:
                for k, gained in fresh.items():
                    memo.put(keys[k], encode(gained))
            out.update(fresh)
        return {k: out[k] for k in sets}

    def _rounds(self, sets: dict[K, Kinds], lasts: dict[K, dict[int, float]]) -> dict[K, list[Met]] | None:
        """One round of every group under each set of ``lasts``."""
        items = [
            (
                handle,
                self.kinds,
                {k: sets[k] for k in lasts},
                {k: {i: last[i] for i in own} for k, last in lasts.items()},
                ({i: self.last_old[i] for i in own}, {i: self.first_end[i] for i in own}),
            )
            for handle, own in zip(self.handles, self.instances, strict=True)
        ]
        done = self.spread(group_round, items)
        if done is None:
            return None
        return {k: [r for part in done for r in part[k]] for k in lasts}


def worth_holding(spread: Spread, jobs: int, ranks: int, work: int) -> bool:
    """Whether re-timing the ranks apart on ``spread``'s workers pays (as
    :func:`~tracekit.analyzers.retime_parallel.simulate_each` decides): more than one rank,
    more than :data:`~tracekit.analyzers.retime_parallel.ROUNDS` times this machine's
    ``jobs`` in workers, and ``work`` (tasks times what-ifs) of at least
    :data:`~tracekit.analyzers.retime_parallel.MIN_WORK`."""
    return ranks > 1 and work >= retime_parallel.MIN_WORK and spread.workers > retime_parallel.ROUNDS * max(jobs, 1)


def hold(
    parts: Parts,
    kept: list[tuple[tuple[int, ...], Any]],
    cross: Crossing,
    cut: StragglerCut | None,
    spread: Spread,
    *,
    partial: bool,
    here: Callable[[frozenset[BoundKind]], Callable[[dict[Any, Kinds]], dict[Any, dict[int, float]]]],
) -> Held | None:
    """The run's what-ifs held on ``spread``'s workers (None: they could not be held).

    ``kept``: the shards whose gains' tables the workers kept where they mapped them (their
    ranks, and a handle of their whole part): those one worker holds are a group, made there
    (:func:`on_one_worker`).
    ``parts``: the gains' tables gathered here, whole for the other ranks, which are cut into
    groups of about equal work, one a worker, and sent. ``partial``: ranks of the world are
    absent (no comms what-if); ``here``: given the wastes the run models, what re-times sets of
    them in this process."""
    tasks = parts.tasks  # type: ignore[attr-defined]
    frames = parts.frames  # type: ignore[attr-defined]
    there = {r for ranks, _ in kept for r in ranks}
    ranks = sorted(r for r in (int(x) for x in frames["rank"].unique()) if r not in there)
    handles: list[Any] = []
    if kept:
        together = on_one_worker(kept, spread.places([handle for _, handle in kept]))
        made = spread.keep(make_group, [(held, cross.of(set(ranks)), cut) for ranks, held in together])
        if made is None:
            return None
        handles += made
    if ranks:
        weight = dict.fromkeys(ranks, 1.0)
        if tasks.height:
            for r, n in tasks.group_by("rank").len().iter_rows():
                if int(r) in weight:
                    weight[int(r)] += float(n)
        groups = balanced(ranks, weight, min(spread.workers, len(ranks)))
        by = {name: ByRank(getattr(parts, name)) for name in type(parts).names() if getattr(parts, name).width}

        def tables(group: list[int]) -> Parts:
            return type(parts)(**{name: pl.concat([t[r] for r in group], how="vertical") for name, t in by.items()})

        items = [Group(tables(g), cross.of(set(g)), cut) for g in groups if g]
        sent = spread.hold(items)
        del items
        if sent is None:
            return None
        handles += sent
    summaries = spread(group_summary, handles)
    if summaries is None:
        return None
    found = set().union(*(s.found for s in summaries))
    last: dict[int, float] = {}
    first: dict[int, float] = {}
    for s in summaries:
        for i, a in s.last.items():
            last[i] = max(last.get(i, -np.inf), a)
        for i, e in s.first.items():
            first[i] = min(first.get(i, np.inf), e)
    kinds = modeled_kinds(found, has_gpu=cross.has_gpu, partial=partial)
    return Held(
        spread=spread,
        handles=handles,
        instances=[set(s.last) for s in summaries],
        last_old=last,
        first_end=first,
        kinds=kinds,
        facts=RunFacts(has_gpu=cross.has_gpu, matched=cross.matched, ranks=sum(len(s.ranks) for s in summaries)),
        digests={r: d for s in summaries for r, d in s.digests.items()},
        here=here(kinds),
    )


def on_one_worker(
    kept: list[tuple[tuple[int, ...], Any]], places: list[str | None]
) -> list[tuple[list[int], tuple[Any, ...]]]:
    """The shards of ``kept`` (their ranks, a handle of their gains' tables) that one worker
    holds (``places``: each handle's worker, None where not known: alone), as one group: their
    ranks and handles, in the order of ``kept``. A group a worker makes each round's work one
    task there, not one per shard: the client's messages grow with the workers, not the shards."""
    together: dict[str | int, tuple[list[int], list[Any]]] = {}
    for i, ((ranks, handle), place) in enumerate(zip(kept, places, strict=True)):
        got = together.setdefault(i if place is None else place, ([], []))
        got[0].extend(ranks)
        got[1].append(handle)
    return [(ranks, tuple(handles)) for ranks, handles in together.values()]


def make_group(item: tuple[tuple[Parts | None, ...], Crossing, StragglerCut | None]) -> Group:
    """A group of some shards' ranks, made where the shards' gains' tables were kept (each
    table concatenated in the order of the shards)."""
    held, cross, cut = item
    if not held or any(p is None for p in held):
        raise ValueError("no gains' tables were kept for a shard")
    parts = [p for p in held if p is not None]
    if len(parts) == 1:
        return Group(parts[0], cross, cut)
    kind = type(parts[0])
    tables = {name: [t for p in parts if (t := getattr(p, name)).width] for name in kind.names()}
    return Group(kind(**{name: pl.concat(t, how="vertical_relaxed") for name, t in tables.items() if t}), cross, cut)
