"""StepMarker on one process: phases switched from hooks, the schedule, the files, and the no-ops
once the measured steps are done (no ranks, a tiny model)."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tracekit.errors import InputError
from tracekit.integrations.marker import StepMarker, make_config
from tracekit.results.capture import load_capture_summary

if TYPE_CHECKING:
    from pathlib import Path

torch = pytest.importorskip("torch", reason="the integrations drive torch.profiler (the capture extra)")


def test_importing_integrations_imports_no_framework() -> None:
    code = (
        "import sys, tracekit.integrations as t; t.StepMarker; "
        "print(sorted(m for m in ('torch', 'transformers', 'lightning', 'accelerate') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_schedule_longer_than_the_steps_is_refused() -> None:
    with pytest.raises(InputError, match="schedule needs 7 steps"):
        make_config("here", warmup_steps=1, measured_steps=2, wait=2, warmup=2, active=3)
    with pytest.raises(TypeError, match="did you mean measured_steps"):
        make_config("here", measured_step=2)


def _train(marker: StepMarker, steps: int) -> list[bool]:
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(steps)]
    going = []
    marker.begin()
    for inputs, targets in marker.loader(data):
        marker.switch("forward")  # as a hook switches: no with-block
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        marker.switch("backward")
        loss.backward()
        marker.switch("optim_step")
        optimizer.step()
        marker.switch("zero_grad")
        optimizer.zero_grad()
        going.append(marker.step())
    marker.end()
    return going


def test_hooks_switching_phases_write_a_capture_folder(tmp_path: Path) -> None:
    config = make_config("here", out_dir=tmp_path, warmup_steps=1, measured_steps=2, wait=0, warmup=1, active=2)
    marker = StepMarker(config, samples_per_step=4, summary_extra={"config": {"workload": "test"}})
    going = _train(marker, steps=6)
    assert going == [True, True, False, False, False, False]  # profiling ends after 3 steps; training goes on
    assert marker.ended and not marker.active and marker.current is None
    assert (tmp_path / "rank0.pt.trace.json.gz").is_file()
    summary = load_capture_summary((tmp_path / "summary.json").read_bytes(), source="summary.json")
    assert summary.measured_steps == 2 and summary.config == {"workload": "test"}
    means = {p.phase: p.mean_ns for p in summary.phases}
    for phase in ("dataload_wait", "forward", "backward", "optim_step", "zero_grad"):
        assert means[phase] > 0
    assert summary.throughput.samples_per_step_per_rank == 4


def test_training_that_stops_early_still_writes_what_it_profiled(tmp_path: Path) -> None:
    config = make_config("here", out_dir=tmp_path, warmup_steps=1, measured_steps=4, wait=0, warmup=1, active=4)
    going = _train(StepMarker(config), steps=3)
    assert going == [True, True, True]
    summary = load_capture_summary((tmp_path / "summary.json").read_bytes(), source="summary.json")
    assert summary.measured_steps == 2


def test_a_marker_never_begun_does_nothing(tmp_path: Path) -> None:
    marker = StepMarker(make_config("here", out_dir=tmp_path / "never"))
    marker.switch("forward")
    assert marker.current is None and not marker.step()
    marker.end()
    assert not (tmp_path / "never").exists()
