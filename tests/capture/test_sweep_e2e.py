"""``tracekit sweep`` end to end on CPU (gloo, 2 ranks): a 2x2 grid (DDP and FSDP, two batch
sizes) with a cell made to raise, an OOM probe under a memory budget, killed after its first
cell and resumed: the resumed sweep reruns only the cells the first one did not finish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracekit.capture.sweep import plan_sweep, run_sweep
from tracekit.pipeline import sweep_matrix

pytest.importorskip("torch")
pytest.importorskip("accelerate")

#: Big inputs and a tiny model: each sample adds about 5 MB to a rank's peak RSS, so the
#: budget of 0.8 GiB (base about 0.36 GiB) lets 64 per rank fit (about 0.67) and not 112 (0.9).
ARGS = '{"in_features": 262144, "hidden": 8, "depth": 1, "samples": 4096}'
RAISING = """
import os

import torch

from tracekit.capture.workloads import mlp


def mlp_failing_fsdp_8(ctx, **kw):
    w = mlp(ctx, **kw)
    fail = ctx.batch_size == 8 and os.environ.get("ACCELERATE_USE_FSDP") == "true"

    def loss_fn(out, target):
        if fail:
            raise RuntimeError("this cell fails on purpose")
        return torch.nn.functional.cross_entropy(out, target)

    w.loss_fn = loss_fn
    return w
"""
COMMON = [
    "--nproc=2",
    "--workload=raising:mlp_failing_fsdp_8",
    f"--workload_args={ARGS}",
    "--warmup_steps=1",
    "--measured_steps=2",
]
GRID = ["batch_size=8,16", "accelerate_config=ddp,fsdp"]


def _runs(folder: Path) -> list[dict[str, object]]:
    try:
        return list(json.loads((folder / "sweep.json").read_text())["runs"])
    except (OSError, ValueError, KeyError):
        return []


@pytest.mark.e2e
def test_sweep_probe_failure_and_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "raising.py").write_text(RAISING)
    env_path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", env_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "sweep"
    options = ["--no-trace", "--probe-oom", "--probe-step", "48", "--mem-budget-gb", "0.8", "--cell-timeout", "120"]
    cmd = [sys.executable, "-m", "tracekit", "sweep", *(f"--grid={g}" for g in GRID), *options, *COMMON]
    proc = subprocess.Popen([*cmd, f"--out_dir={out}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not _runs(out) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)  # mid-way: after the first cell's result is saved
    proc.wait()
    first = _runs(out)
    assert len(first) == 1 and first[0]["status"] == "ok"
    time.sleep(6)  # the killed sweep's ranks stop once their supervisors see it gone

    overrides = {k.removeprefix("--"): v for k, _, v in (a.partition("=") for a in COMMON)}
    overrides["out_dir"] = str(out)
    plan = plan_sweep(
        None,
        overrides,
        GRID,
        trace=False,
        probe_oom=True,
        probe_step=48,
        mem_budget_gb=0.8,
        cell_timeout=120,
        resume=True,
    )
    record = run_sweep(plan)

    assert record.finished
    grid_runs = [r for r in record.runs if not r.probe]
    assert sorted(r.cell for r in grid_runs) == sorted(record.cells) and len(grid_runs) == 4  # none twice
    assert grid_runs[0].started == first[0]["started"]  # the finished cell was kept, not rerun
    status = {r.cell: r.status for r in grid_runs}
    assert status.pop("accelerate_config=fsdp,batch_size=8") == "failed"
    assert set(status.values()) == {"ok"}
    failed = next(r for r in grid_runs if r.status == "failed")
    assert failed.reason is not None and "this cell fails on purpose" in failed.reason
    for probe in record.probes:  # walked 16 -> 64 (fits) -> 112 (over the budget)
        assert (probe.last_fit, probe.first_oom) == (64, 112), probe
        assert probe.error is not None and "over the memory budget" in probe.error
    assert {p.base for p in record.probes} == {"accelerate_config=ddp", "accelerate_config=fsdp"}
    backends = {r.backend for r in grid_runs}
    assert backends == {"DDP", "FSDP FULL_SHARD"}
    fsdp = next(r for r in grid_runs if r.backend.startswith("FSDP") and r.status == "ok")
    notes = json.loads((out / fsdp.folder / "summary.json").read_text())["notes"]
    assert {"kind": "fsdp_on_cpu", "value": "FULL_SHARD"} in notes  # sharded, not DDP in disguise
    assert not list((out / "cells").glob("*.tracekit-tmp-*"))

    matrix = sweep_matrix(out)
    assert matrix.best is not None and matrix.capacity_source == "budget"
    assert {r.probe_last_fit for r in matrix.rows} == {64}
