"""What :mod:`tracekit.analyzers.retime` re-times: one rank's events (:class:`RankPlan`), and
what a what-if changes (:class:`Scenario`: host time removed, task durations, blocks that no
longer wait, collectives hidden), with the arithmetic of removals (:func:`merge`,
:func:`merge_each`, :func:`outside`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

K = TypeVar("K")

#: About how many intervals :func:`merge_each` merges at once.
BATCH_INTERVALS: Final = 1 << 20


@dataclass
class Removal:
    """Host time taken away: ``[start, end)`` intervals, each at ``rate`` (1: all of it)."""

    start: np.ndarray = field(default_factory=lambda: np.empty(0))
    end: np.ndarray = field(default_factory=lambda: np.empty(0))
    rate: np.ndarray = field(default_factory=lambda: np.empty(0))


@dataclass
class RankPlan:
    """One rank's events, times in ns from one origin shared by every rank (floats).

    Tasks are in stream order within each stream. ``instance``: the collective instance of a
    task (an index shared by the ranks that hold it), -1 for none; ``arrival``: a collective's
    arrival (its start, or for a host collective the call that enqueued it).
    """

    rank: int
    # tasks
    stream: np.ndarray
    launch: np.ndarray  # NaN: not launched by this host (anchored to its stream)
    start: np.ndarray
    end: np.ndarray
    instance: np.ndarray
    arrival: np.ndarray
    arrival_is_launch: np.ndarray
    # blocks
    block_start: np.ndarray
    block_end: np.ndarray
    #: where the rank's measured time ends, and whether that end is the device's (else the host's)
    window_end: float
    device_end: bool
    #: per block, the time up to which the tasks launched are awaited: its start for a sync
    #: (the work queued before it), its end for a wait on collectives (the training thread
    #: waits for every bucket, those other threads enqueue meanwhile too); None: the starts
    block_until: np.ndarray | None = None
    #: per block, whether it is a wait on collectives (it awaits the host collectives'
    #: streams only: the tasks with ``arrival_is_launch``); None: none is
    block_on_collectives: np.ndarray | None = None
    #: per block, whether it waits in every scenario, ``no_wait_blocks`` too (tracekit
    #: capture's own step-end sync: removing the training's syncs leaves it); None: none does
    block_kept: np.ndarray | None = None
    #: per task, when its collective completed as the ranks saw it (the earliest end of its
    #: instance's host spans: a backend thread descheduled on a busy CPU records its end late,
    #: after it woke the waiting thread); None: each task's own end
    done: np.ndarray | None = None


@dataclass(frozen=True)
class Shortened:
    """New durations of some of a rank's tasks: the tasks (their places in the plan, ascending)
    and each one's. Only the tasks a what-if changes: an array of every task's (NaN where
    unchanged) was 6 MB for a 2 GB rank's 0.7M tasks, per scenario, every scenario held through
    the re-timing (its transfers: 45k tasks)."""

    index: np.ndarray
    value: np.ndarray

    @classmethod
    def where(cls, changed: np.ndarray, value: np.ndarray) -> Shortened:
        """The tasks of the mask ``changed`` at ``value`` (theirs, in order; NaN: unchanged)."""
        index = np.flatnonzero(changed)
        kept = ~np.isnan(value)
        return cls(index[kept], np.ascontiguousarray(value[kept], dtype=np.float64))

    @classmethod
    def of(cls, durations: np.ndarray) -> Shortened:
        """Every task's new duration (NaN: unchanged), as those changed."""
        changed = ~np.isnan(durations)
        return cls.where(changed, durations[changed])

    def applied(self, durations: np.ndarray) -> np.ndarray:
        """``durations`` (every task's) with these in place (a copy)."""
        out = np.array(durations, dtype=np.float64)
        out[self.index] = self.value
        return out

    @classmethod
    def shortest(cls, each: list[Shortened]) -> Shortened:
        """Several at once: each task at the shortest duration any gives it."""
        if len(each) == 1:
            return each[0]
        index = np.concatenate([s.index for s in each])
        value = np.concatenate([s.value for s in each])
        order = np.lexsort((value, index))  # by task, the shortest first
        index, value = index[order], value[order]
        first = np.ones(index.size, dtype=bool)
        first[1:] = index[1:] != index[:-1]
        return cls(index[first], value[first])


