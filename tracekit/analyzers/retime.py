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
from typing import Final

import numpy as np

from tracekit.analyzers.retime_plan import RankPlan, Removal, Scenario

__all__ = ["AWAIT_TOLERANCE_NS", "DEPENDENCY_NS", "RankPlan", "Removal", "Scenario", "Simulation", "simulate"]

#: A time that holds nothing back.
_NEVER: Final = -np.inf
#: A task that started this long after its launch and its predecessor, as a task of another
#: stream ended, waited on it (the idle model's switch time: ``tracekit.analyzers.idle.SWITCH_NS``).
DEPENDENCY_NS: Final = 20_000.0
#: How far past a block's end an awaited task may end (clock rounding between host and device).
AWAIT_TOLERANCE_NS: Final = 2_000.0


class _Rank:
    """One rank's re-timing state."""

    def __init__(self, plan: RankPlan, scenario: Scenario) -> None:
        self.plan = plan
        n = plan.start.size
        rem = scenario.removals.get(plan.rank, Removal())
        order = np.argsort(rem.start, kind="stable")
        self.r_start, self.r_end, self.r_rate = rem.start[order], rem.end[order], rem.rate[order]
        self.r_cum = np.concatenate([[0.0], np.cumsum((self.r_end - self.r_start) * self.r_rate)])
        new = scenario.durations.get(plan.rank)
        dur = plan.end - plan.start
        self.dur = dur if new is None else np.where(np.isnan(new), dur, new)
        self.hide = scenario.hide_collectives
        self.no_wait = scenario.no_wait_blocks
        self.s_new = np.full(n, np.nan)
        self.e_new = np.full(n, np.nan)
        # streams: task indexes in stream order, and each task's place in its stream
        self.streams: list[np.ndarray] = []
        self.place = np.zeros(n, dtype=np.int64)
        self.stream_of = np.zeros(n, dtype=np.int64)
        # host collectives (``arrival_is_launch``) are free: a backend's pool of workers runs
        # them, overlapping (gloo's spans do), so no stream order holds them back
        self.free = plan.arrival_is_launch.astype(bool)
        for sid in np.unique(plan.stream[~self.free]):
            idx = np.flatnonzero((plan.stream == sid) & ~self.free)
            idx = idx[np.argsort(plan.start[idx], kind="stable")]
            self.place[idx] = np.arange(idx.size)
            self.stream_of[idx] = len(self.streams)
            self.streams.append(idx)
        self.done = [0] * len(self.streams)  # tasks re-timed, per stream
        self._delays()
        self._dependencies()
        self._blocks()

    def _delays(self) -> None:
        """Each task's launch (no later than its start), its predecessor's overlap into it and
        its delay beyond both, measured."""
        p = self.plan
        n = p.start.size
        self.launched = ~np.isnan(p.launch)
        self.lch = np.where(self.launched, np.minimum(np.nan_to_num(p.launch, nan=0.0), p.start), p.start)
        prev_end = np.full(n, _NEVER)
        for idx in self.streams:
            if idx.size > 1:
                prev_end[idx[1:]] = p.end[idx[:-1]]
        self.overlap = np.maximum(0.0, prev_end - p.start)  # -inf - x clips to 0
        anchor = np.maximum(np.where(self.launched, self.lch, _NEVER), prev_end - self.overlap)
        # a first task launched by no one is anchored where it started
        anchor = np.where(np.isneginf(anchor), p.start, anchor)
        self.delay = p.start - anchor
        self.first_unlaunched = ~self.launched & np.isneginf(prev_end)

    def _dependencies(self) -> None:
        """The waits on another stream the trace shows by their timing: a task that started
        more than :data:`DEPENDENCY_NS` after both its launch and its predecessor, within
        :data:`DEPENDENCY_NS` of a task of another stream ending, waited on that task (an event
        or stream wait: the copy or collective whose result it reads). It then starts no
        sooner than that task ends, re-timed; its delay is what it waited beyond that."""
        p = self.plan
        n = p.start.size
        self.dep = np.full(n, -1, dtype=np.int64)
        self.stops: dict[int, np.ndarray] = {}  # per stream (:meth:`stream_until`)
        fixed = np.flatnonzero(~self.free)
        waited = fixed[self.delay[fixed] > DEPENDENCY_NS]
        if fixed.size < 2 or waited.size == 0:
            return
        order = fixed[np.argsort(p.end[fixed], kind="stable")]
        ends = p.end[order]
        i = np.searchsorted(ends, p.start[waited], side="right") - 1
        m = order[np.maximum(i, 0)]
        ok = (i >= 0) & (ends[np.maximum(i, 0)] >= p.start[waited] - DEPENDENCY_NS) & (p.stream[m] != p.stream[waited])
        k = waited[ok]
        self.dep[k] = m[ok]
        self.delay[k] = np.minimum(self.delay[k], p.start[k] - p.end[m[ok]])

    def _dep_end(self, k: int, sim: Simulation) -> float:
        """When the task ``k`` waits on ends, re-timed (-inf: it waits on none)."""
        m = int(self.dep[k])
        if m < 0:
            return _NEVER
        if np.isnan(self.e_new[m]):
            self.stream_until(int(self.stream_of[m]), int(self.place[m]), sim)
        return float(self.e_new[m])

    def _blocks(self) -> None:
        """The blocks made disjoint (overlapping ones merged), each one's awaited task per
        stream, and its own cost and tail, measured."""
        p = self.plan
        until = p.block_start if p.block_until is None else p.block_until
        on_coll = np.zeros(p.block_start.size, dtype=bool) if p.block_on_collectives is None else p.block_on_collectives
        order = np.argsort(p.block_start, kind="stable")
        starts: list[float] = []
        ends: list[float] = []
        untils: list[float] = []
        colls: list[bool] = []
        for b in order:
            if starts and p.block_start[b] < ends[-1]:  # overlaps the previous: one wait
                ends[-1] = max(ends[-1], float(p.block_end[b]))
                untils[-1] = max(untils[-1], float(until[b]))
                colls[-1] = colls[-1] or bool(on_coll[b])
                continue
            starts.append(float(p.block_start[b]))
            ends.append(float(p.block_end[b]))
            untils.append(float(until[b]))
            colls.append(bool(on_coll[b]))
        self.b_start, self.b_end = np.array(starts), np.array(ends)
        self.b_coll = np.array(colls, dtype=bool)
        nb = self.b_start.size
        # the host collectives in end order: a thread waiting on them goes on after each one
        coll = np.flatnonzero(self.free)
        completion = p.end if p.done is None else p.done
        coll = coll[np.argsort(completion[coll], kind="stable")]
        self.comp_task, self.comp_end = coll, completion[coll]
        # a wait awaits the host collectives launched by its end that completed since the
        # previous wait ended (those before it, that one awaited)
        since = np.concatenate([[_NEVER], self.b_end[:-1]]) if nb else self.b_end
        lo = np.searchsorted(self.comp_end, since, side="right")
        hi = np.searchsorted(self.comp_end, self.b_end + AWAIT_TOLERANCE_NS, side="right")
        self.awaited_free = [
            coll[lo[b] : hi[b]][self.lch[coll[lo[b] : hi[b]]] <= untils[b]] if colls[b] else coll[:0] for b in range(nb)
        ]
        drain = np.array([p.end[k].max() if k.size else _NEVER for k in self.awaited_free], dtype=float)
        self.awaited = np.full((nb, len(self.streams)), -1, dtype=np.int64)
        for j, idx in enumerate(self.streams):
            launches = np.maximum.accumulate(self.lch[idx]) if idx.size else self.lch[idx]
            ends_j = np.maximum.accumulate(p.end[idx]) if idx.size else p.end[idx]
            launched_before = np.searchsorted(launches, np.array(untils), side="right") - 1
            ended_by = np.searchsorted(ends_j, self.b_end + AWAIT_TOLERANCE_NS, side="right") - 1
            # a wait on collectives waits for the collective backend's work only
            last = np.where(self.b_coll, -1, np.minimum(launched_before, ended_by))
            self.awaited[:, j] = last
            has = last >= 0
            drain[has] = np.maximum(drain[has], p.end[idx[last[has]]])
        self.waited = drain > self.b_start
        self.drain = drain
        self.tail = np.where(self.waited, self.b_end - drain, _NEVER)
        length = self.b_end - self.b_start
        self.own = np.where(self.waited, np.clip(self.tail, 0.0, length), length)
        self.b_shift = np.zeros(nb)
        self.b_done = 0
        # host time removed before each block's start and end (asked for at every re-timed launch)
        self.r_at_start = self.removed_before(self.b_start)
        self.r_at_end = self.removed_before(self.b_end)

    # -- the host ------------------------------------------------------------------------------

    def removed_before(self, t: np.ndarray) -> np.ndarray:
        """Host time removed before each of ``t``."""
        if self.r_start.size == 0:
            return np.zeros_like(t)
        i = np.searchsorted(self.r_end, t, side="right")
        partial = np.clip(t - self.r_start[np.minimum(i, self.r_start.size - 1)], 0.0, None)
        inside = i < self.r_start.size
        part = np.where(inside, partial * self.r_rate[np.minimum(i, self.r_start.size - 1)], 0.0)
        return self.r_cum[i] + part

    def _resumed(self, b: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Whether each ``t`` inside or after block ``b`` is after the block let the host go on
        (its end, or in a block that waited, the awaited work's end: what runs after it, on this
        thread or another, follows that work)."""
        resumed: np.ndarray = (t >= self.b_end[b]) | (self.waited[b] & (t >= self.drain[b]))
        return resumed

    def host_shift(self, t: np.ndarray, sim: Simulation) -> np.ndarray:
        """How much earlier the host is at each of ``t`` (the blocks it depends on re-timed first)."""
        removed = self.removed_before(t)
        if self.b_start.size == 0 or t.size == 0:
            return removed
        j = np.searchsorted(self.b_start, t, side="right") - 1  # the last block begun by t
        jj = np.maximum(j, 0)
        resumed = (j >= 0) & self._resumed(jj, t)
        need = int(np.max(np.where(resumed, j, j - 1)))
        self.process_through(need, sim)
        before = self.shift_at_start(jj)
        after_end = self.b_shift[jj] + removed - self.r_at_end[jj]
        inside = np.where(resumed, self.b_shift[jj], before)
        if self.comp_task.size:
            inside = np.where(self.b_coll[jj], self._after_completion(t, jj, before, sim), inside)
        shift = np.where(t >= self.b_end[jj], after_end, inside)
        return np.where(j >= 0, shift, removed)

    def _after_completion(self, t: np.ndarray, b: np.ndarray, before: np.ndarray, sim: Simulation) -> np.ndarray:
        """In a wait on collectives, the host goes on after each collective that completes in it
        (DDP copies a bucket back as its all-reduce ends): at ``t``, it is as much earlier as the
        last completion before ``t`` (and no earlier than it reached the wait)."""
        c = np.searchsorted(self.comp_end, t, side="right") - 1
        valid = (c >= 0) & (self.comp_end[np.maximum(c, 0)] >= self.b_start[b]) & self.b_coll[b] & (t < self.b_end[b])
        out = before.copy()
        for i in np.unique(c[valid]):
            k = int(self.comp_task[i])
            self.ensure_free(k, sim)
            gained = float(self.plan.end[k] - self.e_new[k])
            hit = valid & (c == i)
            # it goes on at max(reaching the wait, the completion + the time since it): earlier by
            # the completion's gain, or by as much as it could reach the wait sooner, the smaller
            out[hit] = np.minimum(before[hit] + (t[hit] - self.b_start[b[hit]]), gained)
        result: np.ndarray = out
        return result

    def shift_at_start(self, b: np.ndarray) -> np.ndarray:
        """How much earlier the host reaches the start of each block ``b`` (the blocks before it re-timed)."""
        prev = np.maximum(b - 1, 0)
        since = self.b_shift[prev] + self.r_at_start[b] - self.r_at_end[prev]
        shift: np.ndarray = np.where(b > 0, since, self.r_at_start[b])
        return shift

    def blocks_until(self, t: float, sim: Simulation) -> None:
        """Re-time every block that ends by ``t``."""
        self.process_through(int(np.searchsorted(self.b_end, t, side="right")) - 1, sim)

    def process_through(self, last: int, sim: Simulation) -> None:
        """Re-time blocks up to index ``last``, in order."""
        while self.b_done <= min(last, self.b_end.size - 1):
            self.block(sim)

    def block(self, sim: Simulation) -> None:
        """Re-time the next block: when it returns, from its start and the awaited work."""
        b = self.b_done  # the shift at its start comes from the blocks before it
        start_new = self.b_start[b] - float(self.shift_at_start(np.array([b]))[0])
        drain = _NEVER
        for j in np.flatnonzero(self.awaited[b] >= 0):
            last = int(self.awaited[b, j])
            self.stream_until(int(j), last, sim)
            drain = max(drain, float(self.e_new[self.streams[j][last]]))
        for k in self.awaited_free[b]:
            self.ensure_free(int(k), sim)
            drain = max(drain, float(self.e_new[k]))
        ret = start_new + self.own[b] if self.no_wait else max(start_new + self.own[b], drain + self.tail[b])
        self.b_shift[b] = self.b_end[b] - ret
        self.b_done = b + 1

    # -- the streams ---------------------------------------------------------------------------

    def stream_until(self, j: int, last: int, sim: Simulation) -> None:
        """Re-time stream ``j`` through its task at place ``last``."""
        idx = self.streams[j]
        if j not in self.stops:  # the places re-timed one by one, found once (not at each call: quadratic)
            self.stops[j] = np.flatnonzero((self.plan.instance[idx] >= 0) | (self.dep[idx] >= 0))
        stops = self.stops[j]
        while self.done[j] <= last:
            lo = self.done[j]
            s = int(np.searchsorted(stops, lo))
            hi = int(stops[s]) if s < stops.size and stops[s] <= last else last + 1  # the next stop, or past the last
            if hi > lo:
                self._run(j, lo, hi, sim)
            if hi > last:
                continue
            k = int(idx[hi])
            inst = int(self.plan.instance[k])
            if inst < 0:
                self._one(j, hi, sim)
                continue
            sim.instance(inst)
            if self.done[j] == hi:  # re-entered before the instance could finish: keep its shift
                self._collective_alone(k, sim)
                self.done[j] = hi + 1

    def _one(self, j: int, place: int, sim: Simulation) -> None:
        """Re-time the task at ``place`` of stream ``j``, which waits on another stream's task."""
        k = int(self.streams[j][place])
        dep = self._dep_end(k, sim)
        if self.done[j] != place:  # re-timed meanwhile (through its dependency's stream)
            return
        a = float(self._launch_new(np.array([k]), sim)[0])
        start = max(a, self._prev_end(j, place) - self.overlap[k], dep) + self.delay[k]
        self.s_new[k], self.e_new[k] = start, start + self.dur[k]
        self.done[j] = place + 1

    def _launch_new(self, k: np.ndarray, sim: Simulation) -> np.ndarray:
        """When the tasks ``k`` could start as far as their launch goes (-inf: not launched)."""
        lch = self.lch[k]
        launched = self.launched[k]
        shifted = lch - self.host_shift(np.where(launched, lch, 0.0), sim)
        out = np.where(launched, shifted, _NEVER)
        return np.where(self.first_unlaunched[k], self.plan.start[k] - self.delay[k], out)

    def _prev_end(self, j: int, place: int) -> float:
        if place == 0:
            return _NEVER
        return float(self.e_new[self.streams[j][place - 1]])

    def _run(self, j: int, lo: int, hi: int, sim: Simulation) -> None:
        """Re-time tasks ``lo:hi`` of stream ``j`` (no collective among them) at once."""
        k = self.streams[j][lo:hi]
        a = self._launch_new(k, sim)
        d, delay, ov = self.dur[k], self.delay[k], self.overlap[k]
        c = delay + d - ov
        b = a + delay + d
        cum = np.cumsum(c)
        carry = self._prev_end(j, lo)
        e = cum + np.maximum(carry, np.maximum.accumulate(b - cum))
        self.e_new[k] = e
        self.s_new[k] = e - d
        self.done[j] = hi

    def collective_arrival(self, k: int, sim: Simulation) -> tuple[float, float]:
        """Re-time a collective's start (its stream re-timed up to it): (start, arrival)."""
        a = float(self._launch_new(np.array([k]), sim)[0])
        if self.free[k]:
            start = a + self.delay[k]
        else:
            j, place = int(self.stream_of[k]), int(self.place[k])
            self.stream_until(j, place - 1, sim)
            start = max(a, self._prev_end(j, place) - self.overlap[k], self._dep_end(k, sim)) + self.delay[k]
        # a host collective arrives when its call enqueues it; a kernel when it starts
        arrival = a if self.free[k] and self.launched[k] else start
        return start, arrival

    def finish_collective(self, k: int, start: float, last_new: float, last_old: float) -> None:
        """A collective's end: when the last rank arrives, plus its own tail."""
        p = self.plan
        tail = p.end[k] - max(p.start[k], last_old)
        if self.hide:
            tail = min(tail, 0.0)
        end = max(start, last_new) + tail
        end = max(end, start)  # never before it starts
        self.s_new[k], self.e_new[k] = start, end
        if not self.free[k]:
            j = int(self.stream_of[k])
            self.done[j] = max(self.done[j], int(self.place[k]) + 1)

    def ensure_free(self, k: int, sim: Simulation) -> None:
        """Re-time host collective ``k`` (with its instance on every rank), if not yet."""
        if not np.isnan(self.e_new[k]):
            return
        inst = int(self.plan.instance[k])
        if inst >= 0:
            sim.instance(inst)
        if np.isnan(self.e_new[k]):  # its instance is being re-timed (a cycle), or it has none
            self._collective_alone(k, sim)

    def _collective_alone(self, k: int, sim: Simulation) -> None:
        """A collective reached again while its instance is being re-timed (a cycle through
        other ranks): its wait kept, the last arrival moved as much as its own arrival."""
        start, arrival = self.collective_arrival(k, sim)
        old_last = sim.last_old.get(int(self.plan.instance[k]), float(self.plan.arrival[k]))
        self.finish_collective(k, start, old_last - (float(self.plan.arrival[k]) - arrival), old_last)

    # -- the end -------------------------------------------------------------------------------

    def gained(self, sim: Simulation) -> float:
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
        return float(self.host_shift(np.array([p.window_end]), sim)[0])


class Simulation:
    """Every rank re-timed under one scenario."""

    def __init__(self, plans: list[RankPlan], scenario: Scenario) -> None:
        self.ranks = {p.rank: _Rank(p, scenario) for p in plans}
        #: instance -> [(rank, task)]
        self.members: dict[int, list[tuple[int, int]]] = {}
        self.last_old: dict[int, float] = {}
        for p in plans:
            for k in np.flatnonzero(p.instance >= 0):
                i = int(p.instance[k])
                self.members.setdefault(i, []).append((p.rank, int(k)))
                self.last_old[i] = max(self.last_old.get(i, _NEVER), float(p.arrival[k]))
        self.finished: set[int] = set()
        self.in_progress: set[int] = set()

    def instance(self, i: int) -> None:
        """Re-time collective instance ``i`` on every rank that holds it."""
        if i in self.finished or i in self.in_progress:
            return
        self.in_progress.add(i)
        starts = []
        for rank, k in self.members[i]:
            r = self.ranks[rank]
            if not np.isnan(r.e_new[k]):
                continue
            start, arrival = r.collective_arrival(k, self)
            starts.append((r, k, start, arrival))
        last_new = max((a for *_, a in starts), default=_NEVER)
        for r, k, start, _ in starts:
            if np.isnan(r.e_new[k]):
                r.finish_collective(k, start, last_new, self.last_old[i])
        self.in_progress.discard(i)
        self.finished.add(i)

    def run(self) -> dict[int, float]:
        """Each rank's gain: how much earlier its measured time ends, ns."""
        events: list[tuple[float, int, int, int]] = []  # (time, kind, rank or instance, order)
        for rank, r in self.ranks.items():
            for b, t in enumerate(r.b_end):
                events.append((float(t), 0, rank, b))
        for i, members in self.members.items():
            first_end = min(float(self.ranks[rank].plan.end[k]) for rank, k in members)
            events.append((first_end, 1, i, 0))
        heapq.heapify(events)
        while events:
            _, kind, who, b = heapq.heappop(events)
            if kind == 0:
                self.ranks[who].blocks_until(float(self.ranks[who].b_end[b]), self)
            else:
                self.instance(who)
        return {rank: r.gained(self) for rank, r in self.ranks.items()}


def simulate(plans: list[RankPlan], scenario: Scenario) -> dict[int, float]:
    """Each rank's gain under ``scenario``: how much earlier its measured time ends, ns."""
    return Simulation(plans, scenario).run()
