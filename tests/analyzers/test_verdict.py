"""Verdict rules on hand-made costs, and on real traces."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tracekit.analyzers import run_analysis
from tracekit.analyzers.stragglers import StragglerResult
from tracekit.analyzers.verdict import DATA_MIN_SHARE, Costs, costs_of, decide
from tracekit.readers import load_run
from tracekit.results.analysis import Finding
from tracekit.results.vocab import Confidence, MeasuredOn, NoteKind

NO_STRAGGLERS = StragglerResult(per_rank=pl.DataFrame(), matrix=pl.DataFrame(), stragglers=(), per_ns=1.0)


def costs(**shares: float) -> Costs:
    row = {"rank": 0, "window_ns": 1000, **{f"{k}_ns": int(v * 1000) for k, v in shares.items()}}
    return costs_of(pl.DataFrame([row]), MeasuredOn.GPU)


def test_waste_above_its_threshold_beats_a_larger_compute_share() -> None:
    verdict = decide(costs(data=0.20, compute=0.70), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "data-bound"
    assert verdict.primary.confidence == "high"  # 4x its threshold, nothing else above one
    assert verdict.primary.threshold_pct == 100 * DATA_MIN_SHARE


def test_no_waste_above_threshold_is_compute_bound() -> None:
    verdict = decide(costs(data=DATA_MIN_SHARE * 0.8, compute=0.9), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "gpu-compute-bound"
    assert verdict.secondary == ()


def test_close_wastes_are_mixed_with_low_confidence_and_both_findings() -> None:
    # 30% against 28%: within the run-to-run margin (1.25x), so neither is named alone
    verdict = decide(costs(comms=0.30, straggler=0.28, compute=0.4), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "mixed"
    assert verdict.primary.confidence == "low"
    assert verdict.primary.components == ["comms-bound", "straggler-bound"]
    assert [f.bound for f in verdict.secondary] == ["comms-bound", "straggler-bound"]


def test_a_clear_margin_names_one_bound() -> None:
    verdict = decide(costs(comms=0.40, straggler=0.20, compute=0.4), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "comms-bound"
    assert verdict.primary.margin == 2.0  # 40 / 20
    assert [f.bound for f in verdict.secondary] == ["straggler-bound"]


def test_copies_between_host_and_device_make_a_run_transfer_bound() -> None:
    # the device busy 97% in host-to-device copies, 2.3% in kernels: not compute-bound
    verdict = decide(costs(transfer=0.97, compute=0.023), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "transfer-bound"


def test_compute_bound_only_when_compute_is_the_largest_share() -> None:
    # unexplained idle 18% (under its 20% threshold) is still larger than compute's 15%
    verdict = decide(costs(idle=0.18, compute=0.15), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "mixed"
    assert verdict.primary.components == ["gpu-idle", "gpu-compute-bound"]


def test_unexplained_idle_is_not_compute_bound() -> None:
    verdict = decide(costs(idle=0.95, compute=0.001), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "gpu-idle"


def test_nothing_measured() -> None:
    verdict = decide(costs(), stragglers=NO_STRAGGLERS)
    assert verdict.primary.bound == "undetermined"


def test_a_reason_for_no_verdict_overrides_the_costs() -> None:
    note = Finding(note=NoteKind.TOO_LITTLE_WORK, confidence=Confidence.HIGH, value=5_000.0)
    verdict = decide(costs(launch=0.9, compute=0.05), stragglers=NO_STRAGGLERS, undetermined=(note,))
    assert verdict.primary.bound == "undetermined"
    assert verdict.secondary == (note,)


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
