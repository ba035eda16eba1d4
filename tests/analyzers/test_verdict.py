"""Verdict rules on hand-made costs, and on real traces."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tracekit.analyzers import analyze
from tracekit.analyzers.stragglers import StragglerResult
from tracekit.analyzers.verdict import DATA_MIN_SHARE, Costs, decide
from tracekit.readers import load_run

NO_STRAGGLERS = StragglerResult(per_rank=pl.DataFrame(), matrix=pl.DataFrame(), stragglers=(), per_ns=1.0)


def costs(**shares: float) -> Costs:
    row = {
        "rank": 0,
        "window_ns": 1000,
        "data_ns": 0,
        "comms_ns": 0,
        "straggler_ns": 0,
        "sync_ns": 0,
        "host_ns": 0,
        "idle_ns": 0,
        "compute_ns": 0,
    }
    row.update({f"{k}_ns": int(v * 1000) for k, v in shares.items()})
    return Costs(per_rank=pl.DataFrame([row]), measured_on="gpu")


def test_waste_above_its_threshold_beats_a_larger_compute_share() -> None:
    verdict = decide(costs(data=0.20, compute=0.70), stragglers=NO_STRAGGLERS, evidence={})
    assert verdict.primary.kind == "data-bound"
    assert verdict.primary.confidence == "high"  # 4x its threshold, nothing else above one
    assert verdict.primary.recommendations[0].startswith("Raise DataLoader num_workers")


def test_no_waste_above_threshold_is_compute_bound() -> None:
    verdict = decide(costs(data=DATA_MIN_SHARE * 0.8, compute=0.9), stragglers=NO_STRAGGLERS, evidence={})
    assert verdict.primary.kind == "gpu-compute-bound"
    assert verdict.secondary == ()


def test_close_wastes_give_low_confidence_and_a_secondary_finding() -> None:
    verdict = decide(costs(comms=0.30, straggler=0.28, compute=0.4), stragglers=NO_STRAGGLERS, evidence={})
    assert verdict.primary.kind == "comms-bound"
    assert verdict.primary.confidence == "low"
    assert [f.kind for f in verdict.secondary] == ["straggler-bound"]


def test_unexplained_idle_is_not_compute_bound() -> None:
    verdict = decide(costs(idle=0.95, compute=0.001), stragglers=NO_STRAGGLERS, evidence={})
    assert verdict.primary.kind == "gpu-idle"


def test_nothing_measured() -> None:
    verdict = decide(costs(), stragglers=NO_STRAGGLERS, evidence={})
    assert verdict.primary.kind == "undetermined"


@pytest.mark.real
def test_dataloader_starved_pair(kineto_dir: Path) -> None:
    starved = analyze(load_run([kineto_dir / "tbplugin-resnet50-workers0"])).verdict
    control = analyze(load_run([kineto_dir / "tbplugin-resnet50-workers4"])).verdict
    assert starved.primary.kind == "data-bound"
    assert control.primary.kind != "data-bound"
    assert "data-bound" not in {f.kind for f in control.secondary}


@pytest.mark.real
def test_dlrm_stragglers(kineto_dir: Path) -> None:
    result = analyze(load_run([kineto_dir / "param-dlrm-8rank-v100"]))
    inst = result.collectives.instances
    first_all_to_all = inst.filter(op="SendRecv", k=0).row(0, named=True)
    assert first_all_to_all["last_rank"] == 7
    assert first_all_to_all["ranks"] == 8
    all_reduce = inst.filter(op="AllReduce", k=2).row(0, named=True)
    assert set(all_reduce["last_ranks"]) == {4, 5}
    waits = result.collectives.per_rank.filter(op="SendRecv", k=0).sort("rank")
    assert waits.filter(rank=7)["wait_ns"].item() < 20_000  # rank 7 waits ~10 us ...
    assert waits.filter(rank=1)["wait_ns"].item() > 7_000_000  # ... while rank 1 waits ~7.6 ms
    assert result.stragglers.stragglers[0].rank == 7
    assert result.verdict.primary.kind == "straggler-bound"
    assert "rank 7" in result.verdict.primary.title
