"""Re-timing a run along its dependencies: how much earlier each rank ends when some time goes.

The model (in the spirit of Daydream, Zhu et al., ATC'20, and of HTA's critical path, but
across ranks and as a what-if) keeps every dependency the trace shows and shifts each event
by what its predecessors gained:

* **The host** of a rank is one chain (its threads take turns: the training thread waits while
  autograd's launches backward). Time removed from it (a DataLoader fetch, a launch call, a
  straggler's extra time in a phase: *removals*, with a rate: 1 removes all of an interval,
  0.3 a third of it) moves everything after it earlier by as much, up to the next *block*.
* **A block** is the host waiting on something: a blocking sync call (GPU runs: it returns when
  the device work launched before it is done), or the training thread waiting on a collective
  (CPU-only runs). It returns at ``max(its start + its own cost, the awaited end + its tail)``,
  both measured; a block told not to wait (the sync removed) returns after its own cost.
* **A task** runs on a stream (a GPU stream; on a CPU-only run, a collective backend's worker)
  in stream order: it starts at ``max(its launch, its predecessor's end) + delay``, the delay
  being what it waited beyond both in the trace (a cross-stream event wait, the launch
  latency): kept, so an event wait the trace does not name stays as long as it was.
* **A collective** ends when the last rank of its instance arrives, plus its own tail:
  ``max(start, last arrival) + tail``, the last arrival re-timed on every rank of the
  instance (arrivals compared on one clock). A rank's wait shrinks only when the last arriver
  arrives earlier.

With nothing removed every event keeps its time (``tests/analyzers/test_retime.py`` checks
it): the model explains the trace before it predicts. Events are processed in their original
order across all ranks (a dependency always ended before what it holds back started), with
the stretches between blocks and collectives re-timed at once: along one stream, ``end_k =
max(end_{k-1} + c_k, b_k)`` is a max-plus recursion solved by one cumulative maximum.

What the model cannot see is said by the caller (:mod:`tracekit.analyzers.gains`).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from math import isnan
from typing import TYPE_CHECKING, ClassVar, Final, Protocol, TypeVar

import numpy as np

from tracekit.analyzers.retime_plan import RankPlan, Removal, Scenario
from tracekit.analyzers.retime_removal import REMOVAL_STATE, HostRemoval
from tracekit.analyzers.retime_shape import _NEVER, AWAIT_TOLERANCE_NS, DEPENDENCY_NS, RankShape
from tracekit.native import wanted

__all__ = [
    "AWAIT_TOLERANCE_NS",
    "DEPENDENCY_NS",
    "Meets",
    "RankPlan",
    "Removal",
    "Scenario",
    "Shapes",
    "Simulation",
    "meetings",
    "meetings_of",
    "new_rank",
    "simulate",
    "simulate_each",
]

if TYPE_CHECKING:
    from types import ModuleType

    from tracekit.analyzers._retime_core import Core, Shape

K = TypeVar("K")

_core: ModuleType | None
try:
    from tracekit.analyzers import _retime_core as _core
except ImportError:  # not compiled: every rank is re-timed in Python
    _core = None

#: Whether ranks are re-timed in C (``_retime_core.c``, :class:`_NativeRank`): the extension is
#: there and not turned off (``TRACEKIT_NATIVE=0``, as for the decoder). The same times either way.
NATIVE: bool = _core is not None and wanted()

#: Up to this many times, one at a time in Python is faster than as arrays in NumPy.
_FEW: Final = 16
#: A time that hangs on no collective instance's last arrival (see ``_Rank.e_src``).
_NO_SOURCE: Final = -1
#: The source of a collective's arrival that is not re-timed yet (``_NativeRank.arrived_from``).
_NOT_ARRIVED: Final = -2
#: The sources of times as arrays, where they are not followed (``_Rank.track``).
_UNTRACKED: Final = np.empty(0, dtype=np.int64)


class Meets(Protocol):
    """Where a rank's collectives meet the other ranks': :class:`Simulation` (every rank in one
    process), or one rank re-timed alone (:class:`tracekit.analyzers.retime_ranks.Alone`)."""

    @property
    def last_old(self) -> dict[int, float]:
        """Each instance's last arrival as recorded."""

    def instance(self, i: int) -> None:
        """Re-time collective instance ``i`` (its members on the ranks this side holds)."""


#: What a scenario sets on a rank (``_Rank._scenario``, ``_NativeRank._scenario``): its
#: removal, durations and the re-timing's state.
SCENARIO_STATE: Final = (
    *REMOVAL_STATE,
    "dur",
    "s_new",
    "e_new",
    "e_src",
    "arrived",
    "arrived_src",
    "arrived_at",
    "arrived_from",
    "done",
    "b_shift",
    "b_src",
    "l_shift",
    "l_src",
    "core",
)


