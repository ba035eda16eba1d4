"""A capture runs on one machine: an accelerate config with ``num_machines`` above 1 is refused before any
rank starts (its ranks waited for the other machines until the 30-minute timeout, "still importing")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.cli.process import run_tracekit
from tracekit.capture import accelerate_configs
from tracekit.errors import InputError

if TYPE_CHECKING:
    from pathlib import Path

TWO_MACHINES = """compute_environment: LOCAL_MACHINE
distributed_type: MULTI_CPU
num_machines: 2
machine_rank: 0
main_process_ip: 127.0.0.1
num_processes: 2
use_cpu: true
"""


def test_a_config_for_two_machines_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(TWO_MACHINES)
    with pytest.raises(InputError, match=r"num_machines: 2: tracekit captures on one machine"):
        accelerate_configs.check(str(path))
    path.write_text(TWO_MACHINES.replace("num_machines: 2", "num_machines: 1"))
    assert accelerate_configs.check(str(path)) == path


@pytest.mark.parametrize("command", ["capture", "dataloader", "sweep"])
def test_every_command_that_launches_ranks_refuses_it_at_once(tmp_path: Path, command: str) -> None:
    config = tmp_path / "two.yaml"
    config.write_text(TWO_MACHINES)
    args = ["--grid", "batch_size=8"] if command == "sweep" else []
    result = run_tracekit(
        command, *args, f"--accelerate_config={config}", f"--out_dir={tmp_path / 'out'}", "--nproc=2", timeout=120
    )
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]  # after the command's "capturing ..." line
    assert "Traceback" not in result.stderr
    assert "num_machines: 2: tracekit captures on one machine" in line and str(config) in line
    assert not (tmp_path / "out").exists()