@dataclass
class Scenario:
    """What changes: removals per rank, task durations per rank, blocks that no longer wait,
    collectives whose own tail goes (their communication hidden)."""

    removals: dict[int, Removal] = field(default_factory=dict)
    #: rank -> new durations of some of its tasks (given as every task's, NaN where unchanged,
    #: they are kept as those changed)
    durations: dict[int, Shortened] = field(default_factory=dict)
    no_wait_blocks: bool = False  # except the blocks kept (``RankPlan.block_kept``)
    hide_collectives: bool = False

    def __post_init__(self) -> None:
        given: dict[int, Shortened | np.ndarray] = dict(self.durations)
        self.durations = {r: d if isinstance(d, Shortened) else Shortened.of(d) for r, d in given.items()}


def rate_at(removal: Removal, t: np.ndarray) -> np.ndarray:
    """The rate of ``removal`` at each of ``t`` (0 outside it; its intervals are disjoint)."""
    if removal.start.size == 0:
        return np.zeros(t.size)
    order = np.argsort(removal.start)
    s, e, w = removal.start[order], removal.end[order], removal.rate[order]
    i = np.maximum(np.searchsorted(s, t, side="right") - 1, 0)
    inside = (t >= s[i]) & (t < e[i])
    return np.where(inside, w[i], 0.0)


def cut(removals: list[Removal], rate: Callable[[np.ndarray], np.ndarray]) -> Removal:
    """The elementary stretches between every boundary of ``removals``, at ``rate(midpoints)``."""
    kept = [r for r in removals if r.start.size]
    if not kept:
        return Removal()
    points = np.unique(np.concatenate([np.concatenate([r.start, r.end]) for r in kept]))
    if points.size < 2:
        return Removal()
    lo, hi = points[:-1], points[1:]
    rates = rate((lo + hi) / 2)
    keep = rates > 0
    return Removal(start=lo[keep], end=hi[keep], rate=rates[keep])


def merge(removals: list[Removal]) -> Removal:
    """One removal of several: each instant at the largest rate that covers it."""
    return cut(removals, lambda t: np.max([rate_at(r, t) for r in removals], axis=0))


def merge_each(groups: dict[K, list[Removal]]) -> dict[K, Removal]:
    """:func:`merge` of each group's removals (each rank's, of several scenarios), many groups
    at once: the same boundaries, midpoints and rates, found by one sort of their boundaries
    instead of a few NumPy calls a group (a thousand ranks' took 0.45 s of a warm reduce's
    2.3, profiled). The groups are taken about :data:`BATCH_INTERVALS` intervals at a time (a
    thousand dense ranks' 6.2 M intervals at once held a GB more, and sorted slower). A group
    with two intervals of one removal starting together, whose rate :func:`rate_at` takes
    from either, is merged alone."""
    out: dict[K, Removal] = {}
    batch: dict[K, list[Removal]] = {}
    size = 0
    for key, removals in groups.items():
        batch[key] = removals
        size += sum(r.start.size for r in removals)
        if size >= BATCH_INTERVALS:
            out.update(_merge_batch(batch))
            batch, size = {}, 0
    out.update(_merge_batch(batch))
    return out


def _merge_batch(groups: dict[K, list[Removal]]) -> dict[K, Removal]:
    """:func:`merge_each` of ``groups``, all at once."""
    keys = list(groups)
    out = {k: Removal() for k in keys}
    kept = [(g, r) for g, k in enumerate(keys) for r in groups[k] if r.start.size]
    if not kept:
        return out
    of = np.array([g for g, _ in kept], dtype=np.int64)  # each non-empty removal's group
    owner = np.repeat(np.arange(len(kept), dtype=np.int64), [r.start.size for _, r in kept])  # each interval's
    start, end, rate = (np.concatenate([getattr(r, name) for _, r in kept]) for name in ("start", "end", "rate"))
    points, at_start, at_end = _points(of[owner], start, end)
    g_pts, t_pts = points
    first = np.flatnonzero(g_pts[1:] == g_pts[:-1])  # each stretch's first point (and the next is its last)
    lo, hi, g_mid = t_pts[first], t_pts[first + 1], g_pts[first]
    rates, tied = _max_rates(of, owner, (at_start, at_end, rate), (lo + hi) / 2, first=first, hi=hi)
    keep = rates > 0
    bounds = np.concatenate([[0], np.cumsum(np.bincount(g_mid, minlength=len(keys)))]).tolist()
    for g, k in enumerate(keys):
        if g in tied:
            out[k] = merge(groups[k])
        elif keep[bounds[g] : bounds[g + 1]].any():
            sel = slice(bounds[g], bounds[g + 1])
            out[k] = Removal(start=lo[sel][keep[sel]], end=hi[sel][keep[sel]], rate=rates[sel][keep[sel]])
    return out


