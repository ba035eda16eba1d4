"""What :mod:`tracekit.analyzers.retime` re-times: one rank's events (:class:`RankPlan`), and
what a what-if changes (:class:`Scenario`: host time removed, task durations, blocks that no
longer wait, collectives hidden), with the arithmetic of removals (:func:`merge`, :func:`outside`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable


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


@dataclass
class Scenario:
    """What changes: removals per rank, task durations per rank, blocks that no longer wait,
    collectives whose own tail goes (their communication hidden)."""

    removals: dict[int, Removal] = field(default_factory=dict)
    #: rank -> new durations of its tasks (NaN: unchanged)
    durations: dict[int, np.ndarray] = field(default_factory=dict)
    no_wait_blocks: bool = False  # except the blocks kept (``RankPlan.block_kept``)
    hide_collectives: bool = False


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


def outside(removal: Removal, taken: Removal) -> Removal:
    """``removal`` less what ``taken`` already removes (its rate scaled by what ``taken`` leaves)."""
    if taken.start.size == 0 or removal.start.size == 0:
        return removal
    return cut([removal, taken], lambda t: rate_at(removal, t) * (1 - rate_at(taken, t)))
