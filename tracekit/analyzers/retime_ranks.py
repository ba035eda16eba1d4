"""Re-timing each rank on its own, the ranks meeting only at their collectives' last arrivals.

A rank's re-timing (:mod:`tracekit.analyzers.retime`) depends on the other ranks only where a
collective ends: at ``max(its start, the instance's last arrival) + its tail``. Told each
instance's last arrival, one rank re-times alone (:class:`RankAlone`, where its events are) and
sends back a few numbers per instance (:class:`Round`): its own arrival, and the instance that
arrival hangs on (it is that instance's last arrival plus a constant, the re-timing's maxima
followed back: ``_Rank.e_src``), or none.

A rank's arrivals are a max-plus function of the last arrivals, and linear as long as the
sources hold. So the client (:func:`settle_each`) works on instances only, never on events:

1. every rank re-times with the recorded last arrivals;
2. the client takes the instances in an order every rank agrees on (each rank finishes them
   in an order; a source always comes before what it holds back) and sets each instance's last
   arrival as the latest of its ranks' arrivals, each moved as much as its source moved: one
   pass over ranks x instances (:func:`solve`);
3. every rank re-times with those; where each instance's last arrival is what its ranks'
   arrivals now give, that is the fixed point the whole run re-timed at once
   (:class:`~tracekit.analyzers.retime.Simulation`) solves, and each rank's gain is its gain
   there. Else back to 2 with the new sources: a source changes only where another rank's
   arrival or the rank's own work overtakes it, so it settles in a few rounds.

Where two ranks finish instances in orders no one order holds (collectives in opposite orders
on two ranks' streams: a cycle), the whole-run re-timing breaks the cycle in its own order of
visit, which no rank alone can know: :func:`settle_each` says so (``None``) and the caller re-times
the whole run at once. So does a rank that meets a cycle on its own events, and a run that
does not settle in :data:`MAX_ROUNDS`.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from math import isnan
from typing import TYPE_CHECKING, Final, TypeVar

import numpy as np

from tracekit.analyzers.retime import _NO_SOURCE, _core, _NativeRank, _Rank, meetings_of, new_rank, recorded_instances
from tracekit.analyzers.retime_shape import _NEVER

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from tracekit.analyzers.retime_plan import RankPlan, Scenario

__all__ = [
    "MAX_ROUNDS",
    "TOLERANCE",
    "Lasts",
    "Met",
    "RankAlone",
    "Round",
    "agreed_order",
    "met",
    "read_lasts",
    "recorded",
    "round_of_group",
    "settle_each",
    "solve",
]

K = TypeVar("K")

#: Rounds after which a run that has not settled is re-timed whole (a source that keeps
#: changing; the property tests have never needed more than a few).
MAX_ROUNDS: Final = 8
#: How close an instance's last arrival must come to its ranks' arrivals, relative to its
#: size (the rounding of the same sums done in another order: some thousands of the last
#: bit; 0.1 ns at 100 s from the origin).
TOLERANCE: Final = 1e-12


@dataclass(eq=False)
class Round:
    """What one rank sends back from one round: a few numbers per instance it holds (equal to
    another whichever way its arrivals and sources are given)."""

    rank: int
    #: how much earlier the rank's measured time ends, ns (final once the run settles)
    gained: float
    #: instance -> this rank's arrival there, re-timed (its latest, if it holds it twice)
    arrivals: dict[int, float] = field(default_factory=dict)
    #: instance -> the instance whose last arrival that arrival hangs on (-1: none)
    sources: dict[int, int] = field(default_factory=dict)
    #: the instances in the order this rank finished them
    order: list[int] = field(default_factory=list)
    #: whether the rank met a cycle on its own events (then the whole run is re-timed at once)
    cycled: bool = False
    #: the C core's answer (:meth:`RankAlone._round_native`): each instance's arrival and
    #: source, in ``order``, given as lists instead of ``arrivals`` and ``sources`` (None: those)
    listed: tuple[list[float], list[int]] | None = None

    def pairs(self) -> Iterator[tuple[int, int, float]]:
        """Each instance, the source its arrival hangs on and that arrival (the latest listed,
        if it is listed twice)."""
        if self.listed is None:
            return ((i, self.sources[i], a) for i, a in self.arrivals.items())
        own, src = self.listed
        by = dict(zip(self.order, zip(src, own, strict=True), strict=True))
        return ((i, s, a) for i, (s, a) in by.items())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Round):
            return NotImplemented
        return self._compared() == other._compared()

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value: as a dataclass's

    def _compared(self) -> tuple[object, ...]:
        arrivals, sources = {}, {}
        for i, s, a in self.pairs():
            arrivals[i], sources[i] = a, s
        return (self.rank, self.gained, arrivals, sources, self.order, self.cycled)


def _empty_ids() -> np.ndarray:
    return np.empty(0, dtype=np.int64)


def _empty_times() -> np.ndarray:
    return np.empty(0, dtype=np.float64)


@dataclass(eq=False)
class Met:
    """What a group of ranks sends back from one round, merged (:func:`met`): per instance and
    source, only the latest arrival counts (a max of maxima), so the client's work grows with
    groups x instances, not ranks x instances. Held in arrays, merged in arrays: the client
    merges the groups' answers every round of every what-if (64 groups of 2,231 instances: 50 ms
    each in dicts, 10 in arrays), and a worker its ranks' (64 ``dense`` ranks a group each, the
    workers' rounds in one process: 4.0 -> 1.9 s of CPU)."""

    #: rank -> how much earlier its measured time ends, ns
    gained: dict[int, float] = field(default_factory=dict)
    #: every instance the ranks hold, sorted (one whose arrivals are all NaN or never included)
    held: np.ndarray = field(default_factory=_empty_ids)
    #: per (instance, source: -1 for none) the latest arrival, one row a pair, sorted by
    #: instance then source; NaN and never (-inf) arrivals not counted
    inst: np.ndarray = field(default_factory=_empty_ids)
    src: np.ndarray = field(default_factory=_empty_ids)
    latest: np.ndarray = field(default_factory=_empty_times)
    #: each distinct order in which the group's ranks finished their instances
    orders: set[tuple[int, ...]] = field(default_factory=set)
    cycled: bool = False

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Met):
            return NotImplemented
        arrays = ("held", "inst", "src", "latest")
        same = all(np.array_equal(getattr(self, a), getattr(other, a)) for a in arrays)
        return same and (self.gained, self.orders, self.cycled) == (other.gained, other.orders, other.cycled)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def by_instance(self) -> dict[int, dict[int, float]]:
        """instance -> source -> its latest arrival, every instance held (what a dict of dicts
        would hold: an instance of no counted arrival maps to none)."""
        out: dict[int, dict[int, float]] = {i: {} for i in self.held.tolist()}
        for i, s, a in zip(self.inst.tolist(), self.src.tolist(), self.latest.tolist(), strict=True):
            out[i][s] = a
        return out

    def given(self) -> tuple[np.ndarray, np.ndarray]:
        """Each instance with a counted arrival, and the latest of its arrivals over its sources:
        the last arrival this round gives it."""
        if self.inst.size == 0:
            return _empty_ids(), _empty_times()
        first = np.flatnonzero(np.concatenate([[True], self.inst[1:] != self.inst[:-1]]))
        return self.inst[first], np.maximum.reduceat(self.latest, first)


