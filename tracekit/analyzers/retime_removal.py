"""The host time a scenario removes on one rank, as the re-timing asks for it
(:class:`HostRemoval`, a part of :class:`tracekit.analyzers.retime._Rank`): how much was removed
before a time, and before each block's start and end."""

from __future__ import annotations

from bisect import bisect_right
from typing import ClassVar, Final

import numpy as np

from tracekit.analyzers.retime_plan import Removal

__all__ = ["REMOVAL_STATE", "HostRemoval"]

#: What :meth:`HostRemoval._removal` sets as arrays (what the re-timing in C reads).
_ARRAY_STATE: Final = ("r_start", "r_end", "r_rate", "r_cum", "r_at_start", "r_at_end")
#: What :meth:`HostRemoval._removal` sets.
REMOVAL_STATE: Final = (
    "r_start",
    "r_end",
    "r_rate",
    "r_cum",
    "l_r_start",
    "l_r_end",
    "l_r_rate",
    "l_r_cum",
    "r_at_start",
    "r_at_end",
    "l_at_start",
    "l_at_end",
)


class HostRemoval:
    """One rank's removed host time under one scenario (the blocks are its shape's)."""

    b_start: np.ndarray
    b_end: np.ndarray
    #: the state when nothing is removed on this rank, once worked out (see :meth:`_unremoved`)
    _unremoved_state: dict[str, object] | None
    #: per removal, its arrays' state, once worked out (see :meth:`_removal_kept`)
    _removals_kept: dict[int, tuple[object, dict[str, object]]]
    #: whether the re-timing reads the removal as Python lists too (its Python paths), or only as arrays
    _LISTS: ClassVar[bool] = True

    def _removal(self, rem: Removal, *, lists: bool = True) -> None:
        """The host time ``rem`` removes, in order, and how much of it lies before each block's
        start and end (asked for at every re-timed launch). ``lists``: also as Python lists,
        which only the Python paths read (the C core reads the arrays)."""
        order = np.argsort(rem.start, kind="stable")
        self.r_start, self.r_end, self.r_rate = rem.start[order], rem.end[order], rem.rate[order]
        self.r_cum = np.concatenate([[0.0], np.cumsum((self.r_end - self.r_start) * self.r_rate)])
        self.r_at_start = self.removed_before(self.b_start)
        self.r_at_end = self.removed_before(self.b_end)
        if not lists:
            return
        self.l_r_start: list[float] = self.r_start.tolist()
        self.l_r_end: list[float] = self.r_end.tolist()
        self.l_r_rate: list[float] = self.r_rate.tolist()
        self.l_r_cum: list[float] = self.r_cum.tolist()
        self.l_at_start: list[float] = self.r_at_start.tolist()
        self.l_at_end: list[float] = self.r_at_end.tolist()

    def _removal_kept(self, rem: Removal) -> None:
        """:meth:`_removal` of ``rem`` as arrays only, worked out once per removal and rank (kept
        by the rank's shape): the rounds of a rank re-timed apart ask for the same scenario's
        removal again and again."""
        kept = self._removals_kept.get(id(rem))
        if kept is None or kept[0] is not rem:
            self._removal(rem, lists=False)
            kept = (rem, {k: self.__dict__[k] for k in _ARRAY_STATE})
            self._removals_kept[id(rem)] = kept
        else:
            self.__dict__.update(kept[1])

    def _unremoved(self) -> dict[str, object]:
        """What :meth:`_removal` sets when nothing is removed, worked out once per rank (every
        scenario reads it, none writes it)."""
        state = self._unremoved_state
        if state is None or (self._LISTS and "l_r_start" not in state):
            # the lists only where the Python paths read them (a 2 GB rank's 59k blocks: 4 MB)
            self._removal(Removal(), lists=self._LISTS)
            state = {k: self.__dict__[k] for k in REMOVAL_STATE if k in self.__dict__}
            self._unremoved_state = state
        return state

    def removed_before(self, t: np.ndarray) -> np.ndarray:
        """Host time removed before each of ``t``."""
        if self.r_start.size == 0:
            return np.zeros_like(t)
        i = np.searchsorted(self.r_end, t, side="right")
        partial = np.clip(t - self.r_start[np.minimum(i, self.r_start.size - 1)], 0.0, None)
        inside = i < self.r_start.size
        part = np.where(inside, partial * self.r_rate[np.minimum(i, self.r_start.size - 1)], 0.0)
        return self.r_cum[i] + part

    def removed_one(self, t: float) -> float:
        """:meth:`removed_before` of one time."""
        n = len(self.l_r_start)
        if n == 0:
            return 0.0
        i = bisect_right(self.l_r_end, t)
        if i >= n:
            return self.l_r_cum[i]
        return self.l_r_cum[i] + max(t - self.l_r_start[i], 0.0) * self.l_r_rate[i]
