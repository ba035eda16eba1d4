"""End to end: examples/integrations/hf_trainer.py (a tiny GPT-2 built from a config) under
torchrun on 2 gloo ranks, captured by the Trainer callback, then ``tracekit analyze``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

from tests.conftest import requires
from tests.integrations.output import RANKS, check_capture_folder, example, run, traced_phases

if TYPE_CHECKING:
    from pathlib import Path

pytest.importorskip("torch", reason="the transformers integration needs torch (the capture extra)")
requires("transformers", "the Trainer callback needs transformers (the transformers extra)")


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_trainer_under_torchrun_reads_as_a_capture(tmp_path: Path) -> None:
    out = tmp_path / "trainer"
    run(
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        str(RANKS),
        *example("hf_trainer.py", out),
        abort_at_exit=True,  # the known abort at exit (output.EXIT_ABORT); the files are checked below
    )
    phases = {"dataload_wait", "h2d", "forward", "backward", "optim_step", "zero_grad"}
    analysis = check_capture_folder(out, phases=phases, framework="transformers.Trainer")
    traced = traced_phases(analysis)
    assert {"forward", "backward", "optim_step"} <= set(traced), traced
    assert all(traced[p] > 0 for p in ("forward", "backward", "optim_step"))