def _points(
    group: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
    """The boundaries of each group (the starts and ends of its intervals, each interval of
    ``group``; unique: :func:`cut`'s), in group then time order (their groups and times), and
    where each interval's start and end are among them."""
    n = start.size
    g_pts = np.concatenate([group, group])
    t_pts = np.concatenate([start, end])
    order = np.lexsort((t_pts, g_pts))
    g_pts, t_pts = g_pts[order], t_pts[order]
    new = np.ones(g_pts.size, dtype=bool)
    new[1:] = (g_pts[1:] != g_pts[:-1]) | (t_pts[1:] != t_pts[:-1])
    place = np.empty(order.size, dtype=np.int64)
    place[order] = np.cumsum(new, dtype=np.int64) - 1
    return (g_pts[new], t_pts[new]), place[:n], place[n:]


def _max_rates(
    of: np.ndarray,
    owner: np.ndarray,
    intervals: tuple[np.ndarray, np.ndarray, np.ndarray],
    mid: np.ndarray,
    *,
    first: np.ndarray,
    hi: np.ndarray,
) -> tuple[np.ndarray, set[int]]:
    """At each of ``mid``, the midpoint of the stretch from boundary ``first`` to the next
    (which is at ``hi``), the largest rate of the removals of its group (removal ``i`` of group
    ``of[i]``, its removals consecutive; ``intervals``: where each interval starts and ends
    among the boundaries and its rate, each of removal ``owner``): :func:`rate_at`'s, the last
    interval starting by the midpoint where it holds the point, 0 where none; and the groups
    with a removal of two intervals starting together.

    The boundaries of a group include every start and end of its intervals, so an interval
    holds a stretch's midpoint when it starts at or before the stretch's first boundary and
    ends after it; a midpoint that rounds to the next boundary (two adjacent doubles) is that
    boundary. The removals are taken a place in their group at a time (the first of each
    group, then the second...): a running maximum of the intervals' order along the
    boundaries is the last to start by each one, with no sort of the midpoints."""
    at_start, at_end, rate = intervals
    at = first + (mid == hi)
    group_starts = np.flatnonzero(np.concatenate([[True], of[1:] != of[:-1]]))
    place = np.arange(of.size) - np.repeat(group_starts, np.diff(np.append(group_starts, of.size)))
    of_interval = place[owner]
    rates = np.zeros(mid.size)
    tied: set[int] = set()
    boundaries = int(max(at_end.max(), at_start.max())) + 1
    for p in range(int(place.max()) + 1):
        these = np.flatnonzero(of_interval == p)
        these = these[np.argsort(at_start[these], kind="stable")]  # by group, then time
        starts = at_start[these]
        together = starts[1:] == starts[:-1]
        tied.update(of[owner[these[1:][together]]].tolist())
        last = np.full(boundaries, -1, dtype=np.int64)
        last[starts] = np.arange(these.size)
        np.maximum.accumulate(last, out=last)
        hit = last[at]
        which = these[np.maximum(hit, 0)]
        inside = (hit >= 0) & (at_end[which] > at)
        np.maximum(rates, np.where(inside, rate[which], 0.0), out=rates)
    return rates, tied


def outside(removal: Removal, taken: Removal) -> Removal:
    """``removal`` less what ``taken`` already removes (its rate scaled by what ``taken`` leaves)."""
    if taken.start.size == 0 or removal.start.size == 0:
        return removal
    return cut([removal, taken], lambda t: rate_at(removal, t) * (1 - rate_at(taken, t)))
