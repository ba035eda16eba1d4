"""End to end: examples/integrations/lightning_ddp.py (a tiny LightningModule) with
``strategy="ddp"`` on 2 CPU processes (Lightning starts the second), then ``tracekit analyze``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

from tests.conftest import requires
from tests.integrations.output import check_capture_folder, example, run, traced_phases

if TYPE_CHECKING:
    from pathlib import Path

pytest.importorskip("torch", reason="the Lightning integration needs torch")
requires("lightning", "the Lightning callback needs lightning (the lightning extra)")


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_lightning_ddp_reads_as_a_capture(tmp_path: Path) -> None:
    out = tmp_path / "lightning"
    run(sys.executable, *example("lightning_ddp.py", out))
    phases = {"dataload_wait", "forward", "zero_grad", "backward", "optim_step"}
    analysis = check_capture_folder(out, phases=phases, framework="lightning.Trainer")
    # the phase table holds tracekit's phases, though torch's Optimizer.step range encloses
    # forward, zero_grad and backward (Lightning runs them in the optimizer's closure)
    assert phases <= set(traced_phases(analysis))
