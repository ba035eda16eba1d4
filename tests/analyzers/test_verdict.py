"""Verdict rules on hand-made costs, and on real traces."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tracekit.analyzers import run_analysis
from tracekit.analyzers.stragglers import StragglerResult
from tracekit.analyzers.verdict import DATA_MIN_SHARE, Costs, decide
from tracekit.readers import load_run
from tracekit.results.vocab import MeasuredOn

NO_STRAGGLERS = StragglerResult(per_rank=pl.DataFrame(), matrix=pl.DataFrame(), stragglers=(), per_ns=1.0)


def costs(**shares: float) -> Costs:
    row = {
        "rank": 0,
        "window_ns": 1000,
        "data_ns": 0,
        "comms_ns": 0,
        "straggler_ns": 0,
        "sync_ns": 0,
        "launch_ns": 0,
        "idle_ns": 0,
        "compute_ns": 0,
    }
    row.update({f"{k}_ns": int(v * 1000) for k, v in shares.items()})
    return Costs(per_rank=pl.DataFrame([row]), measured_on=MeasuredOn.GPU)


def test_waste_above_its_threshold_beats_a_larger_compute_share() -> None:
    verdict = decide(costs(data=0.20, compute=0.70), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "data-bound"
    assert verdict.primary.confidence == "high"  # 4x its threshold, nothing else above one
    assert verdict.primary.threshold_pct == 100 * DATA_MIN_SHARE


def test_no_waste_above_threshold_is_compute_bound() -> None:
    verdict = decide(costs(data=DATA_MIN_SHARE * 0.8, compute=0.9), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "gpu-compute-bound"
    assert verdict.secondary == ()


def test_close_wastes_give_low_confidence_and_a_secondary_finding() -> None:
    verdict = decide(costs(comms=0.30, straggler=0.28, compute=0.4), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "comms-bound"
    assert verdict.primary.confidence == "low"
    assert [f.bound for f in verdict.secondary] == ["straggler-bound"]


def test_unexplained_idle_is_not_compute_bound() -> None:
    verdict = decide(costs(idle=0.95, compute=0.001), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "gpu-idle"


def test_nothing_measured() -> None:
    verdict = decide(costs(), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "undetermined"


@pytest.mark.real
def test_dataloader_starved_pair(kineto_dir: Path) -> None:
    starved = run_analysis(load_run([kineto_dir / "tbplugin-resnet50-workers0"])).frames.verdict
    control = run_analysis(load_run([kineto_dir / "tbplugin-resnet50-workers4"])).frames.verdict
    assert starved.primary.bound == "data-bound"
    assert control.primary.bound != "data-bound"
    assert "data-bound" not in {f.bound for f in control.secondary}


@pytest.mark.real
def test_dlrm_stragglers(kineto_dir: Path) -> None:
    result = run_analysis(load_run([kineto_dir / "param-dlrm-8rank-v100"])).frames
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
    # rank 7's lateness is named as a finding, whether or not it is the largest cost (the host
    # dispatch gaps on the slowest rank are as large: see tests/truth)
    findings = {f.bound: f for f in (result.verdict.primary, *result.verdict.secondary)}
    assert findings["straggler-bound"].straggler_rank == 7
