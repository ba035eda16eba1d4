"""End to end: the committed sample script captures 8 gloo ranks on CPU; tracekit reads them."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import polars as pl
import pytest

from tests.conftest import SAMPLES
from tracekit.analyzers import analyze
from tracekit.readers import load_run

if TYPE_CHECKING:
    from pathlib import Path


def test_capture_8_gloo_ranks_and_analyze(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "traces"
    subprocess.run(
        [
            sys.executable,
            str(SAMPLES / "make_cpu_sample.py"),
            "--out",
            str(out),
            "--straggler-rank",
            "2",
            "--straggler-ms",
            "30",
        ],
        check=True,
        timeout=300,
        capture_output=True,
    )
    run = load_run([out])
    assert run.rank_ids == list(range(8))
    assert run.world_size == 8 and run.backend == "gloo"
    collectives = run.events.filter(pl.col("category") == "collective")
    assert set(collectives["name"].cast(pl.String).unique()) >= {"gloo:all_reduce", "c10d::allreduce_"}
    result = analyze(run)
    assert not result.facts.has_gpu
    assert result.steps.stats["count"].to_list() == [3] * 8
    phases = set(result.annotations.summary["name"].to_list())
    assert {f"tracekit.phase/{p}" for p in ("dataload_wait", "forward", "backward", "optim_step")} <= phases
    # the injected straggler spends longer in forward than every other rank
    forward = result.annotations.per_rank.filter(name="tracekit.phase/forward").sort("step_mean_ns")
    assert forward["rank"][-1] == 2
