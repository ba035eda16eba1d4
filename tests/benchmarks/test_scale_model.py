"""The cost model of benchmarks/scale_ranks.py: it counts tasks as tracekit does, and a fit
recovers the coefficients of points it generated."""

from __future__ import annotations

import os
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

import pytest

from benchmarks.scale_model import MB, Model, Point, check, fit
from tracekit.pipeline.shards import plan

if TYPE_CHECKING:
    from pathlib import Path

TRUE = Model(
    m_per_mb=0.02,
    k_per_rank=0.01,
    o_per_task=0.002,
    r0=0.1,
    r1_per_rank=0.0005,
    r2_per_rank_mb=0.0001,
    p0=0.05,
    p1_per_rank=0.001,
    a_start=1.5,
)


@pytest.mark.parametrize(("ranks", "mb", "workers"), [(8, 1.0, 2), (64, 3.0, 2), (300, 3.0, 2), (40, 50.0, 4)])
def test_tasks_are_the_shards_tracekit_makes(tmp_path: Path, ranks: int, mb: float, workers: int) -> None:
    files = []
    for r in range(ranks):  # sparse files: plan() reads only their sizes
        path = tmp_path / f"rank{r}.json"
        with path.open("wb") as f:
            f.truncate(int(mb * MB))
        files.append(path)
    assert TRUE.tasks(ranks, mb, workers) == len(plan(files, workers=workers))
    for f in files:
        os.remove(f)


def test_a_fit_recovers_the_model_of_its_points() -> None:
    points = []
    for ranks, mb in [(64, 3.0), (256, 3.0), (64, 12.0), (256, 12.0), (1024, 3.0)]:
        s = TRUE.stages(ranks, mb, 2, scheduled=False)
        map_cpu = TRUE.a_start + TRUE.map_cpu(ranks, mb)
        points.append(Point(ranks, mb, 2, "local", map_cpu, s["reduce_s"], s["report_s"]))
    fitted = fit(points, task_overhead_s=TRUE.o_per_task)
    for name, value in asdict(fitted).items():
        assert value == pytest.approx(getattr(TRUE, name), rel=0.05, abs=2e-3), name
    checked = check(fitted, replace(points[-1], executor="dask"))
    assert checked["predicted"]["tasks"] == 24
    assert checked["predicted"]["map_s"] == pytest.approx(TRUE.map_cpu(1024, 3.0) / 2 + 24 * TRUE.o_per_task, rel=0.01)
    assert abs(checked["map_cpu_error_pct"]) < 1
