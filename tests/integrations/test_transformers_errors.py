"""The Trainer callback when the training raises or is interrupted in a measured step: the
profiler stopped, the trace of the steps so far kept, its global forward hooks removed and the
DataLoader's class given back, and the error let through; also when ``out_dir`` is refused.

The Trainer runs in a child process (one rank, CPU) whose script reports the process's state
after each failed ``train()`` as JSON: the profiler's and the hooks' state is per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import requires

pytest.importorskip("torch", reason="the transformers integration needs torch (the capture extra)")
requires("transformers", "the Trainer callback needs transformers (the transformers extra)")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, sys, tempfile
from pathlib import Path
import torch
from torch.nn.modules import module as nn_module
from transformers import Trainer, TrainingArguments
from tracekit.integrations.transformers import TracekitCallback

class Tiny(torch.nn.Module):
    """A linear model that raises ``error`` in its ``fail_at``-th forward."""
    def __init__(self, fail_at, error):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.calls, self.fail_at, self.error = 0, fail_at, error
    def forward(self, x, labels=None):
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.error
        return {"loss": ((self.linear(x) - labels) ** 2).mean()}

class Data(torch.utils.data.Dataset):
    def __len__(self): return 64
    def __getitem__(self, i): return {"x": torch.ones(8) * i, "labels": torch.zeros(8)}

def state():
    return {
        "profiler_on": torch.autograd.profiler._is_profiler_enabled,
        "pre_hooks": len(nn_module._global_forward_pre_hooks),
        "hooks": len(nn_module._global_forward_hooks),
    }

out = {}
for case, out_dir in json.loads(sys.argv[1]).items():
    error = KeyboardInterrupt() if case == "interrupt" else RuntimeError("boom in step 5")
    model = Tiny(fail_at=5 if case != "out_dir_is_a_file" else 0, error=error)
    callback = TracekitCallback(out_dir=out_dir, warmup_steps=2, measured_steps=6, wait=1, warmup=1, active=6)
    with tempfile.TemporaryDirectory() as scratch:
        args = TrainingArguments(output_dir=scratch, use_cpu=True, per_device_train_batch_size=2, max_steps=10,
                                 logging_steps=1000, save_strategy="no", report_to=[], disable_tqdm=True)
        late = case == "added_later"
        trainer = Trainer(model=model, args=args, train_dataset=Data(), callbacks=[] if late else [callback])
        if late:
            trainer.add_callback(callback)
        loader_class = type(trainer.get_train_dataloader())
        try:
            trainer.train()
            raised = None
        except BaseException as e:
            raised = type(e).__name__ + ": " + str(e)
    out[case] = {"raised": raised, **state()}
print("RESULT " + json.dumps(out))
'''


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_a_failed_training_leaves_nothing_behind_and_keeps_the_trace(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    cases = {
        "error": str(tmp_path / "error"),
        "interrupt": str(tmp_path / "interrupt"),
        "added_later": str(tmp_path / "added_later"),
        "out_dir_is_a_file": str(tmp_path / "a_file"),
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(cases)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    for case, seen in result.items():
        # nothing left running or registered in the process, whatever the failure
        assert (seen["profiler_on"], seen["pre_hooks"], seen["hooks"]) == (False, 0, 0), (case, seen)
    assert result["error"]["raised"] == "RuntimeError: boom in step 5"
    assert result["added_later"]["raised"] == "RuntimeError: boom in step 5"
    assert result["interrupt"]["raised"].startswith("KeyboardInterrupt")
    assert "out_dir" in result["out_dir_is_a_file"]["raised"]
    for case in ("error", "interrupt", "added_later"):
        # the trace of the steps profiled before the failure is kept (no phase timings or summary)
        trace = Path(cases[case]) / "rank0.pt.trace.json.gz"
        assert trace.is_file(), (case, sorted(p.name for p in Path(cases[case]).glob("*")))