def _own(r: Round) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A rank's instances, the source of each arrival and the arrival, as arrays: an instance it
    lists twice (the core's lists) once, as the later listing gives it (as :meth:`Round.pairs`)."""
    if r.listed is None:
        inst = np.fromiter(r.arrivals.keys(), np.int64, len(r.arrivals))
        src = np.fromiter((r.sources[i] for i in r.arrivals), np.int64, len(r.arrivals))
        return inst, src, np.fromiter(r.arrivals.values(), np.float64, len(r.arrivals))
    own, sources = r.listed
    inst = np.asarray(r.order, dtype=np.int64)
    arrivals, src = np.asarray(own, dtype=np.float64), np.asarray(sources, dtype=np.int64)
    if inst.size > 1:
        # the last listing of each instance: the first of the reversed lists
        _, first = np.unique(inst[::-1], return_index=True)
        if first.size < inst.size:
            keep = np.sort(inst.size - 1 - first)
            inst, src, arrivals = inst[keep], src[keep], arrivals[keep]
    return inst, src, arrivals


def _distinct(ids: np.ndarray) -> np.ndarray:
    """The distinct values of ``ids``, sorted: sorted runs (the groups' instances, each sorted)
    merged by a stable sort, a quarter of the time ``np.unique``'s sort takes on them."""
    ordered = np.sort(ids, kind="stable")
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if ordered.size else ordered


def met(rounds: Iterable[Round | Met]) -> Met:
    """Several ranks' rounds as one (the same last arrivals, order and gains follow from it): per
    instance and source the latest arrival, NaN and never not counted, an instance listed twice
    by one rank the later of its two; one :class:`Met` is itself (read, never changed, by its
    callers)."""
    rounds = list(rounds)
    if len(rounds) == 1 and isinstance(rounds[0], Met):
        return rounds[0]
    out = Met()
    held, inst, src, arrivals = [], [], [], []
    for r in rounds:
        if isinstance(r, Met):
            out.gained.update(r.gained)
            out.orders |= r.orders
            held.append(r.held)
            inst.append(r.inst)
            src.append(r.src)
            arrivals.append(r.latest)
        else:
            out.gained[r.rank] = r.gained
            out.orders.add(tuple(r.order))
            i, s, a = _own(r)
            held.append(i)
            inst.append(i)
            src.append(s)
            arrivals.append(a)
        out.cycled = out.cycled or r.cycled
    if not rounds:
        return out
    # every piece is int64 or float64 already (a Met's arrays, :func:`_own`'s)
    out.held = _distinct(np.concatenate(held))
    every_inst, every_src, every = np.concatenate(inst), np.concatenate(src), np.concatenate(arrivals)
    counted = every > _NEVER  # NaN compares false: not counted, as never
    if not counted.all():
        every_inst, every_src, every = every_inst[counted], every_src[counted], every[counted]
    if every.size == 0:
        return out
    at = np.lexsort((every_src, every_inst))
    every_inst, every_src, every = every_inst[at], every_src[at], every[at]
    new = np.concatenate([[True], (every_inst[1:] != every_inst[:-1]) | (every_src[1:] != every_src[:-1])])
    first = np.flatnonzero(new)
    out.inst, out.src, out.latest = every_inst[first], every_src[first], np.maximum.reduceat(every, first)
    return out


class Lasts(dict[int, float]):
    """Each instance's last arrival as the client gave it, read by every rank of a group:
    sorted into arrays once, where each rank then looks its instances up at once, not one by one
    in Python (the rounds of 64 ``dense`` ranks apart, in one process: 1.72 -> 1.66 s of CPU)."""

    _sorted: tuple[np.ndarray, np.ndarray] | None = None

    def at(self, ids: np.ndarray) -> np.ndarray:
        """The last arrival of each instance of ``ids`` (never, :data:`_NEVER`, where none is
        given): ``[self.get(i, _NEVER) for i in ids]``, as an array."""
        if self._sorted is None:
            keys = np.fromiter(self.keys(), np.int64, len(self))
            values = np.fromiter(self.values(), np.float64, len(self))
            order = np.argsort(keys)
            self._sorted = keys[order], values[order]
        keys, values = self._sorted
        if keys.size == 0:
            return np.full(ids.size, _NEVER)
        at = np.minimum(np.searchsorted(keys, ids), keys.size - 1)
        return np.where(keys[at] == ids, values[at], _NEVER)


class _Alone:
    """One rank's side of the meetings (:class:`~tracekit.analyzers.retime.Meets`): each
    instance ends on the last arrival the client gave, or this rank's own if later."""

    def __init__(self, rank: _Rank, members: dict[int, list[int]], last_old: dict[int, float], last: dict[int, float]):
        self.rank = rank
        self.members = members
        self.last_old = last_old
        self.last = last
        self.out = Round(rank.plan.rank, 0.0)
        self.finished: set[int] = set()
        self.in_progress: set[int] = set()

    def instance(self, i: int) -> None:
        if i in self.finished:
            return
        if i in self.in_progress:  # reached again before it could finish: a cycle on this rank
            self.out.cycled = True
            return
        self.in_progress.add(i)
        r = self.rank
        own, own_src = _NEVER, _NO_SOURCE
        starts = []
        for k in self.members[i]:
            if isnan(r.e_new.item(k)):
                start, start_src, arrival, arrival_src = r.collective_arrival(k, self)
                starts.append((k, start, start_src))
            else:  # re-timed alone meanwhile, through a cycle
                self.out.cycled = True
                arrival, arrival_src = r.arrival_of(k)
            if arrival > own:
                own, own_src = arrival, arrival_src
        given = self.last.get(i, _NEVER)
        last = (given, i) if given >= own else (own, own_src)
        for k, start, start_src in starts:
            if isnan(r.e_new.item(k)):
                r.finish_collective(k, start, start_src, last, self.last_old[i])
        self.in_progress.discard(i)
        self.finished.add(i)
        self.out.order.append(i)
        self.out.arrivals[i] = own
        self.out.sources[i] = own_src

    def run(self, first_end: dict[int, float]) -> Round:
        """Re-time the rank in the order :meth:`Simulation.run` visits it: its blocks by their
        ends, its instances by their first end on any rank."""
        r = self.rank
        events = [(t, 0, b) for b, t in enumerate(r.l_end)]
        events += [(first_end[i], 1, i) for i in self.members]
        heapq.heapify(events)
        while events:
            t, kind, who = heapq.heappop(events)
            if kind == 0:
                r.blocks_until(t, self)
            else:
                self.instance(who)
        self.out.gained = r.gained(self)
        return self.out


class RankAlone:
    """One rank, re-timed on its own round after round (kept where its events are)."""

    def __init__(self, plan: RankPlan, last_old: dict[int, float], first_end: dict[int, float]) -> None:
        """``last_old``, ``first_end``: each instance's last arrival and first end as recorded,
        on any rank (:func:`recorded`)."""
        self.plan = plan
        self.last_old = last_old
        self.first_end = first_end
        # each instance's tasks, in order, the instances by id: arrays (a loop over the tasks
        # was an eighth of a round of 64 ``dense`` ranks apart)
        tasks = np.flatnonzero(plan.instance >= 0)
        by_instance = np.argsort(plan.instance[tasks], kind="stable")
        ids, counts = np.unique(plan.instance[tasks][by_instance], return_counts=True)
        self._held = (ids.astype(np.int64), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
        self._tasks = tasks[by_instance].astype(np.int64)
        self._members: dict[int, list[int]] | None = None
        self._like: _Rank | None = None
        #: the meetings as ``_retime_core.alone`` reads them (but the last arrivals), once worked out
        self._native: tuple[np.ndarray, ...] | None = None

    def __getstate__(self) -> dict[str, object]:
        """What travels to a worker: the plan, not the last round's state."""
        return {**self.__dict__, "_like": None, "_native": None}

    @property
    def members(self) -> dict[int, list[int]]:
        """Each instance this rank holds -> its tasks, in order (worked out when first read)."""
        if self._members is None:
            ids, offsets = self._held
            tasks = self._tasks.tolist()
            ends = offsets.tolist()
            self._members = {i: tasks[a:b] for i, a, b in zip(ids.tolist(), ends, ends[1:], strict=False)}
        return self._members

    def round(self, scenario: Scenario, last: dict[int, float]) -> Round:
        """The rank re-timed under ``scenario``, each instance's last arrival as ``last`` says."""
        rank = new_rank(self.plan, scenario, self._like, track=True)
        self._like = rank
        if isinstance(rank, _NativeRank):
            return self._round_native(rank, last)
        return _Alone(rank, self.members, self.last_old, last).run(self.first_end)

    def _round_native(self, rank: _NativeRank, last: dict[int, float]) -> Round:
        """:meth:`round` in C (``_retime_core.alone``): the same visits, times and order."""
        assert _core is not None
        if self._native is None:
            ids, offsets = self._held
            listed = ids.tolist()
            held = (
                ids,
                offsets,
                np.zeros(self._tasks.size, dtype=np.int64),  # one rank: each member's index is 0
                self._tasks,
                np.array([self.last_old[i] for i in listed], dtype=np.float64),
                np.array([self.first_end[i] for i in listed], dtype=np.float64),
            )
            self._native = meetings_of(held, [(self.plan.rank, rank.b_end)])
        ids_a, m_off, m_core, m_task, last_old, ev_core, ev_block, i_order, i_t = self._native
        if isinstance(last, Lasts):
            given = last.at(ids_a)
        else:
            given = np.array([last.get(i, _NEVER) for i in ids_a.tolist()], dtype=np.float64)
        gained, order, arrivals, sources, cycled = _core.alone(
            rank.core, ids_a, m_off, m_core, m_task, last_old, given, ev_core, ev_block, i_order, i_t
        )
        return Round(self.plan.rank, gained, order=order, cycled=cycled, listed=(arrivals, sources))


def recorded(plans: Iterable[RankPlan]) -> tuple[dict[int, float], dict[int, float]]:
    """Each instance's last arrival and first end as recorded: what the client knows of every
    rank before any round (ranks x instances numbers)."""
    ids, *_, last, first = recorded_instances(list(plans))
    keys = ids.tolist()
    return dict(zip(keys, last.tolist(), strict=True)), dict(zip(keys, first.tolist(), strict=True))


def agreed_order(rounds: list[Round] | list[Met]) -> list[int] | None:
    """The instances in an order each rank's finishing order keeps (None: there is none, a
    cycle), ties in the order of the instances' numbers."""
    orders: set[tuple[int, ...]] = set()
    for r in rounds:
        if isinstance(r, Met):
            orders |= r.orders
        else:
            orders.add(tuple(r.order))
    after: dict[int, set[int]] = {}
    waits: dict[int, int] = {}
    for order in orders:
        for i in order:
            waits.setdefault(i, 0)
        for a, b in itertools.pairwise(order):
            if b not in after.setdefault(a, set()):
                after[a].add(b)
                waits[b] = waits.get(b, 0) + 1
    ready = [i for i, n in waits.items() if n == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        out.append(i)
        for j in after.get(i, ()):
            waits[j] -= 1
            if waits[j] == 0:
                heapq.heappush(ready, j)
    return out if len(out) == len(waits) else None


def solve(rounds: list[Round] | list[Met], last: dict[int, float], order: list[int]) -> dict[int, float]:
    """Each instance's last arrival, the ranks' arrivals moved as much as their sources moved
    (one pass in ``order``: a source is always set before what it holds back); an instance of no
    counted arrival keeps ``last``'s."""
    merged = met(rounds)
    inst, src, latest = merged.inst.tolist(), merged.src.tolist(), merged.latest.tolist()
    bounds = np.flatnonzero(np.diff(merged.inst)).tolist()
    starts, ends = [0, *(b + 1 for b in bounds)], [*(b + 1 for b in bounds), len(inst)]
    pairs = {inst[a]: (a, b) for a, b in zip(starts, ends, strict=True)} if inst else {}
    new = dict(last)
    for i in order:
        if (span := pairs.get(i)) is not None:
            a, b = span
            new[i] = max(t if s < 0 else t + (new[s] - last[s]) for s, t in zip(src[a:b], latest[a:b], strict=True))
    return new


def settle_each(
    rounds_of: Callable[[dict[K, dict[int, float]]], dict[K, list[Round]] | dict[K, list[Met]] | None],
    last_old: dict[int, float],
    keys: Iterable[K],
) -> dict[K, dict[int, float] | None]:
    """Each rank's gain, ns, under each scenario of ``keys``, the ranks re-timed apart, the
    scenarios' rounds side by side. ``rounds_of``: every rank's :meth:`RankAlone.round` under
    each scenario it is given, with that scenario's last arrivals, wherever the ranks are (None:
    a round could not be run). A scenario gets None where only the whole run re-timed at once
    can say (a cycle, no fixed point in :data:`MAX_ROUNDS`, a round not run)."""
    out: dict[K, dict[int, float] | None] = {}
    pending = {k: dict(last_old) for k in keys}
    for _ in range(MAX_ROUNDS):
        if not pending:
            break
        got = rounds_of(pending)
        if got is None:
            break
        for key, rounds in got.items():
            last = pending.pop(key)
            merged = met(rounds)
            order = None if merged.cycled else agreed_order([merged])
            if order is None:
                out[key] = None
                continue
            ids, given = merged.given()
            before = np.fromiter((last[i] for i in ids.tolist()), np.float64, ids.size)
            near = (given == before) | (np.abs(given - before) <= TOLERANCE * np.maximum(1.0, np.abs(before)))
            if bool(near.all()):
                out[key] = merged.gained
            else:
                pending[key] = solve([merged], last, order)
    return {**out, **dict.fromkeys(pending)}


#: What one worker re-times in one round: some ranks (kept there from one round to the next),
#: under the scenarios still settling, each with its last arrivals (of the instances they hold).
Group = tuple[list[RankAlone], dict[K, "Scenario"], dict[K, dict[int, float]]]


def round_of_group(group: Group[K]) -> dict[K, list[Met]]:
    """One round of a group's ranks under each of its scenarios (run where the group is),
    merged (:func:`met`)."""
    ranks, scenarios, lasts = group
    return {k: [met(r.round(scenarios[k], read) for r in ranks)] for k, read in read_lasts(lasts).items()}


def read_lasts(lasts: dict[K, dict[int, float]]) -> dict[K, Lasts]:
    """Each scenario's last arrivals as every rank of a group reads them (:class:`Lasts`)."""
    return {k: last if isinstance(last, Lasts) else Lasts(last) for k, last in lasts.items()}
