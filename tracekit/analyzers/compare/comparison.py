"""Compare two runs: a pure function of typed analyses to a typed :class:`Comparison`.

The noise model is :mod:`~tracekit.analyzers.compare.noise`; the measures,
:mod:`~tracekit.analyzers.compare.measures`; work and syncs matched by name,
:mod:`~tracekit.analyzers.compare.work_changes`; the sides and how they differ,
:mod:`~tracekit.analyzers.compare.sides`. The verdicts are put side by side with every
candidate's share.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING

import numpy as np

from tracekit import __version__
from tracekit.analyzers.compare import measures as ms
from tracekit.analyzers.compare.noise import Noise, measure_of, rounded
from tracekit.analyzers.compare.outliers import outlier_runs
from tracekit.analyzers.compare.samples import steps_frame, syncs
from tracekit.analyzers.compare.sides import check_side, differences, side
from tracekit.analyzers.compare.work_changes import sync_comparison, top_work, work
from tracekit.results.compare import Comparison, CostShift, NoiseModel, VerdictComparison
from tracekit.results.vocab import BoundKind, NoiseMethod, Unit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tracekit.results.analysis import Analysis


def compare(
    a: Sequence[Analysis],
    b: Sequence[Analysis],
    *,
    sources: tuple[Sequence[str], Sequence[str]] = ((), ()),
    labels: tuple[str, str] = ("A", "B"),
    noise: Noise | None = None,
) -> Comparison:
    """Compare run(s) ``b`` against the baseline run(s) ``a`` (several runs per side: repeats)."""
    noise = noise or Noise()
    check_side(labels[0], a)
    check_side(labels[1], b)
    rng = np.random.default_rng(noise.seed)
    side_a, side_b = side(labels[0], sources[0], a), side(labels[1], sources[1], b)
    has_steps = side_a.steps > 0 and side_b.steps > 0
    steps_a, steps_b = [steps_frame(x) for x in a], [steps_frame(x) for x in b]
    sa, sb = ms.step_samples(steps_a), ms.step_samples(steps_b)
    # the order of the measures is the order they draw from ``rng``: keep it
    step = measure_of("step", Unit.NS, a=sa, b=sb, noise=noise, rng=rng)
    c = ms.Inputs(a, b, steps_a, steps_b, noise, rng, has_steps, step.a)
    sync = c.test("syncs", Unit.COUNT, syncs, medians=False)
    measures = [ms.throughput(c), *ms.shares(c), *ms.communication(c), *ms.memory(c), sync]
    per_rank = ms.per_rank(c, sorted(set(side_a.ranks) & set(side_b.ranks)))
    phases = ms.phases(c)
    if (cpu := ms.cpu(c)) is not None:  # last: it draws from ``rng`` after the others
        measures.append(cpu)
    changes = work(a, b, per_second=not has_steps)
    repeats = len(a) > 1 and len(b) > 1
    return Comparison(
        tracekit_version=__version__,
        a=side_a,
        b=side_b,
        noise=NoiseModel(
            method=NoiseMethod.RUNS_THEN_STEPS if repeats else NoiseMethod.STEPS,
            level=noise.level,
            resamples=noise.resamples,
            threshold_pct=noise.threshold_pct,
            unit="step" if has_steps else "second",
            seed=noise.seed,
        ),
        step=step,
        measures=measures,
        per_rank=per_rank,
        phases=phases,
        distributions=ms.distributions(c, sa, sb),
        work=top_work(changes),
        syncs=sync_comparison(a[0], sync, changes),
        verdicts=_verdicts(a[0], b[0]),
        warnings=differences(side_a, side_b, a[0], b[0]),
        outliers=[
            *outlier_runs("a", sa.runs, [_folder(x) for x in a]),
            *outlier_runs("b", sb.runs, [_folder(x) for x in b]),
        ],
    )


def _folder(a: Analysis) -> str | None:
    """The folder of a run's trace files (the deepest one holding them all), when they are named."""
    parents = [PurePath(r.source).parent.parts for r in a.run.ranks if r.source]
    common: list[str] = []
    for parts in zip(*parents, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return str(PurePath(*common)) if parents and common else None


def _verdicts(a: Analysis, b: Analysis) -> VerdictComparison:
    costs_a = {c.bound: c.share_pct for c in a.verdict.costs}
    costs_b = {c.bound: c.share_pct for c in b.verdict.costs}
    order = {kind: i for i, kind in enumerate(BoundKind)}  # ties (share 0) in the vocabulary's order
    bounds = sorted(
        costs_a.keys() | costs_b.keys(),
        key=lambda k: (-max(costs_a.get(k, 0.0), costs_b.get(k, 0.0)), order.get(k, len(order)), k),
    )
    shifts = [
        CostShift(
            bound=k,
            a_pct=rounded(costs_a.get(k)),
            b_pct=rounded(costs_b.get(k)),
            delta_pct=rounded(costs_b[k] - costs_a[k]) if k in costs_a and k in costs_b else None,
        )
        for k in bounds
    ]
    pa, pb = a.verdict.primary, b.verdict.primary
    return VerdictComparison(
        a=pa,
        b=pb,
        a_measured_on=a.verdict.measured_on,
        b_measured_on=b.verdict.measured_on,
        same_bound=(pa.bound, pa.note) == (pb.bound, pb.note),
        costs=shifts,
    )
