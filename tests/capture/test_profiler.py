"""The user-facing Profiler in one process: phases, steps, files, timings."""

from __future__ import annotations

import gzip
import json
import time
from typing import TYPE_CHECKING

import pytest

from tracekit.readers import load_run

if TYPE_CHECKING:
    from pathlib import Path

torch = pytest.importorskip("torch")


def test_user_loop_writes_trace_phases_and_summary(tmp_path: Path) -> None:
    from tracekit.capture import Profiler

    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [torch.randn(4, 8) for _ in range(20)]
    with Profiler(tmp_path, warmup_steps=1, measured_steps=3, wait=1, warmup=1, active=2) as prof:
        for batch in prof.loader(data):
            with prof.phase("forward"):
                loss = model(batch).sum()
                time.sleep(0.004)
            with prof.phase("backward"):
                loss.backward()
            with prof.phase("optim_step"):
                optimizer.step()
                optimizer.zero_grad()
            if not prof.step():
                break
    phases = json.loads((tmp_path / "phases.rank0.json").read_text())
    assert [s["step"] for s in phases["steps"]] == [1, 2, 3]
    for step in phases["steps"]:
        assert sum(step["phases_ns"].values()) == step["step_ns"]
        assert step["phases_ns"]["forward"] >= 4_000_000
        assert set(step["phases_ns"]) >= {"dataload_wait", "forward", "backward", "optim_step", "device_sync", "other"}
    assert phases["memory"]["peak_rss_bytes"] > 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert sum(p["share_pct"] for p in summary["phases"]) == pytest.approx(100)
    with gzip.open(tmp_path / "rank0.pt.trace.json.gz", "rt") as f:
        names = {e.get("name") for e in json.load(f)["traceEvents"]}
    assert {"tracekit.phase/forward", "tracekit.phase/dataload_wait", "ProfilerStep#2", "ProfilerStep#3"} <= names
    run = load_run([tmp_path])
    assert run.rank_ids == [0]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary file


def test_an_exception_inside_the_loop_propagates_and_writes_no_phase_file(tmp_path: Path) -> None:
    from tracekit.capture import Profiler

    with (
        pytest.raises(ValueError, match="boom"),
        Profiler(tmp_path, warmup_steps=0, measured_steps=3) as prof,
        prof.phase("forward"),
    ):
        raise ValueError("boom")
    assert not (tmp_path / "phases.rank0.json").exists()
