"""The re-timing in C (``_retime_core.c``) against the re-timing in Python: the same times to the
last bit, every task's, on random timelines with every kind of wait."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyzers import retime
from tracekit.analyzers.retime import RankPlan, Scenario, Simulation
from tracekit.analyzers.retime_ranks import RankAlone, Round, recorded

from .test_retime import _scenarios, plan, timelines

T = TypeVar("T")


@pytest.fixture(autouse=True)
def native() -> None:
    """The extension, built by the install; CI (CI=true) fails without it, elsewhere it skips."""
    if retime._core is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("tracekit.analyzers._retime_core was not built: the install needs a C compiler")
        pytest.skip("the re-timing in C was not built")


@st.composite
def waits(draw: st.DrawFn) -> list[RankPlan]:
    """:func:`timelines` with the waits CPU-only runs have besides: host collectives (a backend's
    workers run them, the host goes on as each completes), waits on collectives that await them,
    blocks kept when the syncs go, completions seen before the spans end."""
    plans = draw(timelines())
    out = []
    for p in plans:
        n, nb = p.start.size, p.block_start.size
        coll = p.instance >= 0
        free = coll & np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
        early = np.array(draw(st.lists(st.floats(0, 5), min_size=n, max_size=n)), dtype=float)
        on_coll = np.array(draw(st.lists(st.booleans(), min_size=nb, max_size=nb)), dtype=bool)
        kept = np.array(draw(st.lists(st.booleans(), min_size=nb, max_size=nb)), dtype=bool)
        out.append(
            dataclasses.replace(
                p,
                arrival_is_launch=free,
                arrival=np.where(free & ~np.isnan(p.launch), p.launch, p.arrival),
                block_until=np.where(on_coll, p.block_end, p.block_start),
                block_on_collectives=on_coll,
                block_kept=kept,
                done=np.maximum(p.start, p.end - early) if draw(st.booleans()) else None,
            )
        )
    return out


def _simulated(
    plans: list[RankPlan], scenario: Scenario, *, native: bool, met_in_python: bool = False
) -> tuple[dict[int, float], list[np.ndarray]]:
    """Each rank's gain, and every task's re-timed start, end and source, every block's shift,
    every collective's arrival.
    ``met_in_python``: ranks in C, met by Python's visit one call at a time (the core's methods)."""
    was = retime.NATIVE
    retime.NATIVE = native
    try:
        sim = Simulation(plans, scenario)
        gains = sim.visit() if met_in_python else sim.run()
    finally:
        retime.NATIVE = was
    arrays = [a for r in sim.ranks.values() for a in (r.s_new, r.e_new, r.e_src, r.b_shift, r.b_src)]
    # each collective's arrival and its source, as re-timed (else as recorded)
    arrays += [np.array([r.arrival_of(k) for k in range(r.plan.start.size)]).reshape(-1) for r in sim.ranks.values()]
    assert all(type(r) is (retime._NativeRank if native else retime._Rank) for r in sim.ranks.values())
    return gains, arrays


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    pairs = zip(a, b, strict=True)
    return len(a) == len(b) and all(np.array_equal(x, y, equal_nan=x.dtype.kind == "f") for x, y in pairs)


def _rounds(plans: list[RankPlan], scenario: Scenario, last: dict[int, float], *, native: bool) -> list[Round]:
    was = retime.NATIVE
    retime.NATIVE = native
    try:
        last_old, first_end = recorded(plans)
        return [RankAlone(p, last_old, first_end).round(scenario, last) for p in plans]
    finally:
        retime.NATIVE = was


def _outcome(fn: Callable[[bool], T], *, native: bool) -> T | type[RecursionError]:
    """``fn(native)``, or RecursionError where it raised one: the core counts its recursion as
    Python does, so a timeline that recursed without end in Python (as one whose host collective
    was released by its own completion did, before completions were held to their launches)
    raises the same there, never overflowing the C stack."""
    try:
        return fn(native)
    except RecursionError:
        return RecursionError


def _check(plans: list[RankPlan], at: float, length: float) -> None:
    last_old, _ = recorded(plans)
    moved = {i: t - (i + 1) * length for i, t in last_old.items()}
    for scenario in _scenarios(plans, at, length).values():

        def whole(native: bool, scenario: Scenario = scenario) -> tuple[dict[int, float], list[np.ndarray]]:
            return _simulated(plans, scenario, native=native)

        def met_here(native: bool, scenario: Scenario = scenario) -> tuple[dict[int, float], list[np.ndarray]]:
            return _simulated(plans, scenario, native=native, met_in_python=True)

        python = _outcome(whole, native=False)
        for c in (_outcome(whole, native=True), _outcome(met_here, native=True)):
            if isinstance(python, tuple) and isinstance(c, tuple):
                assert c[0] == python[0]
                assert _same(c[1], python[1])
            else:
                assert c is python
        # each rank alone, told the last arrivals as recorded, and moved
        for last in (last_old, moved):

            def alone(native: bool, scenario: Scenario = scenario, last: dict[int, float] = last) -> list[Round]:
                return _rounds(plans, scenario, last, native=native)

            assert _outcome(alone, native=True) == _outcome(alone, native=False)


@settings(max_examples=200, deadline=None)
@given(timelines(), st.floats(0, 200), st.floats(0, 50))
def test_the_same_times_as_in_python(plans: list[RankPlan], at: float, length: float) -> None:
    _check(plans, at, length)


@settings(max_examples=200, deadline=None)
@given(waits(), st.floats(0, 200), st.floats(0, 50))
def test_the_same_times_as_in_python_with_host_collectives_and_their_waits(
    plans: list[RankPlan], at: float, length: float
) -> None:
    _check(plans, at, length)


def test_a_rank_of_many_tasks_as_in_python() -> None:
    """Runs of tasks longer than Python's ``_FEW`` (NumPy there, a loop here) and longer than
    the core's stack buffer: one stream of 200 kernels, each launched by the host, a sync in
    the middle and a fetch removed before it."""
    rng = np.random.default_rng(7)
    launch = np.cumsum(rng.uniform(0, 3, 200))
    start = np.maximum.accumulate(launch + rng.uniform(0, 4, 200))
    tasks = []
    end = 0.0
    for lch, earliest in zip(launch.tolist(), start.tolist(), strict=True):
        begin = max(earliest, end)
        end = begin + float(rng.uniform(0, 5))
        tasks.append((lch, begin, end))
    p = plan(tasks=tasks, blocks=[(launch[100], launch[100] + 50.0)])
    cut = Scenario(removals={0: retime.Removal(np.array([10.0]), np.array([60.0]), np.array([1.0]))})
    for scenario in (Scenario(), cut, Scenario(no_wait_blocks=True)):
        py_gains, py_arrays = _simulated([p], scenario, native=False)
        c_gains, c_arrays = _simulated([p], scenario, native=True)
        assert c_gains == py_gains
        assert _same(c_arrays, py_arrays)


def test_an_error_in_a_meeting_propagates() -> None:
    """What the ranks' meeting raises (here: it cannot be reached) comes out of the core as is."""

    class Broken:
        def __init__(self) -> None:
            self.last_old: dict[int, float] = {}

        def instance(self, i: int) -> None:
            raise RuntimeError(f"instance {i}")

    p = plan(tasks=[(0, 0, 10), (10, 10, 20)], instances=[-1, 0])
    rank = retime._NativeRank(p, Scenario())
    with pytest.raises(RuntimeError, match="instance 0"):
        rank.stream_until(0, 1, Broken())