class _Rank(RankShape, HostRemoval):
    """One rank's re-timing state under one scenario."""

    #: whether it reads the shape's Python lists (:meth:`RankShape.lists`)
    _LISTS: ClassVar[bool] = True

    def __init__(self, plan: RankPlan, scenario: Scenario, like: _Rank | None = None, *, track: bool = False) -> None:
        """``like``: the same plan's rank under another scenario, whose shape (streams,
        delays, dependencies, blocks: what the scenario does not change) is taken as is.
        ``track``: follow each time of a run of tasks back to its instance (``e_src``; the
        times one at a time and the blocks always are): what re-timing a rank apart needs, a
        tenth of the re-timing's time that re-timing every rank at once does without."""
        if like is not None and like.plan is plan:
            self.__dict__.update(like.__dict__)
        else:
            RankShape.__init__(self, plan)
        if self._LISTS:
            self.lists()
        self.track = track
        self._scenario(scenario)

    def release(self) -> None:
        """Let go of what the scenario set (:data:`SCENARIO_STATE`) and of the removals kept for
        re-timing apart: the shape alone stays, for the same plan's rank under the next scenario
        (its ``like``). A rank re-timed under every scenario of :func:`simulate_each` in turn
        held each removal's arrays until the run ended, and the last scenario's state while the
        next was made: a 2 GB DLRM rank's reduce rose 200 MB over its 11 scenarios."""
        for name in SCENARIO_STATE:
            self.__dict__.pop(name, None)
        self._removals_kept.clear()

    def _scenario(self, scenario: Scenario) -> None:
        """What ``scenario`` changes, and the re-timing state, fresh."""
        plan = self.plan
        n = plan.start.size
        rem = scenario.removals.get(plan.rank, Removal())
        if rem.start.size == 0:  # nothing removed on this rank (most ranks of most scenarios)
            self.__dict__.update(self._unremoved())
        else:
            self._removal(rem)
        new = scenario.durations.get(plan.rank)
        dur = plan.end - plan.start
        self.dur = dur if new is None else new.applied(dur)
        self.hide = scenario.hide_collectives
        self.no_wait = scenario.no_wait_blocks
        self.s_new = np.full(n, np.nan)
        self.e_new = np.full(n, np.nan)
        #: per task, the collective instance whose last arrival its re-timed start and end hang
        #: on (they are that arrival plus a constant), -1 for none: see :mod:`retime_ranks`
        self.e_src = np.full(n, _NO_SOURCE, dtype=np.int64)
        self.arrived: dict[int, float] = {}  # each collective's arrival, re-timed
        self.arrived_src: dict[int, int] = {}  # and the instance it hangs on
        self.done = [0] * len(self.streams)  # tasks re-timed, per stream
        self.b_shift = np.zeros(self.b_start.size)
        self.b_src = np.full(self.b_start.size, _NO_SOURCE, dtype=np.int64)  # as ``e_src``, of each block's return
        self.b_done = 0
        self.b_busy = -1  # the block being re-timed (asking for what it awaits), if any
        self.l_shift: list[float] = self.b_shift.tolist()
        self.l_src: list[int] = self.b_src.tolist()

    def _dep_end(self, k: int, sim: Meets) -> tuple[float, int]:
        """When the task ``k`` waits on ends, re-timed (-inf: it waits on none), and its source."""
        m = self.dep.item(k)
        if m < 0:
            return _NEVER, _NO_SOURCE
        if isnan(self.e_new.item(m)):
            self.stream_until(self.stream_of.item(m), self.place.item(m), sim)
        return self.e_new.item(m), self.e_src.item(m)

    # -- the host ------------------------------------------------------------------------------

    def _resumed(self, b: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Whether each ``t`` inside or after block ``b`` is after the block let the host go on
        (its end, or in a block that waited, the awaited work's end: what runs after it, on this
        thread or another, follows that work)."""
        resumed: np.ndarray = (t >= self.b_end[b]) | (self.waited[b] & (t >= self.drain[b]))
        return resumed

    def host_shift(self, t: np.ndarray, sim: Meets) -> tuple[np.ndarray, np.ndarray]:
        """How much earlier the host is at each of ``t`` (the blocks it depends on re-timed
        first), and the instance each new time hangs on (see ``e_src``)."""
        removed = self.removed_before(t)
        none = np.full(t.size, _NO_SOURCE, dtype=np.int64) if self.track else _UNTRACKED
        if self.b_start.size == 0 or t.size == 0:
            return removed, none
        lo, hi = float(t.min()), float(t.max())
        if 0 <= self.b_busy <= bisect_right(self.l_start, hi) - 1:  # a cycle: see host_shift_one
            pairs = [self.host_shift_one(float(x), sim) for x in t]
            return np.array([v for v, _ in pairs], dtype=float), np.array([s for _, s in pairs], dtype=np.int64)
        first = bisect_right(self.l_start, lo) - 1
        if first == bisect_right(self.l_start, hi) - 1 and (first < 0 or lo >= self.l_end[first]):
            # all of ``t`` between one block's end and the next one's start (the common case)
            if first < 0:
                return removed, none
            self.process_through(first, sim)
            shifted: np.ndarray = self.l_shift[first] + removed - self.l_at_end[first]  # as ``after_end`` below
            return shifted, np.full(t.size, self.l_src[first], dtype=np.int64) if self.track else _UNTRACKED
        j = np.searchsorted(self.b_start, t, side="right") - 1  # the last block begun by t
        jj = np.maximum(j, 0)
        resumed = (j >= 0) & self._resumed(jj, t)
        need = int(np.max(np.where(resumed, j, j - 1)))
        self.process_through(need, sim)
        before = self.shift_at_start(jj)
        after_end = self.b_shift[jj] + removed - self.r_at_end[jj]
        inside = np.where(resumed, self.b_shift[jj], before)
        before_src = inside_src = _UNTRACKED
        if self.track:
            before_src = np.where(jj > 0, self.b_src[np.maximum(jj - 1, 0)], _NO_SOURCE)
            inside_src = np.where(resumed, self.b_src[jj], before_src)
        if self.comp_task.size:
            done, done_src = self._after_completion(t, jj, before, before_src, sim)
            inside = np.where(self.b_coll[jj], done, inside)
            if self.track:
                inside_src = np.where(self.b_coll[jj], done_src, inside_src)
        ended = t >= self.b_end[jj]
        shift = np.where(j >= 0, np.where(ended, after_end, inside), removed)
        if not self.track:
            return shift, _UNTRACKED
        return shift, np.where(j >= 0, np.where(ended, self.b_src[jj], inside_src), _NO_SOURCE)

    # -- one time at a time: the same arithmetic as the array paths, in Python floats ----------
    # (an element read with ``.item``: indexing gives a NumPy scalar, whose arithmetic and
    # comparisons cost several times a float's; the values are the same doubles)

    def shift_at_start_one(self, b: int) -> float:
        """:meth:`shift_at_start` of one block."""
        if b > 0:
            return self.l_shift[b - 1] + self.l_at_start[b] - self.l_at_end[b - 1]
        return self.l_at_start[b]

    def _src_at_start(self, b: int) -> int:
        """The source of :meth:`shift_at_start_one` (the block before's)."""
        return self.l_src[b - 1] if b > 0 else _NO_SOURCE

    def host_shift_one(self, t: float, sim: Meets) -> tuple[float, int]:
        """:meth:`host_shift` of one time."""
        removed = self.removed_one(t) if self.l_r_start else 0.0  # most ranks of most scenarios: none
        j = bisect_right(self.l_start, t) - 1
        if j < 0:
            return removed, _NO_SOURCE
        if 0 <= self.b_busy <= j:
            # asked for while the block ``b_busy`` is re-timed, by work it awaits, launched in it
            # (another thread's launch in the wait, an awaited task of no length, ended when it
            # was launched): launched before the block let the host go, as the host reached it
            return self.shift_at_start_one(self.b_busy), self._src_at_start(self.b_busy)
        end = self.l_end[j]
        resumed = t >= end or (self.l_waited[j] and t >= self.l_drain[j])
        through = j if resumed else j - 1
        if through >= self.b_done:  # else re-timed already (the common case): no call
            self.process_through(through, sim)
        if t >= end:
            return self.l_shift[j] + removed - self.l_at_end[j], self.l_src[j]
        before = self.shift_at_start_one(j)
        if self.l_comp_end and self.l_coll[j]:
            return self._after_completion_one(t, j, before, sim)
        return (self.l_shift[j], self.l_src[j]) if resumed else (before, self._src_at_start(j))

    def _after_completion_one(self, t: float, b: int, before: float, sim: Meets) -> tuple[float, int]:
        """:meth:`_after_completion` of one time inside block ``b`` (a wait on collectives)."""
        c = bisect_right(self.l_comp_end, t) - 1
        while c >= 0 and self.l_comp_lch[c] >= t:  # launched at ``t`` or later: not yet released it
            c -= 1
        if c < 0 or self.l_comp_end[c] < self.l_start[b]:
            return before, self._src_at_start(b)
        k = int(self.comp_task[c])
        self.ensure_free(k, sim)
        gained = self.plan.end.item(k) - self.e_new.item(k)
        reach = before + (t - self.l_start[b])
        return (reach, self._src_at_start(b)) if reach <= gained else (gained, self.e_src.item(k))

    def launch_one(self, k: int, sim: Meets) -> tuple[float, int]:
        """:meth:`_launch_new` of one task."""
        if self.first_unlaunched.item(k):
            return self.plan.start.item(k) - self.delay.item(k), _NO_SOURCE
        if not self.launched.item(k):
            return _NEVER, _NO_SOURCE
        lch: float = self.lch.item(k)
        shift, src = self.host_shift_one(lch, sim)
        return lch - shift, src

    def _after_completion(
        self, t: np.ndarray, b: np.ndarray, before: np.ndarray, before_src: np.ndarray, sim: Meets
    ) -> tuple[np.ndarray, np.ndarray]:
        """In a wait on collectives, the host goes on after each collective that completes in it
        (DDP copies a bucket back as its all-reduce ends): at ``t``, it is as much earlier as the
        last completion before ``t`` of a collective launched before ``t`` (and no earlier than it
        reached the wait). A completion read on another rank's clock may come before its launch
        here: at its own launch, such a collective would wait on itself."""
        c = np.searchsorted(self.comp_end, t, side="right") - 1
        late = (c >= 0) & (self.comp_lch[np.maximum(c, 0)] >= t)  # launched at ``t`` or later
        while late.any():
            c = np.where(late, c - 1, c)
            late = (c >= 0) & (self.comp_lch[np.maximum(c, 0)] >= t)
        valid = (c >= 0) & (self.comp_end[np.maximum(c, 0)] >= self.b_start[b]) & self.b_coll[b] & (t < self.b_end[b])
        out = before.copy()
        src = before_src.copy()
        for i in np.unique(c[valid]):
            k = int(self.comp_task[i])
            self.ensure_free(k, sim)
            gained = float(self.plan.end[k] - self.e_new[k])
            hit = valid & (c == i)
            # it goes on at max(reaching the wait, the completion + the time since it): earlier by
            # the completion's gain, or by as much as it could reach the wait sooner, the smaller
            reach = before[hit] + (t[hit] - self.b_start[b[hit]])
            out[hit] = np.minimum(reach, gained)
            if self.track:
                src[hit] = np.where(reach <= gained, before_src[hit], self.e_src[k])
        return out, src

    def shift_at_start(self, b: np.ndarray) -> np.ndarray:
        """How much earlier the host reaches the start of each block ``b`` (the blocks before it re-timed)."""
        prev = np.maximum(b - 1, 0)
        since = self.b_shift[prev] + self.r_at_start[b] - self.r_at_end[prev]
        shift: np.ndarray = np.where(b > 0, since, self.r_at_start[b])
        return shift

    def blocks_until(self, t: float, sim: Meets) -> None:
        """Re-time every block that ends by ``t``."""
        self.process_through(bisect_right(self.l_end, t) - 1, sim)

    def process_through(self, last: int, sim: Meets) -> None:
        """Re-time blocks up to index ``last``, in order."""
        if last < self.b_done:
            return
        last = min(last, len(self.l_end) - 1)
        while self.b_done <= last:
            self.block(sim)

    def block(self, sim: Meets) -> None:
        """Re-time the next block: when it returns, from its start and the awaited work."""
        b = self.b_done  # the shift at its start comes from the blocks before it
        self.b_busy = b
        start_new = self.l_start[b] - self.shift_at_start_one(b)
        drain, drain_src = _NEVER, _NO_SOURCE
        e_new, e_src, done = self.e_new, self.e_src, self.done
        for j, last, k in self.l_awaited[b]:
            if done[j] <= last:  # else re-timed already: no call
                self.stream_until(j, last, sim)
            if e_new.item(k) > drain:
                drain, drain_src = e_new.item(k), e_src.item(k)
        for k in self.l_awaited_free[b]:
            self.ensure_free(k, sim)
            if e_new.item(k) > drain:
                drain, drain_src = e_new.item(k), e_src.item(k)
        ret, src = start_new + self.l_own[b], self._src_at_start(b)
        if (not self.no_wait or self.l_kept[b]) and drain + self.l_tail[b] > ret:  # it waits, and on the work
            ret, src = drain + self.l_tail[b], drain_src
        shift = self.l_end[b] - ret
        self.b_shift[b] = shift
        self.l_shift[b] = shift
        self.b_src[b] = src
        self.l_src[b] = src
        self.b_done = b + 1
        self.b_busy = -1

    # -- the streams ---------------------------------------------------------------------------

    def stream_until(self, j: int, last: int, sim: Meets) -> None:
        """Re-time stream ``j`` through its task at place ``last``."""
        idx, stops = self.streams[j], self.stops[j]
        while self.done[j] <= last:
            lo = self.done[j]
            s = bisect_left(stops, lo)
            hi = min(stops[s], last + 1) if s < len(stops) else last + 1  # the next stop, or past the last
            if hi > lo:
                self._run(j, lo, hi, sim)
            if hi > last:
                continue
            k = idx.item(hi)
            inst = self.plan.instance.item(k)
            if inst < 0:
                self._one(j, hi, sim)
                continue
            sim.instance(inst)
            if self.done[j] == hi:  # re-entered before the instance could finish: keep its shift
                self._collective_alone(k, sim)
                self.done[j] = hi + 1

    def _start_after(self, k: int, launch: tuple[float, int], sim: Meets) -> tuple[float, int]:
        """When task ``k`` starts: after its launch (``launch``: the time and its source), its
        predecessor on its stream and the task it waits on, plus its delay; and its source."""
        a, a_src = launch
        j, place = self.stream_of.item(k), self.place.item(k)
        dep, dep_src = self._dep_end(k, sim)
        prev, prev_src = self._prev_end(j, place) - self.overlap.item(k), self._prev_src(j, place)
        start, src = a, a_src  # the first of equal times, as ``max`` keeps
        if prev > start:
            start, src = prev, prev_src
        if dep > start:
            start, src = dep, dep_src
        return start + self.delay.item(k), src

    def _one(self, j: int, place: int, sim: Meets) -> None:
        """Re-time the task at ``place`` of stream ``j``, which waits on another stream's task."""
        k = self.streams[j].item(place)
        self._dep_end(k, sim)
        if self.done[j] != place:  # re-timed meanwhile (through its dependency's stream)
            return
        start, src = self._start_after(k, self.launch_one(k, sim), sim)
        self.s_new[k], self.e_new[k] = start, start + self.dur.item(k)
        self.e_src[k] = src
        self.done[j] = place + 1

    def _launch_new(self, k: np.ndarray, sim: Meets) -> tuple[np.ndarray, np.ndarray]:
        """When the tasks ``k`` could start as far as their launch goes (-inf: not launched),
        and the instance each hangs on."""
        if k.size <= _FEW:
            pairs = [self.launch_one(int(x), sim) for x in k]
            src = np.array([s for _, s in pairs], dtype=np.int64) if self.track else _UNTRACKED
            return np.array([v for v, _ in pairs], dtype=float), src
        lch = self.lch[k]
        launched = self.launched[k]
        shift, src = self.host_shift(np.where(launched, lch, 0.0), sim)
        out = np.where(launched, lch - shift, _NEVER)
        first = self.first_unlaunched[k]
        new = np.where(first, self.plan.start[k] - self.delay[k], out)
        return new, np.where(launched & ~first, src, _NO_SOURCE) if self.track else _UNTRACKED

    def _prev_end(self, j: int, place: int) -> float:
        if place == 0:
            return _NEVER
        end: float = self.e_new.item(self.streams[j].item(place - 1))
        return end

    def _prev_src(self, j: int, place: int) -> int:
        if place == 0:
            return _NO_SOURCE
        return self.e_src.item(self.streams[j].item(place - 1))

    def _run(self, j: int, lo: int, hi: int, sim: Meets) -> None:
        """Re-time tasks ``lo:hi`` of stream ``j`` (no collective among them) at once."""
        k = self.streams[j][lo:hi]
        if k.size <= _FEW:
            self._run_few(j, k.tolist(), sim)
            self.done[j] = hi
            return
        a, a_src = self._launch_new(k, sim)
        d, delay, ov = self.dur[k], self.delay[k], self.overlap[k]
        c = delay + d - ov
        b = a + delay + d
        cum = np.cumsum(c)
        carry = self._prev_end(j, lo)
        x = b - cum
        most = np.maximum.accumulate(x)
        e = cum + np.maximum(carry, most)
        self.e_new[k] = e
        self.s_new[k] = e - d
        if self.track:  # the carry where it is the larger, else the last task that set the maximum
            which = np.maximum.accumulate(np.where(x >= most, np.arange(x.size), 0))
            self.e_src[k] = np.where(carry >= most, self._prev_src(j, lo), a_src[which])
        self.done[j] = hi

    def _run_few(self, j: int, ks: list[int], sim: Meets) -> None:
        """:meth:`_run` of a few tasks ``ks``, one at a time: the same sums in the same order."""
        launches = [self.launch_one(k, sim) for k in ks]
        place = self.place.item(ks[0])
        carry, carry_src = self._prev_end(j, place), self._prev_src(j, place)
        cum, most, most_src = 0.0, _NEVER, _NO_SOURCE
        dur, delay, overlap = self.dur, self.delay, self.overlap
        s_new, e_new, e_src = self.s_new, self.e_new, self.e_src
        for k, (a, a_src) in zip(ks, launches, strict=True):
            d, w = dur.item(k), delay.item(k)
            cum += w + d - overlap.item(k)
            x = a + w + d - cum
            if x >= most:  # as ``_run``: the last that sets the maximum
                most, most_src = x, a_src
            if carry >= most:
                e, src = cum + carry, carry_src
            else:
                e, src = cum + most, most_src
            e_new[k] = e
            s_new[k] = e - d
            e_src[k] = src

    def collective_arrival(self, k: int, sim: Meets) -> tuple[float, int, float, int]:
        """Re-time a collective's start (its stream re-timed up to it): (start, the instance it
        hangs on, arrival, the instance that hangs on)."""
        a, a_src = self.launch_one(k, sim)
        free = self.free.item(k)
        if free:
            start, src = a + self.delay.item(k), a_src
        else:
            j, place = self.stream_of.item(k), self.place.item(k)
            self.stream_until(j, place - 1, sim)
            start, src = self._start_after(k, (a, a_src), sim)
        # a host collective arrives when its call enqueues it; a kernel when it starts
        arrival, arrival_src = (a, a_src) if free and self.launched.item(k) else (start, src)
        self.arrived[k] = arrival
        self.arrived_src[k] = arrival_src
        return start, src, arrival, arrival_src

    def arrival_of(self, k: int) -> tuple[float, int]:
        """Collective ``k``'s arrival and its source as re-timed, else as recorded (no source)."""
        return self.arrived.get(k, float(self.plan.arrival[k])), self.arrived_src.get(k, _NO_SOURCE)

    def finish_collective(self, k: int, start: float, start_src: int, last: tuple[float, int], last_old: float) -> None:
        """A collective's end: when the last rank arrives (``last``: its time, and the instance
        that time hangs on), plus its own tail."""
        p = self.plan
        tail = p.end.item(k) - max(p.start.item(k), last_old)
        if self.hide:
            tail = min(tail, 0.0)
        last_new, last_src = last
        end, src = (start + tail, start_src) if start >= last_new else (last_new + tail, last_src)
        if start > end:  # never before it starts
            end, src = start, start_src
        self.s_new[k], self.e_new[k] = start, end
        self.e_src[k] = src
        if not self.free.item(k):
            j = self.stream_of.item(k)
            self.done[j] = max(self.done[j], self.place.item(k) + 1)

    def ensure_free(self, k: int, sim: Meets) -> None:
        """Re-time host collective ``k`` (with its instance on every rank), if not yet."""
        if not isnan(self.e_new.item(k)):
            return
        inst = self.plan.instance.item(k)
        if inst >= 0:
            sim.instance(inst)
        if isnan(self.e_new.item(k)):  # its instance is being re-timed (a cycle), or it has none
            self._collective_alone(k, sim)

    def _collective_alone(self, k: int, sim: Meets) -> None:
        """A collective reached again while its instance is being re-timed (a cycle through
        other ranks): its wait kept, the last arrival moved as much as its own arrival."""
        start, start_src, arrival, arrival_src = self.collective_arrival(k, sim)
        old_last = sim.last_old.get(int(self.plan.instance[k]), float(self.plan.arrival[k]))
        last = old_last - (float(self.plan.arrival[k]) - arrival), arrival_src
        self.finish_collective(k, start, start_src, last, old_last)

    # -- the end -------------------------------------------------------------------------------

    def gained(self, sim: Meets) -> float:
        """How much earlier the rank's measured time ends."""
        p = self.plan
        if p.device_end and p.start.size:
            for j, idx in enumerate(self.streams):
                self.stream_until(j, idx.size - 1, sim)
            for k in self.comp_task:
                self.ensure_free(int(k), sim)
            inside = p.end <= p.window_end + AWAIT_TOLERANCE_NS
            if not inside.any():
                return 0.0
            last = int(np.argmax(np.where(inside, p.end, _NEVER)))
            return float(p.end[last] - self.e_new[last])
        self.blocks_until(p.window_end, sim)
        return float(self.host_shift(np.array([p.window_end]), sim)[0][0])


class _NativeRank(_Rank):
    """:class:`_Rank` whose re-timing runs in C (``_retime_core.Core``): its one-at-a-time
    paths, on the same arrays, in the same order, so the same times to the last bit
    (``tests/analyzers/test_retime_core.py``); the methods the ranks' meetings call
    (:class:`Simulation`, ``retime_ranks._Alone``) and :meth:`gained` are the only ways in."""

    #: the plan, its shape as the core holds it, and its recorded durations: once per rank
    #: (passed on with the rest of the shape to the same plan's rank under the next scenario)
    _native_shape: tuple[RankPlan, Shape, np.ndarray] | None = None
    _LISTS: ClassVar[bool] = False  # the core reads the packed arrays

    def _scenario(self, scenario: Scenario) -> None:
        """What ``scenario`` changes, and the state the core writes (the Python paths' own
        state, their lists, is not made: nothing here reads it)."""
        assert _core is not None
        plan = self.plan
        n, nb = plan.start.size, self.b_start.size
        rem = scenario.removals.get(plan.rank, Removal())
        if rem.start.size == 0:
            self.__dict__.update(self._unremoved())
        else:
            self._removal_kept(rem)  # the core reads the arrays only
        shape = self._native_shape
        if shape is None or shape[0] is not plan:  # the shape's, once per rank (``like`` passes it on)
            shape = (plan, _core.Shape(self.packed()), np.ascontiguousarray(plan.end - plan.start, dtype=np.float64))
            self._native_shape = shape
        new = scenario.durations.get(plan.rank)
        dur = shape[2] if new is None else new.applied(shape[2])
        self.dur = np.ascontiguousarray(dur, dtype=np.float64)
        self.hide = scenario.hide_collectives
        self.no_wait = scenario.no_wait_blocks
        self.s_new = np.full(n, np.nan)
        self.e_new = np.full(n, np.nan)
        self.e_src = np.full(n, _NO_SOURCE, dtype=np.int64)
        self.arrived_at = np.full(n, np.nan)  # each collective's arrival, re-timed
        self.arrived_from = np.full(n, _NOT_ARRIVED, dtype=np.int64)  # and its source (none yet)
        self.b_shift = np.zeros(nb)
        self.b_src = np.full(nb, _NO_SOURCE, dtype=np.int64)
        done = np.zeros(len(self.streams), dtype=np.int64)
        self.done = done  # type: ignore[assignment]  # the same counts, as an array the core writes
        removal = (self.r_start, self.r_end, self.r_rate, self.r_cum, self.r_at_start, self.r_at_end)
        self.core: Core = _core.Core(
            shape[1],
            (self.dur, *(np.ascontiguousarray(a, dtype=np.float64) for a in removal)),
            (self.s_new, self.e_new, self.e_src, self.b_shift, self.b_src, done, self.arrived_at, self.arrived_from),
            hide=self.hide,
            no_wait=self.no_wait,
            track=self.track,
            window_end=float(plan.window_end),
            device_end=bool(plan.device_end),
            tolerance=AWAIT_TOLERANCE_NS,
        )

    def blocks_until(self, t: float, sim: Meets) -> None:
        self.core.blocks_until(t, sim)

    def stream_until(self, j: int, last: int, sim: Meets) -> None:
        self.core.stream_until(j, last, sim)

    def host_shift(self, t: np.ndarray, sim: Meets) -> tuple[np.ndarray, np.ndarray]:
        pairs = [self.core.host_shift_one(float(x), sim) for x in t]
        return np.array([v for v, _ in pairs], dtype=float), np.array([s for _, s in pairs], dtype=np.int64)

    def collective_arrival(self, k: int, sim: Meets) -> tuple[float, int, float, int]:
        return self.core.collective_arrival(k, sim)

    def arrival_of(self, k: int) -> tuple[float, int]:
        src = int(self.arrived_from[k])
        if src == _NOT_ARRIVED:
            return float(self.plan.arrival[k]), _NO_SOURCE
        return float(self.arrived_at[k]), src

    def finish_collective(self, k: int, start: float, start_src: int, last: tuple[float, int], last_old: float) -> None:
        self.core.finish_collective(k, start, start_src, last, last_old)

    def ensure_free(self, k: int, sim: Meets) -> None:
        self.core.ensure_free(k, sim)

    def gained(self, sim: Meets) -> float:
        return self.core.gained(sim)


def new_rank(plan: RankPlan, scenario: Scenario, like: _Rank | None = None, *, track: bool = False) -> _Rank:
    """A rank's re-timing under ``scenario`` (see :class:`_Rank`), in C where :data:`NATIVE`."""
    if NATIVE:
        return _NativeRank(plan, scenario, like, track=track)
    return _Rank(plan, scenario, like, track=track)


class Simulation:
    """Every rank re-timed under one scenario."""

    def __init__(self, plans: list[RankPlan], scenario: Scenario, like: Simulation | None = None) -> None:
        """``like``: a simulation of the same plans under another scenario, whose ranks'
        shapes are reused (see :class:`_Rank`)."""
        before: dict[int, _Rank] = like.ranks if like is not None else {}
        self.plans = plans
        self.ranks: dict[int, _Rank] = {p.rank: new_rank(p, scenario, before.get(p.rank)) for p in plans}
        same_plans = len(before) == len(plans) and all(p.rank in before and before[p.rank].plan is p for p in plans)
        #: instance -> [(rank, task)], and its last arrival as recorded (what no scenario changes):
        #: worked out where the ranks are met in Python (:attr:`members`), else never
        self._members: tuple[dict[int, list[tuple[int, int]]], dict[int, float]] | None = None
        #: the meetings as ``_retime_core.simulate`` reads them (:meth:`_meetings`), once worked out
        self._native: tuple[np.ndarray, ...] | None = None
        if like is not None and same_plans:
            self._members, self._native = like._members, like._native
        self.finished: set[int] = set()
        self.in_progress: set[int] = set()

    @property
    def members(self) -> dict[int, list[tuple[int, int]]]:
        """Each instance's members: (rank, task), in the plans' order."""
        return self._by_instance()[0]

    @property
    def last_old(self) -> dict[int, float]:
        """Each instance's last arrival as recorded (what no scenario changes)."""
        return self._by_instance()[1]

    def _by_instance(self) -> tuple[dict[int, list[tuple[int, int]]], dict[int, float]]:
        if self._members is None:
            members: dict[int, list[tuple[int, int]]] = {}
            last_old: dict[int, float] = {}
            for p in self.plans:
                for k in np.flatnonzero(p.instance >= 0):
                    i = int(p.instance[k])
                    members.setdefault(i, []).append((p.rank, int(k)))
                    last_old[i] = max(last_old.get(i, _NEVER), float(p.arrival[k]))
            self._members = members, last_old
        return self._members

    def instance(self, i: int) -> None:
        """Re-time collective instance ``i`` on every rank that holds it."""
        if i in self.finished or i in self.in_progress:
            return
        self.in_progress.add(i)
        starts = []
        last_new = _NEVER
        for rank, k in self.members[i]:
            r = self.ranks[rank]
            if not isnan(r.e_new.item(k)):
                # re-timed alone meanwhile (reached again through a cycle across ranks): it
                # still arrives when it did, and the others wait for it
                last_new = max(last_new, r.arrival_of(k)[0])
                continue
            start, start_src, arrival, _ = r.collective_arrival(k, self)
            starts.append((r, k, start, start_src, arrival))
        last_new = max(last_new, max((a for *_, a in starts), default=_NEVER))
        for r, k, start, start_src, _ in starts:
            if isnan(r.e_new.item(k)):
                r.finish_collective(k, start, start_src, (last_new, i), self.last_old[i])
        self.in_progress.discard(i)
        self.finished.add(i)

    def run(self) -> dict[int, float]:
        """Each rank's gain: how much earlier its measured time ends, ns."""
        ranks = list(self.ranks.values())
        if ranks and all(isinstance(r, _NativeRank) for r in ranks):
            assert _core is not None
            gains = _core.simulate(tuple(r.core for r in ranks if isinstance(r, _NativeRank)), *self._meetings())
            return dict(zip(self.ranks, gains, strict=True))
        return self.visit()

    def visit(self) -> dict[int, float]:
        """:meth:`run` in Python, whatever the ranks (ranks in C are met here one call at a time)."""
        events: list[tuple[float, int, int, int]] = []  # (time, kind, rank or instance, order)
        for rank, r in self.ranks.items():
            for b, t in enumerate(r.b_end):
                events.append((float(t), 0, rank, b))
        for i, members in self.members.items():
            events.append((self._first_end(members), 1, i, 0))
        heapq.heapify(events)
        while events:
            _, kind, who, b = heapq.heappop(events)
            if kind == 0:
                self.ranks[who].blocks_until(float(self.ranks[who].b_end[b]), self)
            else:
                self.instance(who)
        return {rank: r.gained(self) for rank, r in self.ranks.items()}

    def _first_end(self, members: list[tuple[int, int]]) -> float:
        """An instance's first end as recorded, on any rank."""
        return min(float(self.ranks[rank].plan.end[k]) for rank, k in members)

    def _meetings(self) -> tuple[np.ndarray, ...]:
        """What :meth:`run` visits and in which order (:func:`meetings`), once per plans."""
        if self._native is None:
            at = {rank: x for x, rank in enumerate(self.ranks)}
            blocks = [(rank, r.b_end) for rank, r in self.ranks.items()]
            held = None if self._members is not None else _held(self.plans, at)
            if held is not None:
                self._native = meetings_of(held, blocks)
            else:
                self._native = meetings(
                    {i: [(at[rank], k) for rank, k in ms] for i, ms in self.members.items()},
                    self.last_old,
                    {i: self._first_end(ms) for i, ms in self.members.items()},
                    blocks,
                )
        return self._native


def _held(plans: list[RankPlan], at: dict[int, int]) -> tuple[np.ndarray, ...] | None:
    """What :func:`meetings` reads of the instances, from the plans at once (the ranks x
    instances of a thousand ranks in Python loops took seconds and a few hundred MB): the
    instances by id, each one's members (``at``: the index of each rank; in the plans' order,
    then the tasks'), last arrival and first end as recorded; None where a time is not a
    number (whose place in a Python ``max`` decides: the loops do)."""
    ids, offsets, plan_of, task, last, first = recorded_instances(plans)
    if np.isnan(last).any() or np.isnan(first).any():  # a time not a number propagates to its instance's
        return None
    x = np.array([at[p.rank] for p in plans], dtype=np.int64)[plan_of]
    return ids, offsets, x, task, last, first


def recorded_instances(plans: list[RankPlan]) -> tuple[np.ndarray, ...]:
    """Every plan's collective tasks by instance, then plan, then task: the instances' ids, where
    each one's members start and end in the next two arrays (``offsets``), each member's plan
    (its index in ``plans``) and task, and each instance's last arrival and first end as
    recorded (NaN where one of its times is not a number)."""
    tasks = [np.flatnonzero(p.instance >= 0) for p in plans]
    task = np.concatenate([np.empty(0, dtype=np.int64), *tasks]).astype(np.int64)
    plan_of = np.repeat(np.arange(len(plans), dtype=np.int64), [t.size for t in tasks])
    held = list(zip(plans, tasks, strict=True))
    inst = np.concatenate([np.empty(0, dtype=np.int64), *(p.instance[t] for p, t in held)])
    arrival = np.concatenate([np.empty(0), *(p.arrival[t] for p, t in held)]).astype(np.float64)
    end = np.concatenate([np.empty(0), *(p.end[t] for p, t in held)]).astype(np.float64)
    order = np.argsort(inst, kind="stable")  # by instance, then as the plans hold them
    ids, counts = np.unique(inst[order], return_counts=True)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    starts = offsets[:-1]
    last = np.maximum.reduceat(arrival[order], starts) if ids.size else np.empty(0)
    first = np.minimum.reduceat(end[order], starts) if ids.size else np.empty(0)
    return ids.astype(np.int64), offsets, plan_of[order], task[order], last, first


def meetings(
    members: dict[int, list[tuple[int, int]]],
    last_old: dict[int, float],
    first_end: dict[int, float],
    blocks: list[tuple[int, np.ndarray]],
) -> tuple[np.ndarray, ...]:
    """The meetings of ranks held in C, as ``_retime_core.simulate`` and ``alone`` read them
    (their arguments after the ranks; ``alone`` takes the last arrivals given after
    ``last_old``): the instances by id, each one's members (an index into the ranks and the
    task, in ``members``' order) and last arrival as recorded; the blocks (``blocks``: each
    rank's number and block ends, in the ranks' order) by their ends, then rank number, then
    index; the instances by their first ends, then id: the order in which :meth:`Simulation.run`'s
    heap pops them."""
    ids = sorted(members)
    held = [members[i] for i in ids]
    held_a = (
        np.array(ids, dtype=np.int64),
        np.concatenate([[0], np.cumsum([len(ms) for ms in held], dtype=np.int64)]).astype(np.int64),
        np.array([x for ms in held for x, _ in ms], dtype=np.int64),
        np.array([k for ms in held for _, k in ms], dtype=np.int64),
        np.array([last_old[i] for i in ids], dtype=np.float64),
        np.array([first_end[i] for i in ids], dtype=np.float64),
    )
    return meetings_of(held_a, blocks)


def meetings_of(held: tuple[np.ndarray, ...], blocks: list[tuple[int, np.ndarray]]) -> tuple[np.ndarray, ...]:
    """:func:`meetings` of the instances as arrays (``held``): their ids, where each one's
    members start and end in the next two (their ranks' indexes and tasks), their last arrivals
    and first ends."""
    ids_a, offsets, member_x, member_k, last, first = held
    i_order = np.lexsort((ids_a, first)).astype(np.int64)
    ends = [e for _, e in blocks]
    ev_core = np.repeat(np.arange(len(ends), dtype=np.int64), [e.size for e in ends])
    ev_block = np.concatenate([np.arange(e.size, dtype=np.int64) for e in ends]) if ends else ev_core
    t = np.concatenate(ends) if ends else np.empty(0)
    visits = np.lexsort((ev_block, np.array([rank for rank, _ in blocks], dtype=np.int64)[ev_core], t))
    return (
        ids_a,
        offsets,
        member_x,
        member_k,
        last,
        ev_core[visits],
        ev_block[visits],
        i_order,
        np.ascontiguousarray(first[i_order]),
    )


def simulate(plans: list[RankPlan], scenario: Scenario) -> dict[int, float]:
    """Each rank's gain under ``scenario``: how much earlier its measured time ends, ns."""
    return Simulation(plans, scenario).run()


class Shapes:
    """The ranks' shapes of one run's plans in this process, kept from one :func:`simulate_each`
    of them to the next (the verdict's gains, then their explanation, each worked every rank's
    shape out again: a fifth of the re-timing at 1,024 ranks): the last :class:`Simulation`,
    whose ranks the next one starts from. Pickled empty: a child that re-times some of the
    scenarios works its own out."""

    def __init__(self) -> None:
        self.last: Simulation | None = None

    def __getstate__(self) -> dict[str, object]:
        return {}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.last = None


def simulate_each(
    plans: list[RankPlan], scenarios: dict[K, Scenario], *, shapes: Shapes | None = None
) -> dict[K, dict[int, float]]:
    """:func:`simulate` under each of ``scenarios``, the ranks' shapes worked out once (and kept
    in ``shapes`` for the next call on the same plans)."""
    out: dict[K, dict[int, float]] = {}
    last: Simulation | None = None
    if shapes is not None:
        last, shapes.last = shapes.last, None  # held here alone: let go as the next is made
    for key, scenario in scenarios.items():
        last = Simulation(plans, scenario, last)
        out[key] = last.run()
        for rank in last.ranks.values():  # its shape alone is read again, by the next one
            rank.release()
    if shapes is not None and last is not None:
        shapes.last = last
    return out
