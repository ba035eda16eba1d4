"""The arithmetic of removals (:mod:`tracekit.analyzers.retime_plan`): :func:`merge_each`, every
group at once, gives each group exactly what :func:`merge` gives it alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyzers import retime_plan
from tracekit.analyzers.retime_plan import Removal, Scenario, Shortened, merge, merge_each, outside


def _same(a: Removal, b: Removal) -> bool:
    return all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        for x, y in ((a.start, b.start), (a.end, b.end), (a.rate, b.rate))
    )


@st.composite
def removals(draw: st.DrawFn) -> Removal:
    """A removal as the what-ifs make one: intervals of integer ns (touching, overlapping or
    apart; a few starting together), each at a rate in [0, 1]; some from 2**52, where
    consecutive integers are adjacent doubles and the midpoint of two rounds to one of them."""
    base = draw(st.sampled_from([0.0, 2.0**52]))
    n = draw(st.integers(0, 6))
    starts = draw(st.lists(st.integers(0, 60), min_size=n, max_size=n))
    lengths = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    rates = draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 1 / 3]), min_size=n, max_size=n))
    start = base + np.array(starts, dtype=float)
    return Removal(start=start, end=start + np.array(lengths, dtype=float), rate=np.array(rates, dtype=float))


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.lists(removals(), max_size=4), max_size=6))
def test_merge_each_is_merge_of_each_group(groups: list[list[Removal]]) -> None:
    merged = merge_each(dict(enumerate(groups)))
    assert list(merged) == list(range(len(groups)))
    for g, group in enumerate(groups):
        assert _same(merged[g], merge(group)), (g, group)


def test_merge_each_by_hand() -> None:
    a = Removal(start=np.array([0.0, 10.0]), end=np.array([5.0, 20.0]), rate=np.array([1.0, 0.5]))
    b = Removal(start=np.array([3.0]), end=np.array([12.0]), rate=np.array([0.75]))
    merged = merge_each({"r0": [a, b], "r1": [Removal()], "r2": [b, outside(a, b)]})
    # 0-3 at 1, 3-5 at max(1, .75), 5-10 at .75, 10-12 at max(.5, .75), 12-20 at .5
    assert merged["r0"].start.tolist() == [0.0, 3.0, 5.0, 10.0, 12.0]
    assert merged["r0"].end.tolist() == [3.0, 5.0, 10.0, 12.0, 20.0]
    assert merged["r0"].rate.tolist() == [1.0, 1.0, 0.75, 0.75, 0.5]
    assert merged["r1"].start.size == 0
    assert _same(merged["r2"], merge([b, outside(a, b)]))


def test_merge_each_in_batches_is_merge_of_each_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups taken a few intervals at a time (a batch ends inside no group) give what each
    group gives alone, in the groups' order."""
    rng = np.random.default_rng(7)

    def removal() -> Removal:
        n = int(rng.integers(0, 8))
        start = np.sort(rng.integers(0, 100, n)).astype(float)
        return Removal(start=start, end=start + rng.integers(0, 15, n), rate=rng.choice([0.25, 0.5, 1.0], n))

    groups = {f"r{g}": [removal() for _ in range(int(rng.integers(0, 4)))] for g in range(300)}
    monkeypatch.setattr(retime_plan, "BATCH_INTERVALS", 10)
    merged = merge_each(groups)
    assert list(merged) == list(groups)
    for key, group in groups.items():
        assert _same(merged[key], merge(group)), key


_DURATION = st.one_of(st.just(float("nan")), st.floats(0.0, 1e6), st.sampled_from([0.0, 5.0]))


_SCENARIOS = st.integers(0, 12).flatmap(
    lambda n: st.lists(st.lists(_DURATION, min_size=n, max_size=n), min_size=1, max_size=4)
)


@settings(max_examples=300, deadline=None)
@given(_SCENARIOS)
def test_durations_kept_as_those_changed_give_what_every_tasks_did(dense: list[list[float]]) -> None:
    """A scenario's new durations, kept as the tasks changed (NaN: unchanged), applied, and
    several at once (each task at the shortest any gives), are what arrays of every task's
    gave: ``np.where(isnan)`` and ``np.fmin``."""
    arrays = [np.array(d, dtype=float) for d in dense]
    recorded = np.arange(arrays[0].size, dtype=float) * 10.0
    each = [Scenario(durations={0: a}).durations[0] for a in arrays]
    for a, s in zip(arrays, each, strict=True):
        assert np.array_equal(s.applied(recorded), np.where(np.isnan(a), recorded, a))
        assert np.all(np.diff(s.index) > 0)
    both = arrays[0]
    for a in arrays[1:]:
        both = np.fmin(both, a)
    assert np.array_equal(Shortened.shortest(each).applied(recorded), np.where(np.isnan(both), recorded, both))
