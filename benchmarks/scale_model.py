"""The cost model of ``tracekit analyze`` on W workers for R ranks of S MB of JSON each.

    T(R, S, W) = map + reduce + report                       (workers and scheduler running)
    map        = R * (S * m + k) / W + tasks(R, S, W) * o
    reduce     = r0 + R * (r1 + r2 * S)
    report     = p0 + R * (p1 + p2 * I(S))

``m``: CPU seconds of a worker per MB of JSON (decode, cache, classification, every per-rank
analysis); ``k``: CPU seconds of a worker per rank whatever its size (opening a file, the fixed
cost of the per-rank queries); ``o``: the scheduler's CPU seconds per task (a Dask scheduler is
one process: its cost per task adds up, it is not divided by W); ``r*``: the reduce on the
client (ranks decided, collectives matched, stragglers, verdict), per rank and per rank-MB (a
rank's collective calls and idle intervals grow with its trace); ``p*``: rendering the reports
(a row per rank and step in several sections: ``p2``, per rank-instance, fitted on the points
apart, where the dense shape's ranks hold a GB's steps; 0 where those were not measured).
``tasks`` is what :func:`tracekit.pipeline.shards.plan` cuts the files into.

On a running cluster of more workers than :data:`tracekit.analyzers.retime_parallel.ROUNDS`
times the client's cores, the what-ifs re-time each rank apart on the workers (each round, the
client solves over the collective instances: :mod:`tracekit.analyzers.retime_ranks`), so the
reduce is measured apart as well (:class:`ApartPoint`, :func:`fit_apart`):

    reduce     = ra0 + R * (ra1 + ra2 * S + ra3 * I(S))  +  R * (wa1 + wa2 * S + wa3 * I(S)) / W
    I(S)       = i0 + i1 * S

``ra*``: the client's CPU seconds (the collectives matched, the stragglers, the gains' tables
gathered and sent to the workers, the rounds' answers solved: what grows with ranks x collective
instances, ``ra3``, and what is left per rank-MB, ``ra2``); ``wa*``: the workers' CPU seconds
in the reduce's tasks (the groups' plans built, the rounds of re-timing; Dask's own CPU on the
workers left out where measured apart: ``benchmarks.worker_tasks``), spread over the W workers.
``I(S)``: the collective instances of a rank of S MB of the A100 shape, fitted on the local
points (about 2 a MB). The A100 points alone cannot tell ``ra3`` from ``ra2`` (their instances
grow with their MB, a few to a few dozen), so the reduce apart is also measured on ranks of the ``dense`` shape
(:func:`benchmarks.generate.dense_source`): a few MB holding the steps and collective instances
of an A100 rank of a GB, what a prediction at a GB a rank needs without extrapolating 300x.

Every coefficient is fitted by least squares on CPU seconds, not wall time: the benchmark
machine is shared, and CPU seconds are what the work costs whoever else runs. The map's fit
has one more term, ``a``: starting the worker processes (imports), which a running cluster has
already paid. A prediction of wall time assumes workers that are not shared.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from tracekit.pipeline.shards import PARALLEL_MIN_BYTES, SHARD_MAX_BYTES, SHARDS_PER_WORKER

MB = 1e6


@dataclass(frozen=True)
class Point:
    """One measured analysis: R ranks of S MB on W workers, the CPU seconds of its stages."""

    ranks: int
    mb: float
    workers: int
    executor: str
    #: CPU seconds of the map: the workers' (every process but the client) and the client's then
    map_cpu_s: float
    #: CPU seconds of the client during the reduce, and during the reports
    reduce_cpu_s: float
    report_cpu_s: float
    wall_s: float = 0.0


@dataclass(frozen=True)
class ApartPoint:
    """One measured analysis on a running cluster whose workers re-time the ranks apart: R ranks
    of S MB on W workers, the CPU seconds of the reduce on the client and on the workers."""

    ranks: int
    mb: float
    workers: int
    reduce_client_cpu_s: float
    #: the workers' CPU seconds in the reduce's tasks (:func:`benchmarks.scale_ranks.apart_point_of`)
    reduce_workers_cpu_s: float
    #: the collective instances of a rank
    instances: int = 0
    #: the client's CPU seconds in the reports
    report_cpu_s: float = 0.0


@dataclass(frozen=True)
class Model:
    """The fitted coefficients (CPU seconds)."""

    m_per_mb: float
    k_per_rank: float
    o_per_task: float
    r0: float
    r1_per_rank: float
    r2_per_rank_mb: float
    p0: float
    p1_per_rank: float
    #: starting the workers (all of them, as measured)
    a_start: float = 0.0
    #: the reduce with the ranks re-timed apart on the workers (see the module's docstring):
    #: the client's CPU seconds, once, per rank, per rank-MB and per rank-instance ...
    ra0: float = 0.0
    ra1_per_rank: float = 0.0
    ra2_per_rank_mb: float = 0.0
    ra3_per_rank_instance: float = 0.0
    #: ... and the workers', per rank, per rank-MB and per rank-instance, spread over them (0
    #: each: not measured)
    wa1_per_rank: float = 0.0
    wa2_per_rank_mb: float = 0.0
    wa3_per_rank_instance: float = 0.0
    #: the collective instances of an A100-shaped rank: once, and per MB
    i0_instances: float = 0.0
    i1_instances_per_mb: float = 0.0
    #: the reports' CPU seconds per rank-instance (:func:`fit_apart`)
    p2_per_rank_instance: float = 0.0

    @property
    def apart(self) -> bool:
        """Whether the reduce apart was measured (:func:`fit_apart`)."""
        client = (self.ra0, self.ra1_per_rank, self.ra2_per_rank_mb, self.ra3_per_rank_instance)
        return any((*client, self.wa1_per_rank, self.wa2_per_rank_mb, self.wa3_per_rank_instance))

    def instances(self, mb: float) -> float:
        """The collective instances of an A100-shaped rank of ``mb`` MB."""
        return self.i0_instances + self.i1_instances_per_mb * mb

    def tasks(self, ranks: int, mb: float, workers: int) -> int:
        """How many shards :func:`tracekit.pipeline.shards.plan` makes of R files of S MB."""
        total = ranks * mb * MB
        if total < PARALLEL_MIN_BYTES:
            return 1
        target = min(SHARD_MAX_BYTES, total // (max(1, workers) * SHARDS_PER_WORKER))
        per_shard = max(1, int(target // (mb * MB)))
        return -(-ranks // per_shard)

    def map_cpu(self, ranks: int, mb: float) -> float:
        """The workers' CPU seconds for R ranks of S MB (their start-up left out)."""
        return ranks * (mb * self.m_per_mb + self.k_per_rank)

    def stages(self, ranks: int, mb: float, workers: int, *, scheduled: bool, apart: bool = False) -> dict[str, float]:
        """The predicted wall seconds of each stage on ``workers`` workers that are not shared;
        ``scheduled``: the map goes through a Dask scheduler; ``apart``: the reduce re-times the
        ranks on the workers (a running cluster's; needs :attr:`apart`)."""
        tasks = self.tasks(ranks, mb, workers)
        map_s = self.map_cpu(ranks, mb) / workers + (tasks * self.o_per_task if scheduled else 0.0)
        if apart:
            if not self.apart:
                raise ValueError("the reduce apart was not measured: fit_apart first")
            n = self.instances(mb)
            client = self.ra0 + ranks * (self.ra1_per_rank + self.ra2_per_rank_mb * mb + self.ra3_per_rank_instance * n)
            there = self.wa1_per_rank + self.wa2_per_rank_mb * mb + self.wa3_per_rank_instance * n
            reduce_s = client + ranks * there / workers
        else:
            reduce_s = self.r0 + ranks * (self.r1_per_rank + self.r2_per_rank_mb * mb)
        report_s = self.p0 + ranks * (self.p1_per_rank + self.p2_per_rank_instance * self.instances(mb))
        return {
            "tasks": tasks,
            "map_s": round(map_s, 2),
            "reduce_s": round(reduce_s, 2),
            "report_s": round(report_s, 2),
            "total_s": round(map_s + reduce_s + report_s, 2),
        }

    def as_dict(self) -> dict[str, Any]:
        """The coefficients, rounded for the results file."""
        return {k: float(f"{v:.4g}") for k, v in asdict(self).items()}


