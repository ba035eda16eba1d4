"""What :mod:`tracekit.analyzers.retime` works out once per rank, whatever the scenario: the
streams in order, each task's launch, delay and the task of another stream it waits on, the
blocks made disjoint with what each awaits (:class:`RankShape`)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Final

import numpy as np

if TYPE_CHECKING:
    from tracekit.analyzers.retime_plan import RankPlan

__all__ = ["AWAIT_TOLERANCE_NS", "DEPENDENCY_NS", "RankShape"]

#: A time that holds nothing back.
_NEVER: Final = -np.inf
#: A task that started this long after its launch and its predecessor, as a task of another
#: stream ended, waited on it (the idle model's switch time: ``tracekit.analyzers.idle.SWITCH_NS``).
DEPENDENCY_NS: Final = 20_000.0
#: How far past a block's end an awaited task may end: the host's and the device's clocks as the
#: trace aligns them. On an H200 a 32 MiB pageable copy ended 2.5-4.8 us after the
#: ``cudaMemcpyAsync`` that waited for it returned (``samples/captures/cuda-h200-cal-transfer-a``):
#: with 2 us the call awaited nothing, so every what-if kept its whole 7.7 ms.
AWAIT_TOLERANCE_NS: Final = 10_000.0


class RankShape:
    """One rank's events as the re-timing sees them, under any scenario (what none changes)."""

    def __init__(self, plan: RankPlan) -> None:
        self.plan = plan
        n = plan.start.size
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
        # the streams as one array (the core reads it so) and each a view of it: not a copy of
        # every task's index beside the streams' own (a 2 GB rank's 0.7M tasks: 6 MB)
        self.s_flat, self.s_off = _flat(self.streams)
        self.streams = [self.s_flat[a:b] for a, b in itertools.pairwise(self.s_off.tolist())]
        self._delays()
        self._dependencies()
        self._blocks()
        #: the re-timing's state when nothing is removed on this rank (``retime._Rank._unremoved``)
        self._unremoved_state: dict[str, object] | None = None
        #: per removal (by identity, held), the re-timing in C's state of it (``_removal_kept``):
        #: the same scenario's rounds on a rank re-timed apart reuse it
        self._removals_kept: dict[int, tuple[object, dict[str, object]]] = {}
        #: the shape as the re-timing in C reads it (:meth:`packed`), once worked out
        self._packed: tuple[np.ndarray, ...] | None = None
        # per stream, the places of the tasks re-timed one by one (a collective, or a wait on
        # another stream), in order: found by bisection, never by scanning the stream again
        self.stops = [np.flatnonzero((plan.instance[idx] >= 0) | (self.dep[idx] >= 0)).tolist() for idx in self.streams]

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

    def _blocks(self) -> None:
        """The blocks made disjoint (overlapping ones merged), each one's awaited task per
        stream, and its own cost and tail, measured."""
        p = self.plan
        starts, ends, untils, colls, keeps = _merged_blocks(p)
        self.b_start, self.b_end = np.array(starts), np.array(ends)
        self.b_coll = np.array(colls, dtype=bool)
        self.l_kept: list[bool] = keeps
        nb = self.b_start.size
        instant = self.b_end <= self.b_start
        # the host collectives in end order: a thread waiting on them goes on after each one
        coll = np.flatnonzero(self.free)
        completion = p.end if p.done is None else p.done
        coll = coll[np.argsort(completion[coll], kind="stable")]
        self.comp_task, self.comp_end = coll, completion[coll]
        # and when each was launched by this host (-inf: by none): a completion releases the
        # host only at times after its launch (across ranks' clocks it may read as earlier: a
        # collective that released its own launch would wait on itself)
        self.comp_lch = np.where(self.launched[coll], self.lch[coll], _NEVER)
        # a wait awaits the host collectives launched by its end that completed since the
        # previous wait ended (those before it, that one awaited)
        since = np.concatenate([[_NEVER], self.b_end[:-1]]) if nb else self.b_end
        lo = np.searchsorted(self.comp_end, since, side="right")
        hi = np.searchsorted(self.comp_end, self.b_end + AWAIT_TOLERANCE_NS, side="right")
        # per block, the host collectives it awaits: one array, each block's a slice of it (an
        # array a block, most of them empty, were 110 bytes each: 59k blocks, 7 MB)
        waits = [self._launched_by(coll[lo[b] : hi[b]], untils[b], instant[b]) for b in np.flatnonzero(self.b_coll)]
        sizes = np.zeros(nb, dtype=np.int64)
        sizes[self.b_coll] = [k.size for k in waits]
        self.free_flat = _i64(np.concatenate(waits)) if waits else _i64(np.empty(0))
        self.free_off = _offsets(sizes.tolist())
        drain = np.full(nb, _NEVER)
        if self.free_flat.size:
            nonempty = np.flatnonzero(sizes)
            drain[nonempty] = np.maximum.reduceat(p.end[self.free_flat], self.free_off[nonempty])
        self.awaited = np.full((nb, len(self.streams)), -1, dtype=np.int64)
        for j, idx in enumerate(self.streams):
            launches = np.maximum.accumulate(self.lch[idx]) if idx.size else self.lch[idx]
            ends_j = np.maximum.accumulate(p.end[idx]) if idx.size else p.end[idx]
            # launched by then (a wait of no length: strictly before; a launch at the very time
            # the host resumes comes after it, and awaiting it, the wait would wait on itself)
            by = np.searchsorted(launches, np.array(untils), side="right") - 1
            launched_before = np.where(instant, np.searchsorted(launches, np.array(untils), side="left") - 1, by)
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

    def lists(self) -> None:
        """The blocks as Python lists (:meth:`_lists`), unless made: only the re-timing in Python
        reads them (the core in C reads :meth:`packed`)."""
        if "l_start" not in self.__dict__:
            self._lists()

    def _lists(self) -> None:
        """The blocks as Python lists, for the one-time-at-a-time paths (``*_one``): a NumPy
        call on one element costs more than the arithmetic it does."""
        self.l_start: list[float] = self.b_start.tolist()
        self.l_end: list[float] = self.b_end.tolist()
        self.l_waited: list[bool] = self.waited.tolist()
        self.l_drain: list[float] = self.drain.tolist()
        self.l_coll: list[bool] = self.b_coll.tolist()
        self.l_comp_end: list[float] = self.comp_end.tolist()
        self.l_comp_lch: list[float] = self.comp_lch.tolist()
        self.l_own: list[float] = self.own.tolist()
        self.l_tail: list[float] = self.tail.tolist()
        flat, off = self.free_flat.tolist(), self.free_off.tolist()
        self.l_awaited_free: list[list[int]] = [flat[a:b] for a, b in itertools.pairwise(off)]
        # per block, (stream, the last task it awaits there, that task), the streams in order
        self.l_awaited: list[list[tuple[int, int, int]]] = [[] for _ in range(self.b_start.size)]
        blocks, streams = np.nonzero(self.awaited >= 0)  # row by row, each row's streams in order
        for b, j, last in zip(blocks.tolist(), streams.tolist(), self.awaited[blocks, streams].tolist(), strict=True):
            self.l_awaited[b].append((j, last, int(self.streams[j][last])))

    def packed(self) -> tuple[np.ndarray, ...]:
        """The shape as ``_retime_core.Core`` reads it (its ``SH_*`` order), worked out once per
        rank: plain arrays, every list of arrays as one array and its offsets."""
        if self._packed is not None:
            return self._packed
        p = self.plan
        stops = [np.array(s, dtype=np.int64) for s in self.stops]
        # per block, (stream, the last task it awaits there, that task) for the streams in
        # order, as ``l_awaited`` lists them, flat
        blocks, streams = np.nonzero(self.awaited >= 0)  # row by row, each row's streams in order
        last = self.awaited[blocks, streams]
        s_flat, s_off = self.s_flat, self.s_off
        awaited = np.stack([streams, last, s_flat[s_off[streams] + last]], axis=1).reshape(-1)
        awaited_off = _offsets(np.bincount(blocks, minlength=self.b_start.size).tolist())
        self._packed = (
            *(_f64(a) for a in (p.start, p.end, p.arrival, self.lch, self.delay, self.overlap)),
            *(_i64(a) for a in (p.instance, self.place, self.stream_of, self.dep)),
            *(_u8(a) for a in (self.free, self.launched, self.first_unlaunched)),
            s_flat,
            s_off,
            *_flat(stops),
            *(_f64(a) for a in (self.b_start, self.b_end, self.drain, self.own, self.tail)),
            *(_u8(a) for a in (self.waited, self.b_coll, np.array(self.l_kept, dtype=bool))),
            _i64(awaited),
            awaited_off,
            self.free_flat,
            self.free_off,
            _i64(self.comp_task),
            _f64(self.comp_end),
            _f64(self.comp_lch),
        )
        return self._packed

    def _launched_by(self, tasks: np.ndarray, until: float, instant: bool) -> np.ndarray:
        """``tasks`` launched by ``until`` (for a wait of no length, strictly before: see :meth:`_blocks`)."""
        lch = self.lch[tasks]
        picked: np.ndarray = tasks[lch < until] if instant else tasks[lch <= until]
        return picked


