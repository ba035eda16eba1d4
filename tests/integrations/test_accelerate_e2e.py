"""End to end: examples/integrations/accelerate_loop.py under ``accelerate launch`` on 2 gloo
ranks, profiled by one ``profile(accelerator, ...)`` call, then ``tracekit analyze``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

from tests.integrations.output import RANKS, check_capture_folder, example, run, traced_phases

if TYPE_CHECKING:
    from pathlib import Path

pytest.importorskip("torch", reason="the accelerate integration needs torch (the capture extra)")
pytest.importorskip("accelerate", reason="the accelerate integration needs accelerate (the capture extra)")


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_accelerate_loop_under_accelerate_launch_reads_as_a_capture(tmp_path: Path) -> None:
    out = tmp_path / "accelerate"
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(RANKS)]
    run(
        *launch,
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        *example("accelerate_loop.py", out),
        abort_at_exit=True,  # the known abort at exit (output.EXIT_ABORT); the files are checked below
    )
    phases = {"dataload_wait", "forward", "backward", "optim_step", "zero_grad"}
    analysis = check_capture_folder(out, phases=phases, framework="accelerate.Accelerator")
    assert phases <= set(traced_phases(analysis))