def _least_squares(rows: list[list[float]], values: list[float]) -> list[float]:
    """Least squares of ``values`` on ``rows``, negative coefficients clipped to zero."""
    coef, *_ = np.linalg.lstsq(np.array(rows, dtype=float), np.array(values, dtype=float), rcond=None)
    return [max(0.0, float(c)) for c in coef]


def fit(points: list[Point], *, task_overhead_s: float, instances: list[int] | None = None) -> Model:
    """The model of ``points`` (local runs: no scheduler); ``task_overhead_s``: the scheduler's
    CPU seconds per task, measured apart (a Dask cluster running tasks that do nothing);
    ``instances``: each point's collective instances a rank (A100-shaped ranks: :meth:`Model.instances`)."""
    a, m, k = _least_squares([[1.0, p.ranks * p.mb, p.ranks] for p in points], [p.map_cpu_s for p in points])
    r0, r1, r2 = _least_squares([[1.0, p.ranks, p.ranks * p.mb] for p in points], [p.reduce_cpu_s for p in points])
    p0, p1 = _least_squares([[1.0, p.ranks] for p in points], [p.report_cpu_s for p in points])
    i0 = i1 = 0.0
    if instances is not None:
        i0, i1 = _least_squares([[1.0, p.mb] for p in points], [float(n) for n in instances])
    return Model(m, k, task_overhead_s, r0, r1, r2, p0, p1, a_start=a, i0_instances=i0, i1_instances_per_mb=i1)