def _f64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _u8(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=bool).view(np.uint8)


def _offsets(sizes: list[int]) -> np.ndarray:
    return _i64(np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]))


def _flat(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``parts`` as one array and each part's start in it (and the end's)."""
    flat = _i64(np.concatenate(parts)) if parts else _i64(np.empty(0))
    return flat, _offsets([a.size for a in parts])


def _merged_blocks(p: RankPlan) -> tuple[list[float], list[float], list[float], list[bool], list[bool]]:
    """The blocks of ``p`` in time order, overlapping ones merged into one wait: starts, ends,
    awaited-until times, whether each waits on collectives, whether each is kept."""
    n = p.block_start.size
    until = p.block_start if p.block_until is None else p.block_until
    on_coll = np.zeros(n, dtype=bool) if p.block_on_collectives is None else p.block_on_collectives
    kept = np.zeros(n, dtype=bool) if p.block_kept is None else p.block_kept
    starts: list[float] = []
    ends: list[float] = []
    untils: list[float] = []
    colls: list[bool] = []
    keeps: list[bool] = []
    for b in np.argsort(p.block_start, kind="stable"):
        if starts and p.block_start[b] < ends[-1]:  # overlaps the previous: one wait
            ends[-1] = max(ends[-1], float(p.block_end[b]))
            untils[-1] = max(untils[-1], float(until[b]))
            colls[-1] = colls[-1] or bool(on_coll[b])
            keeps[-1] = keeps[-1] or bool(kept[b])
            continue
        starts.append(float(p.block_start[b]))
        ends.append(float(p.block_end[b]))
        untils.append(float(until[b]))
        colls.append(bool(on_coll[b]))
        keeps.append(bool(kept[b]))
    return starts, ends, untils, colls, keeps