def test_arrays_of_the_wrong_size_are_refused() -> None:
    """The core reads its arrays unchecked: a shape whose sizes or indexes do not hold, or a
    state of the wrong size, is refused where it is made."""
    assert retime._core is not None
    p = plan(tasks=[(0, 0, 10), (5, 10, 20)], blocks=[(2, 4)])
    rank = retime._NativeRank(p, Scenario())
    shape = rank.packed()
    with pytest.raises(ValueError, match="shape"):
        retime._core.Shape((shape[1][:1], *shape[1:]))
    bad_stream = list(shape)
    bad_stream[13] = np.array([0, 7], dtype=np.int64)  # the streams' tasks: a task 7 of 2
    with pytest.raises(ValueError, match="out of range"):
        retime._core.Shape(tuple(bad_stream))
    with pytest.raises(ValueError, match="state"):
        retime._core.Core(
            retime._core.Shape(shape),
            (rank.dur, rank.r_start, rank.r_end, rank.r_rate, rank.r_cum, rank.r_at_start, rank.r_at_end),
            (
                rank.s_new,
                rank.e_new,
                rank.e_src,
                rank.b_shift,
                rank.b_src,
                np.zeros(5, dtype=np.int64),
                rank.arrived_at,
                rank.arrived_from,
            ),
            hide=False,
            no_wait=False,
            track=False,
            window_end=20.0,
            device_end=True,
            tolerance=0.0,
        )
