"""benchmarks/targets.py: every target of issue 48 read from its part's results, each bound
checked in its direction."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from benchmarks import targets
from benchmarks.scale_model import Model

MODEL = Model(
    m_per_mb=0.01, k_per_rank=0.0, o_per_task=0.0, r0=1.0, r1_per_rank=0.0, r2_per_rank_mb=0.0, p0=0.5, p1_per_rank=0.0
)


def _parts(*, rss_over_hta: float, local_mb: int, dask_mb: int, identical: bool) -> dict[str, Any]:
    eight = {
        "warm_speedup_vs_hta": {"value": 60.0},
        "speedup_vs_hta": {"value": 8.0},
        "cold_over_floor": {"value": 1.2},
        "rss_over_hta": {"value": rss_over_hta},
    }
    return {
        "8x125mb": {"targets": eight},
        "compare": {"target": {"value": 0.45}},
        "scale_file": {"targets": {"a100": {"rss_2gb_mb": {"value": 450.0}}}},
        "scale_ranks": {
            "model": asdict(MODEL),
            "large": {
                "local": {"peak_rss_mb": local_mb},
                "dask": {"peak_rss_mb": dask_mb},
                "json_identical": identical,
            },
        },
    }


def _table(**kw: Any) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in targets.targets(_parts(**kw))}


def test_issue_48s_own_targets_are_in_the_table() -> None:
    met = _table(rss_over_hta=0.15, local_mb=900, dask_mb=990, identical=True)
    assert met["rss_over_hta"] == {**met["rss_over_hta"], "value": 0.15, "met": True, "bound": "<= 0.2"}
    assert met["ranks_1024_local_rss_mb"]["met"] and met["ranks_1024_dask_rss_mb"]["met"]
    assert met["ranks_1024_same_json"]["met"]
    assert met["rss_2gb_a100_mb"]["met"] and met["rss_2gb_mi300_mb"]["met"] is None  # that shape did not run
    missed = _table(rss_over_hta=0.33, local_mb=1882, dask_mb=2036, identical=False)
    assert missed["rss_over_hta"]["met"] is False
    assert missed["ranks_1024_local_rss_mb"]["met"] is False and missed["ranks_1024_dask_rss_mb"]["value"] == 2036
    assert missed["ranks_1024_same_json"]["met"] is False
    assert missed["warm_speedup_vs_hta"]["met"] and not missed["cold_speedup_vs_hta"]["met"]


def test_the_model_target_is_the_models_prediction() -> None:
    table = _table(rss_over_hta=0.15, local_mb=900, dask_mb=990, identical=True)
    ranks, mb, workers = targets.SCALE
    stages = MODEL.stages(ranks, mb, workers, scheduled=True)
    assert table["scale_total_s"]["value"] == round(stages["total_s"], 3)
    assert table["scale_reduce_s"] == {**table["scale_reduce_s"], "value": 1.0, "met": True}


def test_the_model_target_reads_the_reduce_apart_once_measured() -> None:
    apart = replace(MODEL, ra0=0.5, ra2_per_rank_mb=0.001, wa2_per_rank_mb=0.064)
    parts = _parts(rss_over_hta=0.15, local_mb=900, dask_mb=990, identical=True)
    parts["scale_ranks"] |= {"model": asdict(apart), "apart": {"json_identical_to_local": True}}
    table = {t["name"]: t for t in targets.targets(parts)}
    # by hand, 1,024 x 1 GB on 64 workers: 0.5 + 1024 x 0.001 x 1000 on the client, 1024 x 0.064 x 1000 / 64 there
    assert table["scale_reduce_s"]["value"] == 0.5 + 1024 + 1024
    assert table["scale_reduce_s"]["met"] is False
    assert table["ranks_1024_apart_same_json"]["met"] is True
    # a results file from before the points apart: the reduce on the client, the JSON check not run
    before = _table(rss_over_hta=0.15, local_mb=900, dask_mb=990, identical=True)
    assert before["scale_reduce_s"]["value"] == 1.0 and before["ranks_1024_apart_same_json"]["met"] is None


def test_the_model_target_reads_the_clients_reduce_where_measured_at_its_size() -> None:
    apart = replace(MODEL, ra0=0.5, ra2_per_rank_mb=0.001, wa2_per_rank_mb=0.064)
    parts = _parts(rss_over_hta=0.15, local_mb=900, dask_mb=990, identical=True)
    dense_apart = {"ranks": 1024, "mb_per_rank": 4.0, "shape": "dense", "reduce_client_cpu_s": 12.0}
    measured = {"json_identical_to_local": True, "points": [dense_apart]}
    parts["scale_ranks"] |= {"model": asdict(apart), "apart": measured}
    parts["client_reduce"] = {
        "points": [
            {"shape": "dense", "mb_per_rank": 4.0, "reduce_cpu_s": 10.5},
            {"shape": "a100", "mb_per_rank": 1000.0, "reduce_cpu_s": 10.0},
        ]
    }
    table = {t["name"]: t for t in targets.targets(parts)}
    # by hand: the client's 10 s measured at 1 GB, its rounds 12 - 10.5, the workers' 1024 x 0.064 x 1000 / 64
    assert table["scale_reduce_s"]["value"] == 10.0 + 1.5 + 1024
    stages = apart.stages(*targets.SCALE, scheduled=True, apart=True)
    assert table["scale_total_s"]["value"] == round(stages["map_s"] + 10.0 + 1.5 + 1024 + stages["report_s"], 2)
    # without the dense ranks apart, the client's measured reduce has no rounds to go with: the model's
    del parts["scale_ranks"]["apart"]["points"]
    assert {t["name"]: t for t in targets.targets(parts)}["scale_reduce_s"]["value"] == 0.5 + 1024 + 1024


def test_the_workers_part_is_read_where_measured_at_the_targets_size() -> None:
    apart = replace(MODEL, ra0=0.5, ra2_per_rank_mb=0.001, wa2_per_rank_mb=0.064)
    parts = _parts(rss_over_hta=0.15, local_mb=900, dask_mb=990, identical=True)
    dense_apart = {"ranks": 1024, "mb_per_rank": 4.0, "shape": "dense", "reduce_client_cpu_s": 12.0}
    # 4 ranks of a GB apart: their workers spent 2.4 s in the reduce, 0.6 s a rank
    gb_apart = {"ranks": 4, "mb_per_rank": 1000.0, "shape": "a100", "reduce_workers_cpu_s": 2.4}
    measured_apart = {"json_identical_to_local": True, "points": [dense_apart, gb_apart]}
    parts["scale_ranks"] |= {"model": asdict(apart), "apart": measured_apart}
    parts["client_reduce"] = {
        "points": [
            {"shape": "dense", "mb_per_rank": 4.0, "reduce_cpu_s": 10.5},
            {"shape": "a100", "mb_per_rank": 1000.0, "reduce_cpu_s": 10.0},
        ]
    }

    def workers() -> tuple[float, ...]:
        got = targets.measured_reduce(parts, apart)
        assert got is not None and (got["client_s"], got["rounds_s"]) == (10.0, 1.5)
        return got["workers_s"], got["workers_per_rank_s"], got["workers_measured"]

    # by hand: 1,024 ranks x 0.6 s / 64 workers = 9.6 s, not the model's 1024 x 0.064 x 1000 / 64
    assert workers() == (9.6, 0.6, 1.0)
    assert {t["name"]: t for t in targets.targets(parts)}["scale_reduce_s"]["value"] == 10.0 + 1.5 + 9.6
    # where the workers' CPU in the reduce's own tasks was measured (Dask's own left out), that
    gb_apart["reduce_workers_task_cpu_s"] = 1.6
    assert workers() == (6.4, 0.4, 1.0)
    # a point of another size is not the target's: the model's terms stand
    gb_apart["mb_per_rank"] = 500.0
    assert workers() == (1024.0, 64.0, 0.0)


def test_the_map_is_read_where_a_rank_was_mapped_at_the_targets_size() -> None:
    model = replace(MODEL, o_per_task=0.002)
    parts = _parts(rss_over_hta=0.15, local_mb=900, dask_mb=990, identical=True)
    parts["scale_ranks"]["model"] = asdict(model)
    ranks, mb, workers = targets.SCALE
    stages = model.stages(ranks, mb, workers, scheduled=True)
    tasks = model.tasks(ranks, mb, workers)
    # not measured: the model's map term
    assert targets.measured_map(parts, model) is None
    assert {t["name"]: t for t in targets.targets(parts)}["scale_total_s"]["value"] == round(stages["total_s"], 3)
    # one A100 rank of a GB mapped in 6 s of CPU: 1,024 x 6 / 64 = 96 s, and the scheduler's CPU per task
    a100 = {"shape": "a100", "mb_per_rank": 1000.0, "reduce_cpu_s": 10.0, "map_cpu_s": 6.0}
    parts["client_reduce"] = {"points": [{"shape": "dense", "mb_per_rank": 4.0, "reduce_cpu_s": 10.5}, a100]}
    got = targets.measured_map(parts, model)
    assert got == {"map_s": round(96 + tasks * 0.002, 2), "per_rank_cpu_s": 6.0, "model_map_s": stages["map_s"]}
    table = {t["name"]: t for t in targets.targets(parts)}
    assert table["scale_total_s"]["value"] == round(got["map_s"] + stages["reduce_s"] + stages["report_s"], 2)
    # a rank of another size is not the target's
    a100["mb_per_rank"] = 500.0
    assert targets.measured_map(parts, model) is None
