"""The cost model of benchmarks/scale_ranks.py: it counts tasks as tracekit does, and a fit
recovers the coefficients of points it generated."""

from __future__ import annotations

import os
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

import pytest

from benchmarks.scale_model import MB, ApartPoint, Model, Point, check, client_terms, fit, fit_apart
from benchmarks.scale_ranks import point_of
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


APART = replace(
    TRUE,
    ra0=0.2,
    ra1_per_rank=0.0004,
    ra2_per_rank_mb=0.00005,
    ra3_per_rank_instance=0.00001,
    wa1_per_rank=0.003,
    wa2_per_rank_mb=0.002,
    wa3_per_rank_instance=0.00002,
    i0_instances=1.0,
    i1_instances_per_mb=2.0,
    p2_per_rank_instance=0.000003,
)


def _apart_point(ranks: int, mb: float, instances: int) -> ApartPoint:
    a = APART
    client = a.ra0 + ranks * (a.ra1_per_rank + a.ra2_per_rank_mb * mb + a.ra3_per_rank_instance * instances)
    workers = ranks * (a.wa1_per_rank + a.wa2_per_rank_mb * mb + a.wa3_per_rank_instance * instances)
    report = a.p0 + ranks * (a.p1_per_rank + a.p2_per_rank_instance * instances)
    return ApartPoint(ranks, mb, 7, client, workers, instances, report)


def test_a_fit_apart_recovers_the_reduce_on_the_client_and_on_the_workers() -> None:
    # A100-shaped ranks (instances grow with their MB) and dense ones (2,500 instances in 3 MB)
    points = [_apart_point(256, 3.0, 7), _apart_point(1024, 3.0, 7), _apart_point(1024, 6.0, 13)]
    points += [_apart_point(64, 3.0, 2500), _apart_point(256, 3.0, 2500)]
    local = [Point(r, mb, 2, "local", 1.0, 1.0, 1.0) for r, mb in [(64, 3.0), (64, 12.0), (16, 64.0)]]
    model = fit(local, task_overhead_s=TRUE.o_per_task, instances=[7, 25, 129])
    assert model.instances(1000.0) == pytest.approx(2001.0)
    fitted = fit_apart(replace(TRUE, i0_instances=1.0, i1_instances_per_mb=2.0), points)
    assert fitted.apart and not TRUE.apart
    for name, value in asdict(fitted).items():
        assert value == pytest.approx(getattr(APART, name), rel=1e-6, abs=1e-9), name
    # by hand: 1,024 x 1 GB on 64 workers (2,001 instances a rank), the client's part whole and
    # the workers' spread over 64
    client = 0.2 + 1024 * (0.0004 + 0.00005 * 1000 + 0.00001 * 2001)
    reduce_s = client + 1024 * (0.003 + 0.002 * 1000 + 0.00002 * 2001) / 64
    stages = fitted.stages(1024, 1000.0, 64, scheduled=True, apart=True)
    assert stages["reduce_s"] == pytest.approx(reduce_s, abs=0.01)
    # the reports: a row per rank and step in several sections, fitted on the points apart
    assert stages["report_s"] == pytest.approx(0.05 + 1024 * (0.001 + 0.000003 * 2001), abs=0.01)
    # the map does not change; the reduce on the client alone is the other model's
    whole = fitted.stages(1024, 1000.0, 64, scheduled=True)
    assert whole["map_s"] == fitted.stages(1024, 1000.0, 64, scheduled=True, apart=True)["map_s"]
    assert whole["reduce_s"] == pytest.approx(0.1 + 1024 * (0.0005 + 0.0001 * 1000), abs=0.01)


def test_the_clients_terms_come_with_errors_that_say_which_the_points_determine() -> None:
    points = [_apart_point(256, 3.0, 7), _apart_point(1024, 3.0, 7), _apart_point(1024, 6.0, 13)]
    points += [_apart_point(64, 3.0, 2500), _apart_point(1024, 3.0, 2500)]
    exact = [[p.reduce_client_cpu_s] * 2 for p in points]
    terms = client_terms(points, exact, 1024, 1000.0, 2001.0)
    by_hand = {"once": 0.2, "per_rank": 1024 * 0.0004, "per_rank_mb": 1024 * 0.05, "per_rank_instance": 1024 * 0.02001}
    for name, value in by_hand.items():
        assert terms[name][0] == pytest.approx(value, abs=0.01) and terms[name][1] == pytest.approx(0.0, abs=0.01)
    # two runs of each point 0.1 s apart: the rank-instances (a dense point's 2.5M) are told
    # from that noise, the rank-MB (3,072 between the A100 points) are not
    noisy = [[p.reduce_client_cpu_s - 0.05, p.reduce_client_cpu_s + 0.05] for p in points]
    terms = client_terms(points, noisy, 1024, 1000.0, 2001.0)
    assert terms["per_rank_instance"][1] < 0.1 * terms["per_rank_instance"][0]
    assert terms["per_rank_mb"][1] > 5.0
    with pytest.raises(ValueError, match="more runs than terms"):
        client_terms(points[:4], [[p.reduce_client_cpu_s] for p in points[:4]], 1024, 1000.0, 2001.0)


def test_the_reduce_apart_needs_two_sizes_two_numbers_of_ranks_and_of_instances() -> None:
    one_size = [ApartPoint(r, 3.0, 7, 1.0, 2.0, 4) for r in (256, 512, 1024)]
    with pytest.raises(ValueError, match="two sizes"):
        fit_apart(TRUE, one_size)
    one_density = [ApartPoint(256, 3.0, 7, 1.0, 2.0, 4), ApartPoint(1024, 6.0, 7, 1.0, 2.0, 10)]
    with pytest.raises(ValueError, match="two numbers of instances"):
        fit_apart(TRUE, one_density)
    with pytest.raises(ValueError, match="fit_apart first"):
        TRUE.stages(1024, 3.0, 64, scheduled=True, apart=True)


def test_a_points_map_counts_the_client_that_maps_beside_its_processes() -> None:
    """The local executor's client maps shards too: its CPU in the map is the map's, beside the
    processes' (their CPU alone, about half, fitted the map at half its cost)."""
    row = {
        "ranks": 64,
        "mb_per_rank": 3.0,
        "workers": 2,
        "executor": "local",
        "workers_cpu_s": 9.5,
        "map_client_cpu_s": 10.25,
        "reduce_client_cpu_s": 1.5,
        "report_client_cpu_s": 0.25,
        "wall_s": 12.0,
    }
    point = point_of(row)
    assert point.map_cpu_s == 19.75
    assert (point.reduce_cpu_s, point.report_cpu_s) == (1.5, 0.25)