def _client_row(p: ApartPoint) -> list[float]:
    """A point's row of the client's reduce apart: once, per rank, per rank-MB, per rank-instance."""
    return [1.0, p.ranks, p.ranks * p.mb, p.ranks * p.instances]


def fit_apart(model: Model, points: list[ApartPoint]) -> Model:
    """``model`` with the reduce apart fitted on ``points``: of two sizes per rank, two numbers
    of ranks and two numbers of instances a rank at one size (the ``dense`` shape's), or the
    per-rank, per-rank-MB and per-rank-instance terms are not told apart."""
    if len({p.mb for p in points}) < 2 or len({p.ranks for p in points}) < 2:
        raise ValueError("the reduce apart needs points of two sizes per rank and two numbers of ranks")
    rows = [_client_row(p) for p in points]
    if np.linalg.matrix_rank(np.array(rows)) < len(rows[0]):
        raise ValueError("the reduce apart needs points of one size per rank and two numbers of instances")
    ra0, ra1, ra2, ra3 = _least_squares(rows, [p.reduce_client_cpu_s for p in points])
    wa1, wa2, wa3 = _least_squares(
        [[p.ranks, p.ranks * p.mb, p.ranks * p.instances] for p in points], [p.reduce_workers_cpu_s for p in points]
    )
    reports = [p.report_cpu_s for p in points]
    p0, p1, p2 = _least_squares([[1.0, p.ranks, p.ranks * p.instances] for p in points], reports)
    return replace(
        model,
        p0=p0,
        p1_per_rank=p1,
        p2_per_rank_instance=p2,
        ra0=ra0,
        ra1_per_rank=ra1,
        ra2_per_rank_mb=ra2,
        ra3_per_rank_instance=ra3,
        wa1_per_rank=wa1,
        wa2_per_rank_mb=wa2,
        wa3_per_rank_instance=wa3,
    )


def client_terms(
    points: list[ApartPoint], runs: list[list[float]], ranks: int, mb: float, instances: float
) -> dict[str, tuple[float, float]]:
    """The client's CPU seconds in the reduce apart at R ranks of S MB and I instances a rank,
    term by term (:func:`fit_apart`'s four), each with its standard error: fitted on every run of
    every point (``runs``: each point's client CPU seconds, run by run; nothing clipped). A term
    whose error is as large as itself is one the points do not determine: at these sizes, a
    rank-MB more is a few tenths of a second that two runs of one point differ by."""
    rows, values = [], []
    for p, measured in zip(points, runs, strict=True):
        for v in measured:
            rows.append(_client_row(p))
            values.append(v)
    a, y = np.array(rows, dtype=float), np.array(values, dtype=float)
    dof = len(values) - a.shape[1]
    if dof <= 0 or np.linalg.matrix_rank(a) < a.shape[1]:
        raise ValueError("the client's terms need more runs than terms, of points that tell them apart")
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    variance = float(((y - a @ coef) ** 2).sum()) / dof
    errors = np.sqrt(np.diag(variance * np.linalg.inv(a.T @ a)))
    at = (1.0, ranks, ranks * mb, ranks * instances)
    names = ("once", "per_rank", "per_rank_mb", "per_rank_instance")
    terms = zip(names, coef, errors, at, strict=True)
    return {n: (round(float(c * x), 2), round(float(e * x), 2)) for n, c, e, x in terms}


def check(model: Model, point: Point) -> dict[str, Any]:
    """A measured point beside the model's prediction of it: the CPU seconds of the map (its
    workers' start-up included, as measured) and of the reduce, and the wall time on idle workers."""
    scheduled = point.executor == "dask"
    predicted = model.stages(point.ranks, point.mb, point.workers, scheduled=scheduled)
    map_cpu = model.a_start + model.map_cpu(point.ranks, point.mb)
    return {
        "point": asdict(point),
        "predicted": predicted,
        "map_cpu_s": {"predicted": round(map_cpu, 1), "measured": point.map_cpu_s},
        "map_cpu_error_pct": round(100 * (map_cpu - point.map_cpu_s) / point.map_cpu_s, 1),
        "reduce_cpu_s": {"predicted": predicted["reduce_s"], "measured": point.reduce_cpu_s},
    }
