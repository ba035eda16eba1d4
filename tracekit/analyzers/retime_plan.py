"""What :mod:`tracekit.analyzers.retime` re-times: one rank's events (:class:`RankPlan`), and
what a what-if changes (:class:`Scenario`: host time removed, task durations, blocks that no
longer wait, collectives hidden)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
    no_wait_blocks: bool = False
    hide_collectives: bool = False
