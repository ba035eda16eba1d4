"""tracekit audit-params: which parameters get no gradient after one forward + backward."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tracekit.capture.config import load_config
from tracekit.results.param_audit import ModuleParams, load_param_audit

torch = pytest.importorskip("torch")

from tracekit.capture.audit import audit_params, classify  # noqa: E402  (needs torch)


class Net(torch.nn.Module):  # type: ignore[misc]
    """A trunk and a head that forward uses, an auxiliary head it never calls, a frozen
    embedding-like layer, and a branch multiplied by zero (it gets an all-zero gradient)."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        self.head = torch.nn.Linear(8, 2)
        self.aux = torch.nn.Linear(8, 3)
        self.frozen = torch.nn.Linear(4, 4)
        self.frozen.requires_grad_(False)
        self.dead = torch.nn.Linear(8, 2, bias=False)
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, x: Any) -> Any:
        h = self.trunk(self.frozen(x))
        return self.head(h) * self.scale + 0.0 * self.dead(h)


def backward(model: Any) -> Any:
    torch.manual_seed(0)
    model(torch.randn(5, 4)).sum().backward()
    return model


def test_unused_frozen_and_zero_gradient_parameters_by_module() -> None:
    audit = classify(backward(Net()), include_zero_grad=True)
    assert audit.unused == [ModuleParams(module="aux", parameters=["weight", "bias"], numel=8 * 3 + 3)]
    assert audit.frozen == [ModuleParams(module="frozen", parameters=["weight", "bias"], numel=4 * 4 + 4)]
    assert audit.zero_grad == [ModuleParams(module="dead", parameters=["weight"], numel=16)]
    assert audit.parameters == 10  # trunk 2, head 2, aux 2, frozen 2, dead 1, scale 1
    assert audit.unused_count == 2 and audit.unused_numel == 27


def test_a_parameter_of_the_model_itself_is_grouped_under_the_empty_module() -> None:
    model = Net()
    model.scale.requires_grad_(False)
    audit = classify(backward(model))
    assert ModuleParams(module="", parameters=["scale"], numel=1) in audit.frozen
    assert audit.zero_grad is None  # not asked for


def test_a_model_whose_every_parameter_gets_a_gradient() -> None:
    audit = classify(backward(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))))
    assert (audit.unused, audit.frozen) == ([], [])


@pytest.mark.parametrize("workload", ["mlp", "transformer"])
def test_the_unused_head_knob_is_found_exactly(workload: str) -> None:
    config = load_config(None, {"workload": workload, "workload_args.unused_head": "true", "batch_size": "4"})
    audit = audit_params(config, include_zero_grad=True)
    assert [(m.module, m.parameters) for m in audit.unused] == [("aux_head", ["weight", "bias"])]
    assert audit.frozen == [] and audit.zero_grad == []
    plain = audit_params(load_config(None, {"workload": workload, "batch_size": "4"}))
    assert plain.unused == [] and plain.parameters == audit.parameters - 2


def test_a_frozen_layer_of_a_users_workload() -> None:
    config = load_config(None, {"workload": "tests.capture.audit_workloads:frozen_first_layer", "batch_size": "4"})
    audit = audit_params(config)
    assert [(m.module, m.parameters, m.numel) for m in audit.frozen] == [
        ("inner.0", ["weight", "bias"], 256 * 512 + 512)
    ]
    assert audit.unused == []


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_audit_params_cli_names_the_unused_head(tmp_path: Path) -> None:
    out = tmp_path / "audit.json"
    result = subprocess.run(
        [sys.executable, "-m", "tracekit", "audit-params", "--workload_args.unused_head=true", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=os.environ.copy(),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("2 parameter(s) (5,130 elements) in aux_head get no gradient")
    audit = load_param_audit(out.read_bytes(), source=str(out))
    assert [(m.module, m.parameters, m.numel) for m in audit.unused] == [
        ("aux_head", ["weight", "bias"], 512 * 10 + 10)
    ]
